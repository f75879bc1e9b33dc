import { describe, expect, it } from "vitest";
import { Rng } from "../src/core/rng.ts";
import { buildWorld, counterfactualWorld } from "../src/envs/search/world.ts";
import { lengthGroupedBatches } from "../src/train/sft.ts";
import { ptxDatums } from "../src/train/rl/update.ts";
import type { Datum } from "../src/core/types.ts";

describe("counterfactual demonstration worlds", () => {
  const w = buildWorld({ numCountries: 30 });
  const cf = counterfactualWorld(w, 7);
  it("keep popular countries and the split, permute unknown facts", () => {
    expect(cf.countries.filter((c) => c.popular)).toEqual(w.countries.filter((c) => c.popular));
    expect(cf.train.map((t) => t.id)).toEqual(w.train.map((t) => t.id).filter((id) => cf.train.some((t) => t.id === id)));
    const unknown = (x: typeof w) => x.countries.filter((c) => !c.popular);
    // Same multiset of capitals among unknown countries, different assignment.
    expect(unknown(cf).map((c) => c.capital).sort()).toEqual(unknown(w).map((c) => c.capital).sort());
    expect(unknown(cf).map((c) => c.capital)).not.toEqual(unknown(w).map((c) => c.capital));
    // Passages and answers agree inside the counterfactual world.
    const t = cf.train.find((x) => x.id.startsWith("capital:") && !x.known)!;
    const passage = cf.passages.find((p) => p.id === t.evidenceIds![0])!;
    expect(passage.text).toBe(`the capital of ${t.meta!.entity} is ${t.answers[0]} .`);
    expect(counterfactualWorld(w, 7)).toEqual(cf);
  });
});

describe("length-grouped SFT batches", () => {
  it("cover every item once per epoch, in batches of similar length", () => {
    const items = Array.from({ length: 100 }, (_, i) => ({ id: i, targetTokens: new Array(1 + ((i * 37) % 90)).fill(0) }));
    const batches = lengthGroupedBatches(items, 4, new Rng(1));
    expect(batches.flat().map((x) => x.id).sort((a, b) => a - b)).toEqual(items.map((x) => x.id));
    expect(batches.every((b) => b.length <= 4)).toBe(true);
    // Within a batch lengths are sorted (grouped from a pool of 8 batches).
    for (const b of batches) {
      const lens = b.map((x) => x.targetTokens.length);
      expect(lens).toEqual([...lens].sort((a, c) => a - c));
    }
  });
});

describe("PPO-ptx replay weights", () => {
  it("make the constant-normalised loss equal coef × mean token cross entropy", () => {
    const d = (w: number[]): Datum => ({ modelInput: w.map(() => 0), targetTokens: w.map(() => 0), weights: w });
    const out = ptxDatums([d([1, 1, 0]), d([0, 1, 1, 1, 1])], 0.5);
    // 6 weighted tokens, batch 2: each weight becomes 0.5 × 2 / 6 = 1/6; Σ w ℓ / (1 × 2) = 0.5 × mean ℓ.
    expect(out[0].weights).toEqual([1 / 6, 1 / 6, 0]);
    expect(out[1].weights[0]).toBe(0);
    const tokenLoss = [[2, 4, 9], [9, 1, 1, 1, 1]];
    const loss = out.reduce((a, x, i) => a + x.weights.reduce((s, w, j) => s + w * tokenLoss[i][j], 0), 0) / 2;
    expect(loss).toBeCloseTo(0.5 * ((2 + 4 + 1 + 1 + 1 + 1) / 6), 12);
  });
});

describe("rlStep with observation tokens unmasked", () => {
  it("trains on observation tokens with the pre-update policy's logprobs, sampled tokens keep the sampler's", async () => {
    const { resolveConfig } = await import("../src/train/config.ts");
    const { SMOKE_OVERRIDES } = await import("../src/envs/index.ts");
    const { applyOverrides } = await import("../src/train/configFile.ts");
    const { setupExperiment } = await import("../src/train/setup.ts");
    const { searchRecipe } = await import("../src/envs/index.ts");
    const { EmbeddedBackend } = await import("../src/policy/embedded/backend.ts");
    const { rlStep } = await import("../src/train/rl.ts");
    const config = resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "rl.maskObservations": "false", "reward.preset": "composite", "rl.minibatches": "1" }));
    const s = setupExperiment(config, searchRecipe);
    const real = await EmbeddedBackend.create(s.gpt, 0);
    const seen: { fb: Datum[][]; lp: Array<{ datums: Datum[]; out: number[][] }> } = { fb: [], lp: [] };
    const spy = {
      forwardBackward: (d: Datum[], ...rest: Parameters<typeof real.forwardBackward> extends [unknown, ...infer R] ? R : never) => {
        seen.fb.push(structuredClone(d));
        return real.forwardBackward(d, ...rest);
      },
      computeLogprobs: async (d: Datum[]) => {
        const out = await real.computeLogprobs(d);
        seen.lp.push({ datums: structuredClone(d), out });
        return out;
      },
      optimStep: real.optimStep.bind(real),
      samplingClient: real.samplingClient.bind(real),
      save: real.save.bind(real),
      load: real.load.bind(real),
    };
    const tasks = s.instance.train.slice(0, 3);
    const res = await rlStep({ backend: spy, tokenizer: s.tokenizer, makeEnv: s.instance.makeEnv(0), limits: s.limits, config }, tasks, 5);
    const trajs = res.groups.flatMap((g) => g.trajectories);
    // An untrained policy writes invalid turns, whose corrective observations are masked from sampling.
    expect(trajs.some((t) => t.lossMask.slice(t.promptLength).includes(0))).toBe(true);
    expect(seen.lp).toHaveLength(1); // the behaviour logprobs of the observation tokens
    const trained = seen.fb[0];
    expect(trained.length).toBeGreaterThan(0);
    const all = seen.lp[0];
    for (const d of trained) {
      const b = all.datums.findIndex((x) => x.modelInput.join() === d.modelInput.join() && x.advantages!.join() === d.advantages!.join());
      const t = trajs[b];
      for (let i = 0; i < d.weights.length; i++) {
        const afterPrompt = i + 1 >= t.promptLength;
        expect(d.weights[i]).toBe(afterPrompt ? 1 : 0);
        if (t.lossMask[i + 1] === 1) expect(d.logprobs![i]).toBe(t.logprobs[i + 1]); // sampled: the sampler's
        else if (afterPrompt) expect(d.logprobs![i]).toBe(all.out[b][i]); // observation: the current policy's
      }
    }
    expect(Number.isFinite(res.metrics["train/loss"])).toBe(true);
  });
});

describe("collectGarbage (run.gcEvery)", () => {
  it("runs a full collection: unreachable objects are freed at once", async () => {
    const { collectGarbage } = await import("../src/train/memory.ts");
    collectGarbage();
    const base = process.memoryUsage().heapUsed;
    let junk: Array<{ i: number; s: string }> | null = Array.from({ length: 400_000 }, (_, i) => ({ i, s: `x${i}` }));
    expect(junk.length).toBe(400_000);
    const held = process.memoryUsage().heapUsed;
    junk = null;
    expect(collectGarbage()).toBe(true);
    const after = process.memoryUsage().heapUsed;
    // ~25 MB of garbage: a full collection frees it (a young-generation scavenge alone would leave the promoted part).
    expect(held - base).toBeGreaterThan(10 * 2 ** 20);
    expect(after - base).toBeLessThan((held - base) / 4);
  });
});
