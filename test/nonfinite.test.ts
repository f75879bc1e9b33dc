/**
 * NaN/Inf in training: the embedded backend refuses a non-finite update (weights and Adam state untouched); RL and
 * SFT skip such steps (gradients discarded, `train/skipped_nonfinite` logged, a warning) and stop with a clear
 * message after `rl.maxNonFiniteSteps` in a row. NaN is injected for real (NaN advantages through the embedded
 * loss) by a spy backend.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Datum, Metrics } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { LossConfig, LossFnName, TrainingBackend } from "../src/core/training.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { silentReporter, type Reporter } from "../src/train/reporter.ts";
import { trainRl } from "../src/train/rlLoop.ts";
import { replayDatums, rlWorlds } from "../src/train/runner.ts";
import { setupExperiment } from "../src/train/setup.ts";
import { warmStart, warmStartDemos } from "../src/train/warmStart.ts";
import { RunDir } from "../src/train/runDir.ts";
import { NonFiniteError, trainSft } from "../src/train/sft.ts";

const CFG = { vocabSize: 11, contextLength: 16, dModel: 16, nLayers: 1, nHeads: 2 };
const datum = (adv: number): Datum => ({
  modelInput: [1, 2, 3, 4],
  targetTokens: [2, 3, 4, 5],
  weights: [0, 1, 1, 1],
  logprobs: [0, -2, -2, -2],
  advantages: [0, adv, adv, adv],
});

/** Delegates to an embedded backend; while `poison` is set, RL batches get a NaN advantage (a real NaN loss). */
class SpyBackend implements TrainingBackend {
  poison = false;
  constructor(readonly inner: EmbeddedBackend) {}
  forwardBackward(datums: Datum[], lossFn: LossFnName, config?: LossConfig) {
    const bad = this.poison && lossFn !== "cross_entropy";
    const ds = bad ? datums.map((d, i) => (i === 0 ? { ...d, advantages: d.advantages!.map(() => NaN) } : d)) : datums;
    return this.inner.forwardBackward(ds, lossFn, config);
  }
  computeLogprobs(datums: Datum[]) { return this.inner.computeLogprobs(datums); }
  optimStep(adam: Parameters<TrainingBackend["optimStep"]>[0]) { return this.inner.optimStep(adam); }
  discardGradients() { return this.inner.discardGradients(); }
  samplingClient() { return this.inner.samplingClient(); }
  save(dir: string) { return this.inner.save(dir); }
  load(dir: string) { return this.inner.load(dir); }
}

describe("the embedded backend and non-finite updates", () => {
  it("refuses an update whose gradient norm is NaN (weights, Adam step unchanged), then trains normally", async () => {
    const be = await EmbeddedBackend.create(CFG, 3);
    const probe = [datum(1)];
    const before = await be.computeLogprobs(probe);
    const fb = await be.forwardBackward([datum(NaN)], "ppo");
    expect(Number.isNaN(fb.loss)).toBe(true);
    const opt = await be.optimStep({ learningRate: 0.1 });
    expect(opt.skipped).toBe(1);
    expect(Number.isFinite(opt.grad_norm)).toBe(false);
    expect(be.step).toBe(0);
    expect(await be.computeLogprobs(probe)).toEqual(before);
    await be.forwardBackward([datum(1)], "ppo");
    const ok = await be.optimStep({ learningRate: 0.1 });
    expect(ok.skipped).toBeUndefined();
    expect(Number.isFinite(ok.grad_norm)).toBe(true);
    expect(be.step).toBe(1);
    expect(await be.computeLogprobs(probe)).not.toEqual(before);
    // discardGradients drops pending gradients without an update.
    await be.forwardBackward([datum(1)], "ppo");
    await be.discardGradients();
    expect(await be.pendingGradients()).toBeNull();
    expect(be.step).toBe(1);
  });
});

describe("SFT with NaN losses", () => {
  it("skips the step (gradients discarded, no optimizer step), logs it, and stops after N in a row", async () => {
    const calls: string[] = [];
    const nanSteps = new Set([1, 3, 4, 5]);
    let step = 0;
    const fake: TrainingBackend = {
      forwardBackward: async () => ({ loss: nanSteps.has(step) ? NaN : 1, metrics: {}, logprobs: [] }),
      computeLogprobs: async () => [],
      optimStep: async () => (calls.push(`optim ${step}`), { grad_norm: 1 }),
      discardGradients: async () => void calls.push(`discard ${step}`),
      samplingClient: () => ({ sample: async () => [] }),
      save: async () => {},
      load: async () => {},
    };
    const logged: Array<[number, Metrics]> = [];
    const skips: string[] = [];
    const config = resolveConfig(applyOverrides({}, SMOKE_OVERRIDES));
    const demos = await warmStartDemos(setupExperiment(config, searchRecipe), config);
    const run = trainSft(fake, demos, {
      steps: 10, batchSize: 1, learningRate: 1e-3, gradClip: 1, seed: 0, maxNonFiniteSteps: 3,
      onStep: (s, m) => { logged.push([s, m]); step = s + 1; },
      onSkip: (s, reason) => skips.push(`${s}: ${reason}`),
    });
    await expect(run).rejects.toThrow(NonFiniteError);
    await expect(run).rejects.toThrow("sft step 5: loss NaN — 3 step(s) in a row without a usable update (NaN/Inf loss or gradient norm, or no trajectory; rl.maxNonFiniteSteps 3); training stopped");
    expect(calls).toEqual(["optim 0", "discard 1", "optim 2", "discard 3", "discard 4", "discard 5"]);
    expect(skips).toEqual(["1: loss NaN", "3: loss NaN", "4: loss NaN", "5: loss NaN"]);
    expect(logged.map(([s, m]) => [s, m["train/skipped_nonfinite"]])).toEqual([[0, undefined], [1, 1], [2, undefined], [3, 1], [4, 1], [5, 1]]);
  }, 30_000);
});

describe("RL with NaN advantages (spy backend, smoke configuration)", () => {
  const root = mkdtempSync(join(tmpdir(), "arl-nonfinite-"));
  /** Warm-starts a smoke policy, then runs RL with NaN injected at `poisonSteps`. */
  async function rlWith(name: string, steps: number, poisonSteps: Set<number>) {
    const config = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "run.name": name, "rl.steps": String(steps) }));
    const s = setupExperiment(config, searchRecipe);
    const run = new RunDir(root, name);
    const logs: string[] = [];
    const demos = await warmStartDemos(s, config);
    const inner = (await warmStart(s, config, demos, run, silentReporter)) as EmbeddedBackend;
    const spy = new SpyBackend(inner);
    const sftSteps = inner.step;
    spy.poison = poisonSteps.has(0);
    const reporter: Reporter = {
      bar: () => ({ update: (v: number) => void (spy.poison = poisonSteps.has(v)), stop: () => {} }),
      log: (m) => logs.push(m),
    };
    const result = trainRl({ backend: spy, worlds: rlWorlds(s, config), replayDatums: replayDatums(s, demos), setup: s, config, run, reporter, referenceDir: run.checkpoint("sft") });
    return { result, logs, inner, sftSteps, config, metrics: () => readFileSync(join(run.path, "metrics.jsonl"), "utf8") };
  }

  it("a NaN step is skipped and logged; the weights stay finite and training goes on", async () => {
    const r = await rlWith("one", 4, new Set([1]));
    const out = await r.result;
    const rl = r.metrics().trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.stage === "rl");
    expect(rl.map((l) => l["train/skipped_nonfinite"])).toEqual([undefined, r.config.rl.minibatches, undefined, undefined]);
    expect(rl[1]["train/loss"]).toBeUndefined(); // no applied update to report
    expect(Number.isFinite(rl[2]["train/loss"])).toBe(true);
    expect(r.logs.filter((m) => m.includes("skipped"))).toEqual([`warning: rl step 1: ${r.config.rl.minibatches} update(s) skipped: loss NaN (train/skipped_nonfinite in metrics.jsonl)`]);
    // Every optimizer step of steps 0, 2, 3 was applied; none of step 1's.
    expect(r.inner.step - r.sftSteps).toBe(3 * r.config.rl.minibatches);
    expect(out.steps).toHaveLength(4);
    const lp = await r.inner.computeLogprobs([{ modelInput: [1, 2, 3], targetTokens: [2, 3, 4], weights: [1, 1, 1] }]);
    expect(lp.flat().every(Number.isFinite)).toBe(true);
  }, 120_000);

  it("stops with a clear error after rl.maxNonFiniteSteps NaN steps in a row", async () => {
    const r = await rlWith("three", 6, new Set([1, 2, 3]));
    await expect(r.result).rejects.toThrow("rl step 3: loss NaN — 3 step(s) in a row without a usable update (NaN/Inf loss or gradient norm, or no trajectory; rl.maxNonFiniteSteps 3); training stopped");
    expect(r.metrics().split("\n").filter((l) => l.includes('"stage":"rl"'))).toHaveLength(4); // the failing step is logged
  }, 120_000);
});
