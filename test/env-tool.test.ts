import { describe, expect, it } from "vitest";
import { z } from "zod";
import { RetryableToolError, ToolLimiter, callTool, tool, toolJsonSchema, truncateChars } from "../src/env/tool.ts";

const add = tool({
  name: "add",
  description: "Adds two integers.",
  inputSchema: z.object({ a: z.number().int(), b: z.number().int().describe("second term") }),
  execute: ({ a, b }) => a + b,
});

describe("tool", () => {
  it("exports a JSON schema", () => {
    const s = toolJsonSchema(add);
    expect(s.name).toBe("add");
    expect(s.parameters).toMatchObject({
      type: "object",
      required: ["a", "b"],
      properties: { a: { type: "integer" }, b: { type: "integer", description: "second term" } },
    });
  });
  it("rejects a bad name", () => {
    expect(() => tool({ name: "bad name", description: "", inputSchema: z.object({}), execute: () => 1 })).toThrow(/name/);
  });
  it("calls, validates, catches and times out", async () => {
    expect(await callTool(add, { a: 1, b: 2 })).toEqual({ ok: true, value: 3 });
    const bad = await callTool(add, { a: 1, b: "x" });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error).toMatch(/^tool add: invalid input: b: /);
    const thrower = tool({ name: "boom", description: "", inputSchema: z.object({}), execute: () => { throw new Error("kaput"); } });
    expect(await callTool(thrower, {})).toEqual({ ok: false, error: "tool boom: kaput", kind: "error", attempts: 1 });
    let aborted = false;
    const slow = tool({
      name: "slow",
      description: "",
      inputSchema: z.object({}),
      execute: (_i, { signal }) =>
        new Promise<number>((resolve) => {
          signal.addEventListener("abort", () => { aborted = true; });
          setTimeout(() => resolve(1), 500);
        }),
    });
    expect(await callTool(slow, {}, { timeoutMs: 20 })).toEqual({ ok: false, error: "tool slow: timed out after 20 ms", kind: "timeout", attempts: 1 });
    expect(aborted).toBe(true);
  });
});

describe("callTool reliability (retries, back-off, concurrency, output checks, deadline)", () => {
  /** A tool that fails its first `failures` attempts (retryable or not), recording each attempt's time (ms). */
  const flaky = (failures: number, retryable: boolean) => {
    const times: number[] = [];
    const t = tool({
      name: "flaky",
      description: "",
      inputSchema: z.object({}),
      execute: (_i, ctx) => {
        times.push(performance.now());
        if (ctx.attempt < failures) {
          if (retryable) throw new RetryableToolError(`429 rate limited (attempt ${ctx.attempt})`);
          throw new Error(`broken (attempt ${ctx.attempt})`);
        }
        return "ok";
      },
    });
    return { t, times };
  };

  it("retries errors the tool marks retryable, with doubling back-off, and stops at `retries`", async () => {
    const { t, times } = flaky(2, true);
    expect(await callTool(t, {}, { retries: 2, backoffMs: 30 })).toEqual({ ok: true, value: "ok" });
    expect(times.length).toBe(3);
    // Waits: 30 ms before retry 1, 60 ms before retry 2 (timers may fire a little early or late).
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(25);
    expect(times[2] - times[1]).toBeGreaterThanOrEqual(55);
    const again = flaky(5, true);
    const r = await callTool(again.t, {}, { retries: 2, backoffMs: 1 });
    expect(r).toEqual({ ok: false, kind: "error", attempts: 3, error: "tool flaky: 429 rate limited (attempt 2) (after 3 attempts)" });
    // A plain object with retryable: true counts too.
    let n = 0;
    const obj = tool({ name: "obj", description: "", inputSchema: z.object({}), execute: () => { if (n++ === 0) throw Object.assign(new Error("503"), { retryable: true }); return 1; } });
    expect(await callTool(obj, {}, { retries: 1, backoffMs: 0 })).toEqual({ ok: true, value: 1 });
  });

  it("does not retry plain errors, timeouts or invalid input; caps the back-off", async () => {
    const plain = flaky(1, false);
    expect(await callTool(plain.t, {}, { retries: 3, backoffMs: 0 })).toMatchObject({ ok: false, kind: "error", attempts: 1 });
    expect(plain.times.length).toBe(1);
    let calls = 0;
    const hang = tool({ name: "hang", description: "", inputSchema: z.object({}), execute: () => { calls++; return new Promise<number>(() => {}); } });
    expect(await callTool(hang, {}, { retries: 3, timeoutMs: 20 })).toMatchObject({ ok: false, kind: "timeout", attempts: 1 });
    expect(calls).toBe(1);
    const capped = flaky(3, true);
    const t0 = performance.now();
    await callTool(capped.t, {}, { retries: 3, backoffMs: 1000, maxBackoffMs: 10 });
    expect(performance.now() - t0).toBeLessThan(500);
    expect(await callTool(add, { a: 1 }, { retries: 3 })).toMatchObject({ ok: false, kind: "invalid_input", attempts: 0 });
    expect(await callTool(add, { a: 1, b: 2 }, { retries: -1 })).toMatchObject({ ok: false, kind: "config", error: "tool add: retries must be an integer ≥ 0, got -1" });
  });

  it("limits concurrency per tool name across callers; a queued call's wait is not part of its timeout", async () => {
    const limiter = new ToolLimiter(2);
    let running = 0;
    let peak = 0;
    const busy = tool({
      name: "busy",
      description: "",
      inputSchema: z.object({}),
      execute: async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((r) => setTimeout(r, 30));
        running--;
        return 1;
      },
    });
    // 6 calls × 30 ms, 2 at a time: ~90 ms in all; each call's own timeout (50 ms) is never hit while it queues.
    const results = await Promise.all(Array.from({ length: 6 }, () => callTool(busy, {}, { limiter, timeoutMs: 50, queueTimeoutMs: 1000 })));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(peak).toBe(2);
    expect(limiter.running("busy")).toBe(0);
    // Another tool name has its own slots.
    expect(limiter.running("other")).toBe(0);
    // A queue wait past queueTimeoutMs fails with kind timeout, and a hung holder frees its slot at its timeout.
    const one = new ToolLimiter(1);
    const hang = tool({ name: "hang", description: "", inputSchema: z.object({}), execute: () => new Promise<number>(() => {}) });
    const [a, b] = await Promise.all([callTool(hang, {}, { limiter: one, timeoutMs: 40 }), callTool(hang, {}, { limiter: one, timeoutMs: 40, queueTimeoutMs: 5 })]);
    expect(a).toMatchObject({ ok: false, kind: "timeout", error: "tool hang: timed out after 40 ms" });
    expect(b).toMatchObject({ ok: false, kind: "timeout", error: "tool hang: no free slot within 5 ms (maxConcurrency 1)" });
    expect(one.running("hang")).toBe(0);
    expect(() => new ToolLimiter(-1)).toThrow(/maxConcurrency must be an integer ≥ 0/);
  });

  it("checks the output: not JSON-serialisable, binary or over the cap is an error, cut to the cap with a marker", async () => {
    const returning = (v: unknown) => tool({ name: "ret", description: "", inputSchema: z.object({}), execute: () => v });
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(await callTool(returning(undefined), {})).toMatchObject({ ok: false, kind: "invalid_output", error: "tool ret: invalid output: not JSON-serialisable (undefined)" });
    expect(await callTool(returning(circular), {})).toMatchObject({ ok: false, kind: "invalid_output" });
    expect(await callTool(returning(BigInt(1)), {})).toMatchObject({ ok: false, kind: "invalid_output" });
    expect(await callTool(returning("a\u0000b"), {})).toMatchObject({ ok: false, kind: "invalid_output", error: "tool ret: invalid output: binary data (a NUL or unpaired surrogate)" });
    expect(await callTool(returning({ x: ["\ud800"] }), {})).toMatchObject({ ok: false, kind: "invalid_output" });
    // Ordinary text with accents, emoji and form feeds is fine.
    expect(await callTool(returning({ x: "café 🎉 \f" }), {})).toEqual({ ok: true, value: { x: "café 🎉 \f" } });
    const huge = await callTool(returning("x".repeat(1_000_000)), {}, { maxOutputChars: 100 });
    expect(huge).toMatchObject({ ok: false, kind: "oversize", error: "tool ret: output of 1000000 chars exceeds the cap of 100 chars" });
    if (!huge.ok) {
      expect(huge.partial!.length).toBeLessThanOrEqual(100);
      expect(huge.partial).toMatch(/^x+…\[truncated 999900 chars\]$/);
    }
    // A huge thrown message is cut to the cap too.
    const loud = tool({ name: "loud", description: "", inputSchema: z.object({}), execute: () => { throw new Error("e".repeat(10_000)); } });
    const r = await callTool(loud, {}, { maxOutputChars: 200 });
    expect(!r.ok && r.error.length).toBe(200);
    // The output schema: a result of the wrong shape is invalid output; a right one is returned as the tool gave it.
    const shaped = (v: unknown) => ({ ...returning(v), outputSchema: z.array(z.object({ id: z.string() })) });
    expect(await callTool(shaped("not a list"), {})).toMatchObject({ ok: false, kind: "invalid_output" });
    expect(await callTool(shaped([{ id: "a", extra: 1 }]), {})).toEqual({ ok: true, value: [{ id: "a", extra: 1 }] });
    expect(truncateChars("abcdef", 10)).toBe("abcdef");
  });

  it("ends the whole call (queue, attempts, back-off) by deadlineAt", async () => {
    const hang = tool({ name: "hang", description: "", inputSchema: z.object({}), execute: () => new Promise<number>(() => {}) });
    const t0 = performance.now();
    const r = await callTool(hang, {}, { timeoutMs: 10_000, deadlineAt: t0 + 30 });
    expect(r).toMatchObject({ ok: false, kind: "deadline", error: "tool hang: episode deadline reached" });
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(await callTool(hang, {}, { deadlineAt: performance.now() - 1 })).toMatchObject({ ok: false, kind: "deadline", attempts: 0 });
  });
});
