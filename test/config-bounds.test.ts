/**
 * Config bounds from the reliability pass (issue 12, defects 5, 7, 8): millisecond fields cannot exceed Node's timer
 * limit (2³¹−1 ms; a larger delay fires after 1 ms), sizes have sane upper bounds, and errors show the value given —
 * NaN / Infinity as such, and the bad item of a comma-separated list.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { callTool, MAX_TIMER_MS, tool } from "../src/env/tool.ts";
import { OpenAIJudge } from "../src/reward/judge.ts";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";

/** The ConfigError message of resolving `overrides` (flags) over an empty document. */
const err = (overrides: Record<string, string>, base: Record<string, unknown> = {}): string => {
  try {
    resolveConfig(applyOverrides(base, overrides));
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(overrides)}`);
};

const judge = { "reward.options.judge.baseUrl": "http://127.0.0.1:9/v1", "reward.options.judge.model": "m" };

describe("millisecond fields are bounded by Node's timer limit", () => {
  it("MAX_TIMER_MS is 2^31 - 1", () => {
    expect(MAX_TIMER_MS).toBe(2 ** 31 - 1);
  });

  it("every *Ms field refuses 3e9 naming the field and the allowed range; 2^31-1 itself passes", () => {
    const fields = [
      "env.tools.timeoutMs",
      "env.tools.backoffMs",
      "env.tools.maxBackoffMs",
      "env.faults.slowMs",
      "env.episodeDeadlineMs",
      "reward.options.judge.timeoutMs",
      "policy.tinker.timeoutMs",
      "policy.tinker.retryForMs",
    ];
    for (const f of fields) {
      const m = err({ ...judge, [f]: "3e9" });
      expect(m).toContain(`${f}: expected a number ≤ 2147483647, got 3000000000`);
      expect(m).toMatch(/allowed: \d+ to 2147483647 ms/);
      expect(m).toContain("Node's timers");
      const ok = resolveConfig(applyOverrides({}, { ...judge, [f]: String(MAX_TIMER_MS) }));
      expect(ok).toBeDefined();
    }
  });

  it("callTool and OpenAIJudge refuse a timeout past the limit instead of firing after 1 ms", async () => {
    const echo = tool({ name: "echo", description: "", inputSchema: z.object({}), execute: () => 1 });
    for (const k of ["timeoutMs", "backoffMs", "maxBackoffMs", "queueTimeoutMs"] as const) {
      const r = await callTool(echo, {}, { [k]: 3e9 });
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.kind).toBe("config");
        expect(r.error).toContain(`tool echo: ${k} must be`);
        expect(r.error).toContain("≤ 2147483647 ms");
      }
    }
    expect((await callTool(echo, {}, { timeoutMs: MAX_TIMER_MS })).ok).toBe(true);
    expect(() => new OpenAIJudge({ baseUrl: "http://127.0.0.1:9/v1", model: "m", rubric: "r", timeoutMs: 3e9 })).toThrow(
      "judge.timeoutMs must be at most 2147483647 ms (Node's timer limit; a longer timeout would fire after 1 ms), got 3000000000",
    );
    expect(() => new OpenAIJudge({ baseUrl: "http://127.0.0.1:9/v1", model: "m", rubric: "r", timeoutMs: MAX_TIMER_MS })).not.toThrow();
  });
});

describe("sizes are bounded", () => {
  it("absurd sizes are refused by the schema with the bound", () => {
    expect(err({ "policy.dModel": "100000" })).toContain("policy.dModel: expected a number ≤ 65536, got 100000 (allowed: 8 to 65536)");
    expect(err({ "policy.contextLength": "100000000" })).toContain("policy.contextLength: expected a number ≤ 1048576, got 100000000");
    expect(err({ "policy.nLayers": "5000" })).toContain("policy.nLayers: expected a number ≤ 1024");
    expect(err({ "rl.groupSize": "100000" })).toContain("rl.groupSize: expected a number ≤ 4096");
    expect(err({ "rl.tasksPerStep": "1e6" })).toContain("rl.tasksPerStep: expected a number ≤ 65536");
    expect(err({ "sft.batchSize": "1e6" })).toContain("sft.batchSize: expected a number ≤ 65536");
    expect(err({ "rl.maxTokensPerTurn": "1e7" })).toContain("rl.maxTokensPerTurn: expected a number ≤ 1048576");
    expect(err({ "env.faults.hugeChars": "1e9" })).toMatch(/env\.faults\.hugeChars: expected a number ≤ 5368\d+/);
    // Each size within its bound, their product not: 2^28 episodes in one RL step.
    expect(err({ "rl.groupSize": "4096", "rl.tasksPerStep": "65536" })).toContain("rl.groupSize: rl.tasksPerStep × rl.groupSize = 65536 × 4096 = 268435456 episodes per RL step; at most 1048576");
    // Reward weights: a total of 1e308 made group statistics overflow (issue 12 #4).
    expect(err({ "reward.weights.em": "1e308" })).toContain("reward.weights.em: expected a number ≤ 1000000, got 1e+308 (allowed: -1000000 to 1000000)");
    expect(err({ "lab.define.x.weights.em": "-1e9" })).toContain("lab.define.x.weights.em: expected a number ≥ -1000000");
    // The lower-bound message is as before.
    expect(err({ "rl.groupSize": "-3" })).toContain("rl.groupSize: expected a number ≥ 2, got -3");
  });
});

describe("errors show the value given", () => {
  it("NaN, Infinity and -Infinity are named, not shown as null", () => {
    expect(err({ "env.tools.timeoutMs": ".nan" })).toContain("env.tools.timeoutMs: expected a finite number, got NaN");
    expect(err({ "rl.learningRate": "1e400" })).toContain("rl.learningRate: expected a finite number, got Infinity");
    expect(err({ "rl.temperature": ".inf" })).toContain("rl.temperature: expected a finite number, got Infinity");
    expect(err({ "rl.klCoef": "-.inf" })).toContain("rl.klCoef: expected a finite number, got -Infinity");
    expect(err({ "rl.groupSize": ".nan" })).not.toContain("null");
  });

  it("a bad item of a comma-separated list is shown with its index", () => {
    expect(err({ "env.faults.kinds": "hang,hnag" })).toContain('env.faults.kinds.1: expected one of "fail", "hang", "slow", "garbage", "huge", got "hnag"');
    expect(err({ "env.faults.kinds": "hang, slow ,nope" })).toContain('env.faults.kinds.2: expected one of "fail", "hang", "slow", "garbage", "huge", got "nope"');
    // A YAML list still points at its own item.
    expect(err({}, { env: { faults: { kinds: ["fail", "oops"] } } })).toContain('env.faults.kinds.1: expected one of "fail", "hang", "slow", "garbage", "huge", got "oops"');
    // A flag value YAML cannot read is kept as given, so the field is named (it was a raw YAML parser error).
    expect(err({ "env.faults.kinds": "," })).toContain('env.faults.kinds: expected a list of at least 1 item(s), got ","');
  });
});
