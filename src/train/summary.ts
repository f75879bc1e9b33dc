/**
 * The held-out summary of an experiment: each policy (baselines, warm start, RL) evaluated on the same tasks, one
 * episode each, summarised into one row type for every env — task success, grade, tool calls, invalid actions, and
 * the recipe's own breakdown (the search env's EM / searches / guess rate by known vs unknown facts, the travel env's
 * decisions).
 */
import type { Task, Trajectory } from "../core/types.ts";
import type { RecipeBaseline, RecipeInstance } from "../env/recipe.ts";
import type { DetectorFiring } from "../reward/detectors.ts";
import { PolicyAgent, ScriptedAgent, type TurnGenerator } from "../rollout/agent.ts";
import { rolloutGroups } from "../rollout/rollout.ts";
import type { TrainingBackend } from "../core/training.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";
import { mean } from "./metrics.ts";
import type { Reporter } from "./reporter.ts";
import type { Setup } from "./setup.ts";

/** A rate over the episodes where a breakdown key arose: `rate` (mean value) and `n` (episodes with the key). */
export interface BreakdownCell {
  rate: number;
  n: number;
}

/** One row of the summary: a policy's held-out results. */
export interface SummaryRow {
  policy: string;
  /** Tasks evaluated. */
  n: number;
  /** Share of tasks whose grade score is 1 (the env's task success). */
  success: number;
  /** Mean grade score in [0, 1]. */
  score: number;
  /** Tool calls per task (mean). */
  calls: number;
  /** Invalid actions per turn. */
  invalidRate: number;
  /** Share of tasks that ended without a final answer. */
  noAnswer: number;
  /** The recipe's breakdown (`RecipeInstance.breakdown`) per key. */
  breakdown: Record<string, BreakdownCell>;
}

/** The experiment's summary (also `summary.json`): what `train()` returns for every env. */
export interface ExperimentSummary {
  run: string;
  env: string;
  protocol: string;
  split: string;
  rows: SummaryRow[];
  /** Labels of the breakdown keys, in table order. */
  breakdownLabels: Record<string, string>;
  /** Whether the env grades its episodes (`Trajectory.grade`): the table's success and grade columns mean something. */
  graded: boolean;
  detectors: DetectorFiring[];
}

/** Where an evaluation runs: the experiment's setup (env, tokenizer, budgets), its config (seed) and progress. */
export interface EvalContext {
  setup: Pick<Setup, "instance" | "tokenizer" | "limits">;
  config: ExperimentConfig;
  reporter: Reporter;
}

/** Summarises finished episodes into a row (see `SummaryRow`). */
export function summarizeRow(policy: string, trajs: readonly Trajectory[], instance: RecipeInstance): SummaryRow {
  const turns = trajs.reduce((a, t) => a + t.turns.length, 0);
  const cells: Record<string, number[]> = {};
  for (const t of trajs) for (const [k, v] of Object.entries(instance.breakdown(t))) (cells[k] ??= []).push(v);
  const breakdown: Record<string, BreakdownCell> = {};
  for (const k of Object.keys(cells).sort()) breakdown[k] = { rate: mean(cells[k]), n: cells[k].length };
  return {
    policy,
    n: trajs.length,
    success: mean(trajs.map((t) => (t.grade !== undefined && t.grade.score >= 1 ? 1 : 0))),
    score: mean(trajs.map((t) => t.grade?.score ?? 0)),
    calls: mean(trajs.map((t) => Object.values(t.toolCalls ?? {}).reduce((a, b) => a + b, 0))),
    invalidRate: turns === 0 ? 0 : trajs.reduce((a, t) => a + t.invalidActions, 0) / turns,
    noAnswer: mean(trajs.map((t) => (t.answer === null ? 1 : 0))),
    breakdown,
  };
}

/**
 * Evaluates a turn generator on `tasks` (one episode each, in world 0, seed `run.seed + 7`) and summarises it.
 * @throws Error naming the episodes that failed (a broken env or sampler)
 */
export async function evalRow(
  label: string,
  agent: TurnGenerator,
  tasks: readonly Task[],
  ctx: EvalContext,
): Promise<{ row: SummaryRow; trajectories: Trajectory[] }> {
  const { setup: s, config, reporter } = ctx;
  const bar = reporter.bar(`eval ${label}`, tasks.length);
  let done = 0;
  const groups = await rolloutGroups(tasks, { makeEnv: s.instance.makeEnv(0), agent, tokenizer: s.tokenizer, limits: s.limits }, {
    groupSize: 1,
    seed: config.run.seed + 7,
    onEpisode: () => bar.update(++done),
  });
  bar.stop();
  const trajectories = groups.map((g) => g.trajectories[0]);
  return { row: summarizeRow(label, trajectories, s.instance), trajectories };
}

/**
 * The model as a turn generator at evaluation temperature; `forced` text goes into its turns (a baseline such as
 * Search-R1's Direct and RAG).
 */
export function policyAgent(backend: TrainingBackend, s: Pick<Setup, "tokenizer" | "stops">, config: ExperimentConfig, baseline?: Extract<RecipeBaseline, { forced: unknown }>): PolicyAgent {
  return new PolicyAgent(backend.samplingClient(), s.tokenizer, {
    temperature: config.eval.temperature,
    maxTokensPerTurn: config.rl.maxTokensPerTurn,
    ...s.stops,
    ...(baseline !== undefined ? { forced: baseline.forced } : {}),
  });
}

/**
 * The baseline rows of a run as turn generators, in summary order: the recipe's `baselines`, else its careful persona
 * scripted (the "prompt-driven" row, for scale).
 * @throws ConfigError when a baseline names a persona the recipe does not have
 */
export function baselineAgents(backend: TrainingBackend, s: Setup, config: ExperimentConfig): Array<{ label: string; agent: TurnGenerator }> {
  const careful = s.instance.baselinePersona;
  const baselines = s.instance.baselines ?? [{ label: `Prompt-driven (${careful}, scripted)`, persona: careful }];
  return baselines.map((b) => {
    if ("forced" in b) return { label: b.label, agent: policyAgent(backend, s, config, b) };
    if (!Object.hasOwn(s.instance.personas, b.persona)) throw new ConfigError([`env.name: the ${s.recipe.name} env's baseline "${b.label}" names persona "${b.persona}", not one of ${Object.keys(s.instance.personas).join(", ")}`]);
    return { label: b.label, agent: new ScriptedAgent(s.tokenizer, (ctx) => s.instance.scriptedTurn(b.persona, ctx)) };
  });
}

