/**
 * What an `arl train --agent` run checks before it starts anything: the env (the search env, looked up in the registry:
 * its recipe serves the agent's retrieval through `RecipeInstance.retrievalWorld`), the context, the advantage
 * estimator and the reward; and the config fields `--agent` does not use.
 */
import type { RecipeInstance, RetrievalWorld } from "../env/recipe.ts";
import { DEFAULT_ENV, getRecipe } from "../envs/index.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { buildInstance, checkReward } from "../train/setup.ts";
import { MIN_AGENT_CONTEXT } from "./defaults.ts";
import { AGENT_ESTIMATORS } from "./rollouts.ts";
import { DEFAULT_TEACHER_TOOL } from "./teacher.ts";

/** A rollout's deadline unless `rolloutDeadlineMs` / `--agent-deadline` says otherwise (ms). */
export const DEFAULT_AGENT_DEADLINE_MS = 120_000;

/**
 * Config fields `--agent` does not use (the agent sends its own sampling parameters; the update is one importance-
 * sampling or PPO step on the rollouts, without a KL term, PPO-ptx replay or minibatches): a warning names any set away
 * from its default, so a flag that changes nothing is never silent.
 */
export const AGENT_UNUSED_RL_FIELDS = [
  "temperature", "klCoef", "ptxCoef", "ptxBatchSize", "minibatches", "maskObservations", "maxNonFiniteSteps",
  // issue 16's algorithms run in `arl train`'s loop (src/train/rl.ts), not yet in trainAgent's
  "lossAggMode", "gamma", "lam", "turnRewards", "tis", "tisCap", "filterGroups", "maxGenBatches", "overlongBuffer", "overlongPenalty", "clipRatioC",
] as const;

/**
 * The warning for `AGENT_UNUSED_RL_FIELDS` set away from their defaults (printed by the run and by `--dry-run`), or
 * undefined when none is.
 */
export function agentUnusedFieldsWarning(config: ExperimentConfig): string | undefined {
  const defaults = resolveConfig({}).rl;
  const unused = AGENT_UNUSED_RL_FIELDS.filter((k) => JSON.stringify(config.rl[k]) !== JSON.stringify(defaults[k]));
  if (unused.length === 0) return undefined;
  return `--agent does not use ${unused.map((k) => `rl.${k} (${JSON.stringify(config.rl[k])})`).join(", ")}: the agent sends its own sampling parameters and the update has no KL term, replay or minibatches`;
}

/** The env of an `--agent` run: the recipe's instance and its worlds as the agent's retrieval serves them. */
export interface AgentEnv {
  instance: RecipeInstance;
  /** `RecipeInstance.retrievalWorld`: world 0 is the real one, `k ≥ 1` the warm start's (`demo`) or RL's (`rl`). */
  world: (use: "demo" | "rl", k: number) => RetrievalWorld;
}

/**
 * The config checks an `--agent` run makes before it starts anything, and its env.
 * @returns the env: the search recipe's instance (`buildInstance`) and its `retrievalWorld`
 * @throws ConfigError naming `env.name` (only search), a bad `env.options` field, `policy.contextLength`
 *   (< `MIN_AGENT_CONTEXT`), `rl.advantage` (only `AGENT_ESTIMATORS`), or the reward (`checkReward`: an unknown term, a
 *   judge without `reward.options.judge`)
 */
export function checkAgentConfig(config: ExperimentConfig): AgentEnv {
  if (config.env.name !== DEFAULT_ENV) {
    throw new ConfigError([`env.name: arl train --agent trains on the ${DEFAULT_ENV} env (its retrieval is served to the agent as ARL_RETRIEVAL_URL); got ${config.env.name}`]);
  }
  if (config.policy.contextLength < MIN_AGENT_CONTEXT) {
    throw new ConfigError([`policy.contextLength: an agent's calls (chat template, its tool schemas, its messages, retrieved passages) need at least ${MIN_AGENT_CONTEXT} tokens; got ${config.policy.contextLength} (e.g. --policy.contextLength ${MIN_AGENT_CONTEXT})`]);
  }
  if (!(AGENT_ESTIMATORS as readonly string[]).includes(config.rl.advantage)) {
    throw new ConfigError([`rl.advantage: arl train --agent computes advantages from each rollout's reward: ${AGENT_ESTIMATORS.join(", ")}; got ${config.rl.advantage} (gae, gigpo and reinforce_plus_plus need the policy's own turns: arl train's loop)`]);
  }
  checkReward(config);
  const instance = buildInstance(config, getRecipe(DEFAULT_ENV));
  const world = instance.retrievalWorld?.bind(instance);
  if (world === undefined) throw new Error(`--agent: the ${DEFAULT_ENV} env's recipe has no retrievalWorld (RecipeInstance, src/env/recipe.ts)`);
  return { instance, world };
}

/** What a run was started with, recorded in `agent.json` and checked on `--resume`. */
export interface AgentIdentity {
  agent: string;
  deadlineMs: number;
  /** `NAME:ARG` of the teacher's tool (`--agent-tool`). */
  tool: string;
}

/**
 * The differences between a run folder's `agent.json` and this run (each a message naming the flag), [] when none.
 * A folder from before `--agent-tool` used the default tool (`DEFAULT_TEACHER_TOOL`).
 */
export function agentIdentityDiffs(saved: Partial<AgentIdentity>, now: AgentIdentity): string[] {
  const savedTool = saved.tool ?? `${DEFAULT_TEACHER_TOOL.name}:${DEFAULT_TEACHER_TOOL.queryArg}`;
  return [
    ...(saved.agent !== now.agent ? [`--agent: the run folder was trained by ${JSON.stringify(saved.agent)}, this command gives ${JSON.stringify(now.agent)} (--resume continues the same agent)`] : []),
    ...(saved.deadlineMs !== now.deadlineMs ? [`--agent-deadline: the run folder has ${saved.deadlineMs}, this command has ${now.deadlineMs}`] : []),
    ...(savedTool !== now.tool ? [`--agent-tool: the run folder has ${savedTool}, this command has ${now.tool}`] : []),
  ];
}
