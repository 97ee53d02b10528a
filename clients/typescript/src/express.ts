/**
 * Express middleware for the IETF `Idempotency-Key` header, backed by idemd through
 * executeOnce, with the Python ASGI middleware's semantics. For the configured methods
 * (POST and PATCH by default):
 *
 * - no Idempotency-Key where one is required: 400;
 * - a key but no caller to scope it by (`principal`), unless `sharedKeys`: 400;
 * - the same key with another request (method, path, query, content type, body; or with
 *   a `selector`, the fields it selects): 422, as the IETF draft says (`conflictStatus`; also the answer for a key whose response
 *   idemd no longer keeps);
 * - the same key while the first request still runs: 409 with Retry-After
 *   (`inProgressStatus`);
 * - the same key again: the stored response replayed (status, the headers kept, body),
 *   with `Idempotent-Replayed: true`, without calling the route.
 *
 * During a rollout that changes the selector, `previousSelectors` names the ones being
 * replaced: a request's fingerprints under them go along as previous_fingerprints, so a
 * retry of a request an old version took replays instead of answering `conflictStatus`.
 *
 * The route's response is captured whole (at most `maxResponseBytes`), stored, and only
 * then sent: a client never sees a response that a retry would not see again. A
 * response with a 5xx status (Express answers 500 when a route throws) is not stored:
 * the outcome is left UNKNOWN at idemd and the response is passed on. A retry of that
 * key is then answered 500 (the attempt declines with Fail NOT_STARTED, leaving the
 * doubt to a reconciler) unless `reconcileFirst: "run"`, which declares that the
 * route's effects deduplicate by the key they are given: the route runs again with
 * `res.locals.idempotency` set to the EffectContext (previousOutcomeUnknown, and
 * operationId to pass to providers as their idempotency key).
 *
 * Keys are scoped per caller, as Stripe scopes them per account and
 * draft-ietf-httpapi-idempotency-key-header per client: the key sent to idemd is
 * `scopedKey(principal, key)`, so two callers that pick the same key never share a
 * response. The principal defaults to the request's Authorization header.
 *
 * Mount it after your body parser (`app.use(express.json())`): the request's identity is
 * its raw bytes when `req.rawBody` holds them (see `keepRawBody`), else the parsed body.
 * Mounted before any parser, it reads the body itself and leaves the raw bytes in
 * `req.body` (as express.raw() would).
 */
import { createHash } from "node:crypto";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Client } from "./client.js";
import {
  ConflictError, IdemError, InvalidArgumentError, NeedsReconciliationError, OperationFailedError,
  OutcomeUnknownError, PendingError, ResultExpiredError, StatusError,
} from "./errors.js";
import { type EffectContext, executeOnce, type Result, Success, Unknown } from "./execute.js";
import { Code } from "./errors.js";
import { fingerprintBytes } from "./fingerprint.js";
import { MAX_PREVIOUS_FINGERPRINTS } from "./requests.js";
import { Selector, type SelectorFields } from "./selector.js";

export const DEFAULT_KEEP_HEADERS = ["location", "etag", "last-modified", "cache-control", "content-language", "link"];
// json_payload/bytes_payload are bounded by the server (64 KiB by default); larger
// requests are fingerprinted here, exactly as the server would.
const MAX_SENT_PAYLOAD = 60 * 1024;
const METADATA_LIMIT = 256;
const STATUS = "http.status";
const HEADER = "http.header.";
/** idemd's bound on a key, in bytes. */
const MAX_KEY_BYTES = 255;
/** The bytes scopedKey() puts before the caller's key: 32 hex digits and ":". */
export const PRINCIPAL_PREFIX_BYTES = 33;

/** The parts of an Express request this middleware reads. */
export interface RequestLike extends IncomingMessage {
  method: string;
  path?: string;
  originalUrl?: string;
  body?: unknown;
  rawBody?: Buffer;
}
/** The parts of an Express response this middleware uses. */
export interface ResponseLike extends ServerResponse {
  locals?: Record<string, unknown>;
}
export type NextFunction = (error?: unknown) => void;

export interface IdempotencyOptions {
  /** An idemd Client, or a function that makes one (called once, at the first request). */
  client: Client | (() => Client);
  methods?: string[];
  required?: boolean;
  header?: string;
  /** The operation name of a request (default `http.<method><path>`). */
  operation?: (req: RequestLike) => string;
  keepHeaders?: string[];
  lease?: number;
  attemptDuration?: number;
  /** How long a request for a key that is still running waits for it before
   *  `inProgressStatus`. */
  pendingWait?: number;
  /** The status of a key used with another request, or whose response is no longer kept
   *  (default 422, the IETF draft's): an integer in 400..599, else idempotency() throws a
   *  RangeError naming it. */
  conflictStatus?: number;
  /** The status, with Retry-After, of a key whose first request still runs (default
   *  409): an integer in 400..599, else idempotency() throws a RangeError naming it. */
  inProgressStatus?: number;
  maxRequestBytes?: number;
  maxResponseBytes?: number;
  /** A retry after an attempt whose outcome is unknown (the route threw or answered
   *  5xx): "refuse" (default) answers 500 and runs nothing; "run" declares that the
   *  route's effects deduplicate by `res.locals.idempotency.operationId` and runs it. */
  reconcileFirst?: "refuse" | "run";
  /** Who is calling, to scope keys by (credentials, a session's user id): default the
   *  Authorization header. Where credentials change between a request and its retry
   *  (short-lived tokens), return the stable account id instead, or the retry is a new
   *  request. A request with a key but no principal (undefined, null or "") is refused
   *  with 400 unless `sharedKeys`. */
  principal?: (req: RequestLike) => string | null | undefined | Promise<string | null | undefined>;
  /** Every caller of the routes shares one key space (keys are sent unchanged, and no
   *  principal is needed): only for routes whose callers are one system. */
  sharedKeys?: boolean;
  /** The fields of the JSON body, and the headers, that define a request instead of the
   *  whole of it (docs/api.md, "Request selectors"): a change outside them replays, one
   *  inside them gets `conflictStatus`. A body it cannot apply to (not I-JSON, or not an
   *  object while include/exclude is given) is answered 400. Plain fields are made into
   *  a Selector by idempotency(), which throws SelectorError for one that cannot be right. */
  selector?: Selector | SelectorFields;
  /** During a rollout that changes `selector` (docs/api.md, "Changing the normalisation
   *  while operations are in flight"): the selectors of the versions being replaced, at
   *  most 4; `null` (or an empty one, `{}`) stands for a version without a selector,
   *  whose identity was the whole request. Each request's fingerprint under each is sent as
   *  previous_fingerprints, so a retry of a request the old version took replays (or is
   *  resumed) instead of answering `conflictStatus`. Empty (the default) outside such a
   *  window: nothing changes. idempotency() throws a RangeError for more than 4, a
   *  SelectorError for one that cannot be right. */
  previousSelectors?: ReadonlyArray<Selector | SelectorFields | null>;
}

/** The default principal: the request's Authorization header. */
export function authorizationPrincipal(req: RequestLike): string | undefined {
  return req.headers.authorization;
}

/** The key sent to idemd for a caller's Idempotency-Key:
 *  `hex(SHA-256(UTF-8 principal))[0:32] + ":" + key`. The principal never reaches idemd
 *  in clear, and every idemd client derives the same key for the same principal. */
export function scopedKey(principal: string, key: string): string {
  return createHash("sha256").update(principal, "utf8").digest("hex").slice(0, 32) + ":" + key;
}

/** For `express.json({ verify: keepRawBody })`: keeps the raw bytes in `req.rawBody`. */
export function keepRawBody(req: IncomingMessage, _res: ServerResponse, buffer: Buffer): void {
  (req as RequestLike).rawBody = Buffer.from(buffer);
}

/** The key of an Idempotency-Key header: an RFC 8941 sf-string, or a bare token. */
export function parseKey(value: string): string {
  const trimmed = value.trim();
  if (trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"')) {
    return trimmed.slice(1, -1).replace(/\\(.)/g, "$1");
  }
  return trimmed;
}

function pathOf(req: RequestLike): string {
  const url = req.originalUrl ?? req.url ?? "/";
  const query = url.indexOf("?");
  return query >= 0 ? url.slice(0, query) : url;
}

function queryOf(req: RequestLike): string {
  const url = req.originalUrl ?? req.url ?? "/";
  const query = url.indexOf("?");
  return query >= 0 ? url.slice(query + 1) : "";
}

/** `http.<method><path>` in idemd's operation alphabet, at most 128 characters. */
export function defaultOperation(req: { method: string; originalUrl?: string; url?: string }): string {
  const name = "http." + req.method.toLowerCase() + pathOf(req as RequestLike).replace(/[^A-Za-z0-9._/-]/g, "_");
  if (name.length > 128) {
    return name.slice(0, 111) + "." + createHash("sha256").update(name).digest("hex").slice(0, 16);
  }
  return name;
}

class TooLarge extends Error {}

async function readBody(req: RequestLike, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    size += buffer.length;
    if (size > limit) throw new TooLarge();
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

async function bodyBytes(req: RequestLike, limit: number): Promise<Buffer> {
  if (Buffer.isBuffer(req.rawBody)) return req.rawBody;
  if (req.body === undefined && !req.readableEnded) {
    const raw = await readBody(req, limit);
    req.rawBody = raw;
    req.body = raw;
    return raw;
  }
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === "string") return Buffer.from(req.body);
  if (req.body === undefined) return Buffer.alloc(0);
  return Buffer.from(JSON.stringify(req.body));
}

/** What the key must always be used with: method, path, query, content type, body. */
function requestIdentity(req: RequestLike, body: Buffer): Buffer {
  const head = JSON.stringify([req.method.toUpperCase(), pathOf(req), queryOf(req), req.headers["content-type"] ?? ""]);
  return Buffer.concat([Buffer.from(head), Buffer.from("\n"), body]);
}

function problem(
  res: ResponseLike,
  own: Originals,
  status: number,
  title: string,
  detail: string,
  retryAfter?: number,
): void {
  const body = Buffer.from(JSON.stringify({ type: "about:blank", title, status, detail }));
  const headers: OutgoingHttpHeaders = {
    "content-type": "application/problem+json",
    "content-length": String(body.length),
  };
  if (retryAfter !== undefined) headers["retry-after"] = String(Math.max(1, Math.ceil(retryAfter)));
  send(res, own, status, headers, body);
}

interface Originals {
  writeHead: ServerResponse["writeHead"];
  write: ServerResponse["write"];
  end: ServerResponse["end"];
  flushHeaders: ServerResponse["flushHeaders"];
}

function originals(res: ResponseLike): Originals {
  return { writeHead: res.writeHead, write: res.write, end: res.end, flushHeaders: res.flushHeaders };
}

/** Sends a whole response with the methods the response had before capture() replaced
 *  them, and only the headers given. */
function send(res: ResponseLike, own: Originals, status: number, headers: OutgoingHttpHeaders, body: Buffer): void {
  Object.assign(res, own);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  for (const name of res.getHeaderNames()) res.removeHeader(name);
  res.writeHead(status, headers);
  res.end(body);
}

interface Captured { status: number; headers: OutgoingHttpHeaders; body: Buffer }

/** Runs the rest of the chain with the response captured instead of sent. */
function capture(res: ResponseLike, limit: number, next: NextFunction): Promise<Captured> {
  return new Promise<Captured>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    const add = (chunk: unknown, encoding?: unknown): void => {
      if (chunk === undefined || chunk === null || typeof chunk === "function") return;
      const buffer = Buffer.isBuffer(chunk)
        ? chunk
        : chunk instanceof Uint8Array
          ? Buffer.from(chunk)
          : Buffer.from(String(chunk), typeof encoding === "string" ? (encoding as BufferEncoding) : "utf8");
      size += buffer.length;
      if (size > limit) {
        ended = true;
        reject(new TooLarge("the response is larger than maxResponseBytes"));
        return;
      }
      chunks.push(buffer);
    };
    const r = res as unknown as Record<string, unknown>;
    r.writeHead = (status: number, ...rest: unknown[]) => {
      res.statusCode = status;
      const headers = rest.find((x) => typeof x === "object" && x !== null);
      if (Array.isArray(headers)) {
        for (let i = 0; i + 1 < headers.length; i += 2) res.setHeader(String(headers[i]), String(headers[i + 1]));
      } else if (headers) {
        for (const [name, value] of Object.entries(headers)) if (value !== undefined) res.setHeader(name, value as string);
      }
      return res;
    };
    r.flushHeaders = () => undefined;
    r.write = (chunk: unknown, encoding?: unknown, callback?: unknown) => {
      if (!ended) add(chunk, encoding);
      const cb = typeof encoding === "function" ? encoding : callback;
      if (typeof cb === "function") queueMicrotask(() => (cb as () => void)());
      return true;
    };
    r.end = (chunk?: unknown, encoding?: unknown, callback?: unknown) => {
      if (!ended) {
        add(chunk, encoding);
        ended = true;
        resolve({ status: res.statusCode, headers: res.getHeaders(), body: Buffer.concat(chunks) });
      }
      const cb = [chunk, encoding, callback].find((x) => typeof x === "function");
      if (typeof cb === "function") queueMicrotask(() => (cb as () => void)());
      return res;
    };
    try {
      next();
    } catch (error) {
      reject(error);
    }
  });
}

/** The options with their defaults, resolved once per middleware. */
interface Settings {
  methods: Set<string>;
  required: boolean;
  header: string;
  operation: (req: RequestLike) => string;
  keep: string[];
  maxRequestBytes: number;
  maxResponseBytes: number;
  reconcileFirst: "refuse" | "run";
  principalOf: NonNullable<IdempotencyOptions["principal"]>;
  sharedKeys: boolean;
  maxKeyBytes: number;
  conflictStatus: number;
  inProgressStatus: number;
  /** Undefined for none (or an empty one): the whole request is its identity. */
  selector: Selector | undefined;
  /** The previous versions' selectors, in the same form (undefined: the whole request). */
  previousSelectors: Array<Selector | undefined>;
}

/** The default status of a key used with another request (or expired): the IETF draft's. */
export const DEFAULT_CONFLICT_STATUS = 422;
/** The default status of a key whose first request is still running. */
export const DEFAULT_IN_PROGRESS_STATUS = 409;

/** `value` when it is an HTTP error status (an integer in 400..599), else a RangeError
 *  naming the option. */
function errorStatus(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 400 || value > 599) {
    throw new RangeError(`${name} must be an HTTP error status, an integer in 400..599, not ${String(value)}`);
  }
  return value;
}

function selectorOf(given: Selector | SelectorFields | undefined): Selector | undefined {
  if (given === undefined) return undefined;
  const selector = given instanceof Selector ? given : new Selector(given);
  return selector.empty ? undefined : selector;
}

/** The request's headers as [name, value] pairs in arrival order (repeats kept). */
function headerPairs(req: RequestLike): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    pairs.push([req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string]);
  }
  return pairs;
}

function settingsOf(options: IdempotencyOptions): Settings {
  const sharedKeys = options.sharedKeys ?? false;
  return {
    methods: new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase())),
    required: options.required ?? true,
    header: (options.header ?? "idempotency-key").toLowerCase(),
    operation: options.operation ?? defaultOperation,
    keep: (options.keepHeaders ?? DEFAULT_KEEP_HEADERS).map((h) => h.toLowerCase()),
    maxRequestBytes: options.maxRequestBytes ?? 1 << 20,
    maxResponseBytes: options.maxResponseBytes ?? 1 << 20,
    reconcileFirst: options.reconcileFirst ?? "refuse",
    principalOf: options.principal ?? authorizationPrincipal,
    sharedKeys,
    maxKeyBytes: sharedKeys ? MAX_KEY_BYTES : MAX_KEY_BYTES - PRINCIPAL_PREFIX_BYTES,
    conflictStatus: errorStatus("conflictStatus", options.conflictStatus ?? DEFAULT_CONFLICT_STATUS),
    inProgressStatus: errorStatus("inProgressStatus", options.inProgressStatus ?? DEFAULT_IN_PROGRESS_STATUS),
    selector: selectorOf(options.selector),
    previousSelectors: previousSelectorsOf(options.previousSelectors),
  };
}

function previousSelectorsOf(given: IdempotencyOptions["previousSelectors"]): Array<Selector | undefined> {
  const listed = [...(given ?? [])];
  if (listed.length > MAX_PREVIOUS_FINGERPRINTS) {
    throw new RangeError(`previousSelectors: at most ${MAX_PREVIOUS_FINGERPRINTS}, not ${listed.length}`);
  }
  return listed.map((selector) => selectorOf(selector ?? {}));
}

/** The request's fingerprint under `selector`, as the version that used it sent it:
 *  the selected document's, or (no selector) the whole request's, which that version
 *  sent as bytes_payload or as its fingerprint. */
function fingerprintUnder(selector: Selector | undefined, req: RequestLike, body: Buffer): Buffer {
  if (selector === undefined) return fingerprintBytes(requestIdentity(req, body));
  return selector.fingerprint(body, headerPairs(req));
}

/** The request's fingerprints under the previous versions' selectors, less the current
 *  one. A selector that cannot apply to this body is left out: the version that used it
 *  refused the request (400), so it claimed no operation that this one could retry. */
function previousFingerprintsOf(settings: Settings, req: RequestLike, body: Buffer, current: Buffer): Buffer[] {
  const fingerprints: Buffer[] = [];
  for (const selector of settings.previousSelectors) {
    let fingerprint: Buffer;
    try {
      fingerprint = fingerprintUnder(selector, req, body);
    } catch (error) {
      if (error instanceof InvalidArgumentError) continue;
      throw error;
    }
    if (!fingerprint.equals(current) && !fingerprints.some((seen) => seen.equals(fingerprint))) {
      fingerprints.push(fingerprint);
    }
  }
  return fingerprints;
}

/** The key to send idemd for this request (the caller's, scoped by its principal unless
 *  `sharedKeys`), or undefined once the request has been answered or passed on. */
async function keyOf(
  req: RequestLike,
  res: ResponseLike,
  own: Originals,
  next: NextFunction,
  settings: Settings,
): Promise<string | undefined> {
  const raw = req.headers[settings.header];
  if (raw === undefined) {
    if (settings.required) problem(res, own, 400, "Idempotency-Key missing", "this request requires an Idempotency-Key header");
    else next();
    return undefined;
  }
  const given = parseKey(Array.isArray(raw) ? raw.join(",") : raw);
  if (!given || Buffer.byteLength(given) > settings.maxKeyBytes) {
    problem(res, own, 400, "Invalid Idempotency-Key", `the Idempotency-Key must be 1-${settings.maxKeyBytes} bytes`);
    return undefined;
  }
  if (settings.sharedKeys) return given;
  let principal: string | null | undefined;
  try {
    principal = await settings.principalOf(req);
  } catch (error) {
    next(error);
    return undefined;
  }
  if (!principal) {
    problem(
      res, own, 400, "Idempotency-Key needs a caller",
      "Idempotency-Keys are scoped per caller, and no caller (principal) was found in this request, such as an Authorization header",
    );
    return undefined;
  }
  return scopedKey(principal, given);
}

/** What is stored of a route's response: its body, content type, status and the headers
 *  kept (each within idemd's metadata bounds). */
function recorded(captured: Captured, keep: string[]): Success {
  let contentType = "";
  const metadata: Record<string, string> = { [STATUS]: String(captured.status) };
  for (const [name, value] of Object.entries(captured.headers)) {
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.join(", ") : String(value);
    if (name === "content-type") contentType = text;
    else if (keep.includes(name)) {
      const metaKey = HEADER + name;
      if (metaKey.length + Buffer.byteLength(text) <= METADATA_LIMIT && Object.keys(metadata).length < 16) {
        metadata[metaKey] = text;
      }
    }
  }
  return new Success(captured.body, contentType, metadata);
}

/** Answers what executeOnce threw, as an HTTP problem (a conflict or an expired key with
 *  `conflictStatus`, a request in progress with `inProgressStatus`), or passes the
 *  route's own error on. */
function answerFailure(error: unknown, res: ResponseLike, own: Originals, next: NextFunction, settings: Settings): void {
  if (error instanceof ConflictError) {
    return problem(res, own, settings.conflictStatus, "Idempotency-Key reused", "this Idempotency-Key was used with a different request");
  }
  if (error instanceof ResultExpiredError) {
    return problem(
      res, own, settings.conflictStatus, "Idempotency-Key expired",
      "this Idempotency-Key's response is no longer kept; use a new key",
    );
  }
  if (error instanceof PendingError) {
    return problem(
      res, own, settings.inProgressStatus, "Request in progress",
      "a request with this Idempotency-Key is still being processed", error.retryAfter,
    );
  }
  if (error instanceof InvalidArgumentError) return problem(res, own, 400, "Invalid request", error.grpcMessage);
  if (error instanceof OutcomeUnknownError && error.cause !== undefined && !(error.cause instanceof IdemError)) {
    return next(error.cause); // the route's own error
  }
  if (error instanceof OutcomeUnknownError || error instanceof NeedsReconciliationError || error instanceof OperationFailedError) {
    return problem(res, own, 500, "Outcome unknown", "an earlier attempt with this Idempotency-Key may have taken effect");
  }
  if (error instanceof StatusError) {
    return problem(res, own, 503, "Idempotency service unavailable", Code[error.code] ?? String(error.code), error.retryAfter ?? 1);
  }
  if (error instanceof TooLarge) return problem(res, own, 500, "Response too large", "the response is too large to keep");
  return next(error);
}

/** Sends the stored response: its status, the headers kept, and Idempotent-Replayed on a replay. */
function replay(res: ResponseLike, own: Originals, result: Result): void {
  const headers: OutgoingHttpHeaders = { "content-length": String(result.body.length) };
  if (result.contentType) headers["content-type"] = result.contentType;
  for (const [name, value] of Object.entries(result.metadata)) {
    if (name.startsWith(HEADER)) headers[name.slice(HEADER.length)] = value;
  }
  if (result.replayed) headers["idempotent-replayed"] = "true";
  send(res, own, Number(result.metadata[STATUS] ?? "200"), headers, result.body);
}

/** The Express middleware (see the module comment). Throws a RangeError when
 *  `conflictStatus` or `inProgressStatus` is not an integer in 400..599, and a
 *  SelectorError for a `selector` that cannot be right. */
export function idempotency(options: IdempotencyOptions) {
  const settings = settingsOf(options);
  let client: Client | undefined = typeof options.client === "function" ? undefined : options.client;
  const clientOf = (): Client => (client ??= (options.client as () => Client)());

  return async function idempotencyMiddleware(req: RequestLike, res: ResponseLike, next: NextFunction): Promise<void> {
    if (!settings.methods.has(req.method.toUpperCase())) return next();
    const own = originals(res);
    const key = await keyOf(req, res, own, next, settings);
    if (key === undefined) return;
    let body: Buffer;
    try {
      body = await bodyBytes(req, settings.maxRequestBytes);
    } catch (error) {
      if (error instanceof TooLarge) return problem(res, own, 413, "Request too large", "the request body is too large");
      return next(error);
    }
    let selected: Buffer | undefined;
    try {
      selected = settings.selector?.fingerprint(body, headerPairs(req));
    } catch (error) {
      return answerFailure(error, res, own, next, settings); // not JSON, or not an object: 400
    }
    const framed = selected === undefined ? requestIdentity(req, body) : Buffer.alloc(0);
    const previousFingerprints = settings.previousSelectors.length === 0
      ? []
      : previousFingerprintsOf(settings, req, body, selected ?? fingerprintBytes(framed));
    let passedOn: Captured | undefined;

    const effect = async (ctx: EffectContext): Promise<Success | Unknown> => {
      if (res.locals) res.locals.idempotency = ctx;
      else res.locals = { idempotency: ctx };
      const captured = await capture(res, settings.maxResponseBytes, next);
      if (captured.status >= 500) {
        passedOn = captured;
        return new Unknown("http_status", `the route answered ${captured.status}`);
      }
      return recorded(captured, settings.keep);
    };

    let result: Result;
    try {
      result = await executeOnce(
        clientOf(),
        settings.operation(req),
        key,
        selected === undefined && framed.length <= MAX_SENT_PAYLOAD ? framed : null,
        effect,
        {
          lease: options.lease ?? 30,
          attemptDuration: options.attemptDuration ?? 300,
          deadline: options.pendingWait ?? 0,
          // "refuse": executeOnce declines a ReconcileFirst itself (NOT_STARTED).
          providerDeduplicates: settings.reconcileFirst === "run",
          previousFingerprints,
          ...(selected !== undefined
            ? { fingerprint: selected }
            : framed.length > MAX_SENT_PAYLOAD
              ? { fingerprint: fingerprintBytes(framed) }
              : {}),
        },
      );
    } catch (error) {
      if (passedOn !== undefined) return send(res, own, passedOn.status, passedOn.headers, passedOn.body);
      return answerFailure(error, res, own, next, settings);
    }
    replay(res, own, result);
  };
}
