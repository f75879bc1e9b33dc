/**
 * The reward-term contract. A term is a named, documented function of a finished trajectory (and, for
 * group-relative terms, its GRPO group) that returns a raw value and a one-line explanation; the composer weights
 * and sums terms (`compose.ts`). Terms never throw on model output: odd trajectories get a value and a reason.
 */
import type { Trajectory } from "../core/types.ts";

/** What a term returns: its raw (unweighted) value, why, and an error when it could not be computed (value 0). */
export interface TermResult {
  value: number;
  explanation: string;
  /** Set when the term failed (e.g. the LLM judge after its retries); recorded on the trajectory's breakdown. */
  error?: string;
  /** Spend caused by computing this term (e.g. the judge's tokens × price), in the judge's price unit. */
  cost?: number;
}

/** The families of the reward library (issue 3): what a term measures. */
export type TermFamily = "outcome" | "format" | "necessity" | "evidence" | "cost" | "safety" | "bonus";

/** Everything besides the trajectory a term may read. */
export interface RewardContext {
  /** The trajectory's group (all episodes of the same task in this step), for group-relative terms (OTC). */
  group?: readonly Trajectory[];
  /** Term parameters (see `RewardOptions`); missing fields take `DEFAULT_REWARD_OPTIONS`. */
  options: RewardOptions;
  /** The LLM judge, present when the `judge` term is weighted and `options.judge` is configured. */
  judge?: Judge;
}

/** Parameters of the terms. All have defaults (`DEFAULT_REWARD_OPTIONS`). */
export interface RewardOptions {
  /** `format_sm`: require a `<think>…</think>` block before every action, as Search-R1's format reward does. */
  requireThink: boolean;
  /** `otc`: OTC's smoothing constant c (Wang et al. 2025, "Acting Less is Reasoning More", §3.3). */
  otcC: number;
  /** Answers that count as an abstention (normalised), not a definite answer (`unsupported_answer`). */
  abstentions: string[];
  /** LLM-judge endpoint and rubric (`judge` term); absent = the judge term is unavailable. */
  judge?: JudgeOptions;
}

/** An OpenAI-compatible judge: `POST {baseUrl}/chat/completions`. */
export interface JudgeOptions {
  /** e.g. `http://localhost:8000/v1`. */
  baseUrl: string;
  model: string;
  /** Instructions to the judge; the question, gold answers and prediction are appended. */
  rubric: string;
  /** Environment variable holding the API key (sent as `Authorization: Bearer …`); none when unset. */
  apiKeyEnv?: string;
  /** Retries after the first failed call (default 2). */
  maxRetries?: number;
  /** Limit of one call (ms, default 30 000). */
  timeoutMs?: number;
  /** Price per prompt token and per completion token (any unit, e.g. USD); cost = Σ tokens × price. */
  pricePerInputToken?: number;
  pricePerOutputToken?: number;
}

/** A judge: scores a prediction in [0, 1]. Implementations cache, retry and count cost (see `judge.ts`). */
export interface Judge {
  /**
   * @returns score in [0, 1], the judge's reason, and the cost of this call (0 on a cache hit)
   * @throws Error after the retries are spent (the composer records it on the trajectory)
   */
  score(question: string, golds: readonly string[], prediction: string): Promise<{ score: number; reason: string; cost: number }>;
}

/** A reward term of the library. */
export interface RewardTermDef {
  /** Registry name, used in configs (`reward.weights.<name>`). */
  name: string;
  family: TermFamily;
  /** What the raw value means, with its range and unit (shown by `arl lab --list` and in docs). */
  description: string;
  /** Computes the raw value. Pure except for the judge. */
  compute(traj: Trajectory, ctx: RewardContext): TermResult | Promise<TermResult>;
}

/** A term's compute function that needs only the trajectory. */
export type RewardTermFn = (traj: Trajectory) => TermResult;

/** A term's compute function that reads the context too (group, options, judge). */
export type RewardTermCtxFn = (traj: Trajectory, ctx: RewardContext) => TermResult;
