// DAPO's data-side pieces (src/algo/dapo.ts) on hand-computed examples: overlong shaping and the group filter of
// dynamic sampling. The loop around them (resampling to fill the batch): test/algo-rl.test.ts.
import { describe, expect, it } from "vitest";
import type { Trajectory, TrajectoryGroup } from "../src/core/types.ts";
import { applyOverlongShaping, informativeGroups, overlongPenalty } from "../src/algo/dapo.ts";

describe("overlongPenalty (veRL DAPORewardManager)", () => {
  it("0 up to max − buffer, then linear down to −factor at the budget", () => {
    // max 64, buffer 16 → expected 48. len 40: min(−(40−48)/16, 0) = 0; len 56: −(8/16)·1 = −0.5; len 64: −1;
    // len 72 (past the budget): −1.5; factor 0.5 at len 56: −0.25
    expect(overlongPenalty(40, 64, 16, 1)).toBe(0);
    expect(overlongPenalty(56, 64, 16, 1)).toBeCloseTo(-0.5, 12);
    expect(overlongPenalty(64, 64, 16, 1)).toBeCloseTo(-1, 12);
    expect(overlongPenalty(72, 64, 16, 1)).toBeCloseTo(-1.5, 12);
    expect(overlongPenalty(56, 64, 16, 0.5)).toBeCloseTo(-0.25, 12);
    expect(() => overlongPenalty(1, 8, 16, 1)).toThrow(/buffer 16/);
  });
});

function traj(id: string, total: number, sampled: number): Trajectory {
  const n = sampled + 1;
  return {
    task: { id, question: "q", answers: [], kind: "k" },
    tokens: new Array(n).fill(1),
    lossMask: [0, ...new Array(sampled).fill(1)],
    logprobs: [0, ...new Array(sampled).fill(-1)],
    promptLength: 1,
    turns: [],
    answer: null,
    searches: 0,
    invalidActions: 0,
    truncated: false,
    reward: { total, terms: [] },
  };
}

describe("dynamic sampling filter and overlong term", () => {
  it("keeps only groups whose rewards differ; the overlong term is added to the total and kept", () => {
    const groups: TrajectoryGroup[] = [
      { task: { id: "a", question: "", answers: [], kind: "k" }, trajectories: [traj("a", 1, 4), traj("a", 1, 4)] },
      { task: { id: "b", question: "", answers: [], kind: "k" }, trajectories: [traj("b", 1, 4), traj("b", 0, 4)] },
    ];
    expect(informativeGroups(groups).map((g) => g.task.id)).toEqual(["b"]);
    // budget 6, buffer 4 → expected 2; 4 sampled tokens: −(4 − 2)/4 · 1 = −0.5 on every member
    applyOverlongShaping(groups, 6, 4, 1);
    expect(groups[0].trajectories[0].reward!.total).toBeCloseTo(0.5, 12);
    expect(groups[1].trajectories[1].reward!.total).toBeCloseTo(-0.5, 12);
    expect(groups[1].trajectories[1].reward!.terms.map((t) => [t.name, t.value])).toEqual([["overlong", -0.5]]);
    // Equal lengths shift a group's rewards equally: the filter's verdict does not change.
    expect(informativeGroups(groups).map((g) => g.task.id)).toEqual(["b"]);
  });
});
