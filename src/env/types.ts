/**
 * The environment API: `reset(task) → observation`, `step(actionText) → StepResult`.
 * One Env instance runs one episode at a time; the rollout engine makes one per concurrent episode through an
 * `EnvFactory`. Source: tinker-cookbook `tinker_cookbook/rl/types.py` (Env.initial_observation / Env.step).
 */
import type { StepResult, Task } from "../core/types.ts";

/**
 * What the rollout tells an env about the episode it starts (all optional; an env may ignore it).
 * - `seed`: the episode's seed (`episodeSeed`), stable under any scheduling — with the task id, a stable name for
 *   the episode's tool calls (fault injection keys on it);
 * - `member`: the episode's index within its group;
 * - `deadlineAt`: `performance.now()` time (ms) by which the episode must end: tool calls must not run past it.
 */
export interface EpisodeInfo {
  seed?: number;
  member?: number;
  deadlineAt?: number;
}

export interface Env {
  /**
   * True when `reset` returns a whole chat rendering (a chat protocol's `Protocol.prompt`: system, user and the
   * assistant header), so the rollout encodes it as it is (`Tokenizer.promptTokens(text, {rendered: true})`) rather
   * than wrapping it in a chat template again. Absent/false: the text is the first user message (Search-R1).
   */
  readonly renderedPrompt?: boolean;
  /**
   * Starts an episode. Returns the prompt text the policy sees first (the question in the env's protocol).
   * @throws Error when the task is malformed (no question)
   */
  reset(task: Task, episode?: EpisodeInfo): Promise<string>;
  /**
   * Applies the policy's turn text. Never throws on bad model output: malformed text is an invalid action with a
   * corrective observation; a failing tool (throws, hangs, returns garbage or too much) becomes an error observation
   * with `info.toolError` set, and the episode goes on.
   */
  step(actionText: string): Promise<StepResult>;
}

/** Makes a fresh environment for each episode. */
export type EnvFactory = () => Env;
