// Every algorithm through the real RL loop (smoke configuration: warm start + 2 RL steps on the search env):
// each runs, trains (finite loss and gradient norm), reports its own metrics, and reruns byte-identical.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { runExperiment } from "../src/train/runner.ts";

const root = mkdtempSync(join(tmpdir(), "arl-algo-rl-"));
let n = 0;
async function rlMetrics(overrides: Record<string, string>): Promise<{ text: string; rl: Array<Record<string, number>> }> {
  const name = `run-${n++}`;
  await runExperiment(resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "eval.maxTasks": "2", ...overrides, "run.dir": root, "run.name": name })), searchRecipe);
  const text = readFileSync(join(root, name, "metrics.jsonl"), "utf8");
  const rl = text.trim().split("\n").map((l) => JSON.parse(l) as Record<string, number> & { stage: string }).filter((l) => l.stage === "rl");
  return { text, rl };
}

const VARIANTS: Array<[string, Record<string, string>, string[]]> = [
  ["rloo", { "rl.advantage": "rloo" }, []],
  ["reinforce_plus_plus", { "rl.advantage": "reinforce_plus_plus", "rl.gamma": "0.99" }, []],
  ["reinforce_plus_plus_baseline + seq-mean-token-mean", { "rl.advantage": "reinforce_plus_plus_baseline", "rl.lossAggMode": "seq-mean-token-mean" }, []],
  ["gae", { "rl.advantage": "gae", "rl.lam": "0.95" }, ["train/vf_loss", "train/vf_explained_var"]],
  ["reinforce_plus_plus with per-turn rewards", { "rl.advantage": "reinforce_plus_plus", "rl.turnRewards.toolError": "-0.1" }, []],
  ["gspo", { "rl.lossFn": "gspo" }, ["train/clip_fraction"]],
  ["cispo + clip-higher", { "rl.lossFn": "cispo", "rl.clipHigh": "0.28" }, ["train/clip_fraction"]],
  ["dual clip", { "rl.clipRatioC": "3" }, ["train/clip_fraction_lower"]],
  ["dro", { "rl.lossFn": "dro" }, []],
  ["tis", { "rl.tis": "true" }, ["tis/weight_mean", "tis/truncated_fraction"]],
  ["DAPO dynamic sampling + overlong", { "rl.filterGroups": "true", "rl.overlongBuffer": "16", "rl.clipHigh": "0.28", "rl.lossAggMode": "token-mean" }, ["train/gen_batches", "train/kept_groups", "reward/term/overlong"]],
];

describe("algorithms in the RL loop", () => {
  for (const [label, overrides, keys] of VARIANTS) {
    it(`${label}: trains and reports its metrics`, async () => {
      const { rl } = await rlMetrics(overrides);
      expect(rl.length).toBe(2);
      for (const m of rl) {
        for (const k of keys) expect(Number.isFinite(m[k]), `${label}: ${k}`).toBe(true);
      }
      const trained = rl.filter((m) => m["train/loss"] !== undefined);
      expect(trained.length).toBeGreaterThan(0);
      for (const m of trained) {
        expect(Number.isFinite(m["train/loss"])).toBe(true);
        expect(Number.isFinite(m["train/grad_norm"])).toBe(true);
      }
    });
  }
  it("gigpo with per-turn rewards: each turn's advantage is in the samples", async () => {
    const name = `run-${n}`;
    const { rl } = await rlMetrics({ "rl.advantage": "gigpo", "rl.gamma": "0.95", "rl.turnRewards.toolError": "-0.1", "rl.turnRewards.evidence": "0.2", "run.samplesPerStep": "4" });
    expect(rl.some((m) => Number.isFinite(m["train/loss"]))).toBe(true);
    const samples = readFileSync(join(root, name, "samples", "step-0.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { turns: unknown[]; reward: { turnAdvantages: number[]; turnRewards: number[] } });
    expect(samples.length).toBe(4);
    for (const s of samples) {
      expect(s.reward.turnAdvantages.length).toBe(s.turns.length);
      expect(s.reward.turnRewards.length).toBe(s.turns.length);
      s.reward.turnAdvantages.forEach((a) => expect(Number.isFinite(a)).toBe(true));
    }
  });
  it("gae and DAPO rerun byte-identical for the same seed", async () => {
    const runs: Array<Record<string, string>> = [{ "rl.advantage": "gae" }, { "rl.filterGroups": "true", "rl.tis": "true" }];
    for (const o of runs) {
      const a = await rlMetrics(o);
      const b = await rlMetrics(o);
      expect(a.text).toBe(b.text);
    }
  });
});
