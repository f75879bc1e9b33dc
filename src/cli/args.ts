/**
 * The command line's shared argument handling: dotted config flags (`--rl.groupSize 8`), the config a command trains
 * with (the env's defaults under the file, its smoke preset, flags last), `--env` as a name or a file, `--agent-module`,
 * and positive-integer flags.
 */
import { existsSync } from "node:fs";
import { resolve as resolvePath } from "node:path";
import { pathToFileURL } from "node:url";
import type { EnvRecipe } from "../env/recipe.ts";
import { DEFAULT_ENV, getRecipe, isRecipe, registerRecipe, SMOKE_OVERRIDES } from "../envs/index.ts";
import { AGENT_DEFAULTS } from "../external/defaults.ts";
import type { AgentFunction } from "../external/rollouts.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { applyOverrides, readConfigFile } from "../train/configFile.ts";
import { envNameOf, withDefaults, withInitFlag, withRecipeDefaults } from "../train/recipeDefaults.ts";

/** Splits `--a.b value` / `--a.b=value` pairs (dotted names = config paths) out of argv. */
export function extractOverrides(args: readonly string[]): { overrides: Record<string, string>; rest: string[] } {
  const overrides: Record<string, string> = {};
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const m = /^--([A-Za-z]+(?:\.[A-Za-z0-9_-]+)+)(?:=(.*))?$/.exec(args[i]);
    if (!m) {
      rest.push(args[i]);
      continue;
    }
    if (m[2] !== undefined) overrides[m[1]] = m[2];
    else if (i + 1 < args.length) overrides[m[1]] = args[++i];
    else throw new ConfigError([`--${m[1]}: missing value`]);
  }
  return { overrides, rest };
}

/**
 * Loads the config file (if any), picks the env (`--env`, else `--env.name`, else the file's `env.name`, else
 * search), applies that env's defaults under the file, the smoke preset (the search one, or the env's own) over it,
 * and the flag overrides last; validates.
 * @throws ConfigError naming the field (an unknown env: `env.name`, with the allowed names)
 */
export function loadConfig(file: string | undefined, smoke: boolean, overrides: Record<string, string>, envName?: string, agent = false): ExperimentConfig {
  let raw: Record<string, unknown> = file ? readConfigFile(file) : {};
  if (agent) {
    // `--agent`: its measured defaults under the file; `--smoke` keeps the context an agent's calls need.
    raw = withDefaults(raw, AGENT_DEFAULTS);
    if (envName !== undefined) raw = applyOverrides(raw, { "env.name": envName });
    if (smoke) raw = applyOverrides(raw, { ...SMOKE_OVERRIDES, "run.name": "smoke-agent", "policy.contextLength": AGENT_DEFAULTS["policy.contextLength"]!, "policy.jaxLengthBucket": "64" });
    return resolveConfig(applyOverrides(raw, overrides));
  }
  const name = envName ?? overrides["env.name"] ?? envNameOf(raw);
  let recipe: EnvRecipe;
  try {
    recipe = getRecipe(name);
  } catch (e) {
    throw new ConfigError([`${envName !== undefined ? "--env" : "env.name"}: ${(e as Error).message.replace(/^env\.name: /, "")}`]);
  }
  // The default env's runs keep their historical folder names (runs/default, runs/smoke); others are named for the env.
  const isDefault = recipe.name === DEFAULT_ENV;
  // A `--policy.init` flag picks the base-start defaults as a config file's field would (flags themselves go on last).
  raw = withRecipeDefaults(withInitFlag(raw, overrides), recipe, false);
  if (smoke) raw = applyOverrides(raw, { "run.name": isDefault ? "smoke" : `smoke-${recipe.name}`, ...recipe.smoke });
  else if (!isDefault && file === undefined && overrides["run.name"] === undefined) raw = applyOverrides(raw, { "run.name": recipe.name });
  return resolveConfig(applyOverrides(raw, overrides));
}

/** Parses a positive integer flag. @throws ConfigError naming the flag */
export function positiveInt(flag: string, value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isInteger(n) || n <= 0) {
    throw new ConfigError([`${flag}: expected a positive integer, got ${JSON.stringify(value)}`]);
  }
  return n;
}

/**
 * `--agent-module <file>`: imports a file (TypeScript through tsx) whose default export — else its export named
 * `agent` — is an agent function `(ctx: AgentContext) => Promise<{answer?} | void>`, run in this process per rollout.
 * @throws ConfigError naming `--agent-module` when the file is missing or exports no function
 */
export async function agentModuleArg(arg: string): Promise<AgentFunction> {
  const file = resolvePath(arg);
  if (!existsSync(file)) throw new ConfigError([`--agent-module: no such file ${file} (expected a .ts/.js file whose default export is an agent function)`]);
  const mod = await importUserFile(file, "--agent-module");
  const fn = typeof mod.default === "function" ? mod.default : mod.agent;
  if (typeof fn !== "function") throw new ConfigError([`--agent-module: ${file} exports no agent function (a default export, or an export named agent, taking the rollout's context: see examples/agents/README.md)`]);
  return fn as AgentFunction;
}

/**
 * Imports a user's `.ts` / `.js` file (TypeScript through tsx) for `flag`.
 * @throws ConfigError naming `flag` when tsx loaded the file as CommonJS (its folder's package.json lacks
 *   `"type": "module"`), which cannot import the library; other errors as the import threw them
 */
async function importUserFile(file: string, flag: string): Promise<Record<string, unknown>> {
  if (/\.[cm]?ts$/.test(file)) (await import("tsx/esm/api")).register();
  try {
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (e) {
    if (/Cannot require\(\) ES Module|ERR_REQUIRE_ESM|require\(\) of ES Module/.test(String((e as Error).message))) {
      throw new ConfigError([`${flag}: ${file} was loaded as CommonJS and cannot import the library (an ES module); add "type": "module" to the package.json of its folder (npm pkg set type=module) or name it .mts`]);
    }
    throw e;
  }
}

/** How `--env` takes an env, for every command's help (the loader is `envArg` below). */
export const ENV_ARG_HELP =
  "a built-in name (`arl envs` lists them) or a .ts/.js file whose default export — else its first exported " +
  "EnvRecipe ({ name, protocols, build, … }) — is the recipe (examples/own-env/weather.ts; .ts runs through tsx)";

/**
 * `--env` given as a file (`./my-env.ts`, `envs/x.js`): imports it (TypeScript through tsx, which agentic-rl depends
 * on), registers its recipe (the default export, else the first exported recipe) and returns the recipe's name; an
 * env name is returned as it is.
 * @throws ConfigError naming `--env` when the file is missing or exports no recipe
 */
export async function envArg(arg: string | undefined): Promise<string | undefined> {
  if (arg === undefined || !/[\/\\]|\.[cm]?[jt]s$/.test(arg)) return arg;
  const file = resolvePath(arg);
  if (!existsSync(file)) throw new ConfigError([`--env: no such file ${file} (expected an env name from \`arl envs\` or a file exporting an EnvRecipe)`]);
  const mod = await importUserFile(file, "--env");
  const recipe = isRecipe(mod.default) ? mod.default : Object.values(mod).find(isRecipe);
  if (recipe === undefined) throw new ConfigError([`--env: ${file} exports no env recipe (an object with name, protocols and build; see examples/own-env)`]);
  try {
    registerRecipe(recipe);
  } catch (e) {
    throw new ConfigError([`--env: ${(e as Error).message}`]);
  }
  return recipe.name;
}
