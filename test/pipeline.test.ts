import { mkdtempSync, readFileSync, readdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { runExperiment } from "../src/train/runner.ts";
import { loadPolicy } from "../src/train/checkpoint.ts";

const root = mkdtempSync(join(tmpdir(), "arl-pipeline-"));
const smoke = (name: string) => resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "run.name": name }));

describe("the whole pipeline (smoke configuration: warm start + 2 RL steps)", () => {
  it("runs end to end, writes the run folder, and is byte-identical for the same seed", async () => {
    const a = await runExperiment(smoke("a"), searchRecipe);
    const b = await runExperiment(smoke("b"), searchRecipe);
    const metricsA = readFileSync(join(root, "a", "metrics.jsonl"), "utf8");
    const metricsB = readFileSync(join(root, "b", "metrics.jsonl"), "utf8");
    expect(metricsA).toBe(metricsB);

    const lines = metricsA.trim().split("\n").map((l) => JSON.parse(l) as Record<string, number | string>);
    const rl = lines.filter((l) => l.stage === "rl");
    expect(lines.filter((l) => l.stage === "sft").map((l) => l.step)).toEqual([0, 1, 2, 3]);
    expect(rl.map((l) => l.step)).toEqual([0, 1]);
    for (const key of ["reward/mean", "reward/std", "em", "searches", "invalid_rate", "response_length", "train/entropy", "train/clip_fraction"]) {
      for (const l of rl) expect(Number.isFinite(l[key] as number), key).toBe(true);
    }
    // No wall-clock fields in metrics; they live in timings.jsonl.
    expect(metricsA).not.toMatch(/_ms|time/);
    expect(readFileSync(join(root, "a", "timings.jsonl"), "utf8")).toMatch(/rollout/);

    expect(a.rows.map((r) => r.policy)).toEqual(["Direct", "RAG", "Warm start (SFT)", "RL (GRPO)"]);
    expect(b.rows).toEqual(a.rows.map((r) => ({ ...r })));
    for (const r of a.rows) expect(r.n).toBe(8);
    // Direct never searches; RAG searches exactly once per question.
    expect(a.rows[0].breakdown["count/searches"].rate).toBe(0);
    expect(a.rows[1].breakdown["count/searches"].rate).toBe(1);

    const dir = join(root, "a");
    expect(existsSync(join(dir, "config.yaml"))).toBe(true);
    expect(existsSync(join(dir, "summary.json"))).toBe(true);
    expect(readdirSync(join(dir, "samples"))).toContain("step-0.jsonl");
    expect(readdirSync(join(dir, "checkpoints")).sort()).toEqual(["final", "sft", "step-1", "step-2"]);
    // A checkpoint folder is self-contained: it loads and samples.
    const policy = await loadPolicy(join(dir, "checkpoints", "final"));
    const [s] = await policy.backend.samplingClient().sample([policy.tokenizer.bos], { n: 1, maxTokens: 4, temperature: 0, seed: 0 });
    expect(s.tokens.length).toBeGreaterThan(0);
  });
});
