/**
 * Request selectors: the fields that define a request, so that a retry which changes
 * anything else (a trace id, a timestamp) replays instead of conflicting.
 *
 * The syntax and the rules are docs/api.md, "Request selectors", the same in every
 * idemd client; the shared vectors are testdata/selectors.json:
 *
 * - `include`: JSON Pointers (RFC 6901) to the members that define the request;
 * - `exclude`: JSON Pointers to members that do not;
 * - `headers`: request header names (the HTTP middleware only).
 *
 * The fingerprint is the json-mode fingerprint of the selected document. A selector
 * that cannot be right (the whole-document pointer "", a pointer not starting with
 * "/", a bad "~" escape, a duplicate, a header name that is not a token) throws
 * SelectorError when it is made; a body it cannot apply to (not I-JSON; not a JSON
 * object while include or exclude is given) throws InvalidArgumentError when it is
 * applied, before any RPC.
 */
import { status as Code } from "@grpc/grpc-js";
import { IdemError, InvalidArgumentError } from "./errors.js";
import { type JsonValue, NotIJsonError, canonicalValue, fingerprintJson, parseIJson } from "./fingerprint.js";

/** The fields of a selector; each optional, and an empty one is the whole body. */
export interface SelectorFields {
  include?: readonly string[];
  exclude?: readonly string[];
  /** Header names (the HTTP middleware only), in any case. */
  headers?: readonly string[];
}

/** A selector that cannot be right, thrown when it is made. */
export class SelectorError extends IdemError {
  override name = "SelectorError";
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_ESCAPE = /~(?![01])/;

function tokens(pointer: string): string[] {
  if (pointer === "") throw new SelectorError('the pointer "" (the whole document) cannot be included or excluded');
  if (!pointer.startsWith("/")) throw new SelectorError(`pointer ${JSON.stringify(pointer)} does not start with /`);
  if (BAD_ESCAPE.test(pointer)) {
    throw new SelectorError(`pointer ${JSON.stringify(pointer)}: ~ must be followed by 0 or 1`);
  }
  return pointer.slice(1).split("/").map((raw) => raw.replaceAll("~1", "/").replaceAll("~0", "~"));
}

function pointers(field: string, given: readonly string[] | undefined): string[][] {
  const listed = [...(given ?? [])];
  if (listed.some((pointer) => typeof pointer !== "string")) throw new SelectorError(`${field} must be a list of strings`);
  if (new Set(listed).size !== listed.length) throw new SelectorError(`${field} names a pointer twice`);
  return listed.map(tokens);
}

type JsonObject = Map<string, JsonValue>;
const isObject = (value: JsonValue | undefined): value is JsonObject => value instanceof Map;

/** The object holding the member at `path`, or undefined when the path goes through
 *  something that is not an object or names an absent member. */
function holder(document: JsonValue, path: string[]): JsonObject | undefined {
  let parent: JsonValue | undefined = document;
  for (const token of path.slice(0, -1)) parent = isObject(parent) ? parent.get(token) : undefined;
  const name = path[path.length - 1] as string;
  return isObject(parent) && parent.has(name) ? parent : undefined;
}

function refused(message: string): InvalidArgumentError {
  return new InvalidArgumentError(Code.INVALID_ARGUMENT, message, {
    reason: "INVALID_REQUEST",
    violations: [{ field: "json_payload", description: message }],
  });
}

/** The fields that define a request (docs/api.md, "Request selectors"). */
export class Selector {
  readonly include: readonly string[];
  readonly exclude: readonly string[];
  readonly headers: readonly string[];
  private readonly includePaths: string[][];
  private readonly excludePaths: string[][];

  /** Throws SelectorError for a selector that cannot be right. */
  constructor(fields: SelectorFields = {}) {
    for (const field of ["include", "exclude", "headers"] as const) {
      const given: unknown = fields[field];
      if (given !== undefined && !Array.isArray(given)) throw new SelectorError(`${field} must be a list of strings`);
    }
    this.includePaths = pointers("include", fields.include);
    this.excludePaths = pointers("exclude", fields.exclude);
    const headers = [...(fields.headers ?? [])];
    for (const name of headers) {
      if (typeof name !== "string" || !TOKEN.test(name)) {
        throw new SelectorError(`header name ${JSON.stringify(name)} is not a token`);
      }
    }
    if (new Set(headers.map((name) => name.toLowerCase())).size !== headers.length) {
      throw new SelectorError("headers names a header twice");
    }
    this.include = Object.freeze([...(fields.include ?? [])]);
    this.exclude = Object.freeze([...(fields.exclude ?? [])]);
    this.headers = Object.freeze(headers);
  }

  /** No field is selected: the request is the whole body, as without a selector. */
  get empty(): boolean {
    return this.include.length === 0 && this.exclude.length === 0 && this.headers.length === 0;
  }

  /** The selected document of a JSON `body` and the request's `headers` ([name, value]
   *  pairs in arrival order, names in any case). */
  document(body: string | Uint8Array, headers: Iterable<readonly [string, string]> = []): JsonValue {
    let document: JsonValue;
    try {
      document = parseIJson(body);
    } catch (error) {
      if (error instanceof NotIJsonError) throw refused(`the body is not I-JSON: ${error.message}`);
      throw error;
    }
    if ((this.includePaths.length > 0 || this.excludePaths.length > 0) && !isObject(document)) {
      throw refused("include and exclude need a body that is a JSON object");
    }
    if (this.includePaths.length > 0) {
      const selected: JsonObject = new Map();
      for (const path of this.includePaths) {
        const parent = holder(document, path);
        if (parent === undefined) continue;
        let target = selected;
        for (const token of path.slice(0, -1)) {
          let next = target.get(token);
          if (!isObject(next)) {
            next = new Map();
            target.set(token, next);
          }
          target = next;
        }
        const name = path[path.length - 1] as string;
        target.set(name, structuredClone(parent.get(name) as JsonValue));
      }
      document = selected;
    }
    for (const path of this.excludePaths) {
      holder(document, path)?.delete(path[path.length - 1] as string);
    }
    if (this.headers.length === 0) return document;
    const arrived = [...headers].map(([name, value]) => [name.toLowerCase(), value] as const);
    const picked: JsonObject = new Map();
    for (const wanted of this.headers.map((name) => name.toLowerCase())) {
      const values = arrived.filter(([name]) => name === wanted).map(([, value]) => value);
      if (values.length > 0) picked.set(wanted, values.join(", "));
    }
    return new Map<string, JsonValue>([["body", document], ["headers", picked]]);
  }

  /** The RFC 8785 form (UTF-8) of `document`: what is fingerprinted. */
  canonical(body: string | Uint8Array, headers: Iterable<readonly [string, string]> = []): Buffer {
    return canonicalValue(this.document(body, headers));
  }

  /** The json-mode fingerprint of `document`. */
  fingerprint(body: string | Uint8Array, headers: Iterable<readonly [string, string]> = []): Buffer {
    return fingerprintJson(this.canonical(body, headers));
  }
}
