// `arl lab --env NAME` (src/lab/lab.ts runLab): any env recipe's designs — its own `labDesigns` and the algorithm
// designs with the env's reward — from one warm start; the report reads the recipe's grader and breakdown and says per
// design which loophole it opened (expected detectors vs what fired); quick labs run in seconds and rerun identical.
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { EnvRecipe } from "../src/env/recipe.ts";
import { searchRecipe, travelRecipe } from "../src/envs/index.ts";
import { loopholeVerdicts } from "../src/lab/claims.ts";
import { labConfig } from "../src/lab/cli.ts";
import { defaultDesigns, designConfig, resolveDesigns } from "../src/lab/designs.ts";
import { isQaLab } from "../src/lab/judge.ts";
import { runLab } from "../src/lab/lab.ts";
import { ENV_DYNAMICS_HEAD, envDynamicsRows, envLabTable } from "../src/lab/reportTables.ts";
import type { AnyLabResult, EnvDesignResult, EnvLabResult, SummaryRow } from "../src/lab/types.ts";
import { ConfigError } from "../src/train/config.ts";
import { rewardConfigOf } from "../src/reward/config.ts";

const root = mkdtempSync(join(tmpdir(), "arl-lab-env-"));
const travel = travelRecipe as EnvRecipe;
/** The travel recipe with two reward designs of its own (a user's recipe may declare them the same way). */
const withDesigns: EnvRecipe = {
  ...travel,
  labDesigns: {
    "format-only": { description: "Pays a clean answer, not a booking: breeds an immediate answer.", preset: "tool-env", weights: { outcome: 0, format: 1 }, overrides: {}, expectedDetectors: ["length_collapse"] },
    graded: { description: "The env's grade (the fix).", preset: "tool-env", weights: {}, overrides: { "rl.temperature": "0.9" }, expectedDetectors: [] },
  },
};
const quick = (recipe: EnvRecipe, flags: { designs?: string } = {}, extra: Record<string, string> = {}) => labConfig(recipe, {}, { quick: true, ...flags }, { "run.dir": root, "eval.maxTasks": "3", "lab.examples": "2", "sft.steps": "8", "sft.demosPerTask": "1", ...extra });
/** A loophole lab's result (every env but search). */
function loopholeLab(lab: AnyLabResult): EnvLabResult {
  if (isQaLab(lab)) throw new Error("expected a loophole lab result, got a QA lab");
  return lab;
}
/** `runLab` on a recipe, its result narrowed to a loophole lab's. */
const runLoopholeLab = async (...args: Parameters<typeof runLab>) => loopholeLab(await runLab(...args));

describe("env lab designs and config", () => {
  it("the recipe's designs by default; algorithm designs take the env's reward; search designs are refused", async () => {
    const c = quick(withDesigns);
    expect(c.env.name).toBe("travel");
    expect(c.run.name).toBe("lab-travel-quick");
    expect(c.lab.designs).toBeUndefined(); // the recipe's own designs
    expect(resolveDesigns(c, withDesigns).map((d) => d.name)).toEqual(["format-only", "graded"]);
    expect(c.policy.contextLength).toBe(768); // the recipe's defaults apply under the lab
    expect(c.rl.steps).toBe(4);
    const [fo, graded] = resolveDesigns(c, withDesigns);
    expect(fo.expectedDetectors).toEqual(["length_collapse"]);
    expect(rewardConfigOf(designConfig(c, fo)).weights).toEqual({ outcome: 0, format: 1, invalid: 0.1, needless_calls: 0.05 });
    expect(designConfig(c, graded).rl.temperature).toBe(0.9);
    const algos = resolveDesigns(quick(withDesigns, { designs: "algorithms" }), withDesigns);
    expect(algos.map((d) => d.name)).toContain("gigpo");
    for (const d of algos) expect(d.preset).toBe("tool-env"); // one reward for all: only the algorithm differs
    expect(() => quick(travel)).toThrow(/lab\.designs: the travel env declares no reward designs .*--designs algorithms/);
    expect(() => defaultDesigns(travel)).toThrow(ConfigError);
    expect(() => quick(travel, { designs: "composite" })).toThrow(/unknown design "composite" for the travel env \("composite" is a design of the search env\); allowed: .*grpo/);
    const bad: EnvRecipe = { ...travel, labDesigns: { x: { description: "", preset: "tool-env", weights: {}, overrides: { "policy.dModel": "8" } } } };
    expect(() => quick(bad)).toThrow(/lab\.designs\.x\.overrides: "policy\.dModel" is not allowed; a design may override only rl\.\*, reward\.\*, detectors\.\*, env\.options\.\*/);
    // A lab refuses a config of another env than its recipe's (naming both).
    await expect(runLab(c, searchRecipe)).rejects.toThrow("env.name: the config names the travel env, the lab was given the search recipe");
  });

  it("loophole verdicts: opened, partly, not reproduced, closed, fired anyway, none declared", () => {
    const row = (success: number, score: number): SummaryRow => ({ policy: "p", n: 10, success, score, calls: 1, invalidRate: 0, noAnswer: 0, breakdown: {} });
    const fire = (name: string) => ({ detector: name, metric: `hack/${name}`, since: 2, step: 3, value: 1, baseline: 0, threshold: 0.5, message: `${name} fired` });
    const d = (name: string, expected: string[] | undefined, during: string[], end: string[] = during): EnvDesignResult => ({
      name, description: "", weights: {}, overrides: {}, steps: [], detectors: end.map(fire), firingsDuringTraining: during.map(fire), after: row(0.5, 0.75), examples: { before: [], after: [] }, wallMs: 0,
      ...(expected !== undefined ? { expectedDetectors: expected } : {}),
    });
    const v = loopholeVerdicts(row(0.1, 0.2), [
      d("a", ["tool_spam"], ["tool_spam", "length_collapse"], []),
      d("b", ["tool_spam", "answer_avoidance"], ["answer_avoidance"]),
      d("c", ["tool_spam"], []),
      d("d", [], []),
      d("e", [], ["entropy_collapse"]),
      d("f", undefined, ["kl_acceleration", "kl_acceleration"]),
    ]);
    expect(v.map((x) => x.outcome)).toEqual(["opened", "partly opened", "not reproduced", "closed", "fired anyway", "none declared"]);
    expect(v[0].text).toBe("a opened its loophole: expected tool_spam, fired during training tool_spam, length_collapse (also length_collapse); at the end: none; held-out success 10.0 % → 50.0 %, grade 0.20 → 0.75.");
    expect(v[5].firedDuringTraining).toEqual(["kl_acceleration"]);
    expect(v[5].expected).toBeUndefined();
    expect(v[3].text).toMatch(/^d is expected to fire no detector \(a fix\): none fired/);
  });
});

describe("runLab (quick, travel)", () => {
  it("the recipe's designs: one warm start, the recipe's table and breakdown, verdicts, samples and a report", async () => {
    const lab = await runLoopholeLab(quick(withDesigns), withDesigns, undefined, { overwrite: false, quick: true });
    expect(lab.env).toBe("travel");
    expect(lab.protocol).toBe("hermes");
    expect(lab.designs.map((d) => d.name)).toEqual(["format-only", "graded"]);
    expect(lab.designs[0].expectedDetectors).toEqual(["length_collapse"]);
    expect(lab.loopholes.map((v) => v.design)).toEqual(["format-only", "graded"]);
    for (const v of lab.loopholes) {
      const d = lab.designs.find((x) => x.name === v.design)!;
      expect(v.firedDuringTraining).toEqual([...new Set(d.firingsDuringTraining.map((f) => f.detector))]);
    }
    for (const d of lab.designs) {
      expect(d.steps).toHaveLength(4);
      expect(Number.isFinite(d.steps[3]["grade/score"])).toBe(true);
      expect(d.examples.before).toHaveLength(2);
      expect(existsSync(join(root, "lab-travel-quick", "designs", d.name, "samples", `eval-${d.name}.jsonl`))).toBe(true);
    }
    // Both designs start from the same warm start: identical first-step rollouts of the same policy (same reward weights
    // aside, the episodes are the same: same tool calls per episode).
    expect(lab.designs[0].steps[0].tool_calls).toBe(lab.designs[1].steps[0].tool_calls);
    // Examples are scored with each design's own reward.
    expect(lab.designs[0].examples.before[0]).toMatch(/1×format\(/);
    expect(existsSync(join(root, "lab-travel-quick", "samples", "eval-warm-start-sft.jsonl"))).toBe(true);
    const t = envLabTable(lab);
    expect(t.head.slice(0, 6)).toEqual(["policy", "success %", "grade", "calls/task", "invalid %", "no answer %"]);
    expect(t.rows.map((r) => r[0])).toEqual(["warm start (SFT)", "format-only", "graded"]);
    expect(t.rows[1].at(-1)).toBe("length_collapse");
    expect(t.rows[2].at(-1)).toBe("none (a fix)");
    const saved = JSON.parse(readFileSync(join(root, "lab-travel-quick", "lab.json"), "utf8")) as EnvLabResult;
    expect(saved.loopholes).toEqual(lab.loopholes);
    expect(saved.breakdownLabels).toEqual(lab.breakdownLabels);
    const html = readFileSync(join(root, "lab-travel-quick", "report.html"), "utf8");
    expect(html).toContain('<section id="loopholes">');
    expect(html).toContain("env travel (hermes)");
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|EM % known/);
  });

  it("algorithm designs on travel: measured dynamics, a rerun is identical", async () => {
    const run = (name: string) => runLoopholeLab(quick(travel, { designs: "gae, gigpo" }, { "run.name": name, "rl.steps": "2", "eval.maxTasks": "2", "lab.examples": "1" }), travel, undefined, { overwrite: true, quick: true });
    const a = await run("travel-algo-a");
    expect(a.designs.map((d) => d.name)).toEqual(["gae", "gigpo"]);
    const rows = envDynamicsRows(a);
    for (const r of rows) {
      expect(r.length).toBe(ENV_DYNAMICS_HEAD.length);
      expect(r[2]).not.toBe("n/a");
      expect(r[4]).not.toBe("n/a"); // reward over the last steps
    }
    expect(rows[0][1]).toContain("gae · ppo");
    expect(a.designs[0].steps.every((m) => Number.isFinite(m["train/vf_loss"]))).toBe(true);
    expect(a.loopholes.every((v) => v.outcome === "none declared")).toBe(true);
    const b = await run("travel-algo-b");
    const strip = (l: EnvLabResult) => l.designs.map((d) => ({ name: d.name, steps: d.steps, after: d.after, examples: d.examples }));
    expect(strip(b)).toEqual(strip(a));
    expect(b.fingerprint).toBe(a.fingerprint);
    expect(b.warmStart).toEqual(a.warmStart);
    expect(new Set(a.designs.map((d) => d.steps[0]["reward/mean"])).size).toBe(1);
  });
});
