import { describe, expect, it } from "vitest";
import { grpoAdvantages, tokenAdvantages } from "../src/algo/advantages.ts";
import { aggregateLoss, importanceSamplingTokenLoss, k3Kl, ppoClipTokenLoss } from "../src/algo/losses.ts";

describe("grpoAdvantages", () => {
  it("GRPO uses the unbiased std (torch.std), as verl", () => {
    // mean = 0.5; deviations ±0.5; Σd² = 4·0.25 = 1; unbiased var = 1/(4−1) = 1/3; std = 0.5773503
    // A = ±0.5 / (0.5773503 + 1e-6) = ±0.8660239  (population std 0.5 would give ±1)
    const a = grpoAdvantages([1, 0, 0, 1], { normalizeStd: true });
    const expected = 0.5 / (Math.sqrt(1 / 3) + 1e-6);
    expect(a[0]).toBeCloseTo(expected, 12);
    expect(a[0]).toBeCloseTo(0.8660239, 6);
    expect(a[1]).toBeCloseTo(-expected, 12);
    expect(a[2]).toBeCloseTo(-expected, 12);
    expect(a[3]).toBeCloseTo(expected, 12);
  });
  it("GRPO on [2, 0, 1]", () => {
    // mean = 1; d = [1, −1, 0]; unbiased var = 2/2 = 1; std = 1 → A = d / (1 + 1e-6)
    const a = grpoAdvantages([2, 0, 1], { normalizeStd: true, eps: 1e-6 });
    expect(a[0]).toBeCloseTo(1 / 1.000001, 12);
    expect(a[1]).toBeCloseTo(-1 / 1.000001, 12);
    expect(a[2]).toBe(0);
  });
  it("all-equal group → zero advantages", () => {
    expect(grpoAdvantages([1, 1, 1, 1], { normalizeStd: true })).toEqual([0, 0, 0, 0]);
  });
  it("Dr.GRPO only subtracts the mean", () => {
    // mean 0.5 → [0.5, −0.5, −0.5, 0.5]
    expect(grpoAdvantages([1, 0, 0, 1], { normalizeStd: false })).toEqual([0.5, -0.5, -0.5, 0.5]);
    // mean of [0.9, 0.1, 0.2] = 0.4 → [0.5, −0.3, −0.2]
    const b = grpoAdvantages([0.9, 0.1, 0.2], { normalizeStd: false });
    [0.5, -0.3, -0.2].forEach((v, i) => expect(b[i]).toBeCloseTo(v, 12));
  });
  it("group of size 1 → [0]; empty → []", () => {
    expect(grpoAdvantages([0.7], { normalizeStd: true })).toEqual([0]);
    expect(grpoAdvantages([], { normalizeStd: false })).toEqual([]);
  });
  it("an all-equal group gets exactly 0, whatever float sum its mean takes (issue 12 #4)", () => {
    // Σ of eight 0.1 is 0.7999…, so (r − mean) was 1.39e-11, not 0, and such groups reached the update.
    for (const normalizeStd of [true, false]) {
      for (const rewards of [Array(8).fill(0.1), [0.7, 0.7, 0.7], Array(5).fill(-0.3), Array(16).fill(1 / 3)]) {
        const a = grpoAdvantages(rewards, { normalizeStd });
        expect(a.every((x) => x === 0 && !Object.is(x, -0))).toBe(true);
      }
    }
  });
  it("huge finite rewards give finite advantages: GRPO is scale-free, Dr.GRPO throws when the result overflows", () => {
    const a = grpoAdvantages([1e308, 1e308, -1e308, 1e308], { normalizeStd: true });
    const b = grpoAdvantages([1, 1, -1, 1], { normalizeStd: true, eps: 0 }); // eps is negligible beside a std of 1e308
    a.forEach((x, i) => expect(x).toBeCloseTo(b[i], 9));
    expect(grpoAdvantages([1e308, 1e308, 1e308], { normalizeStd: true })).toEqual([0, 0, 0]);
    // log2(Number.MAX_VALUE) rounds to 1024: the scale must stay finite there too.
    const m = grpoAdvantages([Number.MAX_VALUE, 0], { normalizeStd: true, eps: 0 });
    expect(m[0]).toBeCloseTo(Math.SQRT1_2, 12);
    expect(m[1]).toBeCloseTo(-Math.SQRT1_2, 12);
    const c = grpoAdvantages([1e308, 0, 0, 0], { normalizeStd: false });
    [0.75e308, -0.25e308, -0.25e308, -0.25e308].forEach((v, i) => expect(c[i] / v).toBeCloseTo(1, 12));
    expect(() => grpoAdvantages([1.7e308, -1.7e308, -1.7e308, -1.7e308], { normalizeStd: false })).toThrow(/overflow/);
  });
  it("non-finite reward throws with its index", () => {
    expect(() => grpoAdvantages([1, Number.NaN], { normalizeStd: true })).toThrow("rewards[1]");
  });
});

describe("tokenAdvantages", () => {
  it("broadcasts onto masked tokens only (and never writes −0)", () => {
    expect(tokenAdvantages(0.5, [0, 0, 1, 1, 0, 1])).toEqual([0, 0, 0.5, 0.5, 0, 0.5]);
    const neg = tokenAdvantages(-2, [0, 1]);
    expect(Object.is(neg[0], 0)).toBe(true);
    expect(neg[1]).toBe(-2);
    expect(() => tokenAdvantages(1, [0, 2])).toThrow("lossMask[1] = 2");
  });
});

describe("ppoClipTokenLoss (ε = 0.2)", () => {
  const grad = (lp: number, q: number, a: number): number => {
    const h = 1e-6;
    return (ppoClipTokenLoss(lp + h, q, a, 0.2, 0.2).loss - ppoClipTokenLoss(lp - h, q, a, 0.2, 0.2).loss) / (2 * h);
  };
  it("A > 0, ratio above 1+ε → clipped, zero gradient", () => {
    // r = 1.5; min(1.5·1, 1.2·1) = 1.2 → loss −1.2
    const r = ppoClipTokenLoss(Math.log(1.5), 0, 1, 0.2, 0.2);
    expect(r.ratio).toBeCloseTo(1.5, 12);
    expect(r.loss).toBeCloseTo(-1.2, 12);
    expect(r.clipped).toBe(true);
    expect(grad(Math.log(1.5), 0, 1)).toBeCloseTo(0, 6);
  });
  it("A < 0, ratio below 1−ε → clipped, zero gradient", () => {
    // r = 0.5; min(0.5·(−1), 0.8·(−1)) = −0.8 → loss 0.8
    const r = ppoClipTokenLoss(Math.log(0.5) - 1, -1, -1, 0.2, 0.2);
    expect(r.loss).toBeCloseTo(0.8, 12);
    expect(r.clipped).toBe(true);
    expect(grad(Math.log(0.5) - 1, -1, -1)).toBeCloseTo(0, 6);
  });
  it("inside the trust region → unclipped, gradient −r·A", () => {
    // r = 1.1, A = 2: loss = −2.2; d/dlp(−r·A) = −r·A = −2.2
    const r = ppoClipTokenLoss(Math.log(1.1), 0, 2, 0.2, 0.2);
    expect(r.loss).toBeCloseTo(-2.2, 12);
    expect(r.clipped).toBe(false);
    expect(grad(Math.log(1.1), 0, 2)).toBeCloseTo(-2.2, 5);
  });
  it("pessimistic side stays unclipped (A > 0, r < 1−ε; A < 0, r > 1+ε)", () => {
    // A = 1, r = 0.5: min(0.5, 0.8) = 0.5 → loss −0.5
    const lo = ppoClipTokenLoss(Math.log(0.5), 0, 1, 0.2, 0.2);
    expect(lo.loss).toBeCloseTo(-0.5, 12);
    expect(lo.clipped).toBe(false);
    // A = −1, r = 1.5: min(−1.5, −1.2) = −1.5 → loss 1.5
    const hi = ppoClipTokenLoss(Math.log(1.5), 0, -1, 0.2, 0.2);
    expect(hi.loss).toBeCloseTo(1.5, 12);
    expect(hi.clipped).toBe(false);
  });
  it("asymmetric clip (clipHigh 0.28): r = 1.25 is inside", () => {
    // 1.25 < 1.28 → loss −1.25
    const r = ppoClipTokenLoss(Math.log(1.25), 0, 1, 0.2, 0.28);
    expect(r.loss).toBeCloseTo(-1.25, 12);
    expect(r.clipped).toBe(false);
  });
});

describe("importanceSamplingTokenLoss", () => {
  it("−exp(lp − q)·A", () => {
    // r = exp(ln 2) = 2; −2·0.5 = −1
    expect(importanceSamplingTokenLoss(Math.log(2) - 3, -3, 0.5)).toBeCloseTo(-1, 12);
    // on-policy: r = 1 → −A
    expect(importanceSamplingTokenLoss(-0.7, -0.7, -0.3)).toBeCloseTo(0.3, 12);
  });
});

describe("k3Kl", () => {
  it("0 at equal logprobs", () => {
    expect(k3Kl(-1.3, -1.3)).toBe(0);
  });
  it("hand values", () => {
    // lp = −1, ref = −2: d = ref − lp = −1 → e^−1 − (−1) − 1 = e^−1 = 0.3678794
    expect(k3Kl(-1, -2)).toBeCloseTo(Math.exp(-1), 12);
    // lp = −2, ref = −1: d = 1 → e − 1 − 1 = 0.7182818
    expect(k3Kl(-2, -1)).toBeCloseTo(Math.E - 2, 12);
  });
});

describe("aggregateLoss", () => {
  const losses = [
    [1, 2, 3],
    [4, Number.NaN],
  ];
  const weights = [
    [0, 1, 1],
    [1, 0],
  ];
  it("tokens: Σ w·ℓ / Σ w over the batch (masked NaN ignored)", () => {
    // Σ w·ℓ = 2 + 3 + 4 = 9; Σ w = 3 → 3
    expect(aggregateLoss(losses, weights, "tokens")).toBe(3);
  });
  it("constant: Σ w·ℓ / (L × batch) (Dr.GRPO)", () => {
    // 9 / (4 · 2) = 1.125
    expect(aggregateLoss(losses, weights, "constant", 4)).toBe(1.125);
  });
  it("edge cases and errors", () => {
    expect(aggregateLoss([[5]], [[0]], "tokens")).toBe(0);
    expect(() => aggregateLoss(losses, weights, "constant")).toThrow("positive constantLength");
    expect(() => aggregateLoss([[1, 2]], [[1]], "tokens")).toThrow("row 0 has 2 losses but 1 weights");
    expect(() => aggregateLoss([[1]], [], "tokens")).toThrow("1 loss rows but 0 weight rows");
  });
});
