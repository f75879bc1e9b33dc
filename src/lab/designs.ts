/**
 * Reward designs for the lab: a preset's weights, extra weights and training-option overrides. The built-in
 * designs each open or close one loophole; configs define new ones (`lab.define`) without code.
 */
import type { EnvRecipe } from "../env/recipe.ts";
import type { ExperimentConfig } from "../train/config.ts";
import { ConfigError, applyOverrides, resolveConfig } from "../train/config.ts";
import { didYouMean } from "../core/suggest.ts";

/** A reward design: what `arl lab` trains, one per run. */
export interface LabDesign {
  name: string;
  description: string;
  /** Preset the weights start from (`REWARD_PRESETS`). */
  preset: string;
  /** Weights added to or overriding the preset's. */
  weights: Record<string, number>;
  /** Training-option overrides (dotted config paths under `rl.`, `reward.` or `detectors.` → YAML scalar text). */
  overrides: Record<string, string>;
}

/** The built-in designs, by name. */
export const BUILTIN_DESIGNS: Readonly<Record<string, Omit<LabDesign, "name">>> = {
  "outcome-only": {
    description: "EM only. Searching is free and a lucky guess pays as much as a searched answer.",
    preset: "outcome-only",
    weights: {},
    overrides: {},
  },
  "per-call-bonus": {
    description: "EM plus a bonus per tool call: pays tool-call theatre.",
    preset: "per-call-bonus",
    weights: {},
    overrides: {},
  },
  "search-cost-only": {
    description: "EM minus a price per search, with nothing that says which searches were needed: pays guessing.",
    preset: "search-cost-only",
    weights: {},
    overrides: {},
  },
  composite: {
    description: "EM, format, a guess penalty on unknown facts, a needless-search penalty on known ones, search-then-ignore and fabricated-citation penalties, a small search cost.",
    preset: "composite",
    weights: {},
    overrides: {},
  },
  "composite-unmasked": {
    description: "The composite reward trained with retrieved <information> tokens in the loss (Search-R1 Table 4 ablation).",
    preset: "composite",
    weights: {},
    overrides: { "rl.maskObservations": "false" },
  },
  default: {
    description: "The main job's reward: EM, format, 0.1 per search, 0.1 per invalid action.",
    preset: "default",
    weights: {},
    overrides: {},
  },
};

/**
 * Algorithm designs: the main job's reward (`default`) with one RL algorithm each (docs/algorithms.md), so a lab over
 * them compares algorithms on the same warm start, seed, data and budget. Names are veRL's where it has one.
 */
export const ALGORITHM_DESIGNS: Readonly<Record<string, Omit<LabDesign, "name">>> = {
  grpo: { description: "GRPO: group-normalised outcome advantage, PPO clip, token-mean (this repository's default).", preset: "default", weights: {}, overrides: {} },
  drgrpo: { description: "Dr.GRPO: group mean only, seq-mean-token-sum-norm (Liu et al. 2025).", preset: "default", weights: {}, overrides: { "rl.advantage": "drgrpo" } },
  rloo: { description: "RLOO: leave-one-out baseline (Ahmadian et al. 2024).", preset: "default", weights: {}, overrides: { "rl.advantage": "rloo" } },
  reinforce_plus_plus: { description: "REINFORCE++: discounted returns whitened over the batch, no group baseline (Hu 2025).", preset: "default", weights: {}, overrides: { "rl.advantage": "reinforce_plus_plus" } },
  reinforce_plus_plus_baseline: { description: "REINFORCE++-baseline: group mean subtracted, then batch-whitened (Hu 2025).", preset: "default", weights: {}, overrides: { "rl.advantage": "reinforce_plus_plus_baseline" } },
  gae: { description: "PPO with GAE (γ 1, λ 0.95) and a linear value head on the policy trunk.", preset: "default", weights: {}, overrides: { "rl.advantage": "gae", "rl.lam": "0.95" } },
  dapo: {
    description: "DAPO: clip-higher (0.28), dynamic sampling (all-equal groups dropped and resampled), token-mean, overlong shaping (Yu et al. 2025).",
    preset: "default",
    weights: {},
    overrides: { "rl.clipHigh": "0.28", "rl.filterGroups": "true", "rl.lossAggMode": "token-mean", "rl.overlongBuffer": "8" },
  },
  gspo: { description: "GSPO: PPO clip on the sequence-level length-normalised ratio, seq-mean-token-mean (Zheng et al. 2025).", preset: "default", weights: {}, overrides: { "rl.lossFn": "gspo" } },
  cispo: { description: "CISPO: clipped, detached IS weight; no token loses its gradient (MiniMax-M1).", preset: "default", weights: {}, overrides: { "rl.lossFn": "cispo", "rl.clipHigh": "0.28" } },
  gigpo: {
    description: "GiGPO: episode + step-level advantages over shared anchor states, γ 0.95, with per-turn rewards for failed tool calls and first evidence (Feng et al. 2025).",
    preset: "default",
    weights: {},
    overrides: { "rl.advantage": "gigpo", "rl.gamma": "0.95", "rl.turnRewards.toolError": "-0.1", "rl.turnRewards.evidence": "0.1" },
  },
};

/** `lab.designs: algorithms` expands to these (the documented comparison). */
export const ALGORITHM_SET = Object.keys(ALGORITHM_DESIGNS);

const ALLOWED_PREFIXES = ["rl.", "reward.", "detectors."];

/**
 * The designs a config asks for (`lab.designs`), looked up in `lab.define` first, then `BUILTIN_DESIGNS`.
 * @throws ConfigError naming an unknown design (with the allowed names), a duplicate, or an override outside
 *   `rl.` / `reward.` / `detectors.` (a design must not change the shared world, model or warm start)
 */
export function resolveDesigns(config: ExperimentConfig): LabDesign[] {
  const builtin = (n: string) => Object.hasOwn(BUILTIN_DESIGNS, n) || Object.hasOwn(ALGORITHM_DESIGNS, n);
  const allowed = [...Object.keys(BUILTIN_DESIGNS), ...Object.keys(ALGORITHM_DESIGNS), "algorithms", ...Object.keys(config.lab.define).filter((n) => !builtin(n))];
  const problems: string[] = [];
  for (const name of Object.keys(config.lab.define)) {
    if (builtin(name) || name === "algorithms") problems.push(`lab.define.${name}: a built-in design has this name; choose another name`);
  }
  const seen = new Set<string>();
  const designs: LabDesign[] = [];
  for (const name of config.lab.designs.flatMap((n) => (n === "algorithms" ? ALGORITHM_SET : [n]))) {
    if (seen.has(name)) problems.push(`lab.designs: "${name}" is listed twice`);
    seen.add(name);
    // Own keys only: a name such as `constructor` or `toString` is inherited by every object, not a design.
    const custom = builtin(name) || !Object.hasOwn(config.lab.define, name) ? undefined : config.lab.define[name];
    const d = custom
      ? { description: custom.description, preset: custom.preset, weights: custom.weights, overrides: Object.fromEntries(Object.entries(custom.overrides).map(([k, v]) => [k, String(v)])) }
      : Object.hasOwn(BUILTIN_DESIGNS, name) ? BUILTIN_DESIGNS[name] : Object.hasOwn(ALGORITHM_DESIGNS, name) ? ALGORITHM_DESIGNS[name] : undefined;
    if (d === undefined) {
      problems.push(`lab.designs: unknown design "${name}"${didYouMean(name, allowed)}; allowed: ${allowed.join(", ")} (or define it under lab.define)`);
      continue;
    }
    for (const key of Object.keys(d.overrides)) {
      if (!ALLOWED_PREFIXES.some((p) => key.startsWith(p))) {
        problems.push(`lab.define.${name}.overrides: "${key}" is not allowed; a design may override only ${ALLOWED_PREFIXES.map((p) => p + "*").join(", ")}`);
      }
    }
    designs.push({ name, ...d });
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return designs;
}

/**
 * The experiment config of one design: the lab's config with the design's preset, weights and overrides.
 * @throws ConfigError when an override makes the config invalid (naming the field)
 */
export function designConfig(base: ExperimentConfig, design: LabDesign): ExperimentConfig {
  const raw = structuredClone(base) as unknown as Record<string, unknown>;
  (raw.reward as Record<string, unknown>).preset = design.preset;
  (raw.reward as Record<string, unknown>).weights = { ...design.weights };
  try {
    return resolveConfig(applyOverrides(raw, design.overrides));
  } catch (e) {
    if (e instanceof ConfigError) throw new ConfigError(e.problems.map((p) => `design ${design.name}: ${p}`));
    throw e;
  }
}

/**
 * {@link designConfig} of every design, validated all at once: every design's problems in one ConfigError (a
 * lab-wide flag that breaks several designs names each of them, not only the first).
 * @throws ConfigError with each failing design's problems, prefixed `design <name>:`
 */
export function designConfigs(base: ExperimentConfig, designs: readonly LabDesign[]): ExperimentConfig[] {
  const problems: string[] = [];
  const out: ExperimentConfig[] = [];
  for (const d of designs) {
    try {
      out.push(designConfig(base, d));
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      problems.push(...e.problems);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return out;
}

/** A design of an env lab: a {@link LabDesign} with the detectors it is expected to fire (recipe designs only). */
export interface EnvLabDesign extends LabDesign {
  /** `RecipeLabDesign.expectedDetectors`; absent for algorithm designs and `lab.define` ones. */
  expectedDetectors?: string[];
}

/** What a design of an env lab may override: training options, and the env's own options (not its world or model). */
const ENV_ALLOWED_PREFIXES = ["rl.", "reward.", "detectors.", "env.options."];

/**
 * The designs an env lab (`arl lab --env NAME`, `config.env.name` ≠ `search`) trains, from `lab.designs`: the
 * recipe's own designs (`EnvRecipe.labDesigns`), the algorithm designs (`ALGORITHM_DESIGNS`, or `algorithms` for all
 * of them) — each with the lab's own reward (`reward.preset` and `reward.weights`: the env's, e.g. `tool-env`), so
 * only the algorithm differs — or designs under `lab.define`. The search env's reward designs (`BUILTIN_DESIGNS`)
 * belong to the search world and are refused here.
 * @throws ConfigError naming an unknown design (with the allowed names), a duplicate, a `lab.define` name that is a
 *   recipe or algorithm design's, or an override outside `rl.` / `reward.` / `detectors.` / `env.options.`
 */
export function resolveEnvDesigns(config: ExperimentConfig, recipe: Pick<EnvRecipe, "name" | "labDesigns">): EnvLabDesign[] {
  const own = recipe.labDesigns ?? {};
  const builtin = (n: string) => Object.hasOwn(own, n) || Object.hasOwn(ALGORITHM_DESIGNS, n);
  const allowed = [...Object.keys(own), ...Object.keys(ALGORITHM_DESIGNS), "algorithms", ...Object.keys(config.lab.define).filter((n) => !builtin(n))];
  const problems: string[] = [];
  for (const name of Object.keys(config.lab.define)) {
    if (builtin(name) || name === "algorithms") problems.push(`lab.define.${name}: a ${recipe.name} or algorithm design has this name; choose another name`);
  }
  const seen = new Set<string>();
  const designs: EnvLabDesign[] = [];
  for (const name of config.lab.designs.flatMap((n) => (n === "algorithms" ? ALGORITHM_SET : [n]))) {
    if (seen.has(name)) problems.push(`lab.designs: "${name}" is listed twice`);
    seen.add(name);
    let d: Omit<EnvLabDesign, "name"> | undefined;
    if (Object.hasOwn(own, name)) {
      const r = own[name];
      d = { description: r.description, preset: r.preset, weights: { ...r.weights }, overrides: { ...r.overrides }, ...(r.expectedDetectors !== undefined ? { expectedDetectors: [...r.expectedDetectors] } : {}) };
    } else if (Object.hasOwn(ALGORITHM_DESIGNS, name)) {
      const a = ALGORITHM_DESIGNS[name];
      d = { description: a.description, preset: config.reward.preset, weights: { ...config.reward.weights }, overrides: { ...a.overrides } };
    } else if (Object.hasOwn(config.lab.define, name)) {
      const c = config.lab.define[name];
      d = { description: c.description, preset: c.preset, weights: c.weights, overrides: Object.fromEntries(Object.entries(c.overrides).map(([k, v]) => [k, String(v)])) };
    }
    if (d === undefined) {
      const search = Object.hasOwn(BUILTIN_DESIGNS, name) ? ` ("${name}" is a design of the search env)` : "";
      problems.push(`lab.designs: unknown design "${name}" for the ${recipe.name} env${search}${didYouMean(name, allowed)}; allowed: ${allowed.join(", ")} (or define it under lab.define)`);
      continue;
    }
    for (const key of Object.keys(d.overrides)) {
      if (!ENV_ALLOWED_PREFIXES.some((p) => key.startsWith(p))) {
        problems.push(`lab.designs.${name}.overrides: "${key}" is not allowed; a design may override only ${ENV_ALLOWED_PREFIXES.map((p) => p + "*").join(", ")}`);
      }
    }
    designs.push({ name, ...d });
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return designs;
}

/**
 * The designs an env lab trains when `lab.designs` is not given: the recipe's own (`EnvRecipe.labDesigns`), in order.
 * @throws ConfigError when the recipe has none (naming `--designs algorithms` and `lab.define` as the ways to run one)
 */
export function defaultEnvDesigns(recipe: Pick<EnvRecipe, "name" | "labDesigns">): string[] {
  const names = Object.keys(recipe.labDesigns ?? {});
  if (names.length === 0) {
    throw new ConfigError([`lab.designs: the ${recipe.name} env declares no reward designs (EnvRecipe.labDesigns); run --designs algorithms (or ${ALGORITHM_SET.join(", ")}), or define designs under lab.define`]);
  }
  return names;
}
