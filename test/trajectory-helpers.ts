/**
 * Hand-built trajectories for the reward tests: what the reward terms read (task, turns, answer, counters) without
 * the token arrays a rollout fills in.
 */
import type { Task, Trajectory } from "../src/core/types.ts";

/**
 * A trajectory of `task` with no tokens, no turns, no answer and zeroed counters, then `fields` over it. The keys
 * are those of the rollout's and the reward server's literals, in their order, so every such trajectory has one
 * object shape.
 */
export function handTrajectory(task: Task, fields: Partial<Trajectory> = {}): Trajectory {
  return {
    task,
    tokens: [],
    lossMask: [],
    logprobs: [],
    promptLength: 0,
    turns: [],
    answer: null,
    searches: 0,
    invalidActions: 0,
    truncated: false,
    ...fields,
  };
}
