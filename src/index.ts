/**
 * agentic-rl — the package's public API (`import { … } from "agentic-rl"`; built to `dist/index.js` +
 * `dist/index.d.ts`). It is what a user's env, a user's agent and a training script need; docs/api.md lists every
 * name with one line. Any other module path inside the package is internal and may change without notice.
 *
 * Sections: vocabulary · tools · environments and recipes · protocols · rollout · reward · algorithms · training ·
 * your own agent · policy backends and tokenizers · retrieval.
 */

// ── The vocabulary (src/core) ─────────────────────────────────────────────────────────────────────────────────────
export type {
  Task,
  Message,
  ToolCall,
  Action,
  ToolCallResult,
  Grade,
  Passage,
  StepResult,
  StepInfo,
  ToolErrorKind,
  Turn,
  Trajectory,
  TrajectoryGroup,
  RewardTerm,
  RewardBreakdown,
  Datum,
  Metrics,
} from "./core/types.ts";
export { toolCallCounts, totalToolCalls } from "./core/types.ts";
export { Rng } from "./core/rng.ts";

// ── Tools (src/env/tool.ts, src/env/faults.ts) ────────────────────────────────────────────────────────────────────
export { tool, callTool, toolJsonSchema, renderTools, RetryableToolError } from "./env/tool.ts";
export type { Tool, ToolCallContext, ToolResult, CallToolOptions } from "./env/tool.ts";
export type { ToolJsonSchema } from "./protocol/types.ts";
export { withFaults } from "./env/faults.ts";
export type { FaultKind, FaultOptions } from "./env/faults.ts";

// ── Environments and recipes (src/env, src/envs) ──────────────────────────────────────────────────────────────────
export type { Env, EnvFactory, EpisodeInfo } from "./env/types.ts";
export { toolEnv, checkGrade } from "./env/toolEnv.ts";
export type { GradeInput, ToolCallSettings, ToolEnvSpec, ToolEnvTurn } from "./env/toolEnv.ts";
export { defineToolRecipe, scriptedPersonaTurn, taskOptionFields } from "./env/defineToolRecipe.ts";
export type { ToolRecipeSpec, ToolRecipeBuild, ToolRecipeOptions, CounterfactualAt } from "./env/defineToolRecipe.ts";
export type { EnvRecipe, RecipeContext, RecipeInstance, RecipeLabDesign, RecipeBaseline, DemoContext } from "./env/recipe.ts";
export { parseEnvOptions, counterfactualWorldSeed } from "./env/options.ts";
export type { TurnContext, ForcedText, RolloutLimits } from "./env/episode.ts";
export { ENV_RECIPES, DEFAULT_ENV, getRecipe, registerRecipe, SMOKE_OVERRIDES } from "./envs/index.ts";

// ── Protocols: how a policy writes tool calls and sees results (src/protocol) ────────────────────────────────────
export { getProtocol, PROTOCOL_NAMES } from "./protocol/index.ts";
export type { Protocol, ProtocolName } from "./protocol/index.ts";

// ── Rollout (src/rollout) ─────────────────────────────────────────────────────────────────────────────────────────
export { rolloutGroups, rolloutBatch, runEpisode } from "./rollout/rollout.ts";
export type { EpisodeSetup, GroupRolloutOptions, RolloutBatch, DroppedEpisode } from "./rollout/rollout.ts";
export { PolicyAgent, ScriptedAgent, protocolStops } from "./rollout/agent.ts";
export type { GeneratedTurn, TurnGenerator, PolicyAgentOptions, ScriptedTurn } from "./rollout/agent.ts";

// ── Reward (src/reward) ───────────────────────────────────────────────────────────────────────────────────────────
export { computeReward, rewardGroups, DEFAULT_REWARD_CONFIG } from "./reward/compose.ts";
export type { RewardConfig } from "./reward/compose.ts";
export { REWARD_TERMS, TERM_LIST } from "./reward/terms.ts";
export type { RewardTermDef, RewardContext, RewardOptions, TermResult, Judge, JudgeOptions } from "./reward/types.ts";
export { REWARD_PRESETS } from "./reward/presets.ts";
export { normalizeAnswer, emCheck, subEmCheck, tokenF1 } from "./reward/em.ts";
export { OpenAIJudge } from "./reward/judge.ts";
export { DetectorMonitor, defaultDetectors } from "./reward/detectors.ts";
export type { DetectorFiring, DetectorSpec } from "./reward/detectors.ts";

// ── Algorithms (src/algo) ─────────────────────────────────────────────────────────────────────────────────────────
export { ADVANTAGE_ESTIMATORS, estimateAdvantages } from "./algo/estimators.ts";
export type { AdvantageEstimatorName, EstimatorTrajectory, EstimatorOptions, EstimatedAdvantages } from "./algo/estimators.ts";
export { grpoAdvantages } from "./algo/advantages.ts";
export { trajectoryToDatum } from "./algo/datum.ts";
export { RL_LOSS_FNS } from "./algo/policyLoss.ts";

// ── Training: config, one experiment runner, the lab (src/train, src/lab, src/run) ───────────────────────────────
export { train } from "./run/train.ts";
export type { TrainOptions } from "./run/train.ts";
export { resolveConfig, ConfigError } from "./train/config.ts";
export type { ExperimentConfig } from "./train/config.ts";
export { readConfigFile, applyOverrides } from "./train/configFile.ts";
export { runExperiment } from "./train/runner.ts";
export type { RunOptions } from "./train/runner.ts";
export type { ExperimentSummary, SummaryRow, BreakdownCell } from "./train/summary.ts";
export { silentReporter } from "./train/reporter.ts";
export type { Reporter, ProgressBar } from "./train/reporter.ts";
export { runLab } from "./lab/lab.ts";
export type { LabOptions } from "./lab/lab.ts";
export type { AnyLabResult, LabResult, EnvLabResult } from "./lab/types.ts";

// ── Your own agent: the OpenAI-compatible training gateway and the runner over it (src/gateway, src/external) ────
export { startGateway } from "./gateway/server.ts";
export type { GatewayOptions, GatewayPolicy, RunningGateway } from "./gateway/server.ts";
export type { RolloutRecord, GatewayReward } from "./gateway/types.ts";
export { runAgentExperiment } from "./external/experiment.ts";
export type { AgentExperimentOptions, AgentExperimentSummary } from "./external/experiment.ts";
export { trainAgent } from "./external/train.ts";
export type { TrainAgentOptions } from "./external/train.ts";
export type { AgentContext, AgentFunction, AgentResult } from "./external/rollouts.ts";

// ── Policy backends and tokenizers (src/policy, src/core) ─────────────────────────────────────────────────────────
export { createBackend, closeBackend } from "./train/backends.ts";
export { EmbeddedBackend } from "./policy/embedded/backend.ts";
export type { GPTConfig } from "./policy/embedded/gpt.ts";
export { TinkerBackend } from "./policy/tinker/backend.ts";
export type { LossFnName, LossConfig, ForwardBackwardResult, AdamParams, TrainingBackend } from "./core/training.ts";
export type { SampleOptions, SampledSequence, SamplingClient } from "./core/sampling.ts";
export type { Tokenizer } from "./core/tokenizer.ts";
export { WordTokenizer } from "./policy/tokenizer.ts";
export { loadTokenizer } from "./policy/hf/index.ts";

// ── Retrieval (src/retrieval) ─────────────────────────────────────────────────────────────────────────────────────
export { BM25Index } from "./retrieval/bm25.ts";
export type { Retriever } from "./retrieval/retriever.ts";
export { loadCorpus, loadQA } from "./retrieval/corpus.ts";
