/**
 * `arl lab --env NAME` for an env other than `search`: the lab's config (the recipe's defaults under the config file,
 * its quick sizes with `--quick`, the lab's own fields, flags last) and the console text of its result. The search
 * lab's config and output stay those of `src/cli/main.ts`.
 */
import Table from "cli-table3";
import type { EnvRecipe } from "../env/recipe.ts";
import { withRecipeDefaults } from "../run/train.ts";
import { ConfigError, applyOverrides, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { defaultEnvDesigns, designConfigs, resolveEnvDesigns } from "./designs.ts";
import { quickEnvLabOverrides } from "./lab.ts";
import { envLabTable } from "./report.ts";
import type { EnvLabResult } from "./types.ts";

/** The lab command's flags that shape the config. */
export interface EnvLabFlags {
  /** `--designs`: comma-separated design names (default: the recipe's `labDesigns`, unless the config file lists some). */
  designs?: string;
  /** `--quick`: the recipe's smoke sizes and 4 RL steps per design (`quickEnvLabOverrides`). */
  quick?: boolean;
  /** `--name`: the lab folder (default `lab-<env>`, `lab-<env>-quick` with `--quick`). */
  name?: string;
}

/**
 * The resolved config of an env lab: `raw` (the config file, or `{}`) with the recipe's defaults under it and its
 * `env.name`, the quick lab's sizes over it (`--quick`), then `run.name` and `lab.designs`, then the dotted flags
 * `overrides`. Every design is resolved and checked before anything runs.
 * @throws ConfigError naming the field: an empty `--designs`, an env without designs and none asked for, an unknown
 *   design, an invalid override
 */
export function envLabConfig(recipe: EnvRecipe, raw: Record<string, unknown>, flags: EnvLabFlags, overrides: Record<string, string>): ExperimentConfig {
  let r = withRecipeDefaults(raw, recipe, false);
  if (flags.quick) r = applyOverrides(r, quickEnvLabOverrides(recipe));
  const lab: Record<string, string> = { "run.name": flags.name ?? (flags.quick ? `lab-${recipe.name}-quick` : `lab-${recipe.name}`) };
  if (flags.designs !== undefined) {
    const list = flags.designs.split(",").map((x) => x.trim()).filter(Boolean);
    if (list.length === 0) throw new ConfigError([`--designs: expected a comma-separated list of designs, got ${JSON.stringify(flags.designs)}`]);
    lab["lab.designs"] = JSON.stringify(list);
  } else if (overrides["lab.designs"] === undefined && !hasLabDesigns(raw)) {
    lab["lab.designs"] = JSON.stringify(defaultEnvDesigns(recipe));
  }
  const config = resolveConfig(applyOverrides(applyOverrides(r, lab), overrides));
  designConfigs(config, resolveEnvDesigns(config, recipe)); // every design checked, all problems at once
  return config;
}

/** True when a raw config sets `lab.designs`. */
function hasLabDesigns(raw: Record<string, unknown>): boolean {
  const lab = raw.lab;
  return lab !== null && typeof lab === "object" && (lab as Record<string, unknown>).designs !== undefined;
}

/** The console text of an env lab: its final table (`envLabTable`) and one loophole verdict per design. */
export function envLabText(lab: EnvLabResult): string {
  const t = envLabTable(lab);
  const table = new Table({ style: process.stdout.isTTY ? {} : { head: [], border: [] }, head: t.head });
  for (const row of t.rows) table.push(row);
  return [table.toString(), "loopholes per design:", ...lab.loopholes.map((v) => `  ${v.design}: ${v.outcome} — ${v.text}`)].join("\n");
}
