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
 * `{"a": [1]}` depth 2): `tooDeepPath` found a path. Iterative, so a value nested a million levels deep (which
 * `JSON.parse` builds without complaint) is answered without overflowing the stack. Recursive walks of such values —
 * key trimming, schema validation, rendering, `JSON.stringify` — throw `RangeError: Maximum call stack size
 * exceeded`, so parsers check this first.
 */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  // tooDeepPath checks the levels below the top one; at limit 0 the top-level container is already too deep.
  if (limit < 1) return value !== null && typeof value === "object";
  return tooDeepPath(value, limit) !== undefined;
}

/**
 * Whether JSON `text` opens arrays / objects more than `limit` levels deep (`jsonTextTooDeepPath` found a path): one
 * linear pass, so a parser can refuse a million `[` before `JSON.parse` spends seconds building them.
 */
export function jsonTextDeeperThan(text: string, limit: number): boolean {
  return jsonTextTooDeepPath(text, limit) !== undefined;
}

/**
 * The path to the first array or object nested deeper than `maxDepth` levels in `value` (walked iteratively, so any
 * depth is safe), or undefined when none is.
 * @param value a parsed JSON value
 * @param maxDepth most levels allowed (the top-level container is level 1)
 * @returns keys and indices from the top (`["tools", 0, "function", "parameters", "properties", …]`) to the first
 *   container at level `maxDepth` + 1 (so `maxDepth` entries long)
 */
export function tooDeepPath(value: unknown, maxDepth: number): Array<string | number> | undefined {
  if (value === null || typeof value !== "object") return undefined;
  // Depth-first with one frame per level of the current path (at most `maxDepth`, reused): no allocation per element
  // but objects' key lists, so a body of 10⁶ small objects costs one pass.
  const containers: object[] = [value];
  const keyLists: Array<string[] | null> = [Array.isArray(value) ? null : Object.keys(value)];
  const next: number[] = [0];
  let top = 0;
  while (top >= 0) {
    const v = containers[top];
    const keys = keyLists[top];
    const i = next[top];
    if (i >= (keys === null ? (v as unknown[]).length : keys.length)) {
      top--;
      continue;
    }
    next[top] = i + 1;
    const child = keys === null ? (v as unknown[])[i] : (v as Record<string, unknown>)[keys[i]];
    if (child === null || typeof child !== "object") continue;
    if (top + 2 > maxDepth) {
      // `child` is at level top + 2: the path is each level's key being visited, then this one.
      const path: Array<string | number> = [];
      for (let d = 0; d <= top; d++) path.push(keyLists[d] === null ? next[d] - 1 : keyLists[d]![next[d] - 1]);
      return path;
    }
    top++;
    containers[top] = child;
    keyLists[top] = Array.isArray(child) ? null : Object.keys(child);
    next[top] = 0;
  }
  return undefined;
}

/**
 * `tooDeepPath` read off JSON text, before it is parsed: the path to the first `[` or `{` that opens level
 * `maxDepth` + 1, or undefined when none does (or the text is not JSON enough to tell; `JSON.parse` then refuses it).
 * One linear pass over the characters keeping one frame per open level (at most `maxDepth`), so a body of a million
 * `[` is refused in milliseconds, where V8's `JSON.parse` spends seconds building it and blocks the event loop.
 * @param text a request body (JSON text)
 * @param maxDepth most levels allowed (the top-level container is level 1)
 * @returns keys and indices as `tooDeepPath` gives them for the parsed value (`maxDepth` entries)
 */
export function jsonTextTooDeepPath(text: string, maxDepth: number): Array<string | number> | undefined {
  // Per open level: an array (index of the current element) or an object (where its current key's text lies).
  const isArray: boolean[] = [];
  const index: number[] = [];
  const keyStart: number[] = [];
  const keyEnd: number[] = [];
  const wantKey: boolean[] = [];
  let top = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // a string: skip to its closing quote (a backslash escapes the next character)
      const start = i;
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
      if (top >= 0 && !isArray[top] && wantKey[top]) {
        keyStart[top] = start;
        keyEnd[top] = i + 1;
        wantKey[top] = false;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (top + 1 >= maxDepth) {
        const path: Array<string | number> = [];
        for (let d = 0; d <= top; d++) path.push(isArray[d] ? index[d] : keyText(text, keyStart[d], keyEnd[d]));
        return path;
      }
      top++;
      isArray[top] = c === 0x5b;
      index[top] = 0;
      keyStart[top] = keyEnd[top] = 0;
      wantKey[top] = true;
    } else if (c === 0x5d || c === 0x7d) {
      if (top >= 0) top--;
    } else if (c === 0x2c && top >= 0) {
      if (isArray[top]) index[top]++;
      else wantKey[top] = true;
    }
  }
  return undefined;
}

/** The key whose quoted JSON text is `text[start, end)`, unescaped (as written when it is not valid JSON). */
function keyText(text: string, start: number, end: number): string {
  const quoted = text.slice(start, end);
  try {
    const key: unknown = JSON.parse(quoted);
    return typeof key === "string" ? key : quoted;
  } catch {
    return quoted;
  }
}
