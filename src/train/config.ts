/**
 * The experiment config: one shallow YAML/JSON document with sections `run`, `env`, `policy`, `sft`, `rl`,
 * `reward`, `eval`. Every field has a zod default and a description; validation errors name the path and the
 * allowed values (`rl.groupSize: expected an integer ≥ 2, got -3`). CLI flags override fields (`--rl.groupSize 8`).
 */
import { constants as bufferConstants } from "node:buffer";
import { z } from "zod";
import { unknownNamesText, didYouMean } from "../core/suggest.ts";
import { ConfigInputError, parseBoundedYaml, readBoundedText, reservedKeyProblem, reservedSegmentProblem } from "./configGuards.ts";
import { MAX_TIMER_MS } from "../env/tool.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { REWARD_TERMS } from "../reward/terms.ts";
import { REWARD_PRESETS } from "../reward/presets.ts";
import { DEFAULT_REWARD_OPTIONS, MAX_REWARD_WEIGHT, type RewardConfig as RewardSpec } from "../reward/compose.ts";
import { DEFAULT_DETECTOR_THRESHOLDS as D } from "../reward/detectors.ts";
import { ADVANTAGE_ESTIMATORS } from "../algo/estimators.ts";
import { foreignNameHint } from "../algo/foreignNames.ts";
import { LOSS_AGG_MODES } from "../algo/losses.ts";
import { backendAlgorithmProblem, RL_LOSS_FNS } from "../algo/policyLoss.ts";

const int = (min: number, desc: string) => z.number().int().min(min).describe(desc);
const num = (desc: string) => z.number().describe(desc);
/** An integer in [min, max]; errors show the range. */
const intIn = (min: number, max: number, desc: string) => z.number().int().min(min).max(max).describe(desc);
/**
 * A duration in ms, at most `MAX_TIMER_MS` (2³¹−1): Node's `setTimeout` / `AbortSignal.timeout` silently clamp a
 * longer delay to 1 ms, so a 3e9 ms timeout would fire at once. `headroom` (ms) is subtracted for fields a caller
 * adds to before it sets a timer.
 */
const ms = (min: number, desc: string, headroom = 0) => z.number().int().min(min).max(MAX_TIMER_MS - headroom).describe(desc);

/** Most episodes one RL step may run (`rl.tasksPerStep × rl.groupSize`; the default is 128). */
export const MAX_EPISODES_PER_STEP = 1_048_576;

/** Upper bounds of sizes that are absurd beyond them (the embedded backend's memory check refuses far less). */
export const SIZE_BOUNDS = {
  /** Model width: the largest open models use 16 384. */
  dModel: 65_536,
  nLayers: 1_024,
  nHeads: 1_024,
  mlpRatio: 64,
  /** Context window (tokens): 2²⁰; remote (Tinker) models reach 128 Ki–1 Mi tokens. */
  contextLength: 1_048_576,
  /** Rows of one batch: demonstrations per SFT step, questions per RL step, replayed demonstrations. */
  batch: 65_536,
  /** Episodes per question (GRPO's G). */
  groupSize: 4_096,
  /** Characters of one tool output: V8's longest string (2²⁹−24 on 64-bit Node); longer ones throw RangeError. */
  chars: bufferConstants.MAX_STRING_LENGTH,
} as const;

/**
 * Splits a comma-separated list (`--env.faults.kinds hang,slow`), as the list fields' preprocessors do; the error
 * messages split the raw string the same way to show the offending item.
 */
function commaList(v: string): string[] {
  return v.split(",").map((x) => x.trim()).filter(Boolean);
}

export const RunConfig = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9._-]+$/, "letters, digits, '.', '_' or '-'")
      .refine((n) => n !== "." && n !== "..", "a folder name, not '.' or '..' (the run must stay inside run.dir)")
      .default("default").describe("Run folder name under `dir`."),
    dir: z.string().default("runs").describe("Folder that holds run folders."),
    seed: int(0, "Seed of everything: world, init, data order, sampling.").default(0),
    checkpointEvery: int(0, "Save a checkpoint every N RL steps (0 = only at the end).").default(10),
    samplesPerStep: int(0, "Trajectories written to samples/step-<n>.jsonl per RL step.").default(4),
    gcEvery: int(0, "Full garbage collection every N RL steps (0 = never): memory then follows what the run holds instead of V8's late collection (src/train/memory.ts).").default(1),
  })
  .strict();

export const WorldSection = z
  .object({
    numCountries: int(4, "Countries in the built-in world.").default(80),
    knownFraction: z.number().min(0).max(1).default(0.4).describe("Share of countries whose facts the policy learns in warm start (its parametric knowledge)."),
    testFraction: z.number().gt(0).lt(1).default(0.3).describe("Share of questions held out for evaluation."),
    noiseFraction: z.number().min(0).max(1).default(0).describe("Share of unknown facts that also get an unreliable passage contradicting them (evidence conflicts; 0 = none)."),
    noiseReliability: z.number().min(0).max(1).default(0.3).describe("Reliability recorded on the contradicting passages (their source shows as `forum`)."),
  })
  .strict();

export const ToolsSection = z
  .object({
    timeoutMs: ms(1, "Limit of one tool-call attempt (ms, ≤ 2³¹−1); past it the call is aborted and observes an error.").default(10000),
    retries: intIn(0, 1_000, "Retries of a tool call that failed with an error the tool marks retryable (RetryableToolError / retryable: true); timeouts are not retried.").default(0),
    backoffMs: ms(0, "Wait before the first retry (ms, ≤ 2³¹−1), doubled before each further retry, capped at maxBackoffMs.").default(100),
    maxBackoffMs: ms(0, "Cap on the wait between retries (ms, ≤ 2³¹−1).").default(5000),
    maxConcurrency: int(0, "Calls of one tool running at once across all episodes (0 = unlimited); a queued call waits up to timeoutMs for a slot, not counted in its own timeout.").default(0),
    maxOutputChars: intIn(1, SIZE_BOUNDS.chars, "Cap on a tool's output (characters of the string or its JSON, ≤ V8's longest string); longer output is an error observation.").default(100000),
    maxResultBytes: intIn(1, 3 * SIZE_BOUNDS.chars, "Hard limit on a tool's output (UTF-8 bytes of the string or its JSON): larger output is an error observation naming the tool and its size, with no head kept; far above maxOutputChars.").default(16 * 1024 * 1024),
  })
  .strict();

export const FaultsSection = z
  .object({
    rate: z.number().min(0).max(1).default(0).describe("Share of tool-call attempts that fault, in [0, 1] (0 = off); for hardening runs and tests (src/env/faults.ts)."),
    kinds: z
      .preprocess(
        // `--env.faults.kinds hang` or `hang,slow` as well as a YAML list.
        (v) => (typeof v === "string" ? commaList(v) : v),
        z.array(z.enum(["fail", "hang", "slow", "garbage", "huge"])).min(1),
      )
      .default(["fail", "hang", "slow", "garbage", "huge"])
      .describe("Faults drawn uniformly: fail, hang, slow, garbage, huge (a list, or a comma-separated string)."),
    seed: int(0, "Seed of the fault draws (same seed → same faulting calls).").default(0),
    slowMs: ms(0, "Delay of a `slow` fault (ms, ≤ 2³¹−1).").default(2000),
    hugeChars: intIn(1, SIZE_BOUNDS.chars, "Length of a `huge` output (characters, ≤ V8's longest string; 10 000 000 = 10 MB).").default(10000000),
    retryableShare: z.number().min(0).max(1).default(0.5).describe("Share of `fail` faults marked retryable, in [0, 1]."),
  })
  .strict();

export const EnvConfig = z
  .object({
    name: z
      .string()
      .regex(/^[a-z][a-z0-9-]*$/, "an env name (lower-case letters, digits, -)")
      .default("search")
      .describe("The env recipe to train on (`arl envs` lists them: search, travel, …); its defaults apply under the config file."),
    protocol: z
      .enum(["search-r1", "hermes", "react"])
      .optional()
      .describe("How the policy writes tool calls: search-r1, hermes (Qwen2.5/Qwen3 <tool_call> JSON) or react; default the env's own."),
    options: z.record(z.string(), z.unknown()).default({}).describe("The env's own options (see its README; checked by the env, errors name env.options.<field>)."),
    world: WorldSection.default(WorldSection.parse({})),
    topK: intIn(1, 1_000, "Passages returned per search (Search-R1 default 3).").default(3),
    maxTurns: intIn(1, 1_000, "Turns per episode before it is cut off.").default(4),
    maxObservationTokens: intIn(8, SIZE_BOUNDS.contextLength, "Cap on the tokens of one observation (a tool result, an <information> block).").default(96),
    tools: ToolsSection.default(ToolsSection.parse({})).describe("Tool calls: timeout, retries with back-off, concurrency limit, output cap."),
    faults: FaultsSection.default(FaultsSection.parse({})).describe("Deterministic fault injection into the env's tools (off by default)."),
    episodeDeadlineMs: ms(0, "Wall-clock limit of one episode (ms, ≤ 2³¹−1; 0 = none). Past it the episode ends truncated; its tool calls are bounded by it. Non-zero values make rollouts depend on machine speed.").default(0),
    lanes: intIn(0, 4_096, "Sampling lanes of the RL rollout (0 = off: a batch is whatever episodes ask together). K ≥ 1 splits each step's episodes into K fixed lanes; every sampling batch is one turn of one lane, so batches do not depend on tool timing (slow or remote tools stay deterministic) and with K ≥ 2 one lane decodes while the others wait on tools (src/rollout/lanes.ts).").default(0),
  })
  .strict();

export const TinkerSection = z
  .object({
    baseUrl: z.string().regex(/^https?:\/\/[^\s]+$/, "an http(s) URL").default("http://127.0.0.1:8000").describe("Tinker API server root (hosted Tinker, SkyRL's Tinker server, TuFT, verl-tinker, or `arl serve trainer`)."),
    baseModel: z.string().min(1).default("arl/init").describe("Base model to fine-tune (e.g. Qwen/Qwen3-8B; `arl serve trainer` offers arl/init and its checkpoints)."),
    loraRank: int(1, "LoRA rank sent with create_model (hosted Tinker trains LoRA; arl serve trainer trains all weights).").default(32),
    apiKeyEnv: z.string().default("TINKER_API_KEY").describe("Environment variable holding the API key (keys never go in config files)."),
    timeoutMs: ms(1000, "Per-request timeout (ms); failed requests are retried with the Tinker SDK's back-off (min(2ⁿ, 30) s, up to 5 min). Polls of a future have their own timeout (the server's hold + 15 s) and never give up.").default(60000),
    retryForMs: ms(0, "How long one request keeps retrying while the server is unreachable or answers 408/429/5xx (ms; default 300 000, the Tinker SDK's); then the run stops with the reason, resumable with --resume.").default(300000),
    sendStopStrings: z.boolean().optional().describe("Send multi-token stop strings (</search>) to the server (default: what the server family supports); false = stop ids only, the client cuts samples at the strings."),
    wire: z.enum(["auto", "json", "protobuf"]).default("auto").describe("Encoding of forward_backward and its results: protobuf (Tinker SDK 0.25, hosted Tinker, SkyRL, TuFT, arl serve trainer) or JSON (verl-tinker, older servers); auto = the detected server family's, switched once on a 415."),
    server: z.enum(["auto", "tinker", "skyrl", "tuft", "verl-tinker", "arl", "unknown"]).default("auto").describe("Server family, for its known differences (src/policy/tinker/families.ts); auto = detected from client/config, healthz and get_server_capabilities."),
    tokenizer: z.string().optional().describe("Folder with the model's tokenizer.json (+ tokenizer_config.json) for a real model; default the world's word tokenizer."),
  })
  .strict();

export const PolicyConfig = z
  .object({
    backend: z.enum(["embedded", "tinker"]).default("embedded").describe("Where the model math runs: `embedded` (in-process CPU GPT) or `tinker` (any Tinker-API server)."),
    sampler: z
      .enum(["jax", "onnx"])
      .default("onnx")
      .describe(
        "Sampling engine of the embedded backend: `onnx` (default; onnxruntime-node on an ONNX graph of the same model, rebuilt from the current weights after each update; logprobs match the trainer's to ~1e-5 nats; ~5× faster, BENCHMARKS.md) or `jax` (jax-js, the trainer's own runtime). Ignored by `tinker`.",
      ),
    tinker: TinkerSection.default(TinkerSection.parse({})),
    dModel: intIn(8, SIZE_BOUNDS.dModel, "Transformer width (with the embedded backend, what fits its 4 GiB wasm heap is checked at start: estimateEmbeddedMemory).").default(96),
    nLayers: intIn(1, SIZE_BOUNDS.nLayers, "Transformer blocks.").default(2),
    nHeads: intIn(1, SIZE_BOUNDS.nHeads, "Attention heads (must divide dModel).").default(4),
    mlpRatio: intIn(1, SIZE_BOUNDS.mlpRatio, "MLP hidden size / dModel.").default(4),
    contextLength: intIn(32, SIZE_BOUNDS.contextLength, "Context window (tokens).").default(256),
    microBatchTokens: intIn(64, SIZE_BOUNDS.contextLength, "Embedded backend: tokens per training micro-batch (rows × padded length). Smaller bounds the wasm heap of long contexts (jax-js keeps one set of buffers per micro-batch shape).").default(3072),
    lengthBucket: intIn(8, SIZE_BOUNDS.contextLength, "Embedded backend: padded training lengths are multiples of this (tokens). Larger means fewer micro-batch shapes (less wasm heap, fewer compiles) and more padding.").default(64),
  })
  .strict()
  .refine((p) => p.dModel % p.nHeads === 0, { message: "policy.nHeads must divide policy.dModel", path: ["nHeads"] });

export const SftConfig = z
  .object({
    steps: int(0, "Warm-start (SFT) optimizer steps.").default(1000),
    batchSize: intIn(1, SIZE_BOUNDS.batch, "Demonstrations per SFT step.").default(32),
    learningRate: z.number().positive().default(3e-3).describe("Adam learning rate of SFT."),
    demosPerTask: intIn(1, 1_000, "Demonstrations generated per training question and world.").default(3),
    counterfactualWorlds: intIn(0, 1_000, "Extra demonstration worlds whose unknown facts are permuted, so the policy learns to read evidence instead of memorising answers.").default(3),
    personas: z
      .object({
        careful: z.number().min(0).default(0.2).describe("Searches only when the fact is unknown; good queries."),
        overSearcher: z.number().min(0).default(0.1).describe("Always searches, even for known facts."),
        guesser: z.number().min(0).default(0.55).describe("Never searches; guesses unknown facts."),
        poorQuery: z.number().min(0).default(0.15).describe("First writes a vague query, then recovers or guesses."),
      })
      .strict()
      .optional()
      .describe("The search env's warm-start persona mix (default SEARCH_PERSONAS); other envs use their recipe's own personas, so it is set only for search (resolveConfig)."),
  })
  .strict();

/** The search env's warm-start persona mix, `sft.personas`' default (resolved into every search config). */
export const SEARCH_PERSONAS = { careful: 0.2, overSearcher: 0.1, guesser: 0.55, poorQuery: 0.15 } as const;

export const RlConfig = z
  .object({
    steps: int(0, "RL steps (rollout → reward → advantage → update).").default(100),
    tasksPerStep: intIn(1, SIZE_BOUNDS.batch, "Questions per RL step.").default(16),
    groupSize: intIn(2, SIZE_BOUNDS.groupSize, "Episodes per question (GRPO's G).").default(8),
    temperature: z.number().min(0).default(1).describe("Sampling temperature of rollouts."),
    maxTokensPerTurn: intIn(1, SIZE_BOUNDS.contextLength, "Sampled tokens per turn.").default(16),
    learningRate: z.number().positive().default(1e-3).describe("Adam learning rate of RL."),
    lossFn: z.enum(RL_LOSS_FNS).default("ppo").describe("Policy loss: ppo (clipped; Tinker/veRL vanilla), importance_sampling, cispo (clipped detached IS weight), dro (Tinker's quadratic-penalty loss), gspo (PPO clip on the sequence-level length-normalised ratio). docs/algorithms.md."),
    clipLow: z.number().min(0).lt(1).default(0.2).describe("PPO clip: ratio ≥ 1 − clipLow (veRL clip_ratio_low); below 1, so the lower ratio bound stays positive."),
    clipHigh: z.number().gt(0).default(0.2).describe("PPO clip: ratio ≤ 1 + clipHigh (veRL clip_ratio_high; DAPO clip-higher uses 0.28)."),
    clipRatioC: z.number().gt(1).optional().describe("Dual-clip PPO bound c > 1 (veRL clip_ratio_c, whose default is 3.0): for negative advantages the loss is capped at −c·A. Unset = off (ppo only)."),
    droBeta: z.number().min(0).default(0.05).describe("dro: the quadratic penalty β on (lp − q)² (Tinker loss_fn_config.beta)."),
    lossAggMode: z.enum(["auto", ...LOSS_AGG_MODES]).default("auto").describe("Loss aggregation (veRL loss_agg_mode): token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm (Dr.GRPO; ÷ maxTokensPerTurn × env.maxTurns); auto = the estimator's (drgrpo: seq-mean-token-sum-norm; gspo: seq-mean-token-mean; else token-mean)."),
    klCoef: z.number().min(0).default(0).describe("k3 KL-to-reference coefficient (0 = off)."),
    advantage: z.enum(ADVANTAGE_ESTIMATORS).default("grpo").describe("Advantage estimator (veRL algorithm.adv_estimator names): grpo, drgrpo, rloo, opo, grpo_passk, reinforce_plus_plus, reinforce_plus_plus_baseline, gae (needs a value head), gigpo (turn-level, GiGPO). docs/algorithms.md."),
    gamma: z.number().min(0).max(1).default(1).describe("Discount per policy token for reinforce_plus_plus and gae, per turn for gigpo and per-turn rewards (veRL algorithm.gamma)."),
    lam: z.number().min(0).max(1).default(1).describe("GAE λ (veRL algorithm.lam)."),
    turnRewards: z
      .object({
        toolError: z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT).default(0).describe("Step reward of a turn whose tool call failed (e.g. -0.1)."),
        invalidAction: z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT).default(0).describe("Step reward of a turn with an invalid action."),
        evidence: z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT).default(0).describe("Step reward of the first turn that retrieved a gold answer (information gain)."),
      })
      .strict()
      .default({ toolError: 0, invalidAction: 0, evidence: 0 })
      .describe("Per-turn rewards at the end of each turn (turn-level credit; read by reinforce_plus_plus, gae and gigpo, discounted by rl.gamma)."),
    gigpoStepWeight: z.number().min(0).default(1).describe("gigpo: ω, the weight of the step-level advantage (GiGPO step_advantage_w)."),
    gigpoNormStd: z.boolean().default(false).describe("gigpo: divide episode and step advantages by their group std (GiGPO mode mean_std_norm; default mean_norm)."),
    criticLearningRate: z.number().positive().default(0.01).describe("gae: Adam learning rate of the embedded value head (a linear head on the policy trunk's features)."),
    criticUpdates: intIn(1, 1_000, "gae: value-head Adam steps per RL step, on that step's returns.").default(4),
    cliprangeValue: z.number().positive().default(0.5).describe("gae: value clipping around the old values (veRL critic.cliprange_value)."),
    tis: z.boolean().default(false).describe("Truncated importance sampling for the sampler/trainer logprob mismatch: the PPO ratio uses the trainer's pre-update logprobs and each token's loss is weighted by min(π_trainer/π_sampler, tisCap) (veRL rollout_is: token)."),
    tisCap: z.number().positive().default(2).describe("TIS truncation (veRL rollout_is_threshold)."),
    filterGroups: z.boolean().default(false).describe("DAPO dynamic sampling: drop groups whose rewards are all equal and sample more tasks until rl.tasksPerStep groups remain (veRL algorithm.filter_groups.enable)."),
    maxGenBatches: intIn(1, 100, "DAPO dynamic sampling: most rollout batches per step (veRL filter_groups.max_num_gen_batches); the step trains on what it has after that.").default(4),
    overlongBuffer: int(0, "DAPO overlong shaping: length penalty over the last N tokens of the episode's token budget (maxTokensPerTurn × env.maxTurns); 0 = off (veRL overlong_buffer.len).").default(0),
    overlongPenalty: z.number().min(0).default(1).describe("DAPO overlong shaping: the penalty at the budget (veRL overlong_buffer.penalty_factor)."),
    counterfactualWorlds: intIn(0, 1_000, "RL also samples questions from this many copies of the world with permuted unknown facts (0 = the real world only).").default(8),
    ptxCoef: z.number().min(0).default(1).describe("Weight of warm-start replay (cross entropy on the known-fact demonstrations) in each update; 0 = off (PPO-ptx, InstructGPT §3.5)."),
    ptxBatchSize: intIn(1, SIZE_BOUNDS.batch, "Demonstrations replayed per update when ptxCoef > 0.").default(16),
    minibatches: intIn(1, SIZE_BOUNDS.batch, "Optimizer steps per RL step (the batch is split; later ones are off-policy and clipped).").default(2),
    gradClip: z.number().min(0).default(1).describe("Global gradient-norm clip (0 = off)."),
    maskObservations: z.boolean().default(true).describe("Mask retrieved <information> tokens from the policy loss (Search-R1 §3.1); false trains on them too (Search-R1 Table 4 ablation)."),
    maxNonFiniteSteps: int(1, "Training stops after this many steps in a row whose loss or gradient norm is NaN/Inf (each such update is skipped and logged as train/skipped_nonfinite; applies to SFT steps too).").default(3),
  })
  .strict()
  // Each bound alone allows 2^28 episodes a step; the product is what a step holds in memory.
  .superRefine((r, ctx) => {
    const turnLevel = ["reinforce_plus_plus", "gae", "gigpo"];
    const t = r.turnRewards;
    if ((t.toolError !== 0 || t.invalidAction !== 0 || t.evidence !== 0) && !turnLevel.includes(r.advantage)) {
      ctx.addIssue({ code: "custom", path: ["turnRewards"], message: `per-turn rewards need a turn-level estimator (rl.advantage ${turnLevel.join(", ")}), not "${r.advantage}"` });
    }
    if (r.clipRatioC !== undefined && r.lossFn !== "ppo") {
      ctx.addIssue({ code: "custom", path: ["clipRatioC"], message: `dual clip applies to rl.lossFn "ppo" only (veRL vanilla), not "${r.lossFn}"; unset it` });
    }
    const episodes = r.tasksPerStep * r.groupSize;
    if (episodes > MAX_EPISODES_PER_STEP) {
      const message = `rl.tasksPerStep × rl.groupSize = ${r.tasksPerStep} × ${r.groupSize} = ${episodes} episodes per RL step; at most ${MAX_EPISODES_PER_STEP}`;
      ctx.addIssue({ code: "custom", path: ["groupSize"], params: { keyIssue: true }, message });
    }
  });

const termWeights = (desc: string) =>
  z
    .record(z.string(), z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT))
    .superRefine((weights, ctx) => {
      for (const name of Object.keys(weights)) {
        if (!Object.hasOwn(REWARD_TERMS, name)) {
          ctx.addIssue({ code: "custom", path: [name], params: { keyIssue: true }, message: `unknown reward term${didYouMean(name, Object.keys(REWARD_TERMS))}; allowed: ${Object.keys(REWARD_TERMS).join(", ")}` });
        }
      }
    })
    .describe(desc);

const presetName = z
  .string()
  .refine((p) => Object.hasOwn(REWARD_PRESETS, p), { message: `unknown preset; allowed: ${Object.keys(REWARD_PRESETS).join(", ")}` });

export const JudgeSection = z
  .object({
    baseUrl: z.string().url().describe("OpenAI-compatible base URL, e.g. http://localhost:8000/v1."),
    model: z.string().min(1).describe("Judge model name."),
    rubric: z.string().trim().min(1).default("Reply 1 if the prediction means the same as one of the gold answers, otherwise 0. Reply with the number only.").describe("Judge instructions."),
    apiKeyEnv: z.string().optional().describe("Environment variable holding the API key."),
    // Retry i waits 50·2^i ms: 20 retries keep that far below the timer limit.
    maxRetries: intIn(0, 20, "Retries after a failed judge call.").default(2),
    timeoutMs: ms(1, "Limit of one judge call (ms, ≤ 2³¹−1).").default(30000),
    pricePerInputToken: z.number().min(0).default(0).describe("Price per prompt token."),
    pricePerOutputToken: z.number().min(0).default(0).describe("Price per completion token."),
  })
  .strict();

export const RewardConfig = z
  .object({
    preset: presetName.default("default").describe("Named weight set (see docs/rewards.md): default, tool-env, outcome-only, per-call-bonus, search-cost-only, composite, finance, medical, insurance, customer-service, research."),
    weights: termWeights("Weights added to or overriding the preset's (0 silences a term); total = Σ weight × value.").default({}),
    options: z
      .object({
        requireThink: z.boolean().default(DEFAULT_REWARD_OPTIONS.requireThink).describe("format_sm: require <think> before each action (Search-R1)."),
        otcC: z.number().positive().default(DEFAULT_REWARD_OPTIONS.otcC).describe("otc: OTC's smoothing constant c."),
        abstentions: z.array(z.string()).default([...DEFAULT_REWARD_OPTIONS.abstentions]).describe("Answers that count as abstaining (normalised)."),
        judge: JudgeSection.optional().describe("LLM judge endpoint for the `judge` term."),
      })
      .strict()
      .default({ requireThink: DEFAULT_REWARD_OPTIONS.requireThink, otcC: DEFAULT_REWARD_OPTIONS.otcC, abstentions: [...DEFAULT_REWARD_OPTIONS.abstentions] }),
  })
  .strict();

const riseRule = ({ rise, min, ceiling }: { rise: number; min: number; ceiling: number }, what: string) =>
  z
    .object({
      rise: z.number().min(0).default(rise).describe(`Fires when the smoothed ${what} exceeds its baseline by more than this…`),
      ceiling: z.number().min(0).default(ceiling).describe("…or exceeds this level whatever the baseline…"),
      min: z.number().min(0).default(min).describe("…and is above this."),
    })
    .strict()
    .default({ rise, min, ceiling });

export const DetectorsConfig = z
  .object({
    enabled: z.boolean().default(true).describe("Run the reward-hacking detectors every RL step (logged; warned on the console)."),
    referenceKl: z.boolean().default(true).describe("Measure the KL to the warm-start policy every step (hack/kl_ref, on the first two episodes of each group; one extra forward pass on them)."),
    baselineSteps: int(1, "RL steps averaged into each metric's baseline.").default(D.baselineSteps),
    window: int(1, "RL steps averaged into the smoothed value compared with the baseline.").default(D.window),
    guessUnknown: riseRule(D.guessUnknown, "guess rate on unknown facts"),
    toolSpam: riseRule(D.toolSpam, "searches above the task's need per episode"),
    searchThenIgnore: riseRule(D.searchThenIgnore, "search-then-ignore rate"),
    fabricatedCitation: riseRule(D.fabricatedCitation, "fabricated-citation rate"),
    answerAvoidance: riseRule(D.answerAvoidance, "no-answer rate"),
    lengthCollapse: z.object({ ratio: z.number().min(0).max(1).default(D.lengthCollapse.ratio).describe("Fires when response length falls below this × baseline.") }).strict().default({ ...D.lengthCollapse }),
    entropyCollapse: z.object({ ratio: z.number().min(0).max(1).default(D.entropyCollapse.ratio).describe("Fires when the policy entropy falls below this × baseline.") }).strict().default({ ...D.entropyCollapse }),
    klAcceleration: z
      .object({
        factor: z.number().positive().default(D.klAcceleration.factor).describe("Fires when the windowed KL grew this many times faster over the last window than over the one before…"),
        min: z.number().min(0).default(D.klAcceleration.min).describe("…and the KL is at least this (nats/token)…"),
        minGrowth: z.number().min(0).default(D.klAcceleration.minGrowth).describe("…and grew by more than factor × this (nats/token per window)."),
      })
      .strict()
      .default({ ...D.klAcceleration }),
  })
  .strict();

export const LabDesignSection = z
  .object({
    description: z.string().default("").describe("What the design is and which loophole it opens or closes."),
    preset: presetName.default("default").describe("Preset the design starts from (default: the main job's reward)."),
    weights: termWeights("Weights added to or overriding the preset's.").default({}),
    overrides: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).default({}).describe("Training-option overrides, dotted config paths (e.g. rl.maskObservations: false)."),
  })
  .strict();

export const LabConfig = z
  .object({
    designs: z
      .preprocess((v) => (typeof v === "string" ? commaList(v) : v), z.array(z.string()).min(1))
      .default(["outcome-only", "per-call-bonus", "search-cost-only", "composite", "composite-unmasked"]).describe("Designs `arl lab` trains, built-in or defined below (a list, or one comma-separated string)."),
    define: z
      .record(
        z.string().regex(/^(?!\.{1,2}$)[A-Za-z0-9._-]+$/, "a design name is letters, digits, '.', '_' or '-' (not '.' or '..')"),
        LabDesignSection,
      )
      .default({})
      .describe("New designs from terms, weights and training overrides, by name."),
    examples: int(0, "Example trajectories per design in the report (before and after RL).").default(5),
  })
  .strict();

export const EvalConfig = z
  .object({
    temperature: z.number().min(0).default(0).describe("Sampling temperature at evaluation (0 = greedy, as Search-R1)."),
    maxTasks: int(0, "Evaluate at most N held-out questions (0 = all).").default(0),
  })
  .strict();

export const ExperimentConfig = z
  .object({
    run: RunConfig.default(RunConfig.parse({})),
    env: EnvConfig.default(EnvConfig.parse({})),
    policy: PolicyConfig.default(PolicyConfig.parse({})),
    sft: SftConfig.default(SftConfig.parse({})),
    rl: RlConfig.default(RlConfig.parse({})),
    reward: RewardConfig.default(RewardConfig.parse({})),
    eval: EvalConfig.default(EvalConfig.parse({})),
    detectors: DetectorsConfig.default(DetectorsConfig.parse({})),
    lab: LabConfig.default(LabConfig.parse({})),
  })
  .strict()
  // The algorithm must exist on the backend (src/algo/policyLoss.ts): e.g. a Tinker server has no value head for gae.
  .superRefine((c, ctx) => {
    const problem = backendAlgorithmProblem(c.policy.backend, c.rl, c.policy.tinker.server);
    if (problem) ctx.addIssue({ code: "custom", path: ["rl", problem.field], message: `${problem.message} (policy.backend ${c.policy.backend})` });
    if (c.rl.tis && c.rl.lossFn === "dro") {
      ctx.addIssue({ code: "custom", path: ["rl", "tis"], message: 'TIS folds its weight into the advantage, and dro\'s β penalty carries no advantage (it would stay unweighted); use rl.lossFn ppo, cispo, gspo or importance_sampling with rl.tis, or rl.tis false' });
    }
    const budget = c.rl.maxTokensPerTurn * c.env.maxTurns;
    if (c.rl.overlongBuffer > budget) {
      ctx.addIssue({ code: "custom", path: ["rl", "overlongBuffer"], message: `expected at most the episode's token budget rl.maxTokensPerTurn × env.maxTurns = ${budget} (veRL asserts max_resp_len ≥ overlong_buffer.len)` });
    }
  });

/** The resolved experiment config (every field present). */
export type ExperimentConfig = z.infer<typeof ExperimentConfig>;

/** The reward a config asks for: its preset's weights overridden by `reward.weights`, and the term options. */
export function rewardConfigOf(config: ExperimentConfig): RewardSpec {
  return {
    weights: { ...REWARD_PRESETS[config.reward.preset].weights, ...config.reward.weights },
    options: config.reward.options,
  };
}

/**
 * A value as an error message shows it: NaN, Infinity and -Infinity by name (JSON.stringify would print `null`;
 * YAML reads `.nan`, `.inf` and numbers beyond a double such as `1e400` as these), `nothing` for a missing value.
 */
function showValue(v: unknown): string {
  if (v === undefined) return "nothing";
  if (typeof v === "number" && !Number.isFinite(v)) {
    return Number.isNaN(v) ? "NaN" : `${v} (YAML .inf, or a number beyond ±1.8e308 such as 1e400)`;
  }
  if (typeof v === "bigint") return String(v);
  return JSON.stringify(v) ?? String(v);
}

/** The schema node at a config path (defaults, optionals and preprocessors unwrapped), or undefined. */
function schemaAt(path: readonly PropertyKey[]): z.ZodType | undefined {
  type Def = { type: string; innerType?: z.ZodType; out?: z.ZodType; element?: z.ZodType; valueType?: z.ZodType };
  const unwrap = (n: z.ZodType | undefined): z.ZodType | undefined => {
    for (let i = 0; n && i < 16; i++) {
      const def = n._zod.def as unknown as Def;
      if (def.innerType && ["default", "prefault", "optional", "nullable", "readonly", "catch"].includes(def.type)) n = def.innerType;
      else if (def.type === "pipe" && def.out) n = def.out;
      else break;
    }
    return n;
  };
  let node = unwrap(ExperimentConfig);
  for (const key of path) {
    if (!node) return undefined;
    const def = node._zod.def as unknown as Def;
    if (def.type === "object") node = (node as unknown as { shape: Record<string, z.ZodType> }).shape[String(key)];
    else if (def.type === "array") node = def.element;
    else if (def.type === "record") node = def.valueType;
    else return undefined;
    node = unwrap(node);
  }
  return node;
}

/**
 * ` (allowed: min to max[ ms; why])` for a number field with two finite bounds, from its schema; "" otherwise.
 * Millisecond fields (`…Ms`) say why they stop at Node's timer limit.
 */
function allowedRange(path: readonly PropertyKey[]): string {
  const node = schemaAt(path) as (z.ZodType & { minValue?: number | null; maxValue?: number | null }) | undefined;
  const lo = node?.minValue;
  const hi = node?.maxValue;
  if (typeof lo !== "number" || typeof hi !== "number" || !Number.isFinite(lo) || !Number.isFinite(hi)) return "";
  const isMs = /Ms$/.test(String(path.at(-1) ?? ""));
  const why = isMs ? `; Node's timers cannot wait longer than ${MAX_TIMER_MS} ms: a longer delay fires after 1 ms` : "";
  return ` (allowed: ${lo} to ${hi}${isMs ? " ms" : ""}${why})`;
}

/** Describes what a schema node accepts and the value given, for error messages. */
function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  const path = issue.path.join(".");
  let got: unknown = input;
  for (const key of issue.path) {
    // A comma-separated list (`--env.faults.kinds hang,hnag`) is split by its preprocessor: index the split items.
    if (typeof got === "string" && typeof key === "number") got = commaList(got);
    got = got && typeof got === "object" ? (got as Record<PropertyKey, unknown>)[key] : undefined;
  }
  const shown = showValue(got);
  switch (issue.code) {
    case "invalid_value": {
      // A name from TRL / OpenRLHF / veRL configs (src/algo/foreignNames.ts) is told its name here.
      const hint = path === "rl.advantage" || path === "rl.lossFn" || path === "rl.lossAggMode" ? foreignNameHint(got) : undefined;
      return `${path}: expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}, got ${shown}${hint !== undefined ? ` (${hint})` : ""}`;
    }
    case "unrecognized_keys": {
      const shape = (schemaAt(issue.path) as { shape?: Record<string, unknown> } | undefined)?.shape;
      return `${path || "(top level)"}: unknown field(s) ${unknownNamesText(issue.keys, shape ? Object.keys(shape) : [])}`;
    }
    case "too_small":
      if (issue.origin === "array") return `${path}: expected a list of at least ${issue.minimum} item(s), got ${shown}`;
      return `${path}: expected ${issue.origin === "number" ? "a number" : "a value"} ${issue.inclusive ? "≥" : ">"} ${issue.minimum}, got ${shown}${issue.origin === "number" ? allowedRange(issue.path) : ""}`;
    case "too_big":
      return `${path}: expected ${issue.origin === "number" ? "a number" : "a value"} ${issue.inclusive ? "≤" : "<"} ${issue.maximum}, got ${shown}${issue.origin === "number" ? allowedRange(issue.path) : ""}`;
    case "invalid_key":
      return `${path}: ${issue.issues[0]?.message ?? issue.message}`;
    case "invalid_type":
      if (typeof got === "number" && !Number.isFinite(got) && (issue.expected === "number" || issue.expected === "int")) {
        return `${path}: expected a finite number, got ${shown}`;
      }
      return `${path}: expected ${issue.expected}${issue.expected === "int" ? "eger" : ""}, got ${shown}`;
    default:
      // Custom issues on record keys (unknown terms, presets) name the key in the path; the value is not the problem.
      return issue.code === "custom" && (issue.params as { keyIssue?: boolean } | undefined)?.keyIssue ? `${path}: ${issue.message}` : `${path}: ${issue.message}, got ${shown}`;
  }
}

/** A config that failed validation; `message` lists every bad field on its own line. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid config:\n  ${problems.join("\n  ")}`);
    this.name = "ConfigError";
  }
}

/**
 * Validates a raw config object and fills defaults.
 * @throws ConfigError naming each bad field and what it allows
 */
export function resolveConfig(raw: unknown): ExperimentConfig {
  // A library caller's object (e.g. from JSON.parse) may carry an own `__proto__` key: zod's records would make it
  // the prototype of what they return.
  const reserved = reservedKeyProblem(raw);
  if (reserved !== undefined) throw new ConfigError([reserved]);
  const parsed = ExperimentConfig.safeParse(raw ?? {});
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => describeIssue(i, raw)));
  return withSearchPersonas(parsed.data);
}

/**
 * `sft.personas` as the run uses it: the search env's mix (its default filled in) for `env.name: search`; absent for
 * every other env, whose warm start draws its recipe's own personas — so `config.yaml` and `--print-config` record
 * only what the run used. A config written by an earlier version (which recorded the default mix for every env) still
 * resolves: the default mix is dropped for other envs; any other mix is refused there.
 * @throws ConfigError naming `sft.personas` when a non-default mix is set for an env other than search
 */
function withSearchPersonas(config: ExperimentConfig): ExperimentConfig {
  const given = config.sft.personas;
  if (config.env.name === "search") return given === undefined ? { ...config, sft: { ...config.sft, personas: { ...SEARCH_PERSONAS } } } : config;
  if (given === undefined) return config;
  if (JSON.stringify(given) !== JSON.stringify(SEARCH_PERSONAS)) {
    throw new ConfigError([`sft.personas: the search env's warm-start persona mix; the ${config.env.name} env's warm start uses its own recipe's personas (\`arl envs\` lists them), so remove this field`]);
  }
  const { personas: _, ...sft } = config.sft;
  return { ...config, sft };
}

/**
 * Reads a YAML or JSON config file (JSON is YAML), within the bounds of `./configGuards.ts`: at most 256 KiB
 * (checked before reading), 50 000 YAML tokens (before parsing), 10 000 items per list, 64 levels of nesting, and no
 * `__proto__` / `constructor` / `prototype` key.
 * @throws ConfigError `config file <path>: <size or count>; at most <limit>` past a bound or on a reserved key;
 *   Error naming the file when unreadable, not valid YAML or not a mapping
 */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readBoundedText(path);
  } catch (e) {
    if (e instanceof ConfigInputError) throw new ConfigError([`config file ${path}: ${e.message}`]);
    throw new Error(`config file ${path}: cannot read (${(e as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = parseBoundedYaml(text);
  } catch (e) {
    if (e instanceof ConfigInputError) throw new ConfigError([`config file ${path}: ${e.message}`]);
    throw new Error(`config file ${path}: not valid YAML/JSON (${(e as Error).message})`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new Error(`config file ${path}: expected a mapping at the top level`);
  return doc as Record<string, unknown>;
}

/**
 * A flag's value as YAML reads it (`8` → 8, `true`, `[a, b]`, `.inf`); text that is not a YAML scalar or list (`,`,
 * `a: b`, `[x`) is kept as the string given, so validation names the field and shows it.
 * @throws ConfigError naming `key` when the value is over the config bounds or holds a reserved key (`{__proto__: …}`)
 */
function overrideValue(key: string, value: string): unknown {
  try {
    return parseBoundedYaml(value);
  } catch (e) {
    if (e instanceof ConfigInputError) throw new ConfigError([`${key}: ${e.message}`]);
    return value;
  }
}

/**
 * Applies `--a.b value` overrides onto a raw config. Values are parsed as YAML scalars (numbers, booleans, lists).
 * Every dotted path of the program goes through here (flags, lab designs' and recipes' overrides, `--agent`'s
 * defaults), so here `__proto__`, `constructor` and `prototype` segments are refused and only own fields are walked.
 * @throws Error when a key is empty; ConfigError naming the key on a reserved segment or value (`./configGuards.ts`)
 */
export function applyOverrides(raw: Record<string, unknown>, overrides: Record<string, string>): Record<string, unknown> {
  const out = structuredClone(raw);
  for (const [key, value] of Object.entries(overrides)) {
    const parts = key.split(".").filter(Boolean);
    if (parts.length === 0) throw new Error(`config override: empty key`);
    const reserved = reservedSegmentProblem(key);
    if (reserved !== undefined) throw new ConfigError([reserved]);
    let node: Record<string, unknown> = out;
    for (const [i, p] of parts.slice(0, -1).entries()) {
      // Own fields only: `toString` and the like are inherited by every object, not config sections.
      if (!Object.hasOwn(node, p) || node[p] === undefined || node[p] === null) node[p] = {};
      else if (typeof node[p] !== "object" || Array.isArray(node[p])) {
        // A section given as a scalar (`rl: 5`) is an error to report, not something to replace silently.
        throw new ConfigError([`${parts.slice(0, i + 1).join(".")}: expected a mapping of fields, got ${JSON.stringify(node[p])}`]);
      }
      node = node[p] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = overrideValue(key, value);
  }
  return out;
}

/** The smoke configuration: tiny model and budgets, for tests and `--smoke`. */
export const SMOKE_OVERRIDES: Record<string, string> = {
  "env.world.numCountries": "12",
  "policy.dModel": "32",
  "policy.nLayers": "1",
  "policy.nHeads": "2",
  "policy.contextLength": "192",
  "sft.steps": "4",
  "sft.batchSize": "8",
  "sft.demosPerTask": "1",
  "rl.steps": "2",
  "rl.tasksPerStep": "4",
  "rl.groupSize": "4",
  "eval.maxTasks": "8",
  "run.checkpointEvery": "1",
};

// ---------------------------------------------------------------------------------------------------------------
// Memory of the embedded backend

/**
 * jax-js's wasm heap, where the embedded backend keeps every array: one wasm32 `WebAssembly.Memory` (at most 65 536
 * pages of 64 KiB; jax-js's allocator throws "Allocation exceeds the 4 GiB memory32 limit" past it), bytes.
 */
export const WASM_HEAP_LIMIT_BYTES = 4 * 2 ** 30;

/**
 * What the embedded backend's memory depends on (see `estimateEmbeddedMemory`): the model shape (V = vocabSize,
 * C = contextLength, D = dModel, L = nLayers, H = nHeads, r = mlpRatio, default 4) and how it runs.
 */
export interface EmbeddedMemoryShape extends GPTConfig {
  /** Sampling engine: `jax` decodes in the wasm heap, `onnx` in onnxruntime's (native) memory. */
  sampler: "jax" | "onnx";
  /** Whether a reference policy (a second set of weights) is loaded: `rl.klCoef > 0` or the KL monitor. */
  reference: boolean;
  /** Longest sequence trained on or sampled (tokens; default C: an episode may grow to the context window). */
  seqLen?: number;
  /** Tokens per training micro-batch (default 3072, `EmbeddedBackend`'s `maxTokensPerChunk`). */
  trainTokens?: number;
  /** Padded training lengths are multiples of this (tokens; default 64, `EmbeddedBackend`'s `lengthBucket`). */
  lengthBucket?: number;
  /** Rows decoded together, B (default 256, the sampler's `maxBatchRows`, its most). */
  sampleRows?: number;
  /** Prompt tokens per prefill call (default 4096, the jax sampler's `prefillTokens`). */
  prefillTokens?: number;
}

/** `estimateEmbeddedMemory`'s result; sizes in bytes. */
export interface EmbeddedMemoryEstimate {
  /** Parameters of the model (a count, not bytes). */
  params: number;
  /** Padded length T of the longest training micro-batch (tokens). */
  trainSeq: number;
  /** Tokens N = rows·T of that micro-batch. */
  trainTokens: number;
  /**
   * jax-js's wasm heap (limit `WASM_HEAP_LIMIT_BYTES`), bytes: `total` = state + training + sampling is what the
   * first full-length step needs (a config above the limit cannot run); `peak` is what a long run can grow to when
   * its micro-batches take every padded length and row count (one set of buffers per shape; see the formula).
   */
  wasm: { state: number; training: number; sampling: number; total: number; peak: number };
  /** Outside the wasm heap (host copies of weights, the onnx session and its KV cache), bytes; informative. */
  host: number;
}

/**
 * Estimates the memory of the embedded backend (jax-js on wasm, `src/policy/embedded/`) for a model shape, in bytes
 * (float32 = 4 bytes). jax-js allocates every intermediate of a compiled program at once and reuses a freed buffer
 * only for one of the same size, so the heap is the sum of what its programs hold; the constants are fitted on
 * measured heaps:
 *
 *   P        = (V + C)·D + L·(4D² + 2MD + 9D + M) + 2D        parameters (M = r·D)
 *   state    = 4·P·(8 + ref)                                   weights, gradient accumulator, Adam m and v and the
 *                                                              update's new copies (the old ones live until the norm is
 *                                                              known finite); ref = 1 with a reference policy (weights)
 *   T        = min(C, 64·⌈seqLen/64⌉),  N = max(1, ⌊3072/T⌋)·T  a full training micro-batch (rows × padded length)
 *   act(n,t) = 4·n·(L·((40 + 15r)·D + 14·H·t) + 13·V + 10·D)   buffers of the cross-entropy and PPO(+KL) programs on a
 *                                                              micro-batch of n tokens at length t: per layer ≈ 40+15r
 *                                                              of [n, D] and 14 of [n, H, t] (attention), 13 of [n, V]
 *   training = act(N, T)
 *   sampling = 4·L·(9·B·S·D + 4·R·S·H·S)   (jax engine only)   prompt KV cache and decode temporaries, S = min(C,
 *                                                              32·⌈seqLen/32⌉), and the prefill's attention (R rows of
 *                                                              ≈ 4096 tokens); 0 for onnx
 *   total    = state + training + sampling                     the first full-length step
 *   peak     = state + Σ over distinct n of act's [n,·] part + Σ over distinct n·t of its attention part
 *              (+ the same sum over the sampler's shapes)      every micro-batch shape (t = 64, 128, … ≤ T; rows full or
 *                                                              a power of two below) keeps buffers of its own sizes
 *   host     = 4·(4·P + (onnx ? 5·L·B·D·C : 0))                host tables and checkpoint copies; onnx: its weights, the
 *                                                              KV cache [B, H, hd, C] ×2 per layer and its buffers
 *
 * Batch sizes (sft.batchSize, rl.tasksPerStep × rl.groupSize, rl.ptxBatchSize) enter only through B ≤ 256 and
 * N ≤ max(3072, T): the backend splits a training batch into micro-batches of ≈ 3072 tokens and decodes at most 256
 * rows at once. Calibration (jax-js 0.1.25, Node 20; heap after one cross-entropy and one PPO step at full context):
 * 13 shapes d48–d384, L 1–4, H 2–8, C 128–1024, V 600–2400 within ±1 %, 4 others up to 3.7 GiB within ±2 %, and a
 * shape whose `total` is 4.2 GiB failed with jax-js's allocation error; the smoke run's heap 126 MiB vs `total` 124;
 * the default config's heap after 10 SFT + 2 RL steps 1877 MiB vs `total` 635 and `peak` 2473 (docs/reliability.md).
 * @returns the parameter count, the micro-batch's shape and bytes by part
 */
export function estimateEmbeddedMemory(shape: EmbeddedMemoryShape): EmbeddedMemoryEstimate {
  return estimate(shape, true);
}

/** `estimateEmbeddedMemory`, with `peak` left at `total` unless `withPeak` (its enumeration of shapes costs more). */
function estimate(shape: EmbeddedMemoryShape, withPeak: boolean): EmbeddedMemoryEstimate {
  const { vocabSize: V, contextLength: C, dModel: D, nLayers: L, nHeads: H } = shape;
  const r = shape.mlpRatio ?? 4;
  const M = r * D;
  const seqLen = Math.min(C, shape.seqLen ?? C);
  const B = shape.sampleRows ?? 256;
  const budget = shape.trainTokens ?? 3072;
  const prefillTokens = shape.prefillTokens ?? 4096;
  const params = (V + C) * D + L * (4 * D * D + 2 * M * D + 9 * D + M) + 2 * D;
  const state = 4 * params * (8 + (shape.reference ? 1 : 0));
  /** Bytes of a micro-batch's [n, ·]-sized buffers and of its attention-sized ones (n tokens at length t). */
  const rowsPart = (n: number) => 4 * n * (L * (40 + 15 * r) * D + 13 * V + 10 * D);
  const attnPart = (n: number, t: number) => 4 * n * L * 14 * H * t;
  const bucket = shape.lengthBucket ?? 64;
  const T = Math.min(C, Math.ceil(seqLen / bucket) * bucket);
  const fullRows = (t: number) => Math.max(1, Math.floor(budget / t));
  const N = fullRows(T) * T;
  const training = rowsPart(N) + attnPart(N, T);
  // Every shape the backend can form up to T: lengths 64, 128, … (and C itself), rows full or a power of two below.
  const tokenSizes = new Set<number>();
  const attnSizes = new Set<number>();
  for (let t = bucket; withPeak; t += bucket) {
    const len = Math.min(t, T);
    for (let rows = 1; rows < fullRows(len); rows *= 2) {
      tokenSizes.add(rows * len);
      attnSizes.add(rows * len * len);
    }
    tokenSizes.add(fullRows(len) * len);
    attnSizes.add(fullRows(len) * len * len);
    if (len >= T) break;
  }
  let peakTraining = 0;
  for (const n of tokenSizes) peakTraining += rowsPart(n);
  for (const a of attnSizes) peakTraining += attnPart(a, 1);
  let sampling = 0;
  let peakSampling = 0;
  if (shape.sampler === "jax") {
    const S = Math.min(C, Math.ceil(seqLen / 32) * 32);
    const prefillRows = (p: number, b: number) => Math.min(b, 2 ** Math.floor(Math.log2(Math.max(1, Math.floor(prefillTokens / p)))));
    const sample = (b: number, p: number) => 4 * L * 9 * b * p * D;
    const prefill = (b: number, p: number) => 4 * L * 4 * prefillRows(p, b) * p * H * p;
    sampling = sample(B, S) + prefill(B, S);
    const cache = new Set<number>();
    const attn = new Set<number>();
    for (let p = 32; withPeak; p += 32) {
      const len = Math.min(p, S);
      for (let b = 1; b <= B; b *= 2) {
        cache.add(b * len);
        attn.add(prefillRows(len, b) * len * len);
      }
      if (len >= S) break;
    }
    for (const bp of cache) peakSampling += 4 * L * 9 * bp * D;
    for (const a of attn) peakSampling += 4 * L * 4 * a * H;
  }
  const host = 4 * (4 * params + (shape.sampler === "onnx" ? 5 * L * B * D * C : 0));
  return {
    params,
    trainSeq: T,
    trainTokens: N,
    wasm: { state, training, sampling, total: state + training + sampling, peak: withPeak ? state + peakTraining + peakSampling : state + training + sampling },
    host,
  };
}

/**
 * The embedded-memory shape of a config: its policy fields, the tokenizer's vocabulary, whether RL loads a reference
 * policy, and the rows sampled together (an RL step's episodes or the questions evaluated at once, ≤ 256).
 */
export function embeddedMemoryShape(config: ExperimentConfig, vocabSize: number, evalRows = 256): EmbeddedMemoryShape {
  const p = config.policy;
  const rows = Math.max(1, config.rl.tasksPerStep * config.rl.groupSize, evalRows);
  return {
    vocabSize,
    contextLength: p.contextLength,
    dModel: p.dModel,
    nLayers: p.nLayers,
    nHeads: p.nHeads,
    mlpRatio: p.mlpRatio,
    sampler: p.sampler,
    reference: config.rl.klCoef > 0 || (config.detectors.enabled && config.detectors.referenceKl),
    sampleRows: Math.min(256, 2 ** Math.ceil(Math.log2(rows))),
    trainTokens: p.microBatchTokens,
    lengthBucket: p.lengthBucket,
  };
}

/** Bytes as GiB with one decimal. */
function gib(bytes: number): string {
  const g = bytes / 2 ** 30;
  return g === 0 ? "0" : g < 0.1 ? "< 0.1" : g >= 1e6 ? g.toExponential(1) : g.toFixed(1);
}

/**
 * Why a config's embedded model cannot fit jax-js's 4 GiB wasm heap (`estimateEmbeddedMemory`), or undefined when it
 * fits or the policy is remote (`policy.backend: tinker`: the server holds the model). The message names the policy
 * field that, lowered alone, brings the estimate under the limit (the one furthest above what fits), the largest
 * value it may take then, and the others that would also do: `policy.dModel: 8192 needs ≈ 28.4 GiB of the embedded
 * backend's wasm memory (…), more than its 4 GiB limit …; allowed: policy.dModel ≤ 1792 with the other policy fields
 * as set …`. When no field alone is enough, it names them all.
 * @param vocabSize the tokenizer's vocabulary (the world's words)
 * @param evalRows questions evaluated at once (their episodes share sampling batches)
 */
export function embeddedMemoryProblem(config: ExperimentConfig, vocabSize: number, evalRows = 256): string | undefined {
  if (config.policy.backend !== "embedded") return undefined;
  const base = embeddedMemoryShape(config, vocabSize, evalRows);
  const e = estimate(base, false);
  if (e.wasm.total <= WASM_HEAP_LIMIT_BYTES) return undefined;
  const fits = (s: EmbeddedMemoryShape) => estimate(s, false).wasm.total <= WASM_HEAP_LIMIT_BYTES;
  /** The largest of `n` ascending candidates `valueAt(0 … n−1)` that fits (the estimate grows with each), or undefined. */
  const largest = (n: number, valueAt: (i: number) => number, at: (v: number) => EmbeddedMemoryShape): number | undefined => {
    if (n <= 0 || !fits(at(valueAt(0)))) return undefined;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (fits(at(valueAt(mid)))) lo = mid;
      else hi = mid - 1;
    }
    return valueAt(lo);
  };
  /** `largest` over from, from + step, … below `limit`. */
  const upTo = (from: number, limit: number, step: number, at: (v: number) => EmbeddedMemoryShape): number | undefined =>
    largest(Math.ceil((limit - from) / step), (i) => from + i * step, at);
  const p = config.policy;
  // dModel stays a multiple of nHeads (and ≥ 8); nHeads a divisor of dModel.
  const heads = Array.from({ length: p.nHeads - 1 }, (_, i) => i + 1).filter((h) => p.dModel % h === 0);
  const candidates: Array<{ field: string; value: number; max: number | undefined }> = [
    { field: "dModel", value: p.dModel, max: upTo(Math.ceil(8 / p.nHeads) * p.nHeads, p.dModel, p.nHeads, (v) => ({ ...base, dModel: v })) },
    { field: "contextLength", value: p.contextLength, max: upTo(32, p.contextLength, 1, (v) => ({ ...base, contextLength: v })) },
    { field: "nLayers", value: p.nLayers, max: upTo(1, p.nLayers, 1, (v) => ({ ...base, nLayers: v })) },
    { field: "nHeads", value: p.nHeads, max: largest(heads.length, (i) => heads[i], (v) => ({ ...base, nHeads: v })) },
    { field: "mlpRatio", value: p.mlpRatio, max: upTo(1, p.mlpRatio, 1, (v) => ({ ...base, mlpRatio: v })) },
  ];
  const breakdown =
    `weights, gradients and Adam state of ${e.params.toLocaleString("en-US")} parameters ${gib(e.wasm.state)} GiB; ` +
    `a training micro-batch of ${e.trainTokens} tokens at length ${e.trainSeq} ${gib(e.wasm.training)} GiB` +
    (base.sampler === "jax" ? `; jax sampling of ${base.sampleRows} rows ${gib(e.wasm.sampling)} GiB` : "");
  const over = `≈ ${gib(e.wasm.total)} GiB of the embedded backend's wasm memory (${breakdown}), more than its 4 GiB limit (jax-js keeps every array in one wasm32 heap)`;
  const remote = "or policy.backend tinker for a remote model";
  const fixers = candidates.filter((c) => c.max !== undefined).sort((a, b) => b.value / b.max! - a.value / a.max!);
  if (fixers.length > 0) {
    const [f, ...others] = fixers;
    const also = others.length > 0 ? ` (or, alone: ${others.map((o) => `policy.${o.field} ≤ ${o.max}`).join(", ")})` : "";
    return `policy.${f.field}: ${f.value} needs ${over}; allowed: policy.${f.field} ≤ ${f.max} with the other policy fields as set${also}, ${remote}`;
  }
  return `policy: ${candidates.map((c) => `policy.${c.field} ${c.value}`).join(", ")} need ${over}; no one of them lowered alone fits: lower several (e.g. policy.dModel and policy.nLayers), ${remote}`;
}
