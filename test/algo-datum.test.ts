import { describe, expect, it } from "vitest";
import type { Trajectory } from "../src/core/types.ts";
import { assertTrajectory, trajectoryToDatum } from "../src/algo/datum.ts";

// Layout: positions 0-2 prompt, 3-4 sampled (turn 1), 5-6 observation, 7 sampled (turn 2).
function traj(over: Partial<Trajectory> = {}): Trajectory {
  return {
    task: { id: "task-42", question: "q", answers: ["a"], kind: "single-hop" },
    tokens: [10, 11, 12, 13, 14, 15, 16, 17],
    lossMask: [0, 0, 0, 1, 1, 0, 0, 1],
    logprobs: [0, 0, 0, -0.1, -0.2, 0, 0, -0.3],
    promptLength: 3,
    turns: [],
    answer: "a",
    searches: 1,
    invalidActions: 0,
    truncated: false,
    ...over,
  };
}

describe("trajectoryToDatum", () => {
  it("shifts by one; prompt and observation targets get weight 0", () => {
    const d = trajectoryToDatum(traj(), 0.7);
    expect(d.modelInput).toEqual([10, 11, 12, 13, 14, 15, 16]);
    expect(d.targetTokens).toEqual([11, 12, 13, 14, 15, 16, 17]);
    // target i = token i+1: targets 11,12 (prompt) → 0; 13,14 sampled → 1; 15,16 observation → 0; 17 sampled → 1
    expect(d.weights).toEqual([0, 0, 1, 1, 0, 0, 1]);
    expect(d.logprobs).toEqual([0, 0, -0.1, -0.2, 0, 0, -0.3]);
    expect(d.advantages).toEqual([0, 0, 0.7, 0.7, 0, 0, 0.7]);
    expect(d.refLogprobs).toBeUndefined();
  });
  it("with trainObservations, weights every target after the prompt (Search-R1's unmasked ablation)", () => {
    const d = trajectoryToDatum(traj(), 0.5, { trainObservations: true });
    // targets 11,12 are prompt tokens (positions 1, 2 < promptLength 3) → 0; 13..17 → 1, observations included
    expect(d.weights).toEqual([0, 0, 1, 1, 1, 1, 1]);
    expect(d.advantages).toEqual([0, 0, 0.5, 0.5, 0.5, 0.5, 0.5]);
    // observation logprobs are left for the caller to fill with the behaviour policy's
    expect(d.logprobs).toEqual([0, 0, -0.1, -0.2, 0, 0, -0.3]);
  });
  it("carries target-aligned refLogprobs and checks their length", () => {
    const ref = [0, 0, -0.15, -0.25, 0, 0, -0.35];
    expect(trajectoryToDatum(traj(), 1, { refLogprobs: ref }).refLogprobs).toEqual(ref);
    expect(() => trajectoryToDatum(traj(), 1, { refLogprobs: [0] })).toThrow("task-42: refLogprobs has 1 entries, expected 7");
  });
  it("rejects too-short and invalid trajectories", () => {
    expect(() => trajectoryToDatum(traj({ tokens: [1], lossMask: [0], logprobs: [0], promptLength: 1 }), 1)).toThrow(
      "task-42: needs at least 2 tokens",
    );
    expect(() => trajectoryToDatum(traj({ lossMask: [1, 0, 0, 1, 1, 0, 0, 1] }), 1)).toThrow("task-42");
  });
});

describe("assertTrajectory", () => {
  it("accepts a valid trajectory", () => {
    expect(() => assertTrajectory(traj())).not.toThrow();
  });
  const cases: [string, Partial<Trajectory>, string][] = [
    ["length mismatch", { logprobs: [0, 0, 0] }, "trajectory task-42: length mismatch: tokens 8, lossMask 8, logprobs 3"],
    ["mask not 0/1", { lossMask: [0, 0, 0, 1, 2, 0, 0, 1] }, "trajectory task-42: lossMask[4] = 2"],
    ["mask 1 on the prompt", { lossMask: [0, 0, 1, 1, 1, 0, 0, 1], logprobs: [0, 0, -1, -0.1, -0.2, 0, 0, -0.3] }, "trajectory task-42: lossMask[2] = 1 inside the prompt (promptLength 3)"],
    ["logprob where mask 0", { logprobs: [0, 0, 0, -0.1, -0.2, -0.5, 0, -0.3] }, "trajectory task-42: logprobs[5] = -0.5 where lossMask is 0"],
    ["non-finite logprob", { logprobs: [0, 0, 0, -0.1, Number.NEGATIVE_INFINITY, 0, 0, -0.3] }, "trajectory task-42: logprobs[4] = -Infinity is not finite"],
    ["promptLength out of range", { promptLength: 9 }, "trajectory task-42: promptLength 9 outside [0, 8]"],
  ];
  it.each(cases)("%s", (_name, over, message) => {
    expect(() => assertTrajectory(traj(over))).toThrow(message);
  });
});
