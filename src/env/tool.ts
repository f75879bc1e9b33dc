/**
 * Typed tools in the style of the Vercel AI SDK (`tool({ description, inputSchema, execute })`, package `ai`),
 * with a zod input schema, a JSON Schema export for prompts/APIs, and a call wrapper that validates, times out,
 * retries what the tool marks retryable (with doubling back-off), limits concurrency per tool, checks the output
 * (JSON-serialisable, not binary, under a hard byte limit and a character cap, optional output schema; see
 * `./toolOutput.ts`) and never throws — so a failing,
 * hanging, rate-limited or garbage-returning tool becomes an error observation rather than a crashed or hung
 * rollout. Failure modes from: verl #3070 (a malformed tool call ends the episode), verl PR #1948 (a rate-limited
 * tool hangs the step), verl #2445 (a multi-turn rollout never finishes).
 */
import { z } from "zod";
import type { ToolErrorKind } from "../core/types.ts";
import { describeValue, ownCopy } from "../core/values.ts";
import { loopTurnDue } from "../core/yieldToLoop.ts";
import type { ToolJsonSchema } from "../protocol/types.ts";
import { checkOutput, DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_MAX_RESULT_BYTES, thrownText, truncateChars } from "./toolOutput.ts";

export type { ToolErrorKind } from "../core/types.ts";
export { DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_MAX_RESULT_BYTES, truncateChars } from "./toolOutput.ts";

/**
 * Context passed to `execute`: `signal` aborts when the attempt times out or the episode deadline passes;
 * `attempt` is 0 for the first try and counts retries; `callKey` is the caller's stable name of this call (e.g.
 * `<task id>#<episode seed>:<turn>`), absent when the caller gave none — fault injection keys on it.
 */
export interface ToolCallContext {
  signal: AbortSignal;
  attempt: number;
  callKey?: string;
}

/**
 * A tool: `name` (identifier shown to the model), `description` (one line for the model), `inputSchema` (zod schema
 * of the arguments object), `execute(input, ctx)` returning the result or a promise of it, and optionally
 * `outputSchema` (zod schema the result must satisfy; a result that fails it is an `invalid_output` error — the
 * value returned is the tool's own, not zod's parsed copy).
 */
export interface Tool<S extends z.ZodType = z.ZodType, R = unknown> {
  name: string;
  description: string;
  inputSchema: S;
  outputSchema?: z.ZodType;
  execute: (input: z.output<S>, ctx: ToolCallContext) => R | Promise<R>;
}

/**
 * Defines a tool. An identity function that exists for type inference of `execute`'s input from the schema
 * (as the AI SDK's `tool()`).
 * @throws Error when `name` is empty or not an identifier (`[A-Za-z_][A-Za-z0-9_-]*`)
 */
export function tool<S extends z.ZodType, R>(def: Tool<S, R>): Tool<S, R> {
  if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(def.name)) {
    throw new Error(`tool: name must match [A-Za-z_][A-Za-z0-9_-]*, got ${JSON.stringify(def.name)}`);
  }
  return def;
}

/** The JSON Schema of a tool's input, via zod's `z.toJSONSchema` (draft 2020-12). */
export function toolJsonSchema(t: Tool): ToolJsonSchema {
  const parameters = z.toJSONSchema(t.inputSchema) as Record<string, unknown>;
  return { name: t.name, description: t.description, parameters };
}

/**
 * The JSON Schema declarations of `tools` (name, description, parameters via zod's `z.toJSONSchema`), in order — what
 * `Protocol.system` and `ParseOptions.tools` take.
 */
export function renderTools(tools: readonly Tool[]): ToolJsonSchema[] {
  return tools.map(toolJsonSchema);
}

/**
 * An error a tool throws to say "try again" (rate limits, HTTP 429/503, a dropped connection): `callTool` retries it
 * up to `retries` times with back-off. Any thrown object with `retryable: true` counts the same.
 */
export class RetryableToolError extends Error {
  readonly retryable = true;
  constructor(message: string) {
    super(message);
    this.name = "RetryableToolError";
  }
}

/** True when `e` is a `RetryableToolError` or any object with `retryable: true`. */
export function isRetryable(e: unknown): boolean {
  return e instanceof RetryableToolError || (typeof e === "object" && e !== null && (e as { retryable?: unknown }).retryable === true);
}

/**
 * Result of `callTool`: the value, or an error (never an exception). An error carries its `kind`, the number of
 * `attempts` made (1 + retries used), and for an `oversize` output over the soft cap (but within the hard limit) its
 * head cut to the cap with a marker (`partial`, an own copy).
 */
export type ToolResult<R> =
  | { ok: true; value: R }
  | { ok: false; error: string; kind: ToolErrorKind; attempts: number; partial?: string };

/**
 * A concurrency limit per tool name, shared by every caller that holds the same limiter (e.g. all episodes of a
 * rollout batch): at most `maxConcurrency` calls of one tool run at once; more wait in FIFO order.
 * `maxConcurrency` 0 = unlimited. A slot is released when the attempt ends — with its result, its error, or its
 * timeout (a hung `execute` that ignores its abort signal no longer holds the slot).
 */
export class ToolLimiter {
  private readonly active = new Map<string, number>();
  private readonly waiting = new Map<string, Array<(release: (() => void) | null) => void>>();

  /** @throws Error when maxConcurrency is not an integer ≥ 0 */
  constructor(readonly maxConcurrency: number) {
    if (!Number.isInteger(maxConcurrency) || maxConcurrency < 0) {
      throw new Error(`ToolLimiter: maxConcurrency must be an integer ≥ 0 (0 = unlimited), got ${describeValue(maxConcurrency)}`);
    }
  }

  /** Calls of tool `name` running now. */
  running(name: string): number {
    return this.active.get(name) ?? 0;
  }

  /** Calls of tool `name` waiting for a slot now. */
  queued(name: string): number {
    return this.waiting.get(name)?.length ?? 0;
  }

  /**
   * Waits for a slot of tool `name` for at most `waitMs` (ms). @returns the release function (call it once), or null
   * when no slot freed up in time.
   */
  acquire(name: string, waitMs: number): Promise<(() => void) | null> {
    if (this.maxConcurrency === 0) return Promise.resolve(() => {});
    const n = this.running(name);
    if (n < this.maxConcurrency) {
      this.active.set(name, n + 1);
      return Promise.resolve(this.releaser(name));
    }
    return new Promise((resolve) => {
      const queue = this.waiting.get(name) ?? [];
      this.waiting.set(name, queue);
      const timer = setTimeout(() => {
        const i = queue.indexOf(entry);
        if (i >= 0) queue.splice(i, 1);
        resolve(null);
      }, Math.max(0, waitMs));
      const entry = (release: (() => void) | null) => {
        clearTimeout(timer);
        resolve(release);
      };
      queue.push(entry);
    });
  }

  private releaser(name: string): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiting.get(name)?.shift();
      // The slot passes straight to the next waiter; `active` stays the same.
      if (next) next(this.releaser(name));
      else this.active.set(name, this.running(name) - 1);
    };
  }
}

/**
 * Options of `callTool` (all optional; the defaults reproduce the plain validate-and-time-out call).
 * - `timeoutMs`: wall-clock limit of one attempt (ms, > 0 and ≤ `MAX_TIMER_MS`; default 10 000); the attempt's
 *   `signal` is aborted. Every ms option here is at most `MAX_TIMER_MS` (2³¹−1; Node's timers fire a longer delay
 *   after 1 ms), else the call fails with kind `config`;
 * - `retries`: extra attempts after an error the tool marks retryable (`RetryableToolError` / `retryable: true`;
 *   integer ≥ 0, default 0). Timeouts, invalid input and invalid output are never retried: retrying a hang
 *   multiplies the wait, and a tool that wants its own timeouts retried throws a `RetryableToolError` itself;
 * - `backoffMs`: wait before the first retry (ms ≥ 0, default 100), doubled before each further retry and capped
 *   at `maxBackoffMs` (ms ≥ 0, default 5 000): retry k waits `min(maxBackoffMs, backoffMs × 2^(k−1))`;
 * - `maxOutputChars`: the soft cap on the output's characters (the string itself, or its JSON text; integer > 0,
 *   default 100 000); longer → an `oversize` error whose `partial` is the head cut to the cap with a marker. Error
 *   texts are cut to the cap too. What is kept — the value of a string result, the head, an error text — is an own
 *   copy, never a view that keeps the tool's whole output alive;
 * - `maxResultBytes`: the hard limit on the output's size (UTF-8 bytes of the string, or of its JSON text; integer
 *   > 0, default `DEFAULT_MAX_RESULT_BYTES` = 16 MiB); larger → an `oversize` error `tool <name>: output of <n>
 *   bytes exceeds the hard limit of <max> bytes (maxResultBytes)` without a head (`<n>` is `more than <max>` for a
 *   non-string value: its serialisation stops at the limit);
 * - `limiter`: a `ToolLimiter` shared by the callers whose concurrency it limits. The wait for a slot does not
 *   count toward `timeoutMs` (a busy tool does not turn healthy calls into timeouts); it has its own limit
 *   `queueTimeoutMs` (ms ≥ 0, default `timeoutMs`), after which the call fails with kind `timeout`;
 * - `deadlineAt`: a `performance.now()` time (ms) by which the whole call — queue, attempts, back-off — ends
 *   (kind `deadline`), e.g. the episode's deadline;
 * - `callKey`: passed to `execute` as `ctx.callKey` (fault injection keys on it).
 */
export interface CallToolOptions {
  timeoutMs?: number;
  retries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  maxOutputChars?: number;
  maxResultBytes?: number;
  limiter?: ToolLimiter;
  queueTimeoutMs?: number;
  deadlineAt?: number;
  callKey?: string;
}

/** Formats zod issues as `field: message; …` (`(input)` for the root). */
function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((i) => `${i.path.length > 0 ? i.path.map(String).join(".") : "(input)"}: ${i.message}`)
    .join("; ");
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The longest delay Node's timers can wait: 2³¹−1 ms (≈ 24.8 days). `setTimeout` (and `AbortSignal.timeout`, built on
 * it) silently clamps a larger delay to 1 ms, so a timeout of 3e9 ms would fire at once; every millisecond option
 * (config fields, `callTool`, the judge) is bounded by this instead.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A number option: undefined → `def`; else it must be a number (not a numeric string) that passes `ok`. */
function opt(name: string, v: number | undefined, def: number, ok: (x: number) => boolean, allowed: string): number {
  const x: unknown = v ?? def;
  if (typeof x !== "number" || !ok(x)) throw new Error(`callTool: ${name} must be ${allowed}, got ${describeValue(x)}`);
  return x;
}

/**
 * Validates `rawArgs` against the tool's schema and runs `execute` under a timeout, with retries, a concurrency
 * limit and output checks (see `CallToolOptions`). Never throws: every failure is `{ok:false, error, kind,
 * attempts}`. Errors: `tool <name>: invalid input: <field>: <message>; …` (invalid_input),
 * `tool <name>: timed out after <ms> ms` (timeout; the `signal` given to execute is aborted),
 * `tool <name>: no free slot within <ms> ms (maxConcurrency <n>)` (timeout), `tool <name>: <message of the thrown
 * error>` (error; a thrown non-Error shows as text, see `thrownText`), `tool <name>: invalid output: …`
 * (invalid_output), `tool <name>: output of <n> bytes exceeds the hard limit of <max> bytes (maxResultBytes)` and
 * `tool <name>: output of <n> chars exceeds the cap of <cap> chars` (oversize), `tool <name>: episode deadline
 * reached` (deadline), `tool <name>: <option> must be …` (config). After retries the text ends with ` (after <n>
 * attempts)`. The value comes back as an own copy (see `checkOutput`): a string with the same characters, an object
 * or array rebuilt from its JSON (equal as plain data; what JSON drops is not kept).
 */
export async function callTool<S extends z.ZodType, R>(
  t: Tool<S, R>,
  rawArgs: unknown,
  options: CallToolOptions = {},
): Promise<ToolResult<R>> {
  let timeoutMs: number, retries: number, backoffMs: number, maxBackoffMs: number, cap: number, maxBytes: number, queueTimeoutMs: number;
  try {
    const timerLimit = `(Node's timer limit; a longer delay would fire after 1 ms)`;
    timeoutMs = opt("timeoutMs", options.timeoutMs, 10_000, (x) => x > 0 && x <= MAX_TIMER_MS, `> 0 and ≤ ${MAX_TIMER_MS} ms ${timerLimit}`);
    retries = opt("retries", options.retries, 0, (x) => Number.isInteger(x) && x >= 0, "an integer ≥ 0");
    backoffMs = opt("backoffMs", options.backoffMs, 100, (x) => x >= 0 && x <= MAX_TIMER_MS, `≥ 0 and ≤ ${MAX_TIMER_MS} ms ${timerLimit}`);
    maxBackoffMs = opt("maxBackoffMs", options.maxBackoffMs, 5_000, (x) => x >= 0 && x <= MAX_TIMER_MS, `≥ 0 and ≤ ${MAX_TIMER_MS} ms ${timerLimit}`);
    cap = opt("maxOutputChars", options.maxOutputChars, DEFAULT_MAX_OUTPUT_CHARS, (x) => Number.isInteger(x) && x > 0, "an integer > 0");
    maxBytes = opt("maxResultBytes", options.maxResultBytes, DEFAULT_MAX_RESULT_BYTES, (x) => Number.isInteger(x) && x > 0, "an integer > 0 (bytes)");
    queueTimeoutMs = opt("queueTimeoutMs", options.queueTimeoutMs, timeoutMs, (x) => x >= 0 && x <= MAX_TIMER_MS, `≥ 0 and ≤ ${MAX_TIMER_MS} ms ${timerLimit}`);
  } catch (e) {
    return { ok: false, error: `tool ${t.name}: ${(e as Error).message.replace(/^callTool: /, "")}`, kind: "config", attempts: 0 };
  }
  let parsed: z.ZodSafeParseResult<z.output<S>>;
  try {
    parsed = t.inputSchema.safeParse(rawArgs) as z.ZodSafeParseResult<z.output<S>>;
  } catch (e) {
    // A recursive schema (z.lazy) walks deeply nested arguments recursively; the stack overflow is the input's fault.
    return { ok: false, error: truncateChars(`tool ${t.name}: invalid input: could not be validated (${thrownText(e, 200)})`, cap), kind: "invalid_input", attempts: 0 };
  }
  if (!parsed.success) {
    return { ok: false, error: truncateChars(`tool ${t.name}: invalid input: ${formatIssues(parsed.error.issues)}`, cap), kind: "invalid_input", attempts: 0 };
  }
  const deadlineAt = options.deadlineAt ?? Infinity;
  const left = () => deadlineAt - performance.now();
  const deadline = (attempts: number): ToolResult<R> => ({ ok: false, error: `tool ${t.name}: episode deadline reached`, kind: "deadline", attempts });

  let last: ToolResult<R> | null = null;
  for (let attempt = 0; attempt <= retries; attempt++) {
    if (attempt > 0) {
      const wait = Math.min(maxBackoffMs, backoffMs * 2 ** (attempt - 1));
      if (wait >= left()) break; // the back-off would outlive the deadline: report the last error
      await sleep(wait);
    }
    // Let the event loop turn (signals, timers) before a synchronous tool may hold it; before the clocks start.
    const loopTurn = loopTurnDue();
    if (loopTurn !== undefined) await loopTurn;
    if (left() <= 0) return last ?? deadline(attempt);
    let release: (() => void) | null = () => {};
    if (options.limiter) {
      const waitMs = Math.min(queueTimeoutMs, left());
      release = await options.limiter.acquire(t.name, waitMs);
      if (release === null) {
        if (queueTimeoutMs >= left()) return deadline(attempt);
        return { ok: false, error: `tool ${t.name}: no free slot within ${queueTimeoutMs} ms (maxConcurrency ${options.limiter.maxConcurrency})`, kind: "timeout", attempts: attempt };
      }
    }
    try {
      last = await attemptOnce(t, parsed.data, { attempt, limitMs: Math.min(timeoutMs, left()), timeoutMs, cap, maxBytes, callKey: options.callKey });
    } finally {
      release();
    }
    if (last.ok) return last;
    last.attempts = attempt + 1;
    if (!("retryable" in last) || last.kind !== "error") break;
  }
  if (last === null) return deadline(0);
  if (!last.ok) {
    const { retryable: _r, ...rest } = last as typeof last & { retryable?: boolean };
    if (rest.attempts > 1) rest.error = truncateChars(`${rest.error} (after ${rest.attempts} attempts)`, cap);
    return rest;
  }
  return last;
}

/**
 * One attempt of a call: `attempt` (0 = the first try), `limitMs` (ms this attempt may run: the timeout, or less when
 * the episode deadline is nearer), `timeoutMs` (the configured per-attempt timeout, ms), `cap` / `maxBytes` (the
 * output's soft character cap and hard byte limit) and `callKey` (passed to `execute`).
 */
interface AttemptSettings {
  attempt: number;
  limitMs: number;
  timeoutMs: number;
  cap: number;
  maxBytes: number;
  callKey: string | undefined;
}

/** One attempt: execute under `limitMs`; a limit shorter than `timeoutMs` is the deadline's (kind `deadline`). */
async function attemptOnce<S extends z.ZodType, R>(
  t: Tool<S, R>,
  input: z.output<S>,
  settings: AttemptSettings,
): Promise<ToolResult<R> & { retryable?: true }> {
  const { attempt, limitMs, timeoutMs, cap, maxBytes, callKey } = settings;
  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const byDeadline = limitMs < timeoutMs;
  const timeout = new Promise<ToolResult<R>>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve(
        byDeadline
          ? { ok: false, error: `tool ${t.name}: episode deadline reached`, kind: "deadline", attempts: attempt + 1 }
          : { ok: false, error: `tool ${t.name}: timed out after ${timeoutMs} ms`, kind: "timeout", attempts: attempt + 1 },
      );
    }, Math.max(0, Math.ceil(limitMs)));
  });
  const ctx: ToolCallContext = callKey === undefined ? { signal: controller.signal, attempt } : { signal: controller.signal, attempt, callKey };
  const run = (async (): Promise<ToolResult<R> & { retryable?: true }> => {
    try {
      // Inside the async wrapper so a synchronous throw from execute is caught too.
      const value = await t.execute(input, ctx);
      const schema = t.outputSchema;
      const validate = schema && ((v: unknown) => { const r = schema.safeParse(v); return r.success ? null : formatIssues(r.error.issues); });
      const checked = checkOutput(t.name, value, cap, maxBytes, validate);
      const bad = checked.problem;
      if (bad) return { ok: false, ...bad, error: ownCopy(truncateChars(bad.error, cap)), attempts: attempt + 1 };
      // Kept (observation, turn record, graders, personas) as an own copy: a tool's `page.slice(0, 5000)`, or an
      // object holding one, would keep all of page alive.
      return { ok: true, value: checked.value as R };
    } catch (e) {
      const msg = thrownText(e, cap);
      const r: ToolResult<R> & { retryable?: true } = { ok: false, error: ownCopy(truncateChars(`tool ${t.name}: ${msg}`, cap)), kind: "error", attempts: attempt + 1 };
      if (isRetryable(e)) r.retryable = true;
      return r;
    }
  })();
  try {
    return await Promise.race([run, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
