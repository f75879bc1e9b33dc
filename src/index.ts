/**
 * agentic-rl — the package's public entry (`import { … } from "agentic-rl"`; built to `dist/index.js` +
 * `dist/index.d.ts`). Everything a script needs to define tools and environments, roll out episodes, reward them,
 * compute advantages and losses, and run a whole experiment on the embedded CPU policy is re-exported here; any other
 * module path inside the package is internal and may change without notice.
 *
 * Sections: core types · random numbers · tools and fault injection · environments · rollout · agents · algorithms ·
 * reward · policy backends and tokenizers · retrieval · config and experiments · (reserved: protocols, tool envs,
 * training, env recipes — see the end of this file).
 *
 * Each name keeps the docstring of its defining module; the one-line comments here only say where it comes from.
 */

// ── Core types (src/core/types.ts) ────────────────────────────────────────────────────────────────────────────────
/** The value helpers of the core types (the query of a Search-R1 search action). */
export { searchQuery } from "./core/types.ts";
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
  SampledSpan,
  StopReason,
  RewardTerm,
  RewardBreakdown,
  Trajectory,
  TrajectoryGroup,
  Datum,
  Metrics,
} from "./core/types.ts";

// ── Random numbers (src/core/rng.ts) ──────────────────────────────────────────────────────────────────────────────
/** The seeded, checkpointable generator every stochastic part of a run draws from. */
export { Rng } from "./core/rng.ts";

// ── Tools (src/env/tool.ts) and fault injection (src/env/faults.ts) ───────────────────────────────────────────────
/** Typed zod tools and the never-throwing call wrapper (timeouts, retries, concurrency limits, output checks). */
export { tool, callTool, toolJsonSchema, RetryableToolError, isRetryable, ToolLimiter, MAX_TIMER_MS, truncateChars, DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_MAX_RESULT_BYTES } from "./env/tool.ts";
export type { Tool, ToolCallContext, ToolJsonSchema, ToolResult, CallToolOptions } from "./env/tool.ts";
/** Deterministic fault injection around a tool (fail, hang, slow, garbage, huge). */
export { withFaults, validateFaultOptions, FAULT_KINDS, hash32 } from "./env/faults.ts";
export type { FaultKind, FaultOptions, FaultRecord, FaultyTool } from "./env/faults.ts";

// ── Environments (src/env/types.ts) ───────────────────────────────────────────────────────────────────────────────
/** The environment API (`reset(task) → prompt`, `step(text) → StepResult`) and its factory. */
export type { Env, EnvFactory, EpisodeInfo } from "./env/types.ts";

// ── Rollout (src/rollout/rollout.ts) ──────────────────────────────────────────────────────────────────────────────
/** The rollout engine: whole episodes run concurrently, with exact token books and every drop accounted for. */
export { rolloutGroups, rolloutBatch, runEpisode, episodeSeed, capObservation, rolloutMetrics, EpisodeError } from "./rollout/rollout.ts";
export type { RolloutLimits, ObservationClose, DropReason, EpisodeOptions, GroupRolloutOptions, DroppedEpisode, RolloutBatch } from "./rollout/rollout.ts";

// ── Agents (src/rollout/agent.ts) ─────────────────────────────────────────────────────────────────────────────────
/** Turn generators: the sampling policy and the scripted agent (demonstrations), plus the stop-cutting helpers. */
export { PolicyAgent, ScriptedAgent, firstStop, stopCut, protocolStops } from "./rollout/agent.ts";
export type { TurnContext, GeneratedTurn, TurnGenerator, ForcedText, PolicyAgentOptions, ScriptedTurn } from "./rollout/agent.ts";

// ── Algorithms (src/algo/*.ts) ────────────────────────────────────────────────────────────────────────────────────
/** GRPO / Dr.GRPO advantages. */
export { grpoAdvantages, tokenAdvantages } from "./algo/advantages.ts";
export type { GrpoOptions } from "./algo/advantages.ts";
/** Trajectory → training datum, with the token-integrity invariants checked. */
export { trajectoryToDatum, assertTrajectory, assertTokenIntegrity } from "./algo/datum.ts";
export type { DatumOptions } from "./algo/datum.ts";
/** Per-token policy-gradient losses and their aggregation. */
export { ppoClipTokenLoss, importanceSamplingTokenLoss, k3Kl, aggregateLoss } from "./algo/losses.ts";
export type { PpoTokenLoss, AggregationMode } from "./algo/losses.ts";
/** veRL's estimators, policy losses and aggregation modes; turn-level credit (GiGPO); DAPO's data pieces (docs/algorithms.md). */
export { rlooAdvantages, opoAdvantages, passkAdvantages, maskedWhiten, discountedReturns, reinforcePlusPlusAdvantages, reinforcePlusPlusBaselineAdvantages, gaeAdvantages } from "./algo/advantages.ts";
export { ADVANTAGE_ESTIMATORS, ESTIMATORS, estimateAdvantages } from "./algo/estimators.ts";
export type { AdvantageEstimatorName, EstimatorTrajectory, EstimatorOptions, EstimatedAdvantages, EstimatorInfo } from "./algo/estimators.ts";
export { LOSS_AGG_MODES, aggLoss, aggregationPlan, vanillaPolicyTokenLoss, gspoSequenceRatio, gspoTokenLoss, cispoTokenLoss, droTokenLoss, tisWeights } from "./algo/losses.ts";
export type { LossAggMode, AggregationPlan, PolicyTokenLoss } from "./algo/losses.ts";
export { RL_LOSS_FNS, TINKER_SERVER_LOSSES, backendLossOf, lossAggModeOf, tinkerLossFor, backendAlgorithmProblem } from "./algo/policyLoss.ts";
export type { RlLossFn, TinkerLoss } from "./algo/policyLoss.ts";
export { turnSpans, turnRewards, tokenRewardsFromTurns, turnAnchors, gigpoAdvantages, perTurnAdvantage } from "./algo/turns.ts";
export type { TurnRewardWeights, GigpoTrajectory, GigpoOptions } from "./algo/turns.ts";
export { overlongPenalty, applyOverlongShaping, informativeGroups, moreTasksFrom } from "./algo/dapo.ts";

// ── Reward (src/reward/*.ts) ──────────────────────────────────────────────────────────────────────────────────────
/** Weighted reward terms composed into a breakdown that keeps every term. */
export {
  computeReward,
  rewardGroups,
  validateRewardConfig,
  DEFAULT_REWARD_CONFIG,
  DEFAULT_REWARD_OPTIONS,
  MAX_REWARD_WEIGHT,
} from "./reward/compose.ts";
export type { RewardConfig } from "./reward/compose.ts";
/** The registry of reward terms, by name and in order. */
export { REWARD_TERMS, TERM_LIST } from "./reward/terms.ts";
export type { RewardTermFn, RewardTermCtxFn } from "./reward/terms.ts";
export type { TermResult, TermFamily, RewardContext, RewardOptions, JudgeOptions, Judge, RewardTermDef } from "./reward/types.ts";
/** Named reward designs (weights of terms). */
export { REWARD_PRESETS, presetWeights } from "./reward/presets.ts";
export type { RewardPreset } from "./reward/presets.ts";
/** Search-R1 answer matching: normalisation, exact match, substring match, token F1. */
export { normalizeAnswer, emCheck, subEmCheck, tokenF1 } from "./reward/em.ts";
/** The Search-R1 format check of a whole response. */
export { isValidSequence } from "./reward/format.ts";
export type { SequenceOptions, SequenceVerdict } from "./reward/format.ts";
/** An LLM judge over any OpenAI-compatible endpoint (the `judge` term). */
export { OpenAIJudge } from "./reward/judge.ts";
/** Reward-hacking detectors and their metrics. */
export { hackingMetrics, DetectorMonitor, defaultDetectors, DEFAULT_DETECTOR_THRESHOLDS } from "./reward/detectors.ts";
export type { DetectorFiring, DetectorRule, DetectorSpec, DetectorThresholds } from "./reward/detectors.ts";

// ── Your own agent: the OpenAI-compatible training gateway and the loop over it (src/gateway/, src/train/agent*.ts) ──
/** The gateway in front of the policy: per-rollout `/rollout/<id>/v1` chat completions, exact token records, rewards. */
export { startGateway, gatewayApp } from "./gateway/server.ts";
export type { Gateway, GatewayOptions, GatewayPolicy, RunningGateway } from "./gateway/server.ts";
export { RolloutRegistry } from "./gateway/registry.ts";
export type { RolloutSnapshot, RolloutStatus } from "./gateway/registry.ts";
export type { GatewayCall, GatewayReward, GatewaySegment, RolloutRecord } from "./gateway/types.ts";
/** RL on an unchanged agent (a function, or a command given `OPENAI_BASE_URL`): rollouts, grading, GRPO, updates. */
export { trainAgent, runAgentRollout } from "./train/agentRun.ts";
export type { TrainAgentOptions } from "./train/agentRun.ts";
export { runAgentCommand, agentBatch, segmentToDatum } from "./train/agentRollouts.ts";
export type { AgentContext, AgentFunction, AgentResult, AgentBatch } from "./train/agentRollouts.ts";
export { runAgentExperiment } from "./train/agentExperiment.ts";
export type { AgentExperimentOptions, AgentExperimentSummary } from "./train/agentExperiment.ts";

// ── Policy backends and tokenizers (src/train/backends.ts, src/policy/*) ──────────────────────────────────────────
/** Picks the model-math backend a config asks for (embedded CPU GPT, or a Tinker server) and releases it. */
export { createBackend, closeBackend } from "./train/backends.ts";
/** The embedded CPU GPT (jax-js), trainable and sampleable in this process. */
export { EmbeddedBackend, SAMPLER_ENGINES } from "./policy/embedded/backend.ts";
export type { EmbeddedBackendOptions, SamplerEngine } from "./policy/embedded/backend.ts";
export type { GPTConfig } from "./policy/embedded/gpt.ts";
/** A model on any Tinker-API server (hosted Tinker, SkyRL, TuFT, verl-tinker, `arl serve trainer`): client, families, wire. */
export { TinkerBackend, TINKER_SDK_WIRE_VERSION } from "./policy/tinker/backend.ts";
export type { TinkerBackendOptions, TinkerCheckpointPointer, TinkerWire } from "./policy/tinker/backend.ts";
export { TinkerClient, TinkerApiError } from "./policy/tinker/client.ts";
export type { TinkerClientOptions } from "./policy/tinker/client.ts";
export { FAMILIES as TINKER_SERVER_FAMILIES, detectFamily as detectTinkerServerFamily } from "./policy/tinker/families.ts";
export type { TinkerServerFamily, FamilyTraits as TinkerServerTraits } from "./policy/tinker/families.ts";
/** The backend boundary, shaped like the Tinker training API. */
export type {
  LossFnName,
  LossConfig,
  ForwardBackwardResult,
  AdamParams,
  SampleOptions,
  SampledSequence,
  SamplingClient,
  TrainingBackend,
} from "./policy/types.ts";
/** The word-level tokenizer of the built-in world and the protocol tags it keeps whole. */
export { WordTokenizer, PROTOCOL_TAGS } from "./policy/tokenizer.ts";
export type { Tokenizer, TokenizerJson } from "./policy/tokenizer.ts";

// ── Retrieval (src/retrieval/*.ts) ────────────────────────────────────────────────────────────────────────────────
/** BM25 ranking (Pyserini's parameters by default). */
export { BM25Index, PYSERINI_BM25, tokenizeForIndex } from "./retrieval/bm25.ts";
/** Loaders of wiki-18 passages and QA files (FlashRAG, NQ-open, Bamboogle). */
export { loadCorpus, loadQA } from "./retrieval/corpus.ts";
export type { LoadOptions, LoadQAOptions, QAFormat } from "./retrieval/corpus.ts";

// ── Config and experiments (src/train/config.ts, src/train/experiment.ts) ─────────────────────────────────────────
/** Validates and fills an experiment config; reads config files; applies dotted overrides and the smoke preset. */
export { resolveConfig, ConfigError, readConfigFile, applyOverrides, SMOKE_OVERRIDES } from "./train/config.ts";
export type { ExperimentConfig } from "./train/config.ts";
/** Runs a whole experiment (SFT, baselines, RL, evaluation) into its run folder. */
export { runExperiment, silentReporter } from "./train/experiment.ts";
export type { Reporter, ProgressBar, ExperimentSummary, SummaryRow } from "./train/experiment.ts";

// ── protocols: how a policy writes tool calls and sees results (src/protocol) ──
export { PROTOCOLS, PROTOCOL_NAMES, getProtocol, renderTools, hermesProtocol, reactProtocol, searchR1Protocol, parseHermes, parseReact } from "./protocol/index.ts";
export type { ParseOptions, Protocol, ProtocolName } from "./protocol/index.ts";

// ── tool environments and env recipes (src/env) ──
export { toolEnv, checkGrade, defaultFormatResult } from "./env/toolEnv.ts";
export type { GradeInput, ToolCallSettings, ToolEnvSpec, ToolEnvTurn } from "./env/toolEnv.ts";
export type { EnvRecipe, RecipeContext, RecipeInstance } from "./env/recipe.ts";
export { counterfactualWorldSeed, parseEnvOptions } from "./env/options.ts";
export { searchAction, toolCallCounts, totalToolCalls } from "./core/types.ts";

// ── training entry point and the recipe experiment (src/run, src/train) ──
export { train, withRecipeDefaults, envNameOf } from "./run/train.ts";
export type { TrainOptions } from "./run/train.ts";
export { runRecipeExperiment, recipeSetup, recipeDemos, summarizeRecipe, evalRecipeRow, recipeContext } from "./train/recipeRun.ts";
export type { RecipeRow, RecipeSummary, RecipeSetup, BreakdownCell } from "./train/recipeRun.ts";

// ── built-in env recipes (src/envs): the registry, search and travel ──
export { ENV_RECIPES, getRecipe, searchRecipe, travelRecipe } from "./envs/index.ts";
