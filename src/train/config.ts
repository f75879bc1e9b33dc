/**
 * The experiment config: one shallow YAML/JSON document with sections `run`, `env`, `policy`, `sft`, `rl`,
 * `reward`, `eval`. Every field has a zod default and a description; validation errors name the path and the
 * allowed values (`rl.groupSize: expected an integer ≥ 2, got -3`). CLI flags override fields (`--rl.groupSize 8`).
 */
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { REWARD_TERMS } from "../reward/terms.ts";
import { REWARD_PRESETS } from "../reward/presets.ts";
import { DEFAULT_REWARD_OPTIONS, type RewardConfig as RewardSpec } from "../reward/compose.ts";
import { DEFAULT_DETECTOR_THRESHOLDS as D } from "../reward/detectors.ts";

const int = (min: number, desc: string) => z.number().int().min(min).describe(desc);
const num = (desc: string) => z.number().describe(desc);

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
    timeoutMs: int(1, "Limit of one tool-call attempt (ms); past it the call is aborted and observes an error.").default(10000),
    retries: int(0, "Retries of a tool call that failed with an error the tool marks retryable (RetryableToolError / retryable: true); timeouts are not retried.").default(0),
    backoffMs: int(0, "Wait before the first retry (ms), doubled before each further retry, capped at maxBackoffMs.").default(100),
    maxBackoffMs: int(0, "Cap on the wait between retries (ms).").default(5000),
    maxConcurrency: int(0, "Calls of one tool running at once across all episodes (0 = unlimited); a queued call waits up to timeoutMs for a slot, not counted in its own timeout.").default(0),
    maxOutputChars: int(1, "Cap on a tool's output (characters of the string or its JSON); longer output is an error observation.").default(100000),
  })
  .strict();

export const FaultsSection = z
  .object({
    rate: z.number().min(0).max(1).default(0).describe("Share of tool-call attempts that fault, in [0, 1] (0 = off); for hardening runs and tests (src/env/faults.ts)."),
    kinds: z
      .preprocess(
        // `--env.faults.kinds hang` or `hang,slow` as well as a YAML list.
        (v) => (typeof v === "string" ? v.split(",").map((x) => x.trim()).filter(Boolean) : v),
        z.array(z.enum(["fail", "hang", "slow", "garbage", "huge"])).min(1),
      )
      .default(["fail", "hang", "slow", "garbage", "huge"])
      .describe("Faults drawn uniformly: fail, hang, slow, garbage, huge (a list, or a comma-separated string)."),
    seed: int(0, "Seed of the fault draws (same seed → same faulting calls).").default(0),
    slowMs: int(0, "Delay of a `slow` fault (ms).").default(2000),
    hugeChars: int(1, "Length of a `huge` output (characters; 10 000 000 = 10 MB).").default(10000000),
    retryableShare: z.number().min(0).max(1).default(0.5).describe("Share of `fail` faults marked retryable, in [0, 1]."),
  })
  .strict();

export const EnvConfig = z
  .object({
    world: WorldSection.default(WorldSection.parse({})),
    topK: int(1, "Passages returned per search (Search-R1 default 3).").default(3),
    maxTurns: int(1, "Turns per episode before it is cut off.").default(4),
    maxObservationTokens: int(8, "Cap on the tokens of one <information> observation.").default(96),
    tools: ToolsSection.default(ToolsSection.parse({})).describe("Tool calls: timeout, retries with back-off, concurrency limit, output cap."),
    faults: FaultsSection.default(FaultsSection.parse({})).describe("Deterministic fault injection into the env's tools (off by default)."),
    episodeDeadlineMs: int(0, "Wall-clock limit of one episode (ms; 0 = none). Past it the episode ends truncated; its tool calls are bounded by it. Non-zero values make rollouts depend on machine speed.").default(0),
    lanes: int(0, "Sampling lanes of the RL rollout (0 = off: a batch is whatever episodes ask together). K ≥ 1 splits each step's episodes into K fixed lanes; every sampling batch is one turn of one lane, so batches do not depend on tool timing (slow or remote tools stay deterministic) and with K ≥ 2 one lane decodes while the others wait on tools (src/rollout/lanes.ts).").default(0),
  })
  .strict();

export const TinkerSection = z
  .object({
    baseUrl: z.string().regex(/^https?:\/\/[^\s]+$/, "an http(s) URL").default("http://127.0.0.1:8000").describe("Tinker API server root (hosted Tinker, SkyRL's Tinker server, TuFT, verl-tinker, or `arl serve trainer`)."),
    baseModel: z.string().min(1).default("arl/init").describe("Base model to fine-tune (e.g. Qwen/Qwen3-8B; `arl serve trainer` offers arl/init and its checkpoints)."),
    loraRank: int(1, "LoRA rank sent with create_model (hosted Tinker trains LoRA; arl serve trainer trains all weights).").default(32),
    apiKeyEnv: z.string().default("TINKER_API_KEY").describe("Environment variable holding the API key (keys never go in config files)."),
    timeoutMs: int(1000, "Per-request timeout (ms); failed requests are retried with back-off.").default(60000),
    sendStopStrings: z.boolean().default(true).describe("Send multi-token stop strings (</search>) to the server; false for servers that take stop ids only (SkyRL) — the client then cuts samples at them."),
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
    dModel: int(8, "Transformer width.").default(96),
    nLayers: int(1, "Transformer blocks.").default(2),
    nHeads: int(1, "Attention heads (must divide dModel).").default(4),
    mlpRatio: int(1, "MLP hidden size / dModel.").default(4),
    contextLength: int(32, "Context window (tokens).").default(256),
  })
  .strict()
  .refine((p) => p.dModel % p.nHeads === 0, { message: "policy.nHeads must divide policy.dModel", path: ["nHeads"] });

export const SftConfig = z
  .object({
    steps: int(0, "Warm-start (SFT) optimizer steps.").default(1000),
    batchSize: int(1, "Demonstrations per SFT step.").default(32),
    learningRate: z.number().positive().default(3e-3).describe("Adam learning rate of SFT."),
    demosPerTask: int(1, "Demonstrations generated per training question and world.").default(3),
    counterfactualWorlds: int(0, "Extra demonstration worlds whose unknown facts are permuted, so the policy learns to read evidence instead of memorising answers.").default(3),
    personas: z
      .object({
        careful: z.number().min(0).default(0.2).describe("Searches only when the fact is unknown; good queries."),
        overSearcher: z.number().min(0).default(0.1).describe("Always searches, even for known facts."),
        guesser: z.number().min(0).default(0.55).describe("Never searches; guesses unknown facts."),
        poorQuery: z.number().min(0).default(0.15).describe("First writes a vague query, then recovers or guesses."),
      })
      .strict()
      .default({ careful: 0.2, overSearcher: 0.1, guesser: 0.55, poorQuery: 0.15 }),
  })
  .strict();

export const RlConfig = z
  .object({
    steps: int(0, "RL steps (rollout → reward → advantage → update).").default(100),
    tasksPerStep: int(1, "Questions per RL step.").default(16),
    groupSize: int(2, "Episodes per question (GRPO's G).").default(8),
    temperature: z.number().min(0).default(1).describe("Sampling temperature of rollouts."),
    maxTokensPerTurn: int(1, "Sampled tokens per turn.").default(16),
    learningRate: z.number().positive().default(1e-3).describe("Adam learning rate of RL."),
    lossFn: z.enum(["ppo", "importance_sampling"]).default("ppo").describe("Policy loss (Tinker names)."),
    clipLow: z.number().min(0).default(0.2).describe("PPO clip: ratio ≥ 1 − clipLow."),
    clipHigh: z.number().min(0).default(0.2).describe("PPO clip: ratio ≤ 1 + clipHigh."),
    klCoef: z.number().min(0).default(0).describe("k3 KL-to-reference coefficient (0 = off)."),
    advantage: z.enum(["grpo", "drgrpo"]).default("grpo").describe("grpo: (r−mean)/std, token-mean loss; drgrpo: r−mean, constant-length loss."),
    counterfactualWorlds: int(0, "RL also samples questions from this many copies of the world with permuted unknown facts (0 = the real world only).").default(8),
    ptxCoef: z.number().min(0).default(1).describe("Weight of warm-start replay (cross entropy on the known-fact demonstrations) in each update; 0 = off (PPO-ptx, InstructGPT §3.5)."),
    ptxBatchSize: int(1, "Demonstrations replayed per update when ptxCoef > 0.").default(16),
    minibatches: int(1, "Optimizer steps per RL step (the batch is split; later ones are off-policy and clipped).").default(2),
    gradClip: z.number().min(0).default(1).describe("Global gradient-norm clip (0 = off)."),
    maskObservations: z.boolean().default(true).describe("Mask retrieved <information> tokens from the policy loss (Search-R1 §3.1); false trains on them too (Search-R1 Table 4 ablation)."),
    maxNonFiniteSteps: int(1, "Training stops after this many steps in a row whose loss or gradient norm is NaN/Inf (each such update is skipped and logged as train/skipped_nonfinite; applies to SFT steps too).").default(3),
  })
  .strict();

const termWeights = (desc: string) =>
  z
    .record(z.string(), z.number())
    .superRefine((weights, ctx) => {
      for (const name of Object.keys(weights)) {
        if (!Object.hasOwn(REWARD_TERMS, name)) {
          ctx.addIssue({ code: "custom", path: [name], params: { keyIssue: true }, message: `unknown reward term; allowed: ${Object.keys(REWARD_TERMS).join(", ")}` });
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
    maxRetries: int(0, "Retries after a failed judge call.").default(2),
    timeoutMs: int(1, "Limit of one judge call (ms).").default(30000),
    pricePerInputToken: z.number().min(0).default(0).describe("Price per prompt token."),
    pricePerOutputToken: z.number().min(0).default(0).describe("Price per completion token."),
  })
  .strict();

export const RewardConfig = z
  .object({
    preset: presetName.default("default").describe("Named weight set (see docs/rewards.md): default, outcome-only, per-call-bonus, search-cost-only, composite, finance, medical, insurance, customer-service, research."),
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
      .preprocess((v) => (typeof v === "string" ? v.split(",").map((x) => x.trim()).filter(Boolean) : v), z.array(z.string()).min(1))
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
  .strict();

/** The resolved experiment config (every field present). */
export type ExperimentConfig = z.infer<typeof ExperimentConfig>;

/** The reward a config asks for: its preset's weights overridden by `reward.weights`, and the term options. */
export function rewardConfigOf(config: ExperimentConfig): RewardSpec {
  return {
    weights: { ...REWARD_PRESETS[config.reward.preset].weights, ...config.reward.weights },
    options: config.reward.options,
  };
}

/** Describes what a schema node accepts, for error messages. */
function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  const path = issue.path.join(".");
  let got: unknown = input;
  for (const key of issue.path) got = got && typeof got === "object" ? (got as Record<PropertyKey, unknown>)[key] : undefined;
  const shown = got === undefined ? "nothing" : JSON.stringify(got);
  switch (issue.code) {
    case "invalid_value":
      return `${path}: expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}, got ${shown}`;
    case "unrecognized_keys":
      return `${path || "(top level)"}: unknown field(s) ${issue.keys.join(", ")}`;
    case "too_small":
      return `${path}: expected ${issue.origin === "number" ? "a number" : "a value"} ${issue.inclusive ? "≥" : ">"} ${issue.minimum}, got ${shown}`;
    case "too_big":
      return `${path}: expected ${issue.origin === "number" ? "a number" : "a value"} ${issue.inclusive ? "≤" : "<"} ${issue.maximum}, got ${shown}`;
    case "invalid_key":
      return `${path}: ${issue.issues[0]?.message ?? issue.message}`;
    case "invalid_type":
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
  const parsed = ExperimentConfig.safeParse(raw ?? {});
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => describeIssue(i, raw)));
  return parsed.data;
}

/**
 * Reads a YAML or JSON config file (JSON is YAML). @throws Error naming the file when unreadable or not a mapping
 */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new Error(`config file ${path}: cannot read (${(e as Error).message})`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw new Error(`config file ${path}: not valid YAML/JSON (${(e as Error).message})`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new Error(`config file ${path}: expected a mapping at the top level`);
  return doc as Record<string, unknown>;
}

/**
 * Applies `--a.b value` overrides onto a raw config. Values are parsed as YAML scalars (numbers, booleans, lists).
 * @throws Error when a key is empty
 */
export function applyOverrides(raw: Record<string, unknown>, overrides: Record<string, string>): Record<string, unknown> {
  const out = structuredClone(raw);
  for (const [key, value] of Object.entries(overrides)) {
    const parts = key.split(".").filter(Boolean);
    if (parts.length === 0) throw new Error(`config override: empty key`);
    let node: Record<string, unknown> = out;
    for (const [i, p] of parts.slice(0, -1).entries()) {
      if (node[p] === undefined || node[p] === null) node[p] = {};
      else if (typeof node[p] !== "object" || Array.isArray(node[p])) {
        // A section given as a scalar (`rl: 5`) is an error to report, not something to replace silently.
        throw new ConfigError([`${parts.slice(0, i + 1).join(".")}: expected a mapping of fields, got ${JSON.stringify(node[p])}`]);
      }
      node = node[p] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]] = parseYaml(value) as unknown;
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
