/**
 * The rollout engine: runs whole episodes (policy turn ↔ env step) concurrently and keeps the token books — every
 * token of prompt, turns and observations in one sequence, with a loss mask that is 1 only on tokens the policy
 * sampled. Observations are tokenised once and appended as ids (never re-tokenised), so the tokens trained on are
 * exactly the tokens sampled. Source: Search-R1 `search_r1/llm_agent/generation.py` (run_llm_loop: generate until
 * `</search>` or `</answer>`, execute, append `<information>`, mask it from the loss).
 */
import type { Task, Trajectory, TrajectoryGroup, Turn } from "../core/types.ts";
import type { EnvFactory } from "../env/types.ts";
import type { Tokenizer } from "../policy/tokenizer.ts";
import type { TurnGenerator } from "./agent.ts";

/** Token budgets of an episode. */
export interface RolloutLimits {
  /** The model's context window (tokens); an episode stops when it is full. */
  contextLength: number;
  /** Cap on the tokens of one observation (tokens); longer observations keep their head and closing tag. */
  maxObservationTokens: number;
}

/** Seeds are derived, not drawn, so a trajectory depends only on (seed, task, member) — not on scheduling. */
export function episodeSeed(seed: number, taskIndex: number, member: number): number {
  let h = (seed ^ 0x5bd1e995) >>> 0;
  for (const v of [taskIndex, member]) {
    h = Math.imul(h ^ v, 0x9e3779b1) >>> 0;
    h ^= h >>> 15;
  }
  return h & 0x7fffffff;
}

/** Cuts an observation to `cap` tokens, keeping its last 3 (the closing `</information>` and newlines). */
export function capObservation(tokens: number[], cap: number): number[] {
  if (tokens.length <= cap) return tokens;
  const tail = Math.min(3, cap);
  return tokens.slice(0, cap - tail).concat(tokens.slice(tokens.length - tail));
}

/**
 * Runs one episode to its end (answer, turn budget, or full context).
 * @returns the trajectory, its invariants satisfied (see `Trajectory`)
 * @throws only when the generator or tokenizer throws (env failures become observations inside the env)
 */
export async function runEpisode(
  task: Task,
  makeEnv: EnvFactory,
  agent: TurnGenerator,
  tokenizer: Tokenizer,
  limits: RolloutLimits,
  seed: number,
): Promise<Trajectory> {
  const env = makeEnv();
  const promptText = await env.reset(task);
  const tokens = tokenizer.promptTokens(promptText);
  if (tokens.length >= limits.contextLength) {
    throw new Error(
      `rollout: prompt of task ${task.id} is ${tokens.length} tokens, not below the context length ${limits.contextLength}`,
    );
  }
  const lossMask = tokens.map(() => 0);
  const logprobs = tokens.map(() => 0);
  const promptLength = tokens.length;
  const turns: Turn[] = [];
  let answer: string | null = null;
  let searches = 0;
  let invalidActions = 0;
  let truncated = false;

  for (let turnIndex = 0; ; turnIndex++) {
    const budget = limits.contextLength - tokens.length;
    const gen = await agent.generate(tokens.slice(), { task, turnIndex, history: turns, seed: seed + turnIndex, budget });
    tokens.push(...gen.tokens);
    lossMask.push(...gen.lossMask);
    logprobs.push(...gen.logprobs);
    const actionText = tokenizer.decode(gen.tokens);
    const result = await env.step(actionText);
    const action = result.info.action;
    if (action.type === "search") searches++;
    if (action.type === "invalid") invalidActions++;
    if (action.type === "answer") answer = action.answer;

    let obsTokens: number[] = [];
    const room = limits.contextLength - tokens.length;
    if (!result.done && room > 0) {
      obsTokens = capObservation(tokenizer.encode(result.observation), Math.min(limits.maxObservationTokens, room));
      tokens.push(...obsTokens);
      lossMask.push(...obsTokens.map(() => 0));
      logprobs.push(...obsTokens.map(() => 0));
    }
    turns.push({
      actionText,
      action,
      observation: result.done ? "" : tokenizer.decode(obsTokens),
      passages: result.info.passages,
      sampledTokens: gen.lossMask.reduce((a, b) => a + b, 0),
      observationTokens: obsTokens.length,
      stopReason: gen.stopReason,
      ...(result.info.tool === undefined ? {} : { tool: result.info.tool, toolLatencyMs: result.info.latencyMs ?? 0 }),
    });
    if (result.done) {
      truncated = result.info.truncated === true;
      break;
    }
    if (limits.contextLength - tokens.length <= 1) {
      truncated = true;
      break;
    }
  }
  return { task, tokens, lossMask, logprobs, promptLength, turns, answer, searches, invalidActions, truncated };
}

/** Options of `rolloutGroups`. */
export interface GroupRolloutOptions {
  /** Episodes per task (GRPO's G). */
  groupSize: number;
  /** Base seed of this batch; each episode's seed is derived from it (see `episodeSeed`). */
  seed: number;
  /** Most episodes in flight at once; more wait. */
  concurrency?: number;
  /** Called after each finished episode (progress bars). */
  onEpisode?: (traj: Trajectory) => void;
}

/**
 * Runs `groupSize` episodes for each task, all concurrently (the embedded sampler batches concurrent calls).
 * @returns one group per task, in task order; members in member order — independent of completion order
 */
export async function rolloutGroups(
  tasks: readonly Task[],
  makeEnv: EnvFactory,
  agent: TurnGenerator,
  tokenizer: Tokenizer,
  limits: RolloutLimits,
  options: GroupRolloutOptions,
): Promise<TrajectoryGroup[]> {
  const jobs: Array<{ t: number; m: number }> = [];
  tasks.forEach((_, t) => {
    for (let m = 0; m < options.groupSize; m++) jobs.push({ t, m });
  });
  const results: Trajectory[] = new Array(jobs.length);
  const limit = Math.max(1, options.concurrency ?? 512);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const j = next++;
      const { t, m } = jobs[j];
      results[j] = await runEpisode(tasks[t], makeEnv, agent, tokenizer, limits, episodeSeed(options.seed, t, m));
      options.onEpisode?.(results[j]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  return tasks.map((task, t) => ({
    task,
    trajectories: results.slice(t * options.groupSize, (t + 1) * options.groupSize),
  }));
}
