// GAE's critic: veRL's clipped value loss on a hand example, and the embedded value head (a linear head on the
// policy trunk's features) whose loss falls on a fixed batch, and its state in checkpoints (a resumed gae run continues
// the head's fit: metrics byte-identical to an uninterrupted run's). The GAE formula itself: test/algo-estimators.test.ts.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { embeddedCritic, explainedVariance, valueLoss, ValueHead, type ValueHeadState } from "../src/policy/embedded/value.ts";
import { resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { runExperiment } from "../src/train/runner.ts";

describe("valueLoss (verl compute_value_loss)", () => {
  it("hand example: one unclipped token, one clipped", () => {
    // c = 0.5. t0: v = 1.0, old = 0.6 → v̂ = clip(1.0, 0.1, 1.1) = 1.0; R = 0.5: (v − R)² = (v̂ − R)² = 0.25 → 0.25,
    //   unclipped, ∂/∂v = m·(v − R)/Σm = 0.5/2 = 0.25.
    // t1: v = 0.9, old = 0.0 → v̂ = 0.5; R = 1.0: (v − R)² = 0.01 < (v̂ − R)² = 0.25 → 0.25, clipped, ∂/∂v = 0.
    // loss = 0.5·(0.25 + 0.25)/2 = 0.125; clipfrac = 1/2.
    const l = valueLoss([[1.0, 0.9]], [[0.5, 1.0]], [[0.6, 0.0]], [[1, 1]], 0.5);
    expect(l.loss).toBeCloseTo(0.125, 12);
    expect(l.clipfrac).toBe(0.5);
    expect(l.grad[0][0]).toBeCloseTo(0.25, 12);
    expect(l.grad[0][1]).toBe(0);
    // explained variance: R = [0.5, 1.0] (var 0.0625), R − V = [−0.5, 0.1] (var 0.09) → 1 − 0.09/0.0625 = −0.44
    expect(explainedVariance([[1.0, 0.9]], [[0.5, 1.0]], [[1, 1]])).toBeCloseTo(-0.44, 12);
  });
});

describe("embedded value head", () => {
  const CFG = { vocabSize: 40, contextLength: 64, dModel: 32, nLayers: 2, nHeads: 2 };
  const seq = (n: number, k: number) => Array.from({ length: n }, (_, i) => (i * k + 3 + k * k) % CFG.vocabSize);
  const datums: Datum[] = [seq(12, 3), seq(7, 5), seq(9, 7)].map((t, i) => ({
    modelInput: t.slice(0, -1),
    targetTokens: t.slice(1),
    weights: t.slice(1).map((_, j) => (j >= i + 1 ? 1 : 0)),
  }));

  it("hidden states: one row of dModel features per input position, deterministic", async () => {
    const be = await EmbeddedBackend.create(CFG, 5);
    const h = await be.hiddenStates(datums);
    h.forEach((x, i) => expect(x.length).toBe(datums[i].modelInput.length * CFG.dModel));
    const again = await be.hiddenStates([datums[1]]);
    expect(Array.from(again[0])).toEqual(Array.from(h[1]));
    be.dispose();
  });

  it("its loss falls on a fixed batch (returns from a 3-token-style GAE target), deterministically", async () => {
    const be = await EmbeddedBackend.create(CFG, 5);
    const returns = datums.map((d, i) => d.weights.map((_, t) => (i === 0 ? 1 : 0) + 0.1 * t));
    const run = async () => {
      const critic = embeddedCritic(be, { learningRate: 0.05, cliprange: 100, updates: 1 });
      const losses: number[] = [];
      for (let k = 0; k < 60; k++) {
        const old = await critic.values(datums);
        const m = await critic.update(datums, returns, old);
        losses.push(m.vf_loss);
      }
      return losses;
    };
    const a = await run();
    expect(a[0]).toBeGreaterThan(0);
    expect(a[59]).toBeLessThan(0.25 * a[0]);
    expect(await run()).toEqual(a); // same data, same seed → identical numbers
    be.dispose();
  });
});

describe("the value head in checkpoints (value-head.json)", () => {
  it("state() / restore() round-trips exactly and refuses another shape", () => {
    const a = new ValueHead(3, { learningRate: 0.1, cliprange: 0.5, updates: 2 });
    const h = [Float32Array.from([1, 0, 2, 0.5, -1, 1])]; // one datum, two positions × dModel 3
    a.update(h, [[1, 0]], [[0, 0]], [[1, 1]]);
    const b = new ValueHead(3, { learningRate: 0.1, cliprange: 0.5, updates: 2 });
    b.restore(JSON.parse(JSON.stringify(a.state())) as ValueHeadState);
    expect(b.state()).toEqual(a.state());
    // Both continue identically (the Adam moments and step count came along, not only the weights).
    expect(b.update(h, [[0.5, 1]], [[0, 0]], [[1, 1]])).toEqual(a.update(h, [[0.5, 1]], [[0, 0]], [[1, 1]]));
    expect(b.values(h)).toEqual(a.values(h));
    expect(() => new ValueHead(4, a.options).restore(a.state())).toThrow("value head: saved for dModel 3, this policy has 4");
    expect(() => b.restore({ ...a.state(), w: [1, 2] })).toThrow("value head: w must be 3 finite numbers");
  });

  it("a gae run resumed from a middle checkpoint ends with the uninterrupted run's metrics.jsonl (and not without the head)", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-gae-resume-"));
    const cfg = (name: string) => resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "rl.steps": "4", "rl.advantage": "gae", "rl.lam": "0.95", "eval.maxTasks": "2", "run.dir": root, "run.name": name }));
    await runExperiment(cfg("whole"), searchRecipe);
    const reference = readFileSync(join(root, "whole", "metrics.jsonl"), "utf8");
    const ckpt = (run: string, c: string) => join(root, run, "checkpoints", c);
    expect(existsSync(join(ckpt("whole", "step-2"), "value-head.json"))).toBe(true);
    expect(Object.keys(JSON.parse(readFileSync(join(ckpt("whole", "step-2"), "policy-manifest.json"), "utf8")) as object)).toContain("value-head.json");
    /** A copy of the whole run cut back to its step-2 checkpoint (as if killed during step 3), resumed. */
    const resumeFrom2 = async (name: string, edit?: (dir: string) => void) => {
      cpSync(join(root, "whole"), join(root, name), { recursive: true });
      for (const c of ["step-3", "step-4", "final"]) rmSync(ckpt(name, c), { recursive: true });
      rmSync(join(root, name, "summary.json"));
      edit?.(ckpt(name, "step-2"));
      await runExperiment(cfg(name), searchRecipe, undefined, { overwrite: false, resume: true });
      return readFileSync(join(root, name, "metrics.jsonl"), "utf8");
    };
    expect(await resumeFrom2("resumed")).toBe(reference);
    // Control: the same checkpoint without its value head (the head refits from zero) does not reproduce the run.
    const without = await resumeFrom2("no-head", (dir) => {
      rmSync(join(dir, "value-head.json"));
      const manifest = JSON.parse(readFileSync(join(dir, "policy-manifest.json"), "utf8")) as Record<string, string>;
      delete manifest["value-head.json"];
      writeFileSync(join(dir, "policy-manifest.json"), JSON.stringify(manifest));
    });
    expect(without).not.toBe(reference);
    // Other runs' checkpoints carry no value head.
    await runExperiment(resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "eval.maxTasks": "2", "run.dir": root, "run.name": "grpo" })), searchRecipe);
    expect(existsSync(join(root, "grpo", "checkpoints", "final", "value-head.json"))).toBe(false);
  });
});
