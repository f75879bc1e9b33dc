/**
 * The environment API: `reset(task) → observation`, `step(actionText) → StepResult`.
 * One Env instance runs one episode at a time; the rollout engine makes one per concurrent episode through an
 * `EnvFactory`. Source: tinker-cookbook `tinker_cookbook/rl/types.py` (Env.initial_observation / Env.step).
 */
import type { StepResult, Task } from "../core/types.ts";

export interface Env {
  /**
   * Starts an episode. Returns the prompt text the policy sees first (the question in the env's protocol).
   * @throws Error when the task is malformed (no question)
   */
  reset(task: Task): Promise<string>;
  /**
   * Applies the policy's turn text. Never throws on bad model output: malformed text is an invalid action with a
   * corrective observation; a failing tool becomes an error observation.
   */
  step(actionText: string): Promise<StepResult>;
}

/** Makes a fresh environment for each episode. */
export type EnvFactory = () => Env;
