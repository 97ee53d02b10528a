/**
 * Request fingerprints computed exactly as idemd computes them (README, "Fingerprints"):
 *
 *     fingerprint = SHA-256("idem.v1" 0x00 mode 0x00 canonical-bytes)
 *
 * mode `json`: the RFC 8785 (JCS) form of an I-JSON document; mode `bytes`: the payload
 * as given. Prefer sending the payload (jsonPayload/bytesPayload) and letting the server
 * fingerprint it; this is for callers that send `fingerprint`, e.g. for requests above
 * the server's payload bound.
 *
 * Refused, as the server refuses them (NotIJsonError), because canonicalization would
 * otherwise merge distinct requests: duplicate object keys, lone surrogates, integers
 * beyond ±2^53, numbers with a fraction or exponent of magnitude 2^53 or more, numbers
 * with more significant digits than a double holds, i.e. whose exact value is not the
 * one their canonical form writes (`100.10000000000000001` is the double of `100.1`;
 * `1e-400` underflows to 0), NaN/Infinity, and anything that is not one JSON document. JSON.parse is
 * not used: it keeps the last of duplicate keys and rounds big integers silently.
 */
import { createHash } from "node:crypto";

const DOMAIN = Buffer.from("idem.v1");
const MAX_SAFE = 2 ** 53;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The document is not I-JSON; the server would answer INVALID_ARGUMENT. */
export class NotIJsonError extends Error {
  override name = "NotIJsonError";
}

function domainSeparated(mode: string, canonical: Uint8Array): Buffer {
  return createHash("sha256")
    .update(DOMAIN)
    .update(Buffer.from([0]))
    .update(mode)
    .update(Buffer.from([0]))
    .update(canonical)
    .digest();
}

/** The 32-byte fingerprint of an opaque payload (mode `bytes`). */
export function fingerprintBytes(payload: Uint8Array): Buffer {
  return domainSeparated("bytes", payload);
}

/** The 32-byte fingerprint of a JSON document (mode `json`). */
export function fingerprintJson(document: string | Uint8Array): Buffer {
  return domainSeparated("json", canonicalJson(document));
}

type Value = null | boolean | number | string | Value[] | Map<string, Value>;

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/**
 * A number literal's exact decimal value, by its digits alone: sign, significant digits
 * (no leading or trailing zeros) and the power of ten of the last one ("0" for zero).
 */
function exactDecimal(literal: string): string {
  const negative = literal.startsWith("-");
  const [mantissa = "", exponent = "0"] = literal.replace(/^-/, "").toLowerCase().split("e");
  const [integerDigits = "", fractionDigits = ""] = mantissa.split(".");
  const significant = (integerDigits + fractionDigits).replace(/^0+/, "");
  const digits = significant.replace(/0+$/, "");
  if (digits === "") return "0";
  const power =
    BigInt(exponent.replace(/^\+/, "")) -
    BigInt(fractionDigits.length) +
    BigInt(significant.length - digits.length);
  return `${negative ? "-" : ""}${digits}e${power}`;
}

class Parser {
  private at = 0;
  constructor(private readonly text: string) {}

  document(): Value {
    this.space();
    const value = this.value();
    this.space();
    if (this.at !== this.text.length) this.fail("content after the JSON document");
    return value;
  }

  private fail(why: string): never {
    throw new NotIJsonError(`${why} at offset ${this.at}`);
  }

  private space(): void {
    while (this.at < this.text.length) {
      const c = this.text[this.at];
      if (c === " " || c === "\t" || c === "\n" || c === "\r") this.at += 1;
      else break;
    }
  }

  private literal(word: string, value: Value): Value {
    if (this.text.startsWith(word, this.at)) {
      this.at += word.length;
      return value;
    }
    return this.fail("not JSON");
  }

  private value(): Value {
    const c = this.text[this.at];
    switch (c) {
      case "{": return this.object();
      case "[": return this.array();
      case '"': return this.string();
      case "t": return this.literal("true", true);
      case "f": return this.literal("false", false);
      case "n": return this.literal("null", null);
      default:
        if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return this.number();
        return this.fail(c === undefined ? "an empty or truncated document" : "not JSON");
    }
  }

  private object(): Value {
    this.at += 1;
    const result = new Map<string, Value>();
    this.space();
    if (this.text[this.at] === "}") {
      this.at += 1;
      return result;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') this.fail("an object key must be a string");
      const name = this.string();
      if (result.has(name)) this.fail(`duplicate object key ${JSON.stringify(name)}`);
      this.space();
      if (this.text[this.at] !== ":") this.fail("expected ':'");
      this.at += 1;
      this.space();
      result.set(name, this.value());
      this.space();
      const next = this.text[this.at];
      this.at += 1;
      if (next === "}") return result;
      if (next !== ",") this.fail("expected ',' or '}'");
    }
  }

  private array(): Value {
    this.at += 1;
    const result: Value[] = [];
    this.space();
    if (this.text[this.at] === "]") {
      this.at += 1;
      return result;
    }
    for (;;) {
      this.space();
      result.push(this.value());
      this.space();
      const next = this.text[this.at];
      this.at += 1;
      if (next === "]") return result;
      if (next !== ",") this.fail("expected ',' or ']'");
    }
  }

  private string(): string {
    this.at += 1;
    let out = "";
    for (;;) {
      const c = this.text[this.at];
      if (c === undefined) this.fail("an unterminated string");
      this.at += 1;
      if (c === '"') break;
      if (c === "\\") {
        const e = this.text[this.at];
        this.at += 1;
        switch (e) {
          case '"': out += '"'; break;
          case "\\": out += "\\"; break;
          case "/": out += "/"; break;
          case "b": out += "\b"; break;
          case "f": out += "\f"; break;
          case "n": out += "\n"; break;
          case "r": out += "\r"; break;
          case "t": out += "\t"; break;
          case "u": {
            const hex = this.text.slice(this.at, this.at + 4);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail("a bad \\u escape");
            out += String.fromCharCode(parseInt(hex, 16));
            this.at += 4;
            break;
          }
          default: this.fail("a bad escape");
        }
      } else if (c < " ") {
        this.fail("a control character in a string");
      } else {
        out += c;
      }
    }
    if (LONE_SURROGATE.test(out)) this.fail("a lone surrogate has no UTF-8 form");
    return out;
  }

  private number(): number {
    NUMBER.lastIndex = this.at;
    const match = NUMBER.exec(this.text);
    if (match === null) return this.fail("not a number");
    const literal = match[0];
    this.at += literal.length;
    if (!/[.eE]/.test(literal)) {
      if ((BigInt(literal) < 0n ? -BigInt(literal) : BigInt(literal)) > BigInt(MAX_SAFE)) {
        this.fail(`integer ${literal} is beyond ±2^53 and cannot be compared exactly`);
      }
      return Number(literal);
    }
    const value = Number(literal);
    if (!Number.isFinite(value)) this.fail(`number ${literal} is out of range`);
    if (Math.abs(value) >= MAX_SAFE) this.fail("a number of magnitude 2^53 or more cannot be compared exactly");
    // String(value) is ECMAScript's Number::toString: the canonical form. A literal
    // that does not denote exactly that value shares its double with another one
    // (100.10000000000000001 and 100.1), which would replay it instead of conflicting.
    const canonical = String(value);
    if (exactDecimal(literal) !== exactDecimal(canonical)) {
      this.fail(
        `the number ${literal} has more significant digits than a double holds: ` +
          `it would be compared as ${canonical}`,
      );
    }
    return value;
  }
}

const ESCAPES: Record<string, string> = {
  '"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
};

function formatString(value: string): string {
  let out = '"';
  for (const char of value) {
    const escape = ESCAPES[char];
    if (escape !== undefined) out += escape;
    else if (char < " ") out += `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`;
    else out += char;
  }
  return out + '"';
}

function serialize(value: Value, out: string[]): void {
  if (value === null) out.push("null");
  else if (value === true) out.push("true");
  else if (value === false) out.push("false");
  // ECMAScript's Number.prototype.toString is the form RFC 8785 prescribes (-0 is "0").
  else if (typeof value === "number") out.push(String(value));
  else if (typeof value === "string") out.push(formatString(value));
  else if (Array.isArray(value)) {
    out.push("[");
    value.forEach((item, index) => {
      if (index) out.push(",");
      serialize(item, out);
    });
    out.push("]");
  } else {
    out.push("{");
    // Sorted by UTF-16 code units: JavaScript's own string order.
    const names = [...value.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    names.forEach((name, index) => {
      if (index) out.push(",");
      out.push(formatString(name), ":");
      serialize(value.get(name) as Value, out);
    });
    out.push("}");
  }
}

/** The RFC 8785 canonical form (UTF-8) of an I-JSON document. */
export function canonicalJson(document: string | Uint8Array): Buffer {
  return canonicalValue(parseIJson(document));
}

/** A JSON value as parseIJson makes it: objects are Maps, in document order. */
export type JsonValue = Value;

/** The RFC 8785 canonical form (UTF-8) of a value parseIJson made (or one built of
 *  such values). */
export function canonicalValue(value: JsonValue): Buffer {
  const out: string[] = [];
  serialize(value, out);
  return Buffer.from(out.join(""), "utf8");
}

/** The value of an I-JSON document; NotIJsonError for what the server refuses. */
export function parseIJson(document: string | Uint8Array): JsonValue {
  let text: string;
  if (typeof document === "string") {
    if (LONE_SURROGATE.test(document)) throw new NotIJsonError("a lone surrogate has no UTF-8 form");
    text = document;
  } else {
    try {
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(document);
    } catch (error) {
      throw new NotIJsonError(`not UTF-8: ${String(error)}`);
    }
  }
  let value: Value;
  try {
    value = new Parser(text).document();
  } catch (error) {
    if (error instanceof NotIJsonError) throw error;
    if (error instanceof RangeError) throw new NotIJsonError(`too deeply nested: ${error.message}`);
    throw error;
  }
  return value;
}
