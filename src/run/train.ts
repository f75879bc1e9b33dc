/**
 * `train(config)`: the library's way to run what `arl train` runs, from a script. It resolves the config (the same
 * zod schema: a raw object or YAML-shaped value is validated, errors name the field), applies the env recipe's
 * defaults under it, and runs the experiment into the same run folder with the same progress hooks (`Reporter`).
 * The env is `options.recipe` (a user's own `EnvRecipe`) or the built-in one named by `env.name`.
 */
import type { EnvRecipe } from "../env/recipe.ts";
import { getRecipe } from "../envs/index.ts";
import { applyOverrides, ConfigError, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { RESERVED_KEYS, reservedKeyProblem } from "../train/configGuards.ts";
import { runExperiment, silentReporter, type ExperimentSummary, type Reporter } from "../train/experiment.ts";
import { runRecipeExperiment, type RecipeSummary } from "../train/recipeRun.ts";

/** Options of `train`. */
export interface TrainOptions {
  /** Progress bars and log lines (default: silent). */
  reporter?: Reporter;
  /** Replace an existing run folder of the same name. */
  overwrite?: boolean;
  /** Continue the run in the folder from its last good checkpoint. */
  resume?: boolean;
  /** A user's own env recipe; default the built-in recipe named by `env.name`. */
  recipe?: EnvRecipe;
  /** Apply the recipe's `smoke` preset (a tiny run) under the config's own fields. */
  smoke?: boolean;
}

/**
 * Deep merge of plain objects: `over`'s leaves win.
 * @throws ConfigError on a `__proto__` / `constructor` / `prototype` key (a JSON-parsed config may hold one as its
 *   own key; assigning it would replace the merged object's prototype)
 */
function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (RESERVED_KEYS.has(k)) throw new ConfigError([reservedKeyProblem({ [k]: null }) ?? k]);
    const b = Object.hasOwn(out, k) ? out[k] : undefined;
    out[k] = v !== null && typeof v === "object" && !Array.isArray(v) && b !== null && typeof b === "object" && !Array.isArray(b) ? merge(b as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}

/**
 * A raw config with a recipe's defaults (and, with `smoke`, its smoke preset) applied under it: the user's fields win.
 * @throws ConfigError from `applyOverrides` on a malformed preset
 */
export function withRecipeDefaults(raw: Record<string, unknown>, recipe: EnvRecipe, smoke = false): Record<string, unknown> {
  return merge(withDefaults(raw, smoke ? { ...recipe.defaults, ...recipe.smoke } : recipe.defaults), { env: { name: recipe.name } });
}

/**
 * A raw config with `defaults` (config paths → values, as flags: `{"rl.steps": "40"}`) applied under it: the raw
 * config's own fields win (e.g. `AGENT_DEFAULTS` under `arl train --agent`'s config file and flags).
 * @throws ConfigError from `applyOverrides` on a malformed default; naming the path of a `__proto__` / `constructor` /
 *   `prototype` key in `raw`
 */
export function withDefaults(raw: Record<string, unknown>, defaults: Readonly<Record<string, string>>): Record<string, unknown> {
  const reserved = reservedKeyProblem(raw); // named with its full path here; `merge` refuses it too
  if (reserved !== undefined) throw new ConfigError([reserved]);
  return merge(applyOverrides({}, { ...defaults }), raw);
}

/** The env name a raw config asks for (`env.name`, default `search`). */
export function envNameOf(raw: Record<string, unknown>): string {
  const env = raw.env;
  const name = env !== null && typeof env === "object" ? (env as Record<string, unknown>).name : undefined;
  return typeof name === "string" ? name : "search";
}

/**
 * Trains a policy on an env, end to end (warm start → RL → held-out summary), and returns the summary.
 * @param config a resolved `ExperimentConfig`, or a raw config object (validated here; the recipe's defaults apply
 *   under it)
 * @returns the search experiment's summary for the `search` env, the recipe summary for any other
 * @throws ConfigError naming the field on a bad config or an unknown env (`env.name`); what the run throws
 */
export async function train(config: ExperimentConfig | Record<string, unknown>, options: TrainOptions = {}): Promise<ExperimentSummary | RecipeSummary> {
  const raw = config as Record<string, unknown>;
  let recipe: EnvRecipe;
  try {
    recipe = options.recipe ?? getRecipe(envNameOf(raw));
  } catch (e) {
    throw new ConfigError([(e as Error).message]);
  }
  const resolved = resolveConfig(withRecipeDefaults(raw, recipe, options.smoke === true));
  const run = { overwrite: options.overwrite === true, resume: options.resume === true };
  const reporter = options.reporter ?? silentReporter;
  // The search env keeps its own experiment (Direct / RAG baselines, EM by known vs unknown facts).
  if (options.recipe === undefined && recipe.name === "search") return runExperiment(resolved, reporter, run);
  return runRecipeExperiment(resolved, recipe, reporter, run);
}
