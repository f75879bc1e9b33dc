// Issue 17: `arl lab --env NAME --quick` for every env recipe that declares reward designs (complaints, research,
// classify, extract, summarize, longdoc) runs in the suite: one warm start, each design's RL steps, a loophole verdict per
// design against the detectors it declares, the env's own breakdown in the table, and a report with the fingerprint.
// Quick = the recipe's smoke model and 4 RL steps (src/lab/cli.ts labConfig), here with 8 SFT steps and 2 held-out
// tasks so the six labs take seconds each: it checks the machinery on each env, not the loopholes (the measured labs
// are in each env's README).
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { getRecipe } from "../src/envs/index.ts";
import { labConfig } from "../src/lab/cli.ts";
import { isQaLab } from "../src/lab/judge.ts";
import { runLab } from "../src/lab/lab.ts";
import { envLabTable } from "../src/lab/reportTables.ts";
import type { EnvLabResult } from "../src/lab/types.ts";

const root = mkdtempSync(join(tmpdir(), "arl-lab-envs-"));
const ENVS = ["complaints", "research", "classify", "extract", "summarize", "longdoc"] as const;

describe("arl lab --env NAME --quick for each env with reward designs", () => {
  for (const name of ENVS) {
    it(`${name}: its designs, a verdict each, its breakdown, a report`, async () => {
      const recipe = getRecipe(name);
      const designs = Object.keys(recipe.labDesigns ?? {});
      expect(designs.length).toBeGreaterThanOrEqual(2); // a loophole and its fix at least
      const config = labConfig(recipe, {}, { quick: true }, { "run.dir": root, "eval.maxTasks": "2", "lab.examples": "1", "sft.steps": "8" });
      const result = await runLab(config, recipe, undefined, { overwrite: false, quick: true });
      if (isQaLab(result)) throw new Error(`${name}: expected a loophole lab result, got a QA lab`);
      const lab = result;
      expect(lab.env).toBe(name);
      expect(lab.designs.map((d) => d.name)).toEqual(designs);
      expect(lab.loopholes.map((v) => v.design)).toEqual(designs);
      for (const d of lab.designs) {
        expect(d.steps).toHaveLength(4);
        expect(d.expectedDetectors).toEqual(recipe.labDesigns![d.name].expectedDetectors);
      }
      // Each verdict compares what the design declared with what fired ("opened"/"not reproduced" for a loophole,
      // "closed"/"fired anyway" for a fix, "none declared" without a declaration).
      for (const v of lab.loopholes) expect(["opened", "partly opened", "not reproduced", "closed", "fired anyway", "none declared"]).toContain(v.outcome);
      // The table reads the env's own breakdown (its labels, those measured on these 2 tasks) after the common columns.
      const t = envLabTable(lab);
      expect(t.head.slice(0, 2)).toEqual(["policy", "success %"]);
      expect(t.head.filter((h) => Object.values(lab.breakdownLabels).includes(h)).length).toBeGreaterThan(0);
      const dir = join(root, `lab-${name}-quick`);
      const saved = JSON.parse(readFileSync(join(dir, "lab.json"), "utf8")) as EnvLabResult;
      expect(saved.fingerprint).toMatch(/^[0-9a-f]{16}$/);
      expect(readFileSync(join(dir, "report.html"), "utf8")).toContain(`fingerprint ${saved.fingerprint}`);
      for (const d of designs) expect(existsSync(join(dir, "designs", d, "samples", `eval-${d}.jsonl`))).toBe(true);
    }, 120_000);
  }
});
