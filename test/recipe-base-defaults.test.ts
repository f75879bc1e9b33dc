/**
 * Defaults of a run that starts from a pretrained base (src/train/recipeDefaults.ts `withRecipeDefaults`,
 * src/train/base.ts `BASE_START_DEFAULTS`, `EnvRecipe.baseDefaults`): applied over the recipe's own defaults only with
 * `policy.init: base`, under the user's fields and the smoke preset.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../src/cli/args.ts";
import { getRecipe } from "../src/envs/index.ts";
import { BASE_START_DEFAULTS } from "../src/train/base.ts";
import { resolveConfig } from "../src/train/config.ts";
import { withRecipeDefaults } from "../src/train/recipeDefaults.ts";
import type { EnvRecipe } from "../src/env/recipe.ts";
import { labConfig } from "../src/lab/cli.ts";

describe("base-start defaults", () => {
  const travel = getRecipe("travel");
  it("apply with policy.init base: the base's context, the RL learning rate, the recipe's own warm-start budget", () => {
    const c = resolveConfig(withRecipeDefaults({ policy: { init: "base" } }, travel));
    expect(c.policy.contextLength).toBe(Number(BASE_START_DEFAULTS["policy.contextLength"]));
    expect(c.rl.learningRate).toBe(1e-4);
    expect(c.sft.steps).toBe(300);
    expect(c.sft.batchSize).toBe(16); // the recipe's other defaults stay
  });
  it("do not apply from scratch, and a user's field wins over them", () => {
    const scratch = resolveConfig(withRecipeDefaults({ policy: { init: "scratch" } }, travel));
    expect([scratch.policy.contextLength, scratch.rl.learningRate, scratch.sft.steps]).toEqual([768, 1e-3, 700]);
    const mine = resolveConfig(withRecipeDefaults({ policy: { init: "base" }, sft: { steps: 50 }, rl: { learningRate: 3e-5 } }, travel));
    expect([mine.sft.steps, mine.rl.learningRate]).toEqual([50, 3e-5]);
  });
  it("the smoke preset still goes over them", () => {
    const smoke = resolveConfig(withRecipeDefaults({ policy: { init: "base" } }, travel, true));
    expect(smoke.sft.steps).toBe(Number(travel.smoke["sft.steps"]));
  });
  it("a --policy.init base flag picks them as a config file's field does (flags apply after the recipe's defaults)", () => {
    const c = loadConfig(undefined, false, { "policy.init": "base" }, "travel");
    expect([c.policy.init, c.sft.steps, c.rl.learningRate, c.policy.contextLength]).toEqual(["base", 300, 1e-4, 1024]);
    expect(loadConfig(undefined, false, { "policy.init": "base", "sft.steps": "12" }, "travel").sft.steps).toBe(12);
    expect(loadConfig(undefined, false, { "policy.init": "scratch" }, "travel").sft.steps).toBe(700);
    // travel itself starts from the base by default (its recipe's defaults): the base defaults with no flag at all.
    expect(loadConfig(undefined, false, {}, "travel")).toMatchObject({ policy: { init: "base" }, sft: { steps: 300 }, env: { maxObservationTokens: 128 } });
  });
  it("a recipe whose defaults start from a base gets them; its smoke preset (from scratch) does not, nor does a quick lab", () => {
    const fromBase: EnvRecipe = { ...travel, defaults: { ...travel.defaults, "policy.init": "base" } }; // as travel's own
    const c = resolveConfig(withRecipeDefaults({}, fromBase));
    expect([c.policy.init, c.sft.steps, c.rl.learningRate, c.policy.contextLength]).toEqual(["base", 300, 1e-4, 1024]);
    const smoke = resolveConfig(withRecipeDefaults({}, fromBase, true));
    expect([smoke.policy.init, smoke.rl.learningRate, smoke.policy.contextLength]).toEqual(["scratch", 1e-3, 768]);
    const mine = resolveConfig(withRecipeDefaults({ policy: { init: "scratch" } }, fromBase));
    expect([mine.policy.init, mine.sft.steps]).toEqual(["scratch", 700]);
    const quick = labConfig(fromBase, {}, { quick: true, designs: "grpo" }, {});
    expect([quick.policy.init, quick.rl.learningRate]).toEqual(["scratch", 1e-3]);
  });
});
