/**
 * Values that come from outside — a tool's result, a thrown value, a grade, model output parsed as JSON — as the
 * program keeps them and shows them: copies that own their characters, bounded descriptions that name the type,
 * and a nesting-depth check that cannot overflow the stack.
 */
import { inspect } from "node:util";

/**
 * A copy of `s` that holds only its own characters. V8 represents `big.slice(a, b)` (and a concatenation that
 * contains such a slice) as a view that keeps the whole of `big` alive, so keeping a 100 000-character head of a
 * 50 MB tool result kept the 50 MB (issue 29: 40 capped results held 1.86 GB). The copy goes through a Buffer in
 * UTF-16 (`utf16le`), which is lossless for every string, lone surrogates included; the new string is built from the
 * Buffer's bytes, so it shares nothing with `s`. Costs O(|s|); meant for strings that are kept (at most a cap long).
 */
export function ownCopy(s: string): string {
  return s.length === 0 ? "" : Buffer.from(s, "utf16le").toString("utf16le");
}

/**
 * A value as an error message quotes it, with its type, at most about `maxChars` characters (default 80): a string as
 * JSON with `(a string)` — so `"1" (a string)` is never read as the number 1 —, a number as JavaScript prints it
 * (`NaN`, `Infinity`, `0.5`), `null`, `undefined`, and anything else as `util.inspect` shows it (bounded depth, array
 * length and string length; cycles are fine) with its kind, e.g. `[ 1, 2 ] (an array)`, `{ a: 1 } (an object)`,
 * `1n (a bigint)`. Never throws; the work is bounded whatever the value's size.
 */
export function describeValue(v: unknown, maxChars = 80): string {
  if (v === null || v === undefined) return String(v);
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return `${JSON.stringify(v.length > maxChars ? `${v.slice(0, maxChars)}…` : v)} (a string)`;
  const kind = Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : `a ${typeof v}`;
  let text: string;
  try {
    text = inspect(v, { depth: 2, maxArrayLength: 10, maxStringLength: maxChars, breakLength: Infinity, compact: true });
  } catch {
    text = Object.prototype.toString.call(v);
  }
  if (text.length > maxChars) text = ownCopy(`${text.slice(0, maxChars)}…`);
  return `${text} (${kind})`;
}

/**
 * Whether `value` nests arrays / objects more than `limit` levels deep (a scalar is depth 0, `[]` and `{}` depth 1,
 * `{"a": [1]}` depth 2). Iterative, so a value nested a million levels deep (which `JSON.parse` builds without
 * complaint) is answered without overflowing the stack; stops at the first path deeper than `limit`. O(nodes).
 * Recursive walks of such values — key trimming, schema validation, rendering, `JSON.stringify` — throw
 * `RangeError: Maximum call stack size exceeded`, so parsers check this first.
 */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (depth + 1 > limit) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) {
      if (x !== null && typeof x === "object") stack.push([x, depth + 1]);
    }
  }
  return false;
}

/**
 * Whether JSON `text` opens arrays / objects more than `limit` levels deep, counting `[` and `{` outside strings (the
 * same depth as `nestedDeeperThan` of the parsed value when the text is valid JSON). One linear pass that stops at
 * the first level past `limit`, so a parser can refuse a million `[` before `JSON.parse` spends seconds building them.
 */
export function jsonTextDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}
