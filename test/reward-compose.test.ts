import { describe, expect, it } from "vitest";
import type { Trajectory } from "../src/core/types.ts";
import { computeReward, DEFAULT_REWARD_CONFIG, DEFAULT_REWARD_OPTIONS } from "../src/reward/compose.ts";
import { REWARD_TERMS, TERM_LIST } from "../src/reward/terms.ts";
import type { TermResult } from "../src/reward/types.ts";

/** Computes one registry term with default options and no group. */
function term(name: string, t: Trajectory): Promise<TermResult> {
  return Promise.resolve(REWARD_TERMS[name].compute(t, { options: DEFAULT_REWARD_OPTIONS }));
}

function traj(over: Partial<Trajectory> = {}): Trajectory {
  return {
    task: { id: "t1", question: "Capital of France?", answers: ["Paris", "City of Paris"], kind: "single-hop" },
    tokens: [1, 2, 3],
    lossMask: [0, 1, 1],
    logprobs: [0, -0.5, -0.2],
    promptLength: 1,
    turns: [],
    answer: "paris",
    searches: 0,
    invalidActions: 0,
    truncated: false,
    ...over,
  };
}

describe("reward terms", () => {
  it("em: match, mismatch, no answer", async () => {
    expect(await term("em", traj({ answer: "The City of Paris!" }))).toEqual({
      value: 1,
      explanation: '"The City of Paris!" matches gold "City of Paris"',
    });
    const miss = await term("em", traj({ answer: "Lyon" }));
    expect(miss.value).toBe(0);
    expect(miss.explanation).toContain("matches none of 2 gold answers");
    expect(await term("em", traj({ answer: null }))).toEqual({ value: 0, explanation: "no answer" });
  });
  it("format: 1 only for a clean answered episode, explanation lists every problem", async () => {
    expect((await term("format", traj())).value).toBe(1);
    const bad = await term("format", traj({ answer: null, truncated: true, invalidActions: 2 }));
    expect(bad).toEqual({ value: 0, explanation: "no answer; truncated by the turn budget; 2 invalid actions" });
    expect((await term("format", traj({ answer: "  " }))).explanation).toBe("empty answer");
    expect((await term("format", traj({ invalidActions: 1 }))).explanation).toBe("1 invalid action");
  });
  it("search_cost and invalid are negative counts (and +0 when none)", async () => {
    expect(await term("search_cost", traj({ searches: 3 }))).toEqual({ value: -3, explanation: "3 searches" });
    expect(Object.is((await term("search_cost", traj())).value, 0)).toBe(true);
    expect((await term("invalid", traj({ invalidActions: 2 }))).value).toBe(-2);
  });
});

describe("computeReward", () => {
  it("defaults: correct answer, 2 searches", async () => {
    // em 1·1 + format 1·0.1 + search_cost (−2)·0.05 + invalid 0·0.1 = 1 + 0.1 − 0.1 + 0 = 1.0
    const r = await computeReward(traj({ searches: 2 }));
    expect(r.total).toBeCloseTo(1.0, 12);
    expect(r.terms.map((t) => [t.name, t.value, t.weight])).toEqual([
      ["em", 1, 1],
      ["format", 1, 0.1],
      ["search_cost", -2, 0.05],
      ["invalid", 0, 0.1],
    ]);
    expect(r.terms.every((t) => t.explanation.length > 0)).toBe(true);
  });
  it("defaults: wrong answer after 1 invalid action and 3 searches", async () => {
    // em 0·1 + format 0·0.1 + search_cost (−3)·0.05 + invalid (−1)·0.1 = −0.15 − 0.1 = −0.25
    const r = await computeReward(traj({ answer: "Lyon", searches: 3, invalidActions: 1 }), DEFAULT_REWARD_CONFIG);
    expect(r.total).toBeCloseTo(-0.25, 12);
  });
  it("weight 0 terms are still computed and reported", async () => {
    // em 1·1 + search_cost (−4)·0 = 1
    const r = await computeReward(traj({ searches: 4 }), { weights: { em: 1, search_cost: 0 } });
    expect(r.total).toBe(1);
    expect(r.terms).toHaveLength(2);
    expect(r.terms[1]).toMatchObject({ name: "search_cost", value: -4, weight: 0, explanation: "4 searches" });
  });
  it("unknown term names the term and lists the allowed ones", async () => {
    await expect(computeReward(traj(), { weights: { em: 1, evidence: 0.5 } })).rejects.toThrow(
      `unknown reward term "evidence"; allowed terms: ${TERM_LIST.map((t) => t.name).join(", ")}`,
    );
    await expect(computeReward(traj(), { weights: { evidence: 1 } })).rejects.toThrow(/allowed terms: em, f1, cover_em, judge, format,/);
  });
  it("non-finite weight is rejected", async () => {
    await expect(computeReward(traj(), { weights: { em: Number.NaN } })).rejects.toThrow(/"em": weight must be a finite/);
    // A finite but huge weight makes totals whose group statistics overflow (issue 12 #4): refused by size.
    await expect(computeReward(traj(), { weights: { em: 1e308 } })).rejects.toThrow(/"em": weight must be within ±1000000, got 1e\+308/);
  });
  it("a failing term contributes 0, keeps its error, and the other terms still count", async () => {
    // judge without a configured judge throws → recorded; em 1·1 + judge 0·1 = 1
    const r = await computeReward(traj(), { weights: { em: 1, judge: 1 } });
    expect(r.total).toBe(1);
    expect(r.terms[1]).toEqual({
      name: "judge",
      value: 0,
      weight: 1,
      explanation: "not computed: judge term needs reward.options.judge (an OpenAI-compatible endpoint)",
      error: "judge term needs reward.options.judge (an OpenAI-compatible endpoint)",
    });
    expect(r.cost).toBeUndefined();
  });
  it("options reach the terms: otcC changes otc", async () => {
    // no group, task does not say → OTC-PPO cos(mπ/(2m+c)); m=1: c=1 → cos(π/3) = 0.5; c=2 → cos(π/4) = √2/2
    const one = traj({ searches: 1 });
    expect((await computeReward(one, { weights: { otc: 1 } })).total).toBeCloseTo(0.5, 12);
    expect((await computeReward(one, { weights: { otc: 1 }, options: { otcC: 2 } })).total).toBeCloseTo(Math.SQRT1_2, 12);
  });
});
