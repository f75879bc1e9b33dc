/**
 * Evaluation on a held-out split, and the Search-R1 paper's inference baselines run with our policy:
 * Direct (answer without search: the first turn is forced to start with `<answer>`) and RAG (one search with the
 * question as the query, then an answer). Source: Search-R1 §4 (baselines "Direct Inference" and "RAG").
 */
import type { Task, Trajectory } from "../core/types.ts";
import type { EnvFactory } from "../env/types.ts";
import { PolicyAgent, protocolStops } from "../rollout/agent.ts";
import type { ForcedText, TurnContext, RolloutLimits } from "../env/episode.ts";
import { episodeSeed, rolloutGroups } from "../rollout/rollout.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { SamplingClient } from "../core/sampling.ts";
import { answeredWithoutSearch, mean, trajectoryEm } from "./metrics.ts";

/** How a policy is driven at evaluation. */
export type EvalMode = "agent" | "direct" | "rag";

/** EM, searches per question and guess rate (answered without search) over one slice of questions. */
export interface EvalSlice {
  n: number;
  em: number;
  searches: number;
  guessRate: number;
}

/** Evaluation result: all questions, and split by known vs unknown facts (when the tasks say). */
export interface EvalResult {
  all: EvalSlice;
  known: EvalSlice;
  unknown: EvalSlice;
  trajectories: Trajectory[];
}

/** One row of `arl eval`'s QA table: a policy and its result. */
export interface EvalRow {
  policy: string;
  result: Omit<EvalResult, "trajectories">;
}

/** The forced text of each mode, per turn (`undefined` = the policy samples freely). */
export function forcedTextFor(mode: EvalMode): ((ctx: TurnContext) => ForcedText | undefined) | undefined {
  if (mode === "direct") return (ctx) => (ctx.turnIndex === 0 ? { text: "<answer>", complete: false } : undefined);
  if (mode === "rag") {
    return (ctx) => {
      if (ctx.turnIndex === 0) return { text: `<search> ${ctx.task.question} </search>`, complete: true };
      if (ctx.turnIndex === 1) return { text: "<answer>", complete: false };
      return undefined;
    };
  }
  return undefined;
}

function slice(trajs: readonly Trajectory[]): EvalSlice {
  return {
    n: trajs.length,
    em: mean(trajs.map(trajectoryEm)),
    searches: mean(trajs.map((t) => t.searches)),
    guessRate: mean(trajs.map((t) => (answeredWithoutSearch(t) ? 1 : 0))),
  };
}

/** Options of `evaluate`. */
export interface EvalOptions {
  mode: EvalMode;
  temperature: number;
  maxTokensPerTurn: number;
  seed: number;
  onEpisode?: (t: Trajectory) => void;
  /** Stop conditions of a turn (the env protocol's); default Search-R1's `</search>`, `</answer>`. */
  stops?: { stop: number[]; stopStrings: string[] };
}

/** What `evaluate` runs: a sampler and its tokenizer, in an env with the run's token budgets. */
export interface EvalSetup {
  sampler: SamplingClient;
  tokenizer: Tokenizer;
  makeEnv: EnvFactory;
  limits: RolloutLimits;
}

/**
 * Runs one episode per task with the given sampler and summarises it.
 * @throws only what the rollout throws (prompt longer than the context)
 */
export async function evaluate(tasks: readonly Task[], setup: EvalSetup, options: EvalOptions): Promise<EvalResult> {
  const { sampler, tokenizer, makeEnv, limits } = setup;
  const agent = new PolicyAgent(sampler, tokenizer, {
    temperature: options.temperature,
    maxTokensPerTurn: options.maxTokensPerTurn,
    ...(options.stops ?? protocolStops(tokenizer)),
    forced: forcedTextFor(options.mode),
  });
  const groups = await rolloutGroups(tasks, { makeEnv, agent, tokenizer, limits }, {
    groupSize: 1,
    seed: options.seed,
    onEpisode: options.onEpisode,
  });
  return summarizeEval(groups.map((g) => g.trajectories[0]));
}

/**
 * The evaluation summary of finished episodes: EM, searches per question and guess rate over all of them and split
 * by known vs unknown facts (`task.known`; tasks that do not say count in `all` only).
 */
export function summarizeEval(trajectories: Trajectory[]): EvalResult {
  return {
    all: slice(trajectories),
    known: slice(trajectories.filter((t) => t.task.known === true)),
    unknown: slice(trajectories.filter((t) => t.task.known === false)),
    trajectories,
  };
}

/**
 * Runs one whole episode of `task` with the given seed and returns its trajectory — any policy that is not a
 * `TurnGenerator` over our token books (e.g. the prompt-driven chat agents of src/baselines/).
 */
export type EpisodeRunner = (task: Task, seed: number) => Promise<Trajectory>;

/** Options of `evaluateEpisodes`. */
export interface EpisodeEvalOptions {
  /** Base seed; episode `t` gets `episodeSeed(seed, t, 0)`, as `evaluate`'s rollout does. */
  seed: number;
  /** Most episodes in flight at once (default 4). */
  concurrency?: number;
  onEpisode?: (t: Trajectory) => void;
}

/**
 * Evaluates an episode runner on `tasks` (one episode each, `concurrency` at a time) with the same metrics and
 * slices as `evaluate`.
 * @returns trajectories in task order, whatever the completion order
 * @throws what the runner throws (the first failure)
 */
export async function evaluateEpisodes(tasks: readonly Task[], run: EpisodeRunner, options: EpisodeEvalOptions): Promise<EvalResult> {
  const results: Trajectory[] = new Array(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const t = next++;
      results[t] = await run(tasks[t], episodeSeed(options.seed, t, 0));
      options.onEpisode?.(results[t]);
    }
  };
  const n = Math.min(Math.max(1, options.concurrency ?? 4), tasks.length);
  await Promise.all(Array.from({ length: n }, worker));
  return summarizeEval(results);
}
