import { describe, expect, it } from "vitest";
import type { Trajectory } from "../src/core/types.ts";
import { computeReward, DEFAULT_REWARD_CONFIG } from "../src/reward/compose.ts";
import { REWARD_TERMS } from "../src/reward/terms.ts";

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
  it("em: match, mismatch, no answer", () => {
    expect(REWARD_TERMS.em(traj({ answer: "The City of Paris!" }))).toEqual({
      value: 1,
      explanation: '"The City of Paris!" matches gold "City of Paris"',
    });
    const miss = REWARD_TERMS.em(traj({ answer: "Lyon" }));
    expect(miss.value).toBe(0);
    expect(miss.explanation).toContain("matches none of 2 gold answers");
    expect(REWARD_TERMS.em(traj({ answer: null }))).toEqual({ value: 0, explanation: "no answer" });
  });
  it("format: 1 only for a clean answered episode, explanation lists every problem", () => {
    expect(REWARD_TERMS.format(traj()).value).toBe(1);
    const bad = REWARD_TERMS.format(traj({ answer: null, truncated: true, invalidActions: 2 }));
    expect(bad).toEqual({ value: 0, explanation: "no answer; truncated by the turn budget; 2 invalid actions" });
    expect(REWARD_TERMS.format(traj({ answer: "  " })).explanation).toBe("empty answer");
    expect(REWARD_TERMS.format(traj({ invalidActions: 1 })).explanation).toBe("1 invalid action");
  });
  it("search_cost and invalid are negative counts (and +0 when none)", () => {
    expect(REWARD_TERMS.search_cost(traj({ searches: 3 }))).toEqual({ value: -3, explanation: "3 searches" });
    expect(Object.is(REWARD_TERMS.search_cost(traj()).value, 0)).toBe(true);
    expect(REWARD_TERMS.invalid(traj({ invalidActions: 2 })).value).toBe(-2);
  });
});

describe("computeReward", () => {
  it("defaults: correct answer, 2 searches", () => {
    // em 1·1 + format 1·0.1 + search_cost (−2)·0.05 + invalid 0·0.1 = 1 + 0.1 − 0.1 + 0 = 1.0
    const r = computeReward(traj({ searches: 2 }));
    expect(r.total).toBeCloseTo(1.0, 12);
    expect(r.terms.map((t) => [t.name, t.value, t.weight])).toEqual([
      ["em", 1, 1],
      ["format", 1, 0.1],
      ["search_cost", -2, 0.05],
      ["invalid", 0, 0.1],
    ]);
    expect(r.terms.every((t) => t.explanation.length > 0)).toBe(true);
  });
  it("defaults: wrong answer after 1 invalid action and 3 searches", () => {
    // em 0·1 + format 0·0.1 + search_cost (−3)·0.05 + invalid (−1)·0.1 = −0.15 − 0.1 = −0.25
    const r = computeReward(traj({ answer: "Lyon", searches: 3, invalidActions: 1 }), DEFAULT_REWARD_CONFIG);
    expect(r.total).toBeCloseTo(-0.25, 12);
  });
  it("weight 0 terms are still computed and reported", () => {
    // em 1·1 + search_cost (−4)·0 = 1
    const r = computeReward(traj({ searches: 4 }), { weights: { em: 1, search_cost: 0 } });
    expect(r.total).toBe(1);
    expect(r.terms).toHaveLength(2);
    expect(r.terms[1]).toMatchObject({ name: "search_cost", value: -4, weight: 0, explanation: "4 searches" });
  });
  it("unknown term names the term and lists the allowed ones", () => {
    expect(() => computeReward(traj(), { weights: { em: 1, evidence: 0.5 } })).toThrow(
      'unknown reward term "evidence"; allowed terms: em, format, search_cost, invalid',
    );
  });
  it("non-finite weight is rejected", () => {
    expect(() => computeReward(traj(), { weights: { em: Number.NaN } })).toThrow(/"em": weight must be a finite/);
  });
});
