/**
 * Bounds every `arl serve …` server (src/serve/http.ts) and the training gateway (src/gateway/) keep on what one
 * request may cost and what an answer may hold, so hostile input gets a 4xx and never stalls or crashes the server:
 * JSON nesting depth (recursive walks — JSON.stringify, template printing, schema code — overflow the call stack
 * near 10⁴ levels), the length of error messages (a body of 10⁴ invalid items must not echo every one), a
 * constant-time API-key comparison, a model server's prompt text per token of context and body size, and a lane that
 * runs large synchronous work (tokenising a long prompt) one job at a time, each in a macrotask of its own, so the
 * event loop answers other requests between them.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { z } from "zod";
import { describeValue } from "../core/values.ts";

/**
 * Most levels of nested arrays and objects a request body may have (a top-level object is level 1). A chat request
 * needs 4 (`messages[i].content[j]`), and a tool's `parameters` schema starts at level 5 and takes 2 more per nested
 * object property: 64 leaves 29 nested properties (OpenAI's strict function schemas allow 10), and is far below the
 * ~10⁴ levels at which `JSON.stringify` and other recursive walks throw `RangeError: Maximum call stack size exceeded`.
 */
export const MAX_JSON_DEPTH = 64;

/** Most characters of an error message sent (longer ones are cut, saying how much was left out). */
export const MAX_ERROR_MESSAGE_CHARS = 2048;

/** Most problems an error message lists; the rest are counted. */
export const MAX_LISTED_PROBLEMS = 5;

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

/** A path as a field name: `["tools", 0, "function"]` → `tools[0].function`; `[]` → null. */
export function pathName(path: readonly PropertyKey[]): string | null {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out === "" ? String(p) : `.${String(p)}`;
  return out === "" ? null : out;
}

/** `message` cut to `max` characters (default `MAX_ERROR_MESSAGE_CHARS`), ending with how many were left out. */
export function capMessage(message: string, max = MAX_ERROR_MESSAGE_CHARS): string {
  if (message.length <= max) return message;
  return `${message.slice(0, max)}… (${message.length - max} more characters)`;
}

/** The first `MAX_LISTED_PROBLEMS` problems joined by `; `, then `; … and N more problems` when there are more. */
export function listProblems(problems: readonly string[], max = MAX_LISTED_PROBLEMS): string {
  const shown = problems.slice(0, max).join("; ");
  return problems.length > max ? `${shown}; … and ${problems.length - max} more problem${problems.length - max === 1 ? "" : "s"}` : shown;
}

/**
 * A client's string quoted for an error message (`JSON.stringify`), its first `max` characters only (default 80),
 * so an echo stays short: `"abc…" (5000 characters)`.
 */
export function quoteShort(value: string, max = 80): string {
  if (value.length <= max) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, max)).slice(0, -1)}…" (${value.length} characters)`;
}

/**
 * A zod issue's message with the value it refused, cut to 80 characters with its type (`describeValue`):
 * `expected an integer ≥ 1, got "5" (a string)`. Needs the issue's `input` (`safeParse(body, {reportInput: true})`);
 * messages that already quote it (`… got …`) and unrecognized keys (the input is the whole object) are kept as they are.
 */
export function issueMessage(issue: z.core.$ZodIssue): string {
  if (issue.code === "unrecognized_keys" || !("input" in issue) || /\bgot\b/.test(issue.message)) return issue.message;
  return `${issue.message}, got ${describeValue(issue.input)}`;
}

/** A client's key or path step for an error message: as given when at most `max` characters (default 80), else cut with `…`. */
export function cutKey(key: string, max = 80): string {
  return key.length <= max ? key : `${key.slice(0, max)}…`;
}

/**
 * Whether a presented secret equals the expected one, in time independent of where they differ and of their
 * lengths: both are hashed (SHA-256) and the digests compared with `crypto.timingSafeEqual` (node:crypto), so a
 * client cannot find the key byte by byte from response times.
 * @param given the presented value (a header: possibly absent or repeated)
 */
export function sameSecret(given: string | string[] | undefined, expected: string): boolean {
  if (typeof given !== "string") return false;
  const a = createHash("sha256").update(given, "utf8").digest();
  const b = createHash("sha256").update(expected, "utf8").digest();
  return timingSafeEqual(a, b);
}

/**
 * Default cap on the text a prompt may hold per token of the context (UTF-8 bytes). Servers check a prompt's text
 * against `contextLength × maxBytesPerToken` before tokenising it, so an over-long prompt costs a byte count, not a
 * tokenisation. A typical token is 3-5 bytes; a prompt whose text averages more than 32 bytes per token of the
 * context is not natural text. For a tokenizer whose every token stands for at most 32 bytes of input this refuses
 * only prompts that cannot fit; where a token may stand for more (the word tokenizer's `[UNK]` for any unknown word,
 * whitespace it drops) it is a cap on input size, stated in the error.
 */
export const DEFAULT_MAX_BYTES_PER_TOKEN = 32;

/** Default largest request body (bytes): 16 MiB (the trainer's token batches; other servers take less). */
export const DEFAULT_BODY_LIMIT = 16 * 1024 * 1024;

/**
 * Default largest body (bytes) of a server whose requests are small: 1 MiB (`serve retrieval`: at most 65 536 query
 * characters per request, ≤ 6 bytes each in JSON; `serve mcp`: one tool call). Parsing costs ~25 ms per MiB on the
 * event loop, so a smaller limit bounds how long one hostile body delays the others (`--max-body` raises it).
 */
export const SMALL_BODY_LIMIT = 1024 * 1024;

/**
 * A model server's default body limit for its context (bytes): 8 × `contextLength` × `maxBytesPerToken` — room for
 * the most prompt text it tokenises, JSON escapes (≤ 6 bytes per byte, for control characters) and the fields around
 * it — at least 1 MiB and at most `DEFAULT_BODY_LIMIT`. A larger body cannot hold a prompt the server would take,
 * and parsing it costs ~25 ms per MiB before anything else is checked.
 */
export function contextBodyLimit(contextLength: number, maxBytesPerToken = DEFAULT_MAX_BYTES_PER_TOKEN): number {
  return Math.min(DEFAULT_BODY_LIMIT, Math.max(1024 * 1024, 8 * contextLength * maxBytesPerToken));
}

/** Work of at most this many bytes runs at once in `WorkLane.run` (tokenising 16 KiB takes tens of ms). */
export const INLINE_WORK_BYTES = 16 * 1024;

/**
 * Runs large synchronous jobs (tokenising a long prompt) one at a time, each in a macrotask of its own
 * (`setImmediate`), so between two of them the event loop reads sockets and answers other requests (`/healthz`, small
 * calls). Small jobs (≤ `inlineBytes`) run at once: they never wait behind large ones.
 */
export class WorkLane {
  private tail: Promise<unknown> = Promise.resolve();
  /** Large jobs waiting or running. */
  private queued = 0;

  /** @param inlineBytes jobs of at most this size (bytes) run at once (default `INLINE_WORK_BYTES`) */
  constructor(readonly inlineBytes = INLINE_WORK_BYTES) {}

  /** Large jobs waiting or running now. */
  get waiting(): number {
    return this.queued;
  }

  /**
   * Runs `work` now when `bytes` ≤ `inlineBytes`, else after the lane's earlier large jobs, in its own macrotask.
   * @param bytes the size of the input `work` processes (its cost is taken as proportional to it)
   * @returns what `work` returns (a rejection when it throws)
   */
  run<T>(bytes: number, work: () => T): Promise<T> {
    if (bytes <= this.inlineBytes) {
      try {
        return Promise.resolve(work());
      } catch (e) {
        return Promise.reject(e);
      }
    }
    this.queued++;
    const job = this.tail.then(
      () =>
        new Promise<T>((resolve, reject) => {
          setImmediate(() => {
            try {
              resolve(work());
            } catch (e) {
              reject(e);
            } finally {
              this.queued--;
            }
          });
        }),
    );
    this.tail = job.catch(() => undefined);
    return job;
  }
}
