// Advantage estimators (src/algo/advantages.ts, src/algo/estimators.ts) on hand-computed examples; the numbers are
// worked out in each test's comments. Names and defaults against veRL: test/algo-definitions.test.ts.
import { describe, expect, it } from "vitest";
import {
  discountedReturns,
  gaeAdvantages,
  grpoAdvantages,
  maskedWhiten,
  opoAdvantages,
  passkAdvantages,
  reinforcePlusPlusAdvantages,
  reinforcePlusPlusBaselineAdvantages,
  rlooAdvantages,
} from "../src/algo/advantages.ts";
import { ADVANTAGE_ESTIMATORS, estimateAdvantages, type EstimatorTrajectory } from "../src/algo/estimators.ts";

const close = (got: readonly number[], want: readonly number[], digits = 6) => {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => expect(g).toBeCloseTo(want[i], digits));
};

describe("rloo", () => {
  it("leave-one-out baseline on [3, 1, 2]", () => {
    // n = 3, mean = 2. A_i = r_i − mean of the others: 3 − (1+2)/2 = 1.5; 1 − (3+2)/2 = −1.5; 2 − (3+1)/2 = 0.
    // verl's form r·n/(n−1) − mean·n/(n−1): 3·1.5 − 2·1.5 = 1.5, 1·1.5 − 3 = −1.5, 2·1.5 − 3 = 0.
    close(rlooAdvantages([3, 1, 2]), [1.5, -1.5, 0], 12);
  });
  it("all-equal and single-member groups give exactly 0", () => {
    expect(rlooAdvantages([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])).toEqual(Array(8).fill(0));
    expect(rlooAdvantages([5])).toEqual([0]);
    expect(() => rlooAdvantages([1, Number.NaN])).toThrow(/rewards\[1\]/);
  });
});

describe("opo", () => {
  it("length-weighted baseline", () => {
    // b = (3·1 + 1·0) / (3 + 1) = 0.75 → A = [1 − 0.75, 0 − 0.75] = [0.25, −0.75]
    close(opoAdvantages([1, 0], [3, 1]), [0.25, -0.75], 12);
    expect(() => opoAdvantages([1, 0], [0, 0])).toThrow(/0 trained tokens/);
  });
});

describe("grpo_passk", () => {
  it("only the best member gets (r_max − r_second) / (std + eps)", () => {
    // [0.2, 0.9, 0.5]: best 0.9, second 0.5 → 0.4. mean = 0.533333; Σd² = 0.111111 + 0.134444 + 0.001111 = 0.246667;
    // unbiased var = 0.123333, std = 0.351188 → 0.4 / 0.351189 = 1.138990
    const a = passkAdvantages([0.2, 0.9, 0.5], { normalizeStd: true });
    close(a, [0, 1.13899, 0], 4);
    close(passkAdvantages([0.2, 0.9, 0.5], { normalizeStd: false }), [0, 0.4, 0], 12);
    expect(() => passkAdvantages([1], { normalizeStd: true })).toThrow(/at least 2/);
  });
});

describe("maskedWhiten (verl masked_whiten)", () => {
  it("whitens over masked entries with the unbiased variance", () => {
    // picked [1, 2, 3]: mean 2, Σd² = 2, unbiased var = 2/2 = 1 → (x − 2)/sqrt(1 + 1e-8); masked-out entries → 0
    const w = maskedWhiten([[1, 2], [3, 0]], [[1, 1], [1, 0]]);
    const k = 1 / Math.sqrt(1 + 1e-8);
    close(w[0], [-k, 0], 12);
    close(w[1], [k, 0], 12);
    expect(maskedWhiten([[4, 4]], [[1, 1]])).toEqual([[0, 0]]);
    expect(maskedWhiten([[4, 9]], [[1, 0]])).toEqual([[0, 0]]);
  });
});

describe("discountedReturns", () => {
  it("carries the return over observation tokens (mask 0) instead of resetting it", () => {
    // rewards [0, 0, 0, 0, 1], mask [1, 1, 0, 1, 1], γ = 0.5, backwards over policy tokens only:
    // t4 = 1; t3 = 0 + 0.5·1 = 0.5; t2 is an observation (0, skipped); t1 = 0.5·0.5 = 0.25; t0 = 0.125.
    // (verl's reinforce_plus_plus multiplies the running return by the mask, so t1 and t0 would get 0.)
    close(discountedReturns([0, 0, 0, 0, 1], [1, 1, 0, 1, 1], 0.5), [0.125, 0.25, 0, 0.5, 1], 12);
    // A reward on an observation token goes to the previous policy token: [1 at t1 (mask 0)] → t0 = 1.
    close(discountedReturns([0, 1, 0], [1, 0, 1], 1), [1, 0, 0], 12);
  });
});

describe("reinforce_plus_plus", () => {
  it("returns whitened over every policy token of the batch", () => {
    // A: mask [1, 1], reward 1 at its last token → returns [1, 1] (γ = 1); B: mask [1, 1, 1], reward 0 → [0, 0, 0].
    // 5 tokens: mean 0.4; Σd² = 2·0.36 + 3·0.16 = 1.2; unbiased var = 1.2/4 = 0.3; std = 0.547723.
    // A tokens: 0.6/0.547723 = 1.095445; B tokens: −0.4/0.547723 = −0.730297.
    const r = reinforcePlusPlusAdvantages([[0, 1], [0, 0, 0]], [[1, 1], [1, 1, 1]], 1);
    close(r.returns[0], [1, 1], 12);
    close(r.advantages[0], [1.095445, 1.095445]);
    close(r.advantages[1], [-0.730297, -0.730297, -0.730297]);
  });
});

describe("reinforce_plus_plus_baseline", () => {
  it("group mean subtracted, then whitened over the batch's tokens", () => {
    // group 1: rewards [1, 0] → centred [0.5, −0.5] on masks [1, 1] and [1]; group 2: one member, reward 2 (mean 0,
    // as verl) on [1, 1]. Tokens [0.5, 0.5, −0.5, 2, 2]: mean 0.9; Σd² = 0.16 + 0.16 + 1.96 + 1.21 + 1.21 = 4.7;
    // unbiased var = 4.7/4 = 1.175, std = 1.0839742 → 0.5 → −0.3690125, −0.5 → −1.2915436, 2 → 1.0147840.
    const a = reinforcePlusPlusBaselineAdvantages([[1, 0], [2]], [[[1, 1], [1]], [[1, 1]]]);
    close(a[0][0], [-0.3690125, -0.3690125]);
    close(a[0][1], [-1.2915436]);
    close(a[1][0], [1.014784, 1.014784]);
  });
});

describe("gae", () => {
  it("3-token hand example matches the formula", () => {
    // r = [0, 0, 1], V = [0.5, 0.6, 0.7], γ = 0.9, λ = 0.8 (γλ = 0.72):
    // t2: δ = 1 + 0.9·0 − 0.7 = 0.3, Â = 0.3
    // t1: δ = 0 + 0.9·0.7 − 0.6 = 0.03, Â = 0.03 + 0.72·0.3 = 0.246
    // t0: δ = 0 + 0.9·0.6 − 0.5 = 0.04, Â = 0.04 + 0.72·0.246 = 0.21712
    // returns = Â + V = [0.71712, 0.846, 1.0]
    const g = gaeAdvantages([0, 0, 1], [0.5, 0.6, 0.7], [1, 1, 1], 0.9, 0.8);
    close(g.advantages, [0.21712, 0.246, 0.3], 12);
    close(g.returns, [0.71712, 0.846, 1.0], 12);
  });
  it("skips observation tokens: neither valued nor bootstrapped from", () => {
    // Same as above with an observation (mask 0, value 9) between t0 and t1: identical advantages on policy tokens.
    const g = gaeAdvantages([0, 0, 0, 1], [0.5, 9, 0.6, 0.7], [1, 0, 1, 1], 0.9, 0.8);
    close(g.advantages, [0.21712, 0, 0.246, 0.3], 12);
    // λ = 1, γ = 1: Â_t = R − V_t (Monte Carlo): [1 − 0.5, 1 − 0.6, 1 − 0.7]
    close(gaeAdvantages([0, 0, 1], [0.5, 0.6, 0.7], [1, 1, 1], 1, 1).advantages, [0.5, 0.4, 0.3], 12);
  });
});

describe("estimateAdvantages (the rl.advantage registry)", () => {
  const groups: EstimatorTrajectory[][] = [
    [
      { reward: 1, mask: [0, 1, 1] },
      { reward: 0, mask: [0, 1, 0] },
      { reward: 0.5, mask: [1, 1, 1] },
    ],
    [
      { reward: 2, mask: [1, 1] },
      { reward: 2, mask: [1, 0] },
    ],
  ];
  it("outcome estimators broadcast their scalar on masked tokens; grpo is grpoAdvantages", () => {
    const e = estimateAdvantages("grpo", groups, { gamma: 1, lam: 1 });
    const want = grpoAdvantages([1, 0, 0.5], { normalizeStd: true });
    expect(e.scalars![0]).toEqual(want);
    expect(e.tokens[0][0]).toEqual([0, want[0], want[0]]);
    expect(e.tokens[1]).toEqual([[0, 0], [0, 0]]); // all-equal group
    expect(estimateAdvantages("rloo", groups, { gamma: 1, lam: 1 }).scalars![0]).toEqual(rlooAdvantages([1, 0, 0.5]));
  });
  it("every name runs (gae with values), and gae without values is an error", () => {
    // Values for gae; one turn over the masked tokens for gigpo.
    const withValues = groups.map((g) =>
      g.map((t) => ({ ...t, values: t.mask.map(() => 0.25), turns: { spans: [t.mask.flatMap((m, i) => (m === 1 ? [i] : []))], rewards: [0], anchors: [""] } })),
    );
    for (const name of ADVANTAGE_ESTIMATORS) {
      const e = estimateAdvantages(name, withValues, { gamma: 0.9, lam: 0.95 });
      e.tokens.forEach((g, gi) => g.forEach((tok, i) => tok.forEach((a, t) => {
        expect(Number.isFinite(a)).toBe(true);
        if (withValues[gi][i].mask[t] === 0) expect(a).toBe(0);
      })));
    }
    expect(() => estimateAdvantages("gae", groups, { gamma: 1, lam: 1 })).toThrow(/no critic values/);
    expect(() => estimateAdvantages("nope" as never, groups, { gamma: 1, lam: 1 })).toThrow(/allowed: grpo, drgrpo, rloo/);
  });
  it("token rewards: a turn reward sits where it is given; default is the outcome at the last masked token", () => {
    // One trajectory alone in its batch, γ = 1: tokenRewards [0, −0.5, 0, 1] (a failed tool call after turn 1),
    // mask [1, 1, 1, 1] → returns [0.5, 0.5, 1, 1]; mean 0.75, Σd² = 4·0.0625 = 0.25, var = 0.25/3, std = 0.288675
    // → [−0.866025, −0.866025, 0.866025, 0.866025]
    const e = estimateAdvantages("reinforce_plus_plus", [[{ reward: 0.5, mask: [1, 1, 1, 1], tokenRewards: [0, -0.5, 0, 1] }]], { gamma: 1, lam: 1 });
    close(e.returns![0][0], [0.5, 0.5, 1, 1], 12);
    close(e.tokens[0][0], [-0.866025, -0.866025, 0.866025, 0.866025]);
  });
});
