/**
 * Bounds every `arl serve …` server (src/http/server.ts) and the training gateway (src/gateway/) keep on what one
 * request may cost and what an answer may hold, so hostile input gets a 4xx and never stalls or crashes the server:
 * JSON nesting depth (recursive walks — JSON.stringify, template printing, schema code — overflow the call stack
 * near 10⁴ levels), the length of error messages (a body of 10⁴ invalid items must not echo every one), a
 * constant-time API-key comparison, a model server's prompt text per token of context and body size, and a lane that
 * runs large synchronous work (tokenising a long prompt) one job at a time, each in a macrotask of its own, so the
 * event loop answers other requests between them.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { z } from "zod";
import { describeValue, jsonTextTooDeepPath, tooDeepPath } from "../core/values.ts";

/**
 * Most levels of nested arrays and objects a request body may have (a top-level object is level 1). A chat request
 * needs 4 (`messages[i].content[j]`), and a tool's `parameters` schema starts at level 5 and takes 2 more per nested
 * object property: 64 leaves 29 nested properties (OpenAI's strict function schemas allow 10), and is far below the
 * ~10⁴ levels at which `JSON.stringify` and other recursive walks throw `RangeError: Maximum call stack size exceeded`.
 */
export const MAX_JSON_DEPTH = 64;

// The depth walks live in core/values.ts (protocol parsers use them too); servers import them from here as before.
export { jsonTextTooDeepPath, tooDeepPath };

/** Most characters of an error message sent (longer ones are cut, saying how much was left out). */
export const MAX_ERROR_MESSAGE_CHARS = 2048;

/** Most problems an error message lists; the rest are counted. */
export const MAX_LISTED_PROBLEMS = 5;


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
