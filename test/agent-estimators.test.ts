/**
 * `agentBatch`'s advantage estimators for `arl train --agent` (veRL `algorithm.adv_estimator` names; the estimators
 * themselves are tested against veRL's definitions in test/algo-estimators.test.ts): hand-computed groups of rollout
 * records, each number worked out in the comment beside it.
 */
import { describe, expect, it } from "vitest";
import type { RolloutRecord } from "../src/gateway/types.ts";
import { agentBatch } from "../src/external/rollouts.ts";

/** A rewarded rollout with one segment of `trained` sampled tokens (after a 2-token prompt). */
const rollout = (reward: number, trained: number): RolloutRecord => ({
  id: `r${reward}-${trained}`, meta: {}, status: "rewarded", reward: { value: reward }, mismatches: 0,
  calls: [],
  segments: [{ tokens: Array.from({ length: 2 + trained }, (_, i) => i + 1), lossMask: [0, 0, ...Array.from({ length: trained }, () => 1)], logprobs: Array.from({ length: 2 + trained }, () => 0), promptLength: 2, calls: [0] }],
});
const dropped: RolloutRecord = { id: "d", meta: {}, status: "dropped", dropReason: "agent exited with code 1", mismatches: 0, calls: [], segments: [] };

describe("agentBatch estimators", () => {
  const group = [rollout(1, 2), rollout(0, 6), rollout(0, 2), dropped];

  it("rloo: r_i − mean of the others", () => {
    // kept rewards [1, 0, 0]: 1 − 0 = 1; 0 − (1+0)/2 = −0.5 (twice). The dropped rollout takes no part.
    const b = agentBatch([group], { normalizeStd: true, estimator: "rloo" });
    expect(b.advantages).toEqual([1, -0.5, -0.5]);
    expect(b.dropped).toBe(1);
    expect(b.datums[0].advantages!.filter((a) => a !== 0)).toEqual([1, 1]); // on the rollout's 2 trained tokens
  });

  it("opo: r_i − the length-weighted mean reward", () => {
    // lengths [2, 6, 2] trained tokens: b = (2·1 + 6·0 + 2·0)/10 = 0.2 → [0.8, −0.2, −0.2].
    const b = agentBatch([group], { normalizeStd: true, estimator: "opo" });
    b.advantages.forEach((a, i) => expect(a).toBeCloseTo([0.8, -0.2, -0.2][i], 12));
  });

  it("grpo_passk: only the best is reinforced, by (r_max − r_second) / (std + 1e-6)", () => {
    // [1, 0, 0]: best 1, second 0 → 1 / std; unbiased std = sqrt(((2/3)² + 2·(1/3)²)/2) = sqrt(1/3) = 0.57735…
    const b = agentBatch([group], { normalizeStd: true, estimator: "grpo_passk" });
    expect(b.advantages[0]).toBeCloseTo(1 / (Math.sqrt(1 / 3) + 1e-6), 9);
    expect(b.advantages.slice(1)).toEqual([0, 0]);
  });

  it("reinforce_plus_plus_baseline: group-centred, then whitened over every trained token of the batch", () => {
    // centred [2/3, −1/3, −1/3] on 2, 6, 2 tokens (10 tokens): token mean = (2·2/3 − 6/3 − 2/3)/10 = −2/15;
    // unbiased var = (2·(2/3+2/15)² + 8·(−1/3+2/15)²)/9 = (2·0.64 + 8·0.04)/9 = 1.6/9;
    // A = (c − mean)/sqrt(var + 1e-8): (0.8, −0.2, −0.2)/0.421637….
    const b = agentBatch([group], { normalizeStd: true, estimator: "reinforce_plus_plus_baseline" });
    const sd = Math.sqrt(1.6 / 9 + 1e-8);
    b.advantages.forEach((a, i) => expect(a).toBeCloseTo([0.8, -0.2, -0.2][i] / sd, 9));
  });

  it("grpo and drgrpo as before: (r − mean)/(std + eps) and r − mean", () => {
    const g = agentBatch([group], { normalizeStd: true });
    const d = agentBatch([group], { normalizeStd: false });
    d.advantages.forEach((a, i) => expect(a).toBeCloseTo([2 / 3, -1 / 3, -1 / 3][i], 12));
    g.advantages.forEach((a, i) => expect(a).toBeCloseTo([2 / 3, -1 / 3, -1 / 3][i] / (Math.sqrt(1 / 3) + 1e-6), 6));
  });
});
