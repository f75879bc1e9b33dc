/**
 * `train(config)`: the library's way to run what `arl train` runs, from a script. It resolves the config (the same
 * zod schema: a raw object or YAML-shaped value is validated, errors name the field), applies the env recipe's
 * defaults under it, and runs the experiment into the same run folder with the same progress hooks (`Reporter`).
 * The env is `options.recipe` (a user's own `EnvRecipe`) or the built-in one named by `env.name`.
 */
import type { EnvRecipe } from "../env/recipe.ts";
import { getRecipe } from "../envs/index.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { envNameOf, withRecipeDefaults } from "../train/recipeDefaults.ts";
import { silentReporter, type Reporter } from "../train/reporter.ts";
import { runExperiment } from "../train/runner.ts";
import type { ExperimentSummary } from "../train/summary.ts";

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
 * Trains a policy on an env, end to end (warm start → RL → held-out summary), and returns the summary.
 * @param config a resolved `ExperimentConfig`, or a raw config object (validated here; the recipe's defaults apply
 *   under it)
 * @returns the summary (the same type for every env: rows of baselines, warm start and RL with the recipe's breakdown)
 * @throws ConfigError naming the field on a bad config or an unknown env (`env.name`); what the run throws
 */
export async function train(config: ExperimentConfig | Record<string, unknown>, options: TrainOptions = {}): Promise<ExperimentSummary> {
  const raw = config as Record<string, unknown>;
  let recipe: EnvRecipe;
  try {
    recipe = options.recipe ?? getRecipe(envNameOf(raw));
  } catch (e) {
    throw new ConfigError([(e as Error).message]);
  }
  const resolved = resolveConfig(withRecipeDefaults(raw, recipe, options.smoke === true));
  return runExperiment(resolved, recipe, options.reporter ?? silentReporter, { overwrite: options.overwrite === true, resume: options.resume === true });
}
