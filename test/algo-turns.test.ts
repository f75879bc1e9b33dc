// Turn-level credit (src/algo/turns.ts): turn spans, per-turn rewards, token rewards, and GiGPO (Feng et al. 2025,
// arXiv 2505.10978) on hand-computed examples.
import { describe, expect, it } from "vitest";
import type { Trajectory, Turn } from "../src/core/types.ts";
import { estimateAdvantages } from "../src/algo/estimators.ts";
import { gigpoAdvantages, perTurnAdvantage, tokenRewardsFromTurns, turnAnchors, turnRewards, turnSpans } from "../src/algo/turns.ts";

const turn = (over: Partial<Turn>): Turn => ({
  actionText: "",
  action: { type: "answer", answer: "x" },
  observation: "",
  sampledTokens: 0,
  observationTokens: 0,
  stopReason: "stop",
  ...over,
});

/** prompt [10, 11] · turn 0 [1, 2] · observation [20, 21] · turn 1 [3, 4, 5]; seq = 9, datum length 8. */
function traj(turns: Turn[]): Trajectory {
  return {
    task: { id: "t", question: "q", answers: ["Paris"], kind: "single-hop" },
    tokens: [10, 11, 1, 2, 20, 21, 3, 4, 5],
    lossMask: [0, 0, 1, 1, 0, 0, 1, 1, 1],
    logprobs: [0, 0, -1, -1, 0, 0, -1, -1, -1],
    promptLength: 2,
    turns,
    answer: "x",
    searches: 1,
    invalidActions: 0,
    truncated: false,
    sampled: [
      { start: 2, tokens: [1, 2] },
      { start: 6, tokens: [3, 4, 5] },
    ],
  };
}

describe("turn spans, rewards, anchors", () => {
  const t = traj([
    turn({ action: { type: "tool_call", calls: [{ name: "search", arguments: { query: "capital" } }] }, observation: "<information>Paris is the capital</information>", passages: [{ id: "p1", title: "France", text: "Paris is the capital of France." }], toolError: "timeout" }),
    turn({}),
  ]);
  it("each turn's policy tokens as datum indices (position − 1)", () => {
    // turn 0 at positions 2, 3 → datum 1, 2; turn 1 at 6, 7, 8 → 5, 6, 7
    expect(turnSpans(t)).toEqual([[1, 2], [5, 6, 7]]);
    const { sampled: _s, ...bare } = t;
    expect(turnSpans(bare as Trajectory)).toEqual([[1, 2], [5, 6, 7]]); // runs of the mask without `sampled`
  });
  it("step rewards: failed tool call, information gain on the first turn that retrieved the gold", () => {
    // turn 0: toolError −0.1 + evidence (Paris retrieved) 0.3 = 0.2; turn 1: 0
    const r = turnRewards(t, { toolError: -0.1, invalidAction: -0.5, evidence: 0.3 });
    expect(r[0]).toBeCloseTo(0.2, 12);
    expect(r[1]).toBe(0);
    expect(turnRewards(traj([turn({ action: { type: "invalid", reason: "no tag" } }), turn({})]), { toolError: 0, invalidAction: -0.5, evidence: 0 })).toEqual([-0.5, 0]);
  });
  it("token rewards: turn rewards at their last token, the outcome at the last policy token", () => {
    // spans [[1, 2], [5, 6, 7]], turn rewards [0.2, 0], outcome 1 → index 2 gets 0.2, index 7 gets 1
    expect(tokenRewardsFromTurns([[1, 2], [5, 6, 7]], [0.2, 0], 1, 8)).toEqual([0, 0, 0.2, 0, 0, 0, 0, 1]);
    // A turn with no tokens passes its reward to the previous turn's last token.
    expect(tokenRewardsFromTurns([[1, 2], []], [0, -0.5], 1, 4)).toEqual([0, 0, 0.5, 0]);
  });
  it("anchors: the prompt for the first turn, then the previous observation", () => {
    expect(turnAnchors(t)).toEqual(["", "obs:<information>Paris is the capital</information>"]);
  });
});

describe("gigpoAdvantages (GiGPO Eq. 3-8)", () => {
  // A: anchors ["", X], step rewards [0, 0], outcome 1 → r = [0, 1]
  // B: anchors ["", X, Y], step rewards [−0.1, 0, 0], outcome 0 → r = [−0.1, 0, 0]
  const group = [
    { episodeReward: 1, stepRewards: [0, 1], anchors: ["", "X"] },
    { episodeReward: 0, stepRewards: [-0.1, 0, 0], anchors: ["", "X", "Y"] },
  ];
  it("mean_norm (the authors' default)", () => {
    // A^E: R = [1, 0], mean 0.5 → [0.5, −0.5]. γ = 0.5 returns: A [0 + 0.5·1, 1] = [0.5, 1]; B [−0.1, 0, 0].
    // step groups: "" {A0 0.5, B0 −0.1} mean 0.2 → +0.3 / −0.3; X {A1 1, B1 0} mean 0.5 → +0.5 / −0.5; Y {B2} → 0.
    // A = A^E + 1·A^S: A [0.8, 1.0]; B [−0.8, −1.0, −0.5]
    const a = gigpoAdvantages(group, { gamma: 0.5, stepWeight: 1, normStd: false });
    [0.8, 1.0].forEach((v, k) => expect(a[0][k]).toBeCloseTo(v, 12));
    [-0.8, -1.0, -0.5].forEach((v, k) => expect(a[1][k]).toBeCloseTo(v, 12));
  });
  it("mean_std_norm and ω", () => {
    // std of [1, 0] (unbiased) = 0.7071068 → A^E = ±0.5/0.7071078 = ±0.7071058; step "": [0.5, −0.1], std 0.4242641
    // → ±0.3/0.4242651 = ±0.7071051; X: ±0.7071058. ω = 0.5: A [0.7071058 + 0.3535526, 0.7071058 + 0.3535529].
    const a = gigpoAdvantages(group, { gamma: 0.5, stepWeight: 0.5, normStd: true });
    expect(a[0][0]).toBeCloseTo(0.7071058 + 0.5 * 0.7071051, 6);
    expect(a[0][1]).toBeCloseTo(0.7071058 + 0.5 * 0.7071058, 6);
    expect(a[1][2]).toBeCloseTo(-0.7071058, 6); // singleton step group: episode part only
  });
  it("through the registry: each turn's tokens carry that turn's advantage", () => {
    const e = estimateAdvantages(
      "gigpo",
      [[
        { reward: 1, mask: [0, 1, 1, 0, 1], turns: { spans: [[1, 2], [4]], rewards: [0, 0], anchors: ["", "X"] } },
        { reward: 0, mask: [0, 1, 0, 1, 1], turns: { spans: [[1], [3, 4]], rewards: [-0.1, 0], anchors: ["", "X"] } },
      ]],
      { gamma: 0.5, lam: 1 },
    );
    // returns A [0.5, 1], B [−0.1, 0]; "" mean 0.2 → ±0.3; X mean 0.5 → ±0.5; A^E ±0.5 → A [0.8, 1.0], B [−0.8, −1.0]
    expect(e.tokens[0][0].map((x) => Math.round(x * 1e9) / 1e9)).toEqual([0, 0.8, 0.8, 0, 1]);
    expect(e.tokens[0][1].map((x) => Math.round(x * 1e9) / 1e9)).toEqual([0, -0.8, 0, -1, -1]);
    expect(perTurnAdvantage(e.tokens[0][1], [[1], [3, 4]]).map((x) => Math.round(x * 1e9) / 1e9)).toEqual([-0.8, -1]);
    expect(() => estimateAdvantages("gigpo", [[{ reward: 1, mask: [1] }]], { gamma: 1, lam: 1 })).toThrow(/no turns/);
  });
});
