/**
 * `arl lab --env NAME`: the lab's config (the recipe's defaults under the config file, its quick sizes with `--quick`,
 * the lab's own fields, flags last) and the console text of its result.
 */
import Table from "cli-table3";
import type { EnvRecipe } from "../env/recipe.ts";
import { withInitFlag, withRecipeDefaults } from "../train/recipeDefaults.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../train/config.ts";
import { applyOverrides } from "../train/configFile.ts";
import { designConfigs, resolveDesigns } from "./designs.ts";
import { isQaLab } from "./judge.ts";
import { quickLabOverrides } from "./lab.ts";
import { envLabTable, LAB_TABLE_HEAD, labTableRows } from "./reportTables.ts";
import type { AnyLabResult } from "./types.ts";

/** The lab command's flags that shape the config. */
export interface LabFlags {
  /** `--designs`: comma-separated design names (default: the recipe's `labDesigns`, unless the config file lists some). */
  designs?: string;
  /** `--quick`: the recipe's smoke sizes and 4 RL steps per design (`quickLabOverrides`). */
  quick?: boolean;
  /** `--name`: the lab folder (default `lab-<env>`, `lab-<env>-quick` with `--quick`; the default env's `lab`, `lab-quick`). */
  name?: string;
  /** The default env (`DEFAULT_ENV`), whose labs keep their historical folder names. */
  defaultEnv?: string;
}

/**
 * The resolved config of an env lab: `raw` (the config file, or `{}`) with the recipe's defaults under it and its
 * `env.name`, the quick lab's sizes over it (`--quick`), then `run.name` and `lab.designs`, then the dotted flags
 * `overrides`. Every design is resolved and checked before anything runs.
 * @throws ConfigError naming the field: an empty `--designs`, an env without designs and none asked for, an unknown
 *   design, an invalid override
 */
export function labConfig(recipe: EnvRecipe, raw: Record<string, unknown>, flags: LabFlags, overrides: Record<string, string>): ExperimentConfig {
  // A quick lab runs at the smoke sizes, so it starts where the smoke preset does (a recipe that defaults to a base smokes from scratch).
  const smokeInit = flags.quick === true ? recipe.smoke["policy.init"] : undefined;
  const quickInit: Record<string, string> = smokeInit === undefined ? {} : { "policy.init": smokeInit };
  let r = withRecipeDefaults(withInitFlag(raw, { ...quickInit, ...overrides }), recipe, false);
  if (flags.quick) r = applyOverrides(r, quickLabOverrides(recipe));
  const base = recipe.name === flags.defaultEnv ? "lab" : `lab-${recipe.name}`;
  const lab: Record<string, string> = { "run.name": flags.name ?? (flags.quick ? `${base}-quick` : base) };
  if (flags.designs !== undefined) {
    const list = flags.designs.split(",").map((x) => x.trim()).filter(Boolean);
    if (list.length === 0) throw new ConfigError([`--designs: expected a comma-separated list of designs, got ${JSON.stringify(flags.designs)}`]);
    lab["lab.designs"] = JSON.stringify(list);
  }
  const config = resolveConfig(applyOverrides(applyOverrides(r, lab), overrides));
  designConfigs(config, resolveDesigns(config, recipe)); // every design checked, all problems at once
  return config;
}

/**
 * The console text of a lab: its final table, then the QA lab's claims or the loophole lab's verdict per design.
 */
export function labText(lab: AnyLabResult): string {
  const style = process.stdout.isTTY ? {} : { head: [], border: [] };
  if (isQaLab(lab)) {
    const table = new Table({ style, head: [...LAB_TABLE_HEAD] });
    for (const row of labTableRows(lab)) table.push(row);
    return [table.toString(), ...lab.claims.map((c) => `${c.title}\n  ${c.text}`)].join("\n");
  }
  const t = envLabTable(lab);
  const table = new Table({ style, head: t.head });
  for (const row of t.rows) table.push(row);
  return [table.toString(), "loopholes per design:", ...lab.loopholes.map((v) => `  ${v.design}: ${v.outcome} — ${v.text}`)].join("\n");
}
