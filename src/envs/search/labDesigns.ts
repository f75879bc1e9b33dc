/**
 * The search env's reward designs for `arl lab` (`EnvRecipe.labDesigns`): each opens or closes one loophole of
 * outcome-only RL with a search tool — lucky guesses, tool-call theatre, guessing to save search cost — and
 * `composite` closes them (docs/reward-lab.md). `default` is the main job's reward, trained only when named.
 */
import type { RecipeLabDesign } from "../../env/recipe.ts";

/** The search recipe's lab designs, by name (the lab's default list is every design not marked `optional`). */
export const SEARCH_LAB_DESIGNS: Readonly<Record<string, RecipeLabDesign>> = {
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
    optional: true,
  },
};
