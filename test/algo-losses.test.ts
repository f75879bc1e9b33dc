// Policy losses and loss aggregation: the reference math (src/algo/losses.ts) on hand-computed examples, and the
// embedded jax-js backend (src/policy/embedded/loss.ts) against the reference — loss values, clip statistics and
// gradients. Numbers are worked out in the comments.
import { describe, expect, it } from "vitest";
import type { Datum } from "../src/core/types.ts";
import {
  aggLoss,
  aggregationPlan,
  cispoTokenLoss,
  droTokenLoss,
  gspoSequenceRatio,
  gspoTokenLoss,
  LOSS_AGG_MODES,
  tisWeights,
  vanillaPolicyTokenLoss,
  type LossAggMode,
  type PolicyTokenLoss,
} from "../src/algo/losses.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { GPTConfig } from "../src/policy/embedded/gpt.ts";
import type { LossConfig, LossFnName } from "../src/core/training.ts";

describe("reference token losses (hand-computed)", () => {
  it("vanilla PPO: clip-higher and dual clip", () => {
    // A = +1, r = 1.5, ε_low 0.2, ε_high 0.28: clip(r) = 1.28 < r → ℓ = −min(1.5, 1.28) = −1.28, clipped, ∂ℓ/∂lp = 0.
    const a = vanillaPolicyTokenLoss(Math.log(1.5), 0, 1, { clipLow: 0.2, clipHigh: 0.28 });
    expect(a.loss).toBeCloseTo(-1.28, 12);
    expect(a.clipped).toBe(true);
    expect(a.dLogprob).toBe(0);
    // A = −1, r = 4: ℓ₁ = max(−A·r, −A·clip(r)) = max(4, 1.2) = 4 (not clipped, ∂ℓ/∂lp = −A·r = 4).
    const b = vanillaPolicyTokenLoss(Math.log(4), 0, -1, { clipLow: 0.2, clipHigh: 0.2 });
    expect(b.loss).toBeCloseTo(4, 12);
    expect(b.dLogprob).toBeCloseTo(4, 12);
    // Dual clip c = 3: ℓ = min(−A·c, ℓ₁) = min(3, 4) = 3, the lower clip, gradient 0 (Ye et al. 2020).
    const c = vanillaPolicyTokenLoss(Math.log(4), 0, -1, { clipLow: 0.2, clipHigh: 0.2, clipRatioC: 3 });
    expect(c.loss).toBeCloseTo(3, 12);
    expect(c.clippedLower).toBe(true);
    expect(c.dLogprob).toBe(0);
    // A > 0 is untouched by the dual clip: r = 4, A = 1 → ℓ = −min(4, 1.2) = −1.2.
    expect(vanillaPolicyTokenLoss(Math.log(4), 0, 1, { clipLow: 0.2, clipHigh: 0.2, clipRatioC: 3 }).loss).toBeCloseTo(-1.2, 12);
    expect(() => vanillaPolicyTokenLoss(0, 0, 1, { clipLow: 0.2, clipHigh: 0.2, clipRatioC: 1 })).toThrow(/> 1/);
  });
  it("GSPO: the length-normalised sequence ratio, clipped like PPO", () => {
    // lp − q = [0.2, −0.1, (0.5 masked)] → mean over the 2 masked tokens = 0.05 → s = e^0.05 = 1.0512711.
    const s = gspoSequenceRatio([0.2, -0.1, 0.5], [0, 0, 0], [1, 1, 0]);
    expect(s).toBeCloseTo(Math.exp(0.05), 12);
    // A = 2, s inside [0.8, 1.2]: ℓ = −2·1.0512711 = −2.1025422, ∂ℓ/∂lp_t = −A·s.
    const a = gspoTokenLoss(s, 2, 0.2, 0.2);
    expect(a.loss).toBeCloseTo(-2.1025422, 6);
    expect(a.dLogprob).toBeCloseTo(-2.1025422, 6);
    // s = e^0.5 = 1.6487213, A = 1: ℓ = max(−1.6487, −1.2) = −1.2, clipped, gradient 0.
    const b = gspoTokenLoss(Math.exp(0.5), 1, 0.2, 0.2);
    expect(b.loss).toBeCloseTo(-1.2, 12);
    expect(b.clipped).toBe(true);
    expect(b.dLogprob).toBe(0);
    // veRL clamps log s at 10.
    expect(gspoSequenceRatio([50], [0], [1])).toBeCloseTo(Math.exp(10), 6);
  });
  it("CISPO: detached clipped IS weight, every token keeps a gradient", () => {
    // r = e^0.5 = 1.6487 → clip 1.2; A = 1, lp = −0.3: ℓ = −1.2·1·(−0.3) = 0.36, ∂ℓ/∂lp = −1.2 (PPO would give 0).
    const a = cispoTokenLoss(-0.3, -0.8, 1, 0.2, 0.2);
    expect(a.loss).toBeCloseTo(0.36, 12);
    expect(a.dLogprob).toBeCloseTo(-1.2, 12);
    expect(a.clipped).toBe(true);
    // r = 0.9 inside the range, A = −2, lp = −1: ℓ = −0.9·(−2)·(−1) = −1.8, ∂ℓ/∂lp = 1.8.
    const b = cispoTokenLoss(-1, -1 - Math.log(0.9), -2, 0.2, 0.2);
    expect(b.loss).toBeCloseTo(-1.8, 12);
    expect(b.dLogprob).toBeCloseTo(1.8, 12);
    expect(b.clipped).toBe(false);
  });
  it("DRO: −(lp·A − ½β(lp − q)²)", () => {
    // lp = −1, q = −1.5, A = 0.5, β = 0.1: d = 0.5; ℓ = −(−0.5 − 0.05·0.25) = 0.5125; ∂ℓ/∂lp = −0.5 + 0.1·0.5 = −0.45
    const a = droTokenLoss(-1, -1.5, 0.5, 0.1);
    expect(a.loss).toBeCloseTo(0.5125, 12);
    expect(a.dLogprob).toBeCloseTo(-0.45, 12);
  });
  it("TIS weights: min(π_trainer/π_sampler, cap), 0 off the mask", () => {
    // trainer − sampler = [0.5, −0.5, 0]: w = [min(e^0.5 = 1.6487, 1.5) = 1.5, e^−0.5 = 0.6065307, masked → 0]
    const w = tisWeights([-1, -1, -2], [-1.5, -0.5, -2], [1, 1, 0], 1.5);
    expect(w[0]).toBe(1.5);
    expect(w[1]).toBeCloseTo(0.6065307, 7);
    expect(w[2]).toBe(0);
    expect(() => tisWeights([0], [0], [1], 0)).toThrow(/positive/);
  });
});

describe("aggLoss (verl agg_loss) and aggregationPlan", () => {
  // Rows: [1, 2, 3] all masked; [4, (0), (0)] one masked; [5] fully masked.
  const losses = [[1, 2, 3], [4, 0, 0], [5]];
  const masks = [[1, 1, 1], [1, 0, 0], [0]];
  it("the four modes on a hand example", () => {
    // token-mean: (1+2+3+4)/4 = 2.5
    expect(aggLoss(losses, masks, "token-mean")).toBeCloseTo(2.5, 12);
    // seq-mean-token-sum: non-empty rows' sums 6 and 4 → mean 5 (the empty row is excluded, as verl's seq_mask)
    expect(aggLoss(losses, masks, "seq-mean-token-sum")).toBeCloseTo(5, 12);
    // seq-mean-token-mean: row means 2 and 4 → 3
    expect(aggLoss(losses, masks, "seq-mean-token-mean")).toBeCloseTo(3, 12);
    // seq-mean-token-sum-norm, scale 4: (6 + 4 + 0) / (4 · 3 rows) = 0.8333333
    expect(aggLoss(losses, masks, "seq-mean-token-sum-norm", 4)).toBeCloseTo(10 / 12, 12);
    expect(() => aggLoss(losses, masks, "seq-mean-token-sum-norm")).toThrow(/scaleFactor/);
  });
  it("a plan's Σ w·ℓ ÷ its normalisation equals aggLoss for every mode", () => {
    for (const mode of LOSS_AGG_MODES) {
      const plan = aggregationPlan(masks, mode, 4);
      const num = plan.weights.reduce((a, row, b) => a + row.reduce((x, w, t) => x + w * losses[b][t], 0), 0);
      const wsum = plan.weights.flat().reduce((a, b) => a + b, 0);
      const got = plan.normalization === "tokens" ? num / wsum : num / (plan.constantLength! * masks.length);
      expect(got).toBeCloseTo(aggLoss(losses, masks, mode, 4), 12);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
// The embedded backend against the reference.

const CFG: GPTConfig = { vocabSize: 40, contextLength: 64, dModel: 32, nLayers: 2, nHeads: 2 };
const seq = (n: number, k: number) => Array.from({ length: n }, (_, i) => (i * k + 3 + k * k) % CFG.vocabSize);
const toks = [seq(12, 3), seq(7, 5), seq(9, 7)];
const weights = [
  [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
  [0, 1, 1, 1, 1, 1],
  [0, 0, 1, 1, 0, 1, 1, 1],
];
/** Ratios r = exp(lp − q) by position, across both clip sides; advantages of both signs. */
const ratios = [1.5, 0.5, 1.1, 0.7, 1.3, 0.95, 4, 0.2];
const advs = [1, -1, 2, -0.5, -1.5];

async function setup(): Promise<{ datums: Datum[]; lp: number[][] }> {
  const be = await EmbeddedBackend.create(CFG, 11);
  const base: Datum[] = toks.map((t, i) => ({ modelInput: t.slice(0, -1), targetTokens: t.slice(1), weights: weights[i] }));
  const lp = await be.computeLogprobs(base);
  be.dispose();
  const datums = base.map((d, i) => ({
    ...d,
    logprobs: lp[i].map((x, t) => (d.weights[t] ? x - Math.log(ratios[(t + 3 * i) % ratios.length]) : 0)),
    advantages: lp[i].map((_, t) => (d.weights[t] ? advs[(t + 2 * i) % advs.length] : 0)),
  }));
  return { datums, lp };
}

/** Reference per-token losses of a datum batch. */
function reference(fn: LossFnName, cfg: LossConfig, datums: Datum[], lp: number[][]): PolicyTokenLoss[][] {
  const lo = cfg.clipLow ?? 0.2;
  const hi = cfg.clipHigh ?? 0.2;
  return datums.map((d, b) => {
    const q = d.logprobs!;
    const A = d.advantages!;
    const s = gspoSequenceRatio(lp[b], q, d.weights);
    return lp[b].map((l, t) => {
      switch (fn) {
        case "ppo":
          return vanillaPolicyTokenLoss(l, q[t], A[t], { clipLow: lo, clipHigh: hi, clipRatioC: cfg.clipRatioC });
        case "gspo":
          return gspoTokenLoss(s, A[t], lo, hi);
        case "cispo":
          return cispoTokenLoss(l, q[t], A[t], lo, hi);
        case "dro":
          return droTokenLoss(l, q[t], A[t], cfg.droBeta ?? 0.05);
        default: {
          const r = Math.exp(l - q[t]);
          return { loss: -r * A[t], dLogprob: -r * A[t], clipped: false, clippedLower: false, ratio: r };
        }
      }
    });
  });
}

const CASES: Array<[LossFnName, LossConfig]> = [
  ["ppo", { clipLow: 0.2, clipHigh: 0.28 }],
  ["ppo", { clipRatioC: 3 }],
  ["gspo", {}],
  ["cispo", { clipLow: 0.2, clipHigh: 0.28 }],
  ["dro", { droBeta: 0.1 }],
];

describe("embedded backend = reference", () => {
  it("loss values and clip statistics of ppo (clip-higher, dual clip), gspo, cispo, dro", async () => {
    const { datums, lp } = await setup();
    const be = await EmbeddedBackend.create(CFG, 11);
    const masks = datums.map((d) => d.weights);
    let sawLower = false;
    for (const [fn, cfg] of CASES) {
      const ref = reference(fn, cfg, datums, lp);
      const got = await be.forwardBackward(datums, fn, cfg);
      await be.discardGradients();
      const want = aggLoss(ref.map((r) => r.map((x) => x.loss)), masks, "token-mean");
      expect(Math.abs(got.loss - want)).toBeLessThan(2e-5 * Math.max(1, Math.abs(want)));
      if (fn !== "dro") {
        const frac = aggLoss(ref.map((r) => r.map((x) => (x.clipped ? 1 : 0))), masks, "token-mean");
        expect(got.metrics.clip_fraction).toBeCloseTo(frac, 6);
      }
      if (cfg.clipRatioC !== undefined) {
        const lower = aggLoss(ref.map((r) => r.map((x) => (x.clippedLower ? 1 : 0))), masks, "token-mean");
        expect(lower).toBeGreaterThan(0); // the example exercises the lower clip (r = 4 with A < 0)
        expect(got.metrics.clip_fraction_lower).toBeCloseTo(lower, 6);
        sawLower = true;
      }
    }
    expect(sawLower).toBe(true);
    be.dispose();
  });

  it("gradients: each loss's gradient equals Σ_t w_t·(∂ℓ/∂lp)_t·∂lp_t/∂θ from the reference", async () => {
    // importance_sampling at q = lp (ratio 1) with advantages A' = −(∂ℓ/∂lp)_ref has exactly the gradient
    // Σ_t w_t·(∂ℓ/∂lp)_t·∂lp_t/∂θ / Σw — so comparing the two backends' pending gradients checks every closed-form
    // ∂ℓ/∂lp of the jax-js program against the reference, through the whole model.
    const { datums, lp } = await setup();
    for (const [fn, cfg] of CASES) {
      const ref = reference(fn, cfg, datums, lp);
      const a = await EmbeddedBackend.create(CFG, 11);
      await a.forwardBackward(datums, fn, cfg);
      const got = (await a.pendingGradients())!;
      a.dispose();
      const b = await EmbeddedBackend.create(CFG, 11);
      const surrogate = datums.map((d, i) => ({ ...d, logprobs: lp[i], advantages: ref[i].map((x, t) => (d.weights[t] ? -x.dLogprob : 0)) }));
      await b.forwardBackward(surrogate, "importance_sampling");
      const want = (await b.pendingGradients())!;
      b.dispose();
      let maxErr = 0;
      let maxAbs = 0;
      for (const [name, w] of want) {
        const g = got.get(name)!;
        w.forEach((x, i) => {
          maxErr = Math.max(maxErr, Math.abs(x - g[i]));
          maxAbs = Math.max(maxAbs, Math.abs(x));
        });
      }
      expect(maxAbs).toBeGreaterThan(1e-4);
      expect(maxErr, `${fn} ${JSON.stringify(cfg)}`).toBeLessThan(1e-4 * maxAbs);
    }
  });

  it("aggregation modes through aggregationPlan weights equal verl agg_loss", async () => {
    const { datums, lp } = await setup();
    const be = await EmbeddedBackend.create(CFG, 11);
    const masks = datums.map((d) => d.weights);
    const ref = reference("ppo", {}, datums, lp).map((r) => r.map((x) => x.loss));
    for (const mode of LOSS_AGG_MODES as readonly LossAggMode[]) {
      const plan = aggregationPlan(masks, mode, 20);
      const mb = datums.map((d, i) => ({ ...d, weights: plan.weights[i] }));
      const got = await be.forwardBackward(mb, "ppo", { normalization: plan.normalization, constantLength: plan.constantLength });
      await be.discardGradients();
      const want = aggLoss(ref, masks, mode, 20);
      expect(Math.abs(got.loss - want), mode).toBeLessThan(2e-5 * Math.max(1, Math.abs(want)));
    }
    be.dispose();
  });
});
