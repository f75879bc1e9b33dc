/**
 * An episode as both sides of the rollout see it: the context a turn is written from (`TurnContext`, what a turn
 * generator and a recipe's scripted persona read), text forced into a turn (`ForcedText`, baselines), and the token
 * budgets an episode runs under (`RolloutLimits`). The rollout engine (src/rollout) runs episodes with them; a recipe
 * (`./recipe.ts`) writes turns and baselines against them without depending on the engine.
 */
import type { Task, Turn } from "../core/types.ts";

/** Everything a turn generator may look at. */
export interface TurnContext {
  task: Task;
  /** 0-based index of the turn being generated. */
  turnIndex: number;
  /** Completed turns so far (with their observations and passages). */
  history: readonly Turn[];
  /** Seed for this turn's sampling randomness. */
  seed: number;
  /** Tokens the turn may still add before the context window is full (tokens). */
  budget: number;
}

/**
 * Text forced into a turn: `complete: true` replaces the whole turn (nothing sampled); otherwise the text is a
 * prefix and the policy continues after it. Forced tokens get loss mask 0.
 */
export interface ForcedText {
  text: string;
  complete: boolean;
}

/** Token budgets of an episode. */
export interface RolloutLimits {
  /** The model's context window (tokens); an episode stops when it is full. */
  contextLength: number;
  /**
   * Cap on the tokens of one observation (tokens); longer observations keep their head and their whole closing text
   * (`StepResult.observationClose`; see `capObservation` in src/rollout/rollout.ts). Where the closing text alone does not fit (the cap, or the
   * room left in the context, is smaller), the episode ends truncated with no observation appended.
   */
  maxObservationTokens: number;
}
