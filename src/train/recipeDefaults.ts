/**
 * A recipe's config defaults under a user's config: the recipe's `defaults` (with `policy.init: base`, the base-start
 * defaults and the recipe's `baseDefaults` over them; for `--smoke`, its `smoke` preset over all) apply first, the
 * user's file and flags win.
 */
import type { EnvRecipe } from "../env/recipe.ts";
import { BASE_START_DEFAULTS } from "./base.ts";
import { ConfigError } from "./config.ts";
import { applyOverrides } from "./configFile.ts";
import { RESERVED_KEYS, reservedKeyProblem } from "./configGuards.ts";

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
  const presets = { ...recipe.defaults, ...(smoke ? recipe.smoke : {}) };
  // Where the policy starts decides which defaults apply: the user's `policy.init`, else the smoke preset's or the recipe's.
  const base = (initOf(raw) ?? presets["policy.init"]) === "base" ? { ...BASE_START_DEFAULTS, ...recipe.baseDefaults } : {};
  return merge(withDefaults(raw, { ...recipe.defaults, ...base, ...(smoke ? recipe.smoke : {}) }), { env: { name: recipe.name } });
}

/**
 * `raw` with a `--policy.init` flag's value set, for {@link withRecipeDefaults}: the CLI applies the other dotted flags
 * after the recipe's defaults, but this one decides which defaults apply.
 */
export function withInitFlag(raw: Record<string, unknown>, overrides: Readonly<Record<string, string>>): Record<string, unknown> {
  const init = overrides["policy.init"];
  return init === undefined ? raw : applyOverrides(raw, { "policy.init": init });
}

/** Where a raw config's policy starts (`policy.init`; undefined when unset or not a string: the schema reports it). */
function initOf(raw: Record<string, unknown>): string | undefined {
  const policy = raw.policy;
  const init = policy !== null && typeof policy === "object" ? (policy as Record<string, unknown>).init : undefined;
  return typeof init === "string" ? init : undefined;
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
