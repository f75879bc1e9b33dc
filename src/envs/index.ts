/**
 * The registry of env recipes: the one place that names envs (`train/` knows recipes only through
 * `EnvRecipe`). `arl envs` lists it; `arl train --env NAME` looks names up here; a user's own env is a recipe object
 * passed to `train(config, { recipe })` instead.
 */
import type { EnvRecipe } from "../env/recipe.ts";
import { classifyRecipe } from "./classify/index.ts";
import { complaintsRecipe } from "./complaints/index.ts";
import { extractRecipe } from "./extract/index.ts";
import { longdocRecipe } from "./longdoc/index.ts";
import { researchRecipe } from "./research/index.ts";
import { searchRecipe } from "./search/recipe.ts";
import { summarizeRecipe } from "./summarize/index.ts";
import { travelRecipe } from "./travel/index.ts";

/** The env `arl train` trains without `--env` (its runs keep the folder names runs/default and runs/smoke). */
export const DEFAULT_ENV = "search";

/** Every built-in recipe by name, in `arl envs` order. */
export const ENV_RECIPES: Readonly<Record<string, EnvRecipe>> = {
  search: searchRecipe,
  travel: travelRecipe as EnvRecipe,
  complaints: complaintsRecipe as EnvRecipe,
  research: researchRecipe as EnvRecipe,
  classify: classifyRecipe as EnvRecipe,
  extract: extractRecipe as EnvRecipe,
  summarize: summarizeRecipe as EnvRecipe,
  longdoc: longdocRecipe as EnvRecipe,
};

/** Recipes registered at run time (a user's env file given to the CLI), by name. */
const registered = new Map<string, EnvRecipe>();

/**
 * Registers a user's recipe under its name for this process (`arl train --env ./my-env.ts` does this), so every
 * command that looks an env up by name finds it.
 * @throws Error when the name is not an env name or is a built-in one
 */
export function registerRecipe(recipe: EnvRecipe): void {
  if (!/^[a-z][a-z0-9-]*$/.test(recipe.name)) throw new Error(`env recipe: name must be lower-case letters, digits and -, got ${JSON.stringify(recipe.name)}`);
  if (Object.hasOwn(ENV_RECIPES, recipe.name)) throw new Error(`env recipe: ${JSON.stringify(recipe.name)} is a built-in env; choose another name`);
  registered.set(recipe.name, recipe);
}

/**
 * The recipe named `name`: a built-in one, or one registered with `registerRecipe`.
 * @throws Error `env.name: unknown env "x"; allowed: search, travel`
 */
export function getRecipe(name: string): EnvRecipe {
  if (Object.hasOwn(ENV_RECIPES, name)) return ENV_RECIPES[name];
  const r = registered.get(name);
  if (r !== undefined) return r;
  throw new Error(`env.name: unknown env ${JSON.stringify(name)}; allowed: ${[...Object.keys(ENV_RECIPES), ...registered.keys()].join(", ")} (or a file exporting a recipe: --env ./my-env.ts)`);
}

/** True when `value` has the shape of an `EnvRecipe` (name, protocols, build). */
export function isRecipe(value: unknown): value is EnvRecipe {
  const r = value as Partial<EnvRecipe> | null;
  return r !== null && typeof r === "object" && typeof r.name === "string" && Array.isArray(r.protocols) && typeof r.build === "function";
}

export { searchRecipe, searchOptions } from "./search/recipe.ts";
/** The default env's `--smoke` preset (a tiny world and model, 2 RL steps): what tests and `arl serve trainer --smoke` use. */
export { SEARCH_SMOKE as SMOKE_OVERRIDES } from "./search/recipe.ts";
// The Search-R1 env over any corpus: `arl eval --data … --corpus …` and the retrieval/MCP servers build it on real files.
export { searchEnvFactory } from "./search/env.ts";
export { travelRecipe } from "./travel/index.ts";
