/**
 * What `callTool` (src/env/tool.ts) does with what a tool gives back — its value, or what it threw — before the value
 * reaches an observation: the size limits (a soft cap in characters, a hard limit in bytes), the JSON and binary
 * checks, the cut with its marker, and the text of a thrown value. Everything kept is an own copy (`ownCopy`, or a
 * value rebuilt from its bounded JSON), so a kept result never keeps the tool's whole output alive (issue 29: 40
 * capped 100 000-character results of 50 MB strings held 1.86 GB, and a 50 MB result per call ended runs with
 * "JavaScript heap out of memory"; then an object holding a 40-character slice of a 50 MB string, or a hidden
 * non-enumerable 50 MB property, kept 50 MB per call, and a 200 MB Float64Array or 100 MB Buffer was expanded into
 * gigabytes before being refused).
 */
import { types } from "node:util";
import type { ToolErrorKind } from "../core/types.ts";
import { describeValue, ownCopy } from "../core/values.ts";

/** Default of `CallToolOptions.maxOutputChars`: the soft cap (characters). */
export const DEFAULT_MAX_OUTPUT_CHARS = 100_000;

/**
 * Default of `CallToolOptions.maxResultBytes`: the hard limit (UTF-8 bytes of the string, or of its JSON), 16 MiB.
 * Far above the soft cap, so it only decides what is done with an absurd result: the error names the tool and the
 * size, and no head is cut or JSON text built past it. Above the fault injector's default `huge` output (10 000 000
 * characters, src/env/faults.ts), which stays a soft-cap error with its head.
 */
export const DEFAULT_MAX_RESULT_BYTES = 16 * 1024 * 1024;

/**
 * `text` cut to at most `cap` characters, ending in `…[truncated N chars]` when cut (a surrogate pair is never split).
 * A cut text is an own copy (`ownCopy`): it does not keep `text` alive.
 */
export function truncateChars(text: string, cap: number): string {
  if (text.length <= cap) return text;
  const marker = `…[truncated ${text.length - cap} chars]`;
  if (marker.length >= cap) return ownCopy(text.slice(0, headEnd(text, cap)));
  return ownCopy(text.slice(0, headEnd(text, cap - marker.length)) + marker);
}

/** `n`, or `n − 1` when `text[n−1]` is the first half of a surrogate pair (the cut would split the character). */
function headEnd(text: string, n: number): number {
  const c = text.charCodeAt(n - 1);
  return n > 0 && c >= 0xd800 && c <= 0xdbff ? n - 1 : n;
}

// A NUL, or a UTF-16 surrogate without its pair: bytes, not text.
const BINARY_RE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A failed output check: the error kind, its text (`tool <name>: …`) and, for the soft cap, the cut head. */
export interface OutputProblem {
  kind: ToolErrorKind;
  error: string;
  partial?: string;
}

/**
 * UTF-8 bytes of `s` — or, when its length alone shows it is within `limit` (≤ 3 bytes per UTF-16 unit), that length
 * (a number ≤ `limit`, without reading the string). Exact whenever the result is over `limit`.
 */
function utf8Bytes(s: string, limit: number): number {
  return s.length * 3 <= limit ? s.length : Buffer.byteLength(s, "utf8");
}

/**
 * Whether the JSON text of `value` surely has more than `maxBytes` bytes, judged from a lower bound of its size
 * without calling any `toJSON` and without expanding a typed array: a typed array counts ≥ 5 characters per element
 * (`"i":x,`), a Buffer ≥ 2 (`x,` in its `toJSON`'s `data`), a string its length plus quotes, an object entry its key
 * plus `"":` (entries JSON omits — undefined, functions, symbols — count nothing), anything else 1. Objects with their
 * own `toJSON` and boxed primitives are not looked into (their JSON is what `toJSON` / the primitive makes). Iterative
 * (no stack limit); each object is visited once (a cycle is left to `JSON.stringify` to report); stops as soon as the
 * bound passes `maxBytes`, so a 200 MB typed array or a 2-million-key object is refused after reading its length or
 * key list, never serialised (JSON.stringify of a 200 MB Float64Array took 12.6 GB of RSS).
 * @returns false too when reading the value throws (a getter, a proxy): `JSON.stringify` then reports it
 */
function surelyOverLimit(value: unknown, maxBytes: number): boolean {
  let size = 0;
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  // The size of a value that is not looked into: a string's characters (UTF-16 length ≤ UTF-8 bytes) plus quotes.
  const leaf = (v: unknown) => (typeof v === "string" ? v.length + 2 : 1);
  try {
    while (stack.length > 0) {
      const v = stack.pop();
      if (v === null || typeof v !== "object") {
        size += leaf(v);
      } else if (seen.has(v)) {
        continue;
      } else {
        seen.add(v);
        const toJSON = (v as { toJSON?: unknown }).toJSON;
        if (types.isTypedArray(v)) size += (toJSON === Buffer.prototype.toJSON ? 2 : typeof toJSON === "function" ? 0 : 5) * v.length + 1;
        else if (typeof toJSON === "function" || types.isBoxedPrimitive(v)) size += 1;
        else if (Array.isArray(v)) {
          size += 1 + v.length; // brackets and commas; each element adds at least one character more
          for (let i = 0; i < v.length && size <= maxBytes; i++) {
            const x: unknown = v[i];
            if (x !== null && typeof x === "object") stack.push(x);
            else size += leaf(x);
          }
        } else {
          size += 2;
          for (const key of Object.keys(v)) {
            if (size > maxBytes) break;
            const x: unknown = (v as Record<string, unknown>)[key];
            if (x === undefined || typeof x === "function" || typeof x === "symbol") continue;
            size += key.length + 3;
            if (typeof x === "object" && x !== null) stack.push(x);
            else size += leaf(x);
          }
        }
      }
      if (size > maxBytes) return true;
    }
  } catch {
    return false;
  }
  return false;
}

/** Thrown by the serialiser's replacer to stop at the hard limit. */
const OVER_LIMIT = Symbol("over the hard limit");

/**
 * The JSON text of a non-string value, or `OVER_LIMIT` as soon as a running lower bound of its size passes `maxBytes`
 * (so a huge object, array or typed array is never serialised whole), with whether a string in it is binary.
 * @throws what `JSON.stringify` throws (a cycle, a BigInt, nesting past the stack)
 */
function boundedJson(value: unknown, maxBytes: number): { text: string | undefined; binary: boolean } | typeof OVER_LIMIT {
  let binary = false;
  // A lower bound of the JSON text's bytes: `"key":` per object entry, the characters of each string plus its
  // quotes, one character for any other value (UTF-16 length ≤ UTF-8 bytes; escapes and separators only add).
  let size = 0;
  let text: string | undefined;
  if (surelyOverLimit(value, maxBytes)) return OVER_LIMIT;
  try {
    text = JSON.stringify(value, function (this: unknown, key: string, v: unknown) {
      if (key !== "" && !Array.isArray(this)) size += key.length + 3;
      if (typeof v === "string") {
        size += v.length + 2;
        if (size <= maxBytes && !binary && BINARY_RE.test(v)) binary = true;
      } else size += 1;
      if (size > maxBytes) throw OVER_LIMIT;
      return v;
    });
  } catch (e) {
    if (e === OVER_LIMIT) return OVER_LIMIT;
    throw e;
  }
  return { text, binary };
}

/**
 * Checks a tool's value: JSON-serialisable, within the hard limit (`maxBytes`, UTF-8 bytes), within the soft cap
 * (`cap`, characters of the string or its JSON), not binary (a NUL or an unpaired surrogate), and satisfying
 * `validate` (the tool's output schema, as `field: message` text or null). Strings over the soft cap are not scanned.
 * @param name the tool's name, for the error texts
 * @returns `{ value }` — what is kept of a fine value — else `{ problem }`: `invalid_output` (`tool <name>: invalid
 *   output: …`) or `oversize` (`tool <name>: output of <n> bytes exceeds the hard limit of <max> bytes
 *   (maxResultBytes)`, no head; `tool <name>: output of <n> chars exceeds the cap of <cap> chars`, with the head cut
 *   to the cap as `partial`). The kept value shares nothing with the tool's: a string as an own copy
 *   (`ownCopy`), a number, boolean or null as it is, and an object or array rebuilt from its JSON text (`JSON.parse`,
 *   at most `maxBytes` bytes) — plain data compares equal, while what JSON leaves out (non-enumerable or undefined
 *   properties, a class's prototype, a Date object: its string) is not kept, nor is any larger string that a kept
 *   slice of it would hold alive.
 */
export function checkOutput(
  name: string,
  value: unknown,
  cap: number,
  maxBytes: number,
  validate?: (value: unknown) => string | null,
): { problem: OutputProblem } | { problem?: undefined; value: unknown } {
  const problem = outputProblem(name, value, cap, maxBytes, validate);
  if (typeof problem !== "string" && problem !== null) return { problem };
  if (typeof value === "string") return { value: ownCopy(value) };
  // A primitive has nothing to hold alive (and keeps e.g. NaN as it is); an object is kept as its JSON's copy.
  return { value: problem === null ? value : JSON.parse(problem) };
}

/** `checkOutput`'s check: the problem, or null (a primitive or string is fine), or the JSON text of a fine object. */
function outputProblem(
  name: string,
  value: unknown,
  cap: number,
  maxBytes: number,
  validate?: (value: unknown) => string | null,
): OutputProblem | string | null {
  const kind = "invalid_output" as const;
  if (value === undefined || typeof value === "function" || typeof value === "symbol") {
    return { kind, error: `tool ${name}: invalid output: not JSON-serialisable (${typeof value})` };
  }
  const overLimit = (size: string): OutputProblem => ({
    kind: "oversize",
    error: `tool ${name}: output of ${size} bytes exceeds the hard limit of ${maxBytes} bytes (maxResultBytes)`,
  });
  let text: string;
  let binary = false;
  if (typeof value === "string") {
    const bytes = utf8Bytes(value, maxBytes);
    if (bytes > maxBytes) return overLimit(String(bytes));
    text = value;
    binary = text.length <= cap && BINARY_RE.test(text); // an oversize string is not scanned
  } else {
    let json: ReturnType<typeof boundedJson>;
    try {
      json = boundedJson(value, maxBytes);
    } catch (e) {
      return { kind, error: `tool ${name}: invalid output: not JSON-serialisable (${e instanceof Error ? e.message : String(e)})` };
    }
    if (json === OVER_LIMIT) return overLimit(`more than ${maxBytes}`);
    if (json.text === undefined) return { kind, error: `tool ${name}: invalid output: not JSON-serialisable (its JSON is empty)` };
    const bytes = utf8Bytes(json.text, maxBytes);
    if (bytes > maxBytes) return overLimit(String(bytes));
    text = json.text;
    binary = json.binary;
  }
  if (text.length > cap) {
    return { kind: "oversize", error: `tool ${name}: output of ${text.length} chars exceeds the cap of ${cap} chars`, partial: truncateChars(text, cap) };
  }
  if (binary) return { kind, error: `tool ${name}: invalid output: binary data (a NUL or unpaired surrogate)` };
  const issues = validate?.(value) ?? null;
  if (issues !== null) return { kind, error: `tool ${name}: invalid output: ${truncateChars(issues, 500)}` };
  return value !== null && typeof value === "object" ? text : null;
}

/**
 * The text of what a tool threw, for the policy's error observation: an `Error`'s message (its name when the message
 * is empty; an Error of another realm too); a string as it is; another primitive as `String` prints it; an object as
 * its JSON when that is at most `cap` characters and says something (not `{}`), else as `describeValue` shows it
 * (bounded `util.inspect`, e.g. `Foo { code: 7 } (an object)`; cycles and BigInts are fine). Never `[object Object]`.
 * Never throws.
 */
export function thrownText(e: unknown, cap: number): string {
  try {
    // isNativeError: also an Error from another realm (a vm context, a worker's structured clone), not instanceof Error.
    if (e instanceof Error || types.isNativeError(e)) return e.message !== "" ? e.message : e.name;
    if (e === null || typeof e !== "object") return String(e);
    let json: ReturnType<typeof boundedJson> | undefined;
    try {
      json = boundedJson(e, cap);
    } catch {
      json = undefined; // a cycle or a BigInt: described below
    }
    if (json !== undefined && json !== OVER_LIMIT && json.text !== undefined && json.text !== "{}") return json.text;
    return describeValue(e, Math.min(cap, 500));
  } catch {
    return "(an unprintable value was thrown)";
  }
}
