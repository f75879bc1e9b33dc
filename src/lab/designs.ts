/**
 * Reward designs for the lab: a preset's weights, extra weights and training-option overrides. The built-in
 * designs each open or close one loophole; configs define new ones (`lab.define`) without code.
 */
import type { EnvRecipe } from "../env/recipe.ts";
import { ENV_RECIPES } from "../envs/index.ts";
import type { ExperimentConfig } from "../train/config.ts";
import { ConfigError, resolveConfig } from "../train/config.ts";
import { applyOverrides } from "../train/configFile.ts";
import { didYouMean } from "../core/suggest.ts";

/** A reward design: what `arl lab` trains, one per run. */
export interface LabDesign {
  name: string;
  description: string;
  /** Preset the weights start from (`REWARD_PRESETS`). */
  preset: string;
  /** Weights added to or overriding the preset's. */
  weights: Record<string, number>;
  /** Training-option overrides (dotted config paths under `rl.`, `reward.`, `detectors.` or `env.options.` → YAML scalar text). */
  overrides: Record<string, string>;
  /** `RecipeLabDesign.expectedDetectors`; absent for algorithm designs and `lab.define` ones. */
  expectedDetectors?: string[];
}

/** An algorithm design: the `default` reward preset, no extra weights, and `overrides` that pick the algorithm. */
function algorithm(description: string, overrides: Record<string, string>): Omit<LabDesign, "name"> {
  return { description, preset: "default", weights: {}, overrides };
}

/**
 * Algorithm designs: the main job's reward (`default`) with one RL algorithm each (docs/algorithms.md), so a lab over
 * them compares algorithms on the same warm start, seed, data and budget. Names are veRL's where it has one.
 */
export const ALGORITHM_DESIGNS: Readonly<Record<string, Omit<LabDesign, "name">>> = {
  grpo: algorithm("GRPO: group-normalised outcome advantage, PPO clip, token-mean (this repository's default).", {}),
  drgrpo: algorithm("Dr.GRPO: group mean only, seq-mean-token-sum-norm (Liu et al. 2025).", { "rl.advantage": "drgrpo" }),
  rloo: algorithm("RLOO: leave-one-out baseline (Ahmadian et al. 2024).", { "rl.advantage": "rloo" }),
  reinforce_plus_plus: algorithm("REINFORCE++: discounted returns whitened over the batch, no group baseline (Hu 2025).", { "rl.advantage": "reinforce_plus_plus" }),
  reinforce_plus_plus_baseline: algorithm("REINFORCE++-baseline: group mean subtracted, then batch-whitened (Hu 2025).", { "rl.advantage": "reinforce_plus_plus_baseline" }),
  gae: algorithm("PPO with GAE (γ 1, λ 0.95) and a linear value head on the policy trunk.", { "rl.advantage": "gae", "rl.lam": "0.95" }),
  dapo: algorithm(
    "DAPO: clip-higher (0.28), dynamic sampling (all-equal groups dropped and resampled), token-mean, overlong shaping (Yu et al. 2025).",
    { "rl.clipHigh": "0.28", "rl.filterGroups": "true", "rl.lossAggMode": "token-mean", "rl.overlongBuffer": "8" },
  ),
  gspo: algorithm("GSPO: PPO clip on the sequence-level length-normalised ratio, seq-mean-token-mean (Zheng et al. 2025).", { "rl.lossFn": "gspo" }),
  cispo: algorithm("CISPO: clipped, detached IS weight; no token loses its gradient (MiniMax-M1).", { "rl.lossFn": "cispo", "rl.clipHigh": "0.28" }),
  gigpo: algorithm(
    "GiGPO: episode + step-level advantages over shared anchor states, γ 0.95, with per-turn rewards for failed tool calls and first evidence (Feng et al. 2025).",
    { "rl.advantage": "gigpo", "rl.gamma": "0.95", "rl.turnRewards.toolError": "-0.1", "rl.turnRewards.evidence": "0.1" },
  ),
};

/** `lab.designs: algorithms` expands to these (the documented comparison). */
export const ALGORITHM_SET = Object.keys(ALGORITHM_DESIGNS);

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

/** What a design may override: training options, and the env's own options (not its world or model). */
const ALLOWED_PREFIXES = ["rl.", "reward.", "detectors.", "env.options."];

/**
 * The designs a lab (`arl lab --env NAME`) trains, from `lab.designs` (default: the recipe's own, `defaultDesigns`):
 * the recipe's own designs (`EnvRecipe.labDesigns`), the algorithm designs (`ALGORITHM_DESIGNS`, or `algorithms` for
 * all of them) — each with the lab's own reward (`reward.preset` and `reward.weights`: the env's, e.g. `tool-env`), so
 * only the algorithm differs — or designs under `lab.define`.
 * @throws ConfigError naming an unknown design (with the allowed names), a duplicate, a `lab.define` name that is a
 *   recipe or algorithm design's, or an override outside `rl.` / `reward.` / `detectors.` / `env.options.`
 */
export function resolveDesigns(config: ExperimentConfig, recipe: Pick<EnvRecipe, "name" | "labDesigns">): LabDesign[] {
  const own = recipe.labDesigns ?? {};
  const builtin = (n: string) => Object.hasOwn(own, n) || Object.hasOwn(ALGORITHM_DESIGNS, n);
  const allowed = [...Object.keys(own), ...Object.keys(ALGORITHM_DESIGNS), "algorithms", ...Object.keys(config.lab.define).filter((n) => !builtin(n))];
  const problems: string[] = [];
  for (const name of Object.keys(config.lab.define)) {
    if (builtin(name) || name === "algorithms") problems.push(`lab.define.${name}: a ${recipe.name} or algorithm design has this name; choose another name`);
  }
  const seen = new Set<string>();
  const designs: LabDesign[] = [];
  for (const name of (config.lab.designs ?? defaultDesigns(recipe)).flatMap((n) => (n === "algorithms" ? ALGORITHM_SET : [n]))) {
    if (seen.has(name)) problems.push(`lab.designs: "${name}" is listed twice`);
    seen.add(name);
    let d: Omit<LabDesign, "name"> | undefined;
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
      const elsewhere = Object.values(ENV_RECIPES).filter((r) => r.name !== recipe.name && Object.hasOwn(r.labDesigns ?? {}, name)).map((r) => r.name);
      const hint = elsewhere.length > 0 ? ` ("${name}" is a design of the ${elsewhere.join(", ")} env)` : "";
      problems.push(`lab.designs: unknown design "${name}" for the ${recipe.name} env${hint}${didYouMean(name, allowed)}; allowed: ${allowed.join(", ")} (or define it under lab.define)`);
      continue;
    }
    for (const key of Object.keys(d.overrides)) {
      if (!ALLOWED_PREFIXES.some((p) => key.startsWith(p))) {
        problems.push(`lab.designs.${name}.overrides: "${key}" is not allowed; a design may override only ${ALLOWED_PREFIXES.map((p) => p + "*").join(", ")}`);
      }
    }
    designs.push({ name, ...d });
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return designs;
}

/**
 * The designs a lab trains when `lab.designs` is not given: the recipe's own (`EnvRecipe.labDesigns`) not marked
 * `optional`, in order.
 * @throws ConfigError when the recipe has none (naming `--designs algorithms` and `lab.define` as the ways to run one)
 */
export function defaultDesigns(recipe: Pick<EnvRecipe, "name" | "labDesigns">): string[] {
  const names = Object.entries(recipe.labDesigns ?? {}).filter(([, d]) => d.optional !== true).map(([n]) => n);
  if (names.length === 0) {
    throw new ConfigError([`lab.designs: the ${recipe.name} env declares no reward designs (EnvRecipe.labDesigns); run --designs algorithms (or ${ALGORITHM_SET.join(", ")}), or define designs under lab.define`]);
  }
  return names;
}
