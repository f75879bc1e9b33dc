import { describe, expect, it } from "vitest";
import { DEFAULT_DETECTOR_THRESHOLDS } from "../src/reward/detectors.ts";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { rewardConfigOf } from "../src/reward/config.ts";
import { searchOptions, searchRecipe } from "../src/envs/index.ts";
import { defaultDesigns } from "../src/lab/designs.ts";

describe("config", () => {
  it("fills every default from an empty document", () => {
    const c = resolveConfig({});
    expect(c.rl.groupSize).toBe(8);
    expect(searchOptions(c.env.options).topK).toBe(3); // the search recipe's option default
    expect(c.env.maxTurns).toBe(4);
    expect(c.reward.preset).toBe("default");
    expect(c.reward.weights).toEqual({});
    // The default reward is the main job's v1: the `default` preset's weights.
    expect(rewardConfigOf(c).weights).toEqual({ em: 1, format: 0.1, search_cost: 0.1, invalid: 0.1 });
    expect(c.rl.maskObservations).toBe(true);
    // The config's detector defaults are the documented DEFAULT_DETECTOR_THRESHOLDS.
    const { enabled, referenceKl, ...thresholds } = c.detectors;
    expect([enabled, referenceKl]).toEqual([true, true]);
    expect(thresholds).toEqual(DEFAULT_DETECTOR_THRESHOLDS);
    expect(c.lab.designs).toBeUndefined(); // the env's own designs: for search, these
    expect(defaultDesigns(searchRecipe)).toEqual(["outcome-only", "per-call-bonus", "search-cost-only", "composite", "composite-unmasked"]);
  });

  it("reward.weights add to or override the preset's weights", () => {
    const c = resolveConfig({ reward: { preset: "composite", weights: { guess: 1, latency: 0.5 } } });
    expect(rewardConfigOf(c).weights).toMatchObject({ em: 1, guess: 1, latency: 0.5, needless_search: 0.2 });
  });

  it("errors name the field, the allowed values and what was given", () => {
    const err = (raw: unknown) => {
      try {
        resolveConfig(raw);
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error("expected a ConfigError");
    };
    expect(err({ rl: { groupSize: -3 } })).toContain("rl.groupSize: expected a number ≥ 2, got -3");
    expect(err({ rl: { groupSize: 2.5 } })).toContain("rl.groupSize: expected integer");
    expect(err({ rl: { lossFn: "dpo" } })).toContain('rl.lossFn: expected one of "ppo", "importance_sampling", "cispo", "dro", "gspo", got "dpo"');
    expect(err({ rl: { grupSize: 4 } })).toContain("rl: unknown field(s) grupSize");
    expect(err({ policy: { dModel: 30, nHeads: 4 } })).toContain("policy.nHeads");
    // Run names cannot leave run.dir (`runs/..` is the project folder, which --overwrite would replace).
    for (const name of ["..", ".", "../x", "a/b"]) expect(err({ run: { name } })).toContain("run.name:");
    expect(err({ policy: { tinker: { baseUrl: "ftp://x" } } })).toContain("policy.tinker.baseUrl: an http(s) URL");
  });

  it("flag overrides set nested fields with YAML scalars", () => {
    const raw = applyOverrides({ rl: { steps: 3 } }, { "rl.groupSize": "4", "policy.dModel": "64", "rl.lossFn": "importance_sampling" });
    const c = resolveConfig(raw);
    expect(c.rl.groupSize).toBe(4);
    expect(c.rl.steps).toBe(3);
    expect(c.policy.dModel).toBe(64);
    expect(c.rl.lossFn).toBe("importance_sampling");
  });
});
