/**
 * The experiment config: one shallow YAML/JSON document with sections `run`, `env`, `policy`, `sft`, `rl`,
 * `reward`, `eval`, `detectors`, `lab`. Every field has a zod default and a description; validation errors name the
 * path and the allowed values (`rl.groupSize: expected an integer ≥ 2, got -3`). Each section's schema lives beside
 * its owner — `env` in src/env/config.ts (an env's own fields are its recipe's `env.options`), `policy` in
 * src/policy/config.ts, `rl` in src/algo/config.ts, `reward` and `detectors` in src/reward/config.ts — and is
 * assembled here with the runner's own `run`, `sft`, `eval` and `lab`. Files are read and flags (`--rl.groupSize 8`)
 * applied by ./configFile.ts; `resolveConfig` validates the result.
 */
import { z } from "zod";
import { unknownNamesText } from "../core/suggest.ts";
import { commaList, int, intIn, SIZE_BOUNDS } from "../core/configFields.ts";
import { reservedKeyProblem } from "./configGuards.ts";
import { MAX_TIMER_MS } from "../env/tool.ts";
import { envSection } from "../env/config.ts";
import { DetectorsConfig, presetName, RewardConfig, termWeights } from "../reward/config.ts";
import { foreignNameHint } from "../algo/foreignNames.ts";
import { RlConfig, rlCrossSectionIssues } from "../algo/config.ts";
import { PolicyConfig } from "../policy/config.ts";
import { backendAlgorithmProblem } from "./backendAlgorithm.ts";

/** The `run` section: run folder, seed, checkpoint and sample cadence. */
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

/** The `sft` section: the warm start's budget and demonstrations. */
export const SftConfig = z
  .object({
    steps: int(0, "Warm-start (SFT) optimizer steps.").default(1000),
    batchSize: intIn(1, SIZE_BOUNDS.batch, "Demonstrations per SFT step.").default(32),
    learningRate: z.number().positive().default(3e-3).describe("Adam learning rate of SFT."),
    demosPerTask: intIn(1, 1_000, "Demonstrations generated per training question and world.").default(3),
    counterfactualWorlds: intIn(0, 1_000, "Extra demonstration worlds whose unknown facts are permuted, so the policy learns to read evidence instead of memorising answers.").default(3),
    personas: z
      .record(z.string(), z.number().min(0))
      .optional()
      .describe("Weights of the env's warm-start personas (`arl envs` lists them), over its own mix: a persona not named keeps the env's weight; a name the env lacks is an error."),
  })
  .strict();

/** The env section (src/env/config.ts); an env's own fields are its recipe's `env.options`. */
export const EnvConfig = envSection({});

/** One design of `lab.define`: a reward preset and weights plus training overrides. */
export const LabDesignSection = z
  .object({
    description: z.string().default("").describe("What the design is and which loophole it opens or closes."),
    preset: presetName.default("default").describe("Preset the design starts from (default: the main job's reward)."),
    weights: termWeights("Weights added to or overriding the preset's.").default({}),
    overrides: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).default({}).describe("Training-option overrides, dotted config paths (e.g. rl.maskObservations: false)."),
  })
  .strict();

/** The `lab` section: the designs `arl lab` trains and how many examples its report shows. */
export const LabConfig = z
  .object({
    designs: z
      .preprocess((v) => (typeof v === "string" ? commaList(v) : v), z.array(z.string()).min(1))
      .optional()
      .describe("Designs `arl lab` trains: the env's own (`arl lab --list`), algorithm designs, or ones defined below (a list, or one comma-separated string); default the env's own designs."),
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

/** The `eval` section: sampling temperature and how many held-out tasks are evaluated. */
export const EvalConfig = z
  .object({
    temperature: z.number().min(0).default(0).describe("Sampling temperature at evaluation (0 = greedy, as Search-R1)."),
    maxTasks: int(0, "Evaluate at most N held-out questions (0 = all).").default(0),
  })
  .strict();

/** The whole config: every section with its defaults, and the rl rules that read other sections. */
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
  // The algorithm must exist on the backend (./backendAlgorithm.ts): e.g. a Tinker server has no value head for gae;
  // then the rl rules checked on the whole config (src/algo/config.ts).
  .superRefine((c, ctx) => {
    const problem = backendAlgorithmProblem(c.policy.backend, c.rl, c.policy.tinker.server);
    if (problem) ctx.addIssue({ code: "custom", path: ["rl", problem.field], message: `${problem.message} (policy.backend ${c.policy.backend})` });
    for (const issue of rlCrossSectionIssues(c.rl, c.env)) ctx.addIssue({ code: "custom", path: ["rl", issue.field], message: issue.message });
  });

/** The resolved experiment config (every field present). */
export type ExperimentConfig = z.infer<typeof ExperimentConfig>;

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
      // A number field says its range here too (a new-user pass: `--policy.lengthBucket abc` did not).
      return `${path}: expected ${issue.expected}${issue.expected === "int" ? "eger" : ""}, got ${shown}${issue.expected === "number" || issue.expected === "int" ? allowedRange(issue.path) : ""}`;
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
  const moved = movedKeyProblems(raw);
  if (moved.length > 0) throw new ConfigError(moved);
  const parsed = ExperimentConfig.safeParse(raw ?? {});
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => describeIssue(i, raw)));
  return parsed.data;
}

/**
 * Config paths of earlier versions that moved, old → new. A moved section moves each of its fields: the search env's
 * world and passages per search are its recipe's options now (`env.world.numCountries` → `env.options.numCountries`).
 */
const MOVED_PATHS: Readonly<Record<string, string>> = { "env.world": "env.options", "env.topK": "env.options.topK" };
const SEARCH_OPTIONS_NOTE = "(the search env's own options: numCountries, knownFraction, testFraction, noiseFraction, noiseReliability, topK)";

/** The value at a dotted path of a raw config, or undefined. */
function valueAt(raw: unknown, path: string): unknown {
  let v = raw;
  for (const k of path.split(".")) v = v !== null && typeof v === "object" && Object.hasOwn(v, k) ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

/**
 * One problem per moved path set in `raw` (`MOVED_PATHS`), naming its new path; empty when none.
 */
export function movedKeyProblems(raw: unknown): string[] {
  const out: string[] = [];
  for (const [from, to] of Object.entries(MOVED_PATHS)) {
    const v = valueAt(raw, from);
    if (v === undefined) continue;
    const fields = v !== null && typeof v === "object" && !Array.isArray(v) ? Object.keys(v) : [];
    if (fields.length === 0) out.push(`${from}: moved to ${to} ${SEARCH_OPTIONS_NOTE}`);
    for (const k of fields) out.push(`${from}.${k}: moved to ${to}.${k} ${SEARCH_OPTIONS_NOTE}`);
  }
  return out;
}
