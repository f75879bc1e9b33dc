import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { computeClaims } from "../src/lab/claims.ts";
import { designConfig, resolveDesigns } from "../src/lab/designs.ts";
import { runLab } from "../src/lab/lab.ts";
import { searchRecipe } from "../src/envs/index.ts";
import { SEARCH_LAB_DESIGNS } from "../src/envs/search/labDesigns.ts";
import type { DesignResult, EvalSummary, LabResult } from "../src/lab/types.ts";
import { REWARD_PRESETS } from "../src/reward/presets.ts";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { rewardConfigOf } from "../src/reward/config.ts";
import { qaLab, quickSearchLab } from "./lab-helpers.ts";

const root = mkdtempSync(join(tmpdir(), "arl-lab-"));
const quick = (extra: Record<string, string> = {}) => quickSearchLab(root, extra);

describe("lab designs", () => {
  it("resolves built-in designs and applies their presets and overrides", () => {
    const config = quick({ "lab.designs": "[outcome-only, composite-unmasked]" });
    const designs = resolveDesigns(config, searchRecipe);
    expect(designs.map((d) => d.name)).toEqual(["outcome-only", "composite-unmasked"]);
    const unmasked = designConfig(config, designs[1]);
    expect(unmasked.rl.maskObservations).toBe(false);
    expect(rewardConfigOf(unmasked).weights).toEqual(REWARD_PRESETS.composite.weights);
    const outcome = designConfig(config, designs[0]);
    expect(outcome.rl.maskObservations).toBe(true);
    expect(rewardConfigOf(outcome).weights).toEqual({ em: 1 });
  });

  it("defines new designs from terms, weights and training overrides in config, without code", () => {
    const config = resolveConfig({
      lab: {
        designs: ["cautious", "composite"],
        define: { cautious: { preset: "composite", weights: { guess: 1, latency: 0.5 }, overrides: { "rl.temperature": 0.8 } } },
      },
    });
    const [cautious] = resolveDesigns(config, searchRecipe);
    // `--lab.designs a,b` on the command line arrives as one string
    expect(resolveConfig({ lab: { designs: "outcome-only, composite" } }).lab.designs).toEqual(["outcome-only", "composite"]);
    const cfg = designConfig(config, cautious);
    expect(rewardConfigOf(cfg).weights).toEqual({ ...REWARD_PRESETS.composite.weights, guess: 1, latency: 0.5 });
    expect(cfg.rl.temperature).toBe(0.8);
  });

  it("rejects unknown designs, duplicates and overrides that would change the shared warm start", () => {
    expect(() => resolveDesigns(resolveConfig({ lab: { designs: ["outcome-only", "nope"] } }), searchRecipe)).toThrow(
      /lab\.designs: unknown design "nope" for the search env; allowed: .*outcome-only/,
    );
    expect(() => resolveDesigns(resolveConfig({ lab: { designs: ["composite", "composite"] } }), searchRecipe)).toThrow(/listed twice/);
    const bad = resolveConfig({ lab: { designs: ["x"], define: { x: { overrides: { "policy.dModel": 8 } } } } });
    expect(() => resolveDesigns(bad, searchRecipe)).toThrow(ConfigError);
    expect(() => resolveDesigns(bad, searchRecipe)).toThrow(/"policy.dModel" is not allowed; a design may override only rl\.\*, reward\.\*, detectors\.\*/);
    const invalid = resolveConfig({ lab: { designs: ["y"], define: { y: { overrides: { "rl.lossFn": "dpo" } } } } });
    expect(() => designConfig(invalid, resolveDesigns(invalid, searchRecipe)[0])).toThrow(/design y: rl\.lossFn: expected one of/);
    expect(() => resolveConfig({ lab: { define: { z: { preset: "nope" } } } })).toThrow(/lab\.define\.z\.preset: unknown preset/);
    expect(() => resolveDesigns(resolveConfig({ lab: { designs: ["composite"], define: { composite: { preset: "outcome-only" } } } }), searchRecipe)).toThrow(
      "lab.define.composite: a search or algorithm design has this name; choose another name",
    );
    expect(() => resolveConfig({ lab: { define: { "..": {} } } })).toThrow("lab.define...: a design name is letters, digits, '.', '_' or '-' (not '.' or '..')");
    expect(() => resolveConfig({ reward: { options: { judge: { baseUrl: "http://x/v1", model: "m", rubric: "  " } } } })).toThrow(/reward\.options\.judge\.rubric/);
    // A design without a preset starts from the main job's reward.
    const plain = resolveConfig({ lab: { designs: ["plain"], define: { plain: { weights: { latency: 1 } } } } });
    expect(rewardConfigOf(designConfig(plain, resolveDesigns(plain, searchRecipe)[0])).weights).toEqual({ em: 1, format: 0.1, search_cost: 0.1, invalid: 0.1, latency: 1 });
  });

  it("refuses a model too large for the embedded backend before the lab folder is touched", async () => {
    const config = quick({ "run.name": "too-big", "policy.dModel": "8192" });
    await expect(runLab(config, searchRecipe)).rejects.toThrow(/policy\.dModel: 8192 needs ≈ .* GiB/);
    expect(existsSync(join(root, "too-big"))).toBe(false);
  });

  it("every built-in design's preset exists", () => {
    for (const d of Object.values(SEARCH_LAB_DESIGNS)) expect(Object.hasOwn(REWARD_PRESETS, d.preset)).toBe(true);
  });
});

describe("runLab (quick)", () => {
  it("trains each design from one warm start and writes lab.json and a self-contained report", async () => {
    const config = quick({ "run.name": "q", "lab.designs": "[outcome-only, composite-unmasked]", "lab.examples": "3" });
    const lab = qaLab(await runLab(config, searchRecipe, undefined, { overwrite: false, quick: true }));
    expect(lab.designs.map((d) => d.name)).toEqual(["outcome-only", "composite-unmasked"]);
    for (const d of lab.designs) {
      expect(d.steps).toHaveLength(4);
      for (const key of ["reward/mean", "em", "hack/guess_rate_unknown", "hack/tool_spam", "hack/kl_ref"]) {
        expect(Number.isFinite(d.steps[3][key]), `${d.name} ${key}`).toBe(true);
      }
      expect(d.examples.before).toHaveLength(3);
      expect(d.examples.after).toHaveLength(3);
      expect(existsSync(join(root, "q", "designs", d.name, "metrics.jsonl"))).toBe(true);
      expect(existsSync(join(root, "q", "designs", d.name, "checkpoints", "final"))).toBe(true);
    }
    // The composite's rewards vary within groups, so it updates (and reports the policy entropy); with all-zero EM
    // the outcome-only groups carry no gradient and skip the update.
    expect(lab.designs[1].steps.some((m) => Number.isFinite(m["train/entropy"]))).toBe(true);
    // Each design's examples are scored with its own reward: outcome-only shows only em, the composite more terms.
    expect(lab.designs[0].examples.after[0]).toMatch(/reward: .* = 1×em\(/);
    expect(lab.designs[1].examples.after[0]).toMatch(/0\.3×guess\(/);
    // Both designs start from the same warm start: their before-examples are identical text up to the reward line.
    const strip = (s: string) => s.replace(/\nreward:.*$/s, "");
    expect(lab.designs[0].examples.before.map(strip)).toEqual(lab.designs[1].examples.before.map(strip));
    expect(lab.claims.map((c) => c.id)).toEqual(["a", "b", "c", "d", "e"]);
    expect(lab.claims[1].text).toMatch(/^Not measured: this lab did not train per-call-bonus/);
    expect(lab.claims[3].text).toBe("Not measured: this lab did not train composite.");
    // Without composite, (e) compares the warm start with the first design.
    expect(lab.claims[4].numbers.rl_em).toBe(lab.designs[0].after.all.em);
    expect(lab.claims[4].text).toContain("RL with outcome-only reached EM");
    const saved = JSON.parse(readFileSync(join(root, "q", "lab.json"), "utf8")) as LabResult;
    expect(saved.designs[1].steps[0]).toEqual(lab.designs[1].steps[0]);
    const html = readFileSync(join(root, "q", "report.html"), "utf8");
    expect(html).toContain("composite-unmasked");
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=/);
    // A lab folder is never overwritten silently.
    await expect(runLab(config, searchRecipe)).rejects.toThrow(/already holds a run; choose another name/);
  });
});

function evalSummary(em: number, searches: number, guess: number, needless: number): EvalSummary {
  const slice = { n: 10, em, searches, guessRate: guess };
  return { all: slice, known: slice, unknown: slice, needlessSearches: needless, needlessSearchRate: needless, guessEmUnknown: 0.5 };
}
function design(name: string, after: EvalSummary, steps: Array<Record<string, number>> = []): DesignResult {
  return { name, description: "", weights: {}, overrides: {}, steps, detectors: [], firingsDuringTraining: [], after, examples: { before: [], after: [] }, wallMs: 0 };
}

describe("computeClaims", () => {
  it("states each claim with its numbers, whichever way they go", () => {
    const lab = {
      name: "t",
      seed: 0,
      quick: true,
      rlSteps: 10,
      evalQuestions: 10,
      wallMs: 0,
      warmStart: evalSummary(0.4, 0.3, 0.6, 0.1),
      designs: [
        design("outcome-only", evalSummary(0.5, 0.4, 0.5, 0.1), [{ "hack/guess_rate_unknown": 0.5 }]),
        design("per-call-bonus", evalSummary(0.45, 2.5, 0.0, 0.9)),
        design("composite", evalSummary(0.6, 0.5, 0.2, 0.05), [{ "hack/guess_rate_unknown": 0.2, "hack/kl_ref": 0.1, "train/grad_norm": 1, "reward/mean": 0.5 }]),
        design("composite-unmasked", evalSummary(0.55, 0.5, 0.2, 0.05), [{ "hack/kl_ref": 0.3, "train/grad_norm": 2, "reward/mean": 0.4 }]),
      ],
    };
    const claims = computeClaims(lab);
    expect(claims[0].text).toContain("outcome-only answered 50.0 % without searching");
    expect(claims[0].text).toContain("higher than composite's 20.0 %");
    expect(claims[1].text).toContain("per-call-bonus made 2.50 searches per question, higher than outcome-only's 0.40");
    expect(claims[1].text).toContain("its EM was 45.0 %, lower than outcome-only's 50.0 %");
    expect(claims[2].text).toContain("composite: EM 60.0 % (rank 1 of 4), needless-search rate 5.0 % (rank 1 of 4");
    expect(claims[3].numbers).toMatchObject({ masked_em: 0.6, unmasked_em: 0.55, masked_kl_peak: 0.1, unmasked_kl_peak: 0.3 });
    expect(claims[4].text).toContain("EM 60.0 % vs the warm start's 40.0 % (+20.0 points)");
    expect(computeClaims({ ...lab, rlSteps: 0 })[0].text).toContain("No RL steps ran, so there is no training guess rate;");
  });
});
