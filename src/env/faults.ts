/**
 * Deterministic fault injection for any tool: `withFaults(tool, {rate, kinds, seed})` returns a tool that, on a
 * seeded share of its calls, fails, hangs, is slow, returns garbage or returns a huge output — so a test (or a user
 * hardening their own environment) can show that training goes on through every failure the real world produces:
 * a tool that throws or is rate-limited (verl PR #1948), hangs (verl #2445), or answers with something that is not
 * a result (verl #3070). Which calls fault depends only on (seed, call key, attempt), never on timing or the
 * order in which concurrent episodes call, so the same seed injects the same faults into the same episodes.
 */
import { describeValue } from "../core/values.ts";
import { RetryableToolError, type Tool, type ToolCallContext } from "./tool.ts";
import type { z } from "zod";

/** The kinds of fault: see `FaultOptions`. */
export const FAULT_KINDS = ["fail", "hang", "slow", "garbage", "huge"] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * Options of `withFaults`.
 * - `rate`: share of attempts that fault, in [0, 1];
 * - `kinds`: the faults to draw from, uniformly (default all of `FAULT_KINDS`):
 *   `fail` throws (a `RetryableToolError` on a `retryableShare` of them, else a plain Error),
 *   `hang` never resolves (it settles only when the call's signal aborts, i.e. at its timeout),
 *   `slow` waits `slowMs` then returns the real result,
 *   `garbage` returns a value that is not a result: a binary string (NUL, unpaired surrogate), a circular object,
 *   a BigInt, or `undefined`,
 *   `huge` returns a string of `hugeChars` characters;
 * - `seed`: integer seed of the draws (default 0);
 * - `slowMs`: delay of a `slow` fault (ms ≥ 0, default 2 000);
 * - `hugeChars`: length of a `huge` output (characters, integer > 0, default 10 000 000 = 10 MB);
 * - `retryableShare`: share of `fail` faults marked retryable, in [0, 1] (default 0.5).
 */
export interface FaultOptions {
  rate: number;
  kinds?: readonly FaultKind[];
  seed?: number;
  slowMs?: number;
  hugeChars?: number;
  retryableShare?: number;
}

/** One injected fault: its kind, the call key it hit and the attempt (0 = first try). */
export interface FaultRecord {
  kind: FaultKind;
  key: string;
  attempt: number;
  /** For `fail`: whether the thrown error was marked retryable. */
  retryable?: boolean;
}

/** A tool with faults injected; `injected` lists every fault so far, in call order. */
export type FaultyTool<S extends z.ZodType, R> = Tool<S, R> & { readonly injected: FaultRecord[] };

/**
 * 32-bit FNV-1a of a string, then a murmur-style finaliser: a stable, seedable hash for deterministic draws keyed by
 * a call (fault injection here; an env's own flaky API, e.g. the travel recipe's). @returns an integer in [0, 2³²)
 */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A uniform number in [0, 1) from (seed, key, attempt, salt). */
function draw(seed: number, key: string, attempt: number, salt: string): number {
  return hash32(`${seed}|${salt}|${attempt}|${key}`) / 2 ** 32;
}

/** JSON with sorted object keys, so equal inputs give equal keys whatever their key order. */
function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(",")}]`;
  if (v !== null && typeof v === "object") {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(v) ?? "undefined";
}

/**
 * Checks fault options. @throws Error naming the field and the allowed values
 */
export function validateFaultOptions(o: FaultOptions): void {
  if (!(typeof o.rate === "number" && o.rate >= 0 && o.rate <= 1)) throw new Error(`faults.rate must be a number in [0, 1], got ${describeValue(o.rate)}`);
  const kinds = o.kinds ?? FAULT_KINDS;
  if (kinds.length === 0) throw new Error(`faults.kinds must name at least one of ${FAULT_KINDS.join(", ")}`);
  for (const k of kinds) {
    if (!(FAULT_KINDS as readonly string[]).includes(k)) throw new Error(`faults.kinds: unknown kind ${JSON.stringify(k) ?? String(k)}; allowed: ${FAULT_KINDS.join(", ")}`);
  }
  if (o.seed !== undefined && !Number.isInteger(o.seed)) throw new Error(`faults.seed must be an integer, got ${describeValue(o.seed)}`);
  if (o.slowMs !== undefined && !(typeof o.slowMs === "number" && o.slowMs >= 0)) throw new Error(`faults.slowMs must be ≥ 0 ms, got ${describeValue(o.slowMs)}`);
  if (o.hugeChars !== undefined && !(Number.isInteger(o.hugeChars) && o.hugeChars > 0)) {
    throw new Error(`faults.hugeChars must be an integer > 0 (characters), got ${describeValue(o.hugeChars)}`);
  }
  if (o.retryableShare !== undefined && !(typeof o.retryableShare === "number" && o.retryableShare >= 0 && o.retryableShare <= 1)) {
    throw new Error(`faults.retryableShare must be a number in [0, 1], got ${describeValue(o.retryableShare)}`);
  }
}

/** Resolves after `ms`, or rejects when `signal` aborts first. */
function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Error("aborted"));
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(new Error("aborted"));
    }, { once: true });
  });
}

/** A value that is not a tool result, chosen by `u` in [0, 1). */
function garbage(u: number): unknown {
  const variants: Array<() => unknown> = [
    () => "\u0000\u0001\ufffd\ud800garbage\u0000",
    () => {
      const o: Record<string, unknown> = { garbage: true };
      o.self = o;
      return o;
    },
    () => BigInt(42),
    () => undefined,
  ];
  return variants[Math.floor(u * variants.length)]();
}

/**
 * Wraps `t` so that a deterministic share `rate` of its attempts fault (see `FaultOptions`). The draw for an attempt
 * depends on (seed, key, attempt), where key is the caller's `ctx.callKey` when given (the search env passes
 * `<task id>#<episode seed>:<turn>`), else the input's JSON with sorted keys — so concurrency order never changes
 * which calls fault, and a retry (attempt + 1) draws afresh. Non-faulting attempts run `t.execute` unchanged.
 * @throws Error from `validateFaultOptions`
 */
export function withFaults<S extends z.ZodType, R>(t: Tool<S, R>, options: FaultOptions): FaultyTool<S, R> {
  validateFaultOptions(options);
  const kinds = options.kinds ?? FAULT_KINDS;
  const seed = options.seed ?? 0;
  const slowMs = options.slowMs ?? 2_000;
  const hugeChars = options.hugeChars ?? 10_000_000;
  const retryableShare = options.retryableShare ?? 0.5;
  const injected: FaultRecord[] = [];
  const execute = async (input: z.output<S>, ctx: ToolCallContext): Promise<R> => {
    const key = ctx.callKey ?? stableJson(input);
    const attempt = ctx.attempt ?? 0;
    if (options.rate === 0 || draw(seed, key, attempt, "rate") >= options.rate) return t.execute(input, ctx);
    const kind = kinds[Math.floor(draw(seed, key, attempt, "kind") * kinds.length)];
    const record: FaultRecord = { kind, key, attempt };
    injected.push(record);
    switch (kind) {
      case "fail": {
        const retryable = draw(seed, key, attempt, "retryable") < retryableShare;
        record.retryable = retryable;
        if (retryable) throw new RetryableToolError(`injected fault: fail (retryable), attempt ${attempt}`);
        throw new Error(`injected fault: fail, attempt ${attempt}`);
      }
      case "hang":
        return new Promise<R>((_resolve, reject) => {
          ctx.signal.addEventListener("abort", () => reject(new Error("injected fault: hang (aborted)")), { once: true });
        });
      case "slow":
        await abortableSleep(slowMs, ctx.signal);
        return t.execute(input, ctx);
      case "garbage":
        return garbage(draw(seed, key, attempt, "garbage")) as R;
      case "huge":
        return "x".repeat(hugeChars) as R;
    }
  };
  return { name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema, execute, injected };
}
