// `arl lab` over algorithm designs (src/lab/designs.ts ALGORITHM_DESIGNS): the same warm start, seed, data and budget
// per algorithm; the quick lab runs in seconds, its training-dynamics table is measured, a rerun's per-step metrics
// are identical, and a design added later from the same warm start (`warmStart`) measures what the lab would have.
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ALGORITHM_DESIGNS, ALGORITHM_SET, designConfig, resolveDesigns } from "../src/lab/designs.ts";
import { runLab } from "../src/lab/lab.ts";
import { searchRecipe } from "../src/envs/index.ts";
import { DYNAMICS_HEAD, dynamicsRows } from "../src/lab/reportTables.ts";
import type { LabResult } from "../src/lab/types.ts";
import { qaLab, quickSearchLab } from "./lab-helpers.ts";

const root = mkdtempSync(join(tmpdir(), "arl-lab-algo-"));
const quick = (extra: Record<string, string> = {}) => quickSearchLab(root, extra);

describe("algorithm designs", () => {
  it("`algorithms` expands to every algorithm design; each resolves to a valid config with its rl options", () => {
    const config = quick({ "lab.designs": "algorithms" });
    const designs = resolveDesigns(config, searchRecipe);
    expect(designs.map((d) => d.name)).toEqual(ALGORITHM_SET);
    for (const d of designs) {
      const cfg = designConfig(config, d);
      for (const [k, v] of Object.entries(ALGORITHM_DESIGNS[d.name].overrides)) {
        const got = k.split(".").reduce<unknown>((o, part) => (o as Record<string, unknown>)[part], cfg);
        expect(String(got), `${d.name} ${k}`).toBe(v);
      }
      expect(cfg.reward.preset).toBe("default"); // one reward for all: only the algorithm differs
    }
  });

  it("a quick lab of grpo, rloo and gae: one warm start, measured dynamics, reruns identical", async () => {
    const run = async (name: string) =>
      qaLab(await runLab(quick({ "run.name": name, "lab.designs": "grpo, rloo, gae", "lab.examples": "1", "rl.steps": "3" }), searchRecipe, undefined, { overwrite: true, quick: true }));
    const a = await run("algo-a");
    expect(a.designs.map((d) => d.name)).toEqual(["grpo", "rloo", "gae"]);
    const rows = dynamicsRows(a);
    expect(rows.length).toBe(3);
    for (const r of rows) {
      expect(r.length).toBe(DYNAMICS_HEAD.length);
      for (const cell of r.slice(2)) expect(cell, r[0]).not.toBe("n/a");
    }
    expect(rows[2][1]).toContain("gae · ppo");
    expect(a.designs[2].steps.every((m) => Number.isFinite(m["train/vf_loss"]))).toBe(true);
    const html = readFileSync(join(root, "algo-a", "report.html"), "utf8");
    expect(html).toContain('<section id="dynamics">');
    const b = await run("algo-b");
    const strip = (l: LabResult) => l.designs.map((d) => ({ name: d.name, steps: d.steps, after: d.after }));
    expect(strip(b)).toEqual(strip(a));
    expect(b.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(b.fingerprint).toBe(a.fingerprint); // what `arl lab` prints for a rerun check
    // Same warm start for every design: the first rollout's reward is the same sample of the same policy.
    expect(new Set(a.designs.map((d) => d.steps[0]["reward/mean"])).size).toBe(1);
    // The warm start's held-out episodes are written beside the designs' (the viewer's Compare reads them).
    expect(existsSync(join(root, "algo-a", "samples", "eval-warm-start-sft.jsonl"))).toBe(true);

    // One more design added later from the same warm start (`--warm-start`): what the full lab would have measured.
    const sft = join(root, "algo-a", "checkpoints", "sft");
    const c = qaLab(await runLab(quick({ "run.name": "algo-c", "lab.designs": "gae", "lab.examples": "1", "rl.steps": "3" }), searchRecipe, undefined, { overwrite: true, quick: true, warmStart: sft }));
    expect(c.warmStartFrom).toBe(sft);
    expect(c.warmStart).toEqual(a.warmStart);
    expect(strip(c)).toEqual(strip(a).filter((d) => d.name === "gae"));
    expect(existsSync(join(root, "algo-c", "checkpoints", "sft"))).toBe(false); // no warm start trained
    await expect(runLab(quick({ "run.name": "algo-d", "lab.designs": "gae" }), searchRecipe, undefined, { overwrite: true, quick: true, warmStart: join(root, "nope") })).rejects.toThrow(/--warm-start: checkpoint .*nope: no such folder/);
    await expect(runLab(quick({ "run.name": "algo-e", "lab.designs": "gae", "policy.dModel": "16" }), searchRecipe, undefined, { overwrite: true, quick: true, warmStart: sft })).rejects.toThrow(/--warm-start: checkpoint .*gpt\.json does not match this config \(dModel 32 vs 16/);
  });
});
