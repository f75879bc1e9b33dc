/**
 * The embedded backend's memory estimate (issue 12, defect 7): a config whose model cannot fit jax-js's 4 GiB wasm
 * heap is refused at `--dry-run` and before a run writes anything, naming the field; the default config fits; the
 * estimate follows the measured heap of a real step; `--dry-run` reports the figure the run warns with.
 */
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, resolveConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe, travelRecipe } from "../src/envs/index.ts";
import { WASM_HEAP_LIMIT_BYTES, embeddedMemoryProblem, estimateEmbeddedMemory } from "../src/policy/embedded/memory.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { dryRun } from "../src/train/dryRun.ts";
import { memoryWarning } from "../src/train/memoryReport.ts";
import { silentReporter, type Reporter } from "../src/train/reporter.ts";
import { runExperiment } from "../src/train/runner.ts";
import { checkMemory, setupExperiment } from "../src/train/setup.ts";
import type { EnvRecipe } from "../src/env/recipe.ts";
import { withRecipeDefaults } from "../src/train/recipeDefaults.ts";

const smoke = (root: string, extra: Record<string, string> = {}) =>
  resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "run.name": "smoke", ...extra }));
const GiB = 2 ** 30;

describe("estimateEmbeddedMemory", () => {
  it("counts parameters exactly and grows with every size", () => {
    const base = { vocabSize: 600, contextLength: 256, dModel: 96, nLayers: 2, nHeads: 4, mlpRatio: 4, sampler: "onnx" as const, reference: true };
    const e = estimateEmbeddedMemory(base);
    // wte + wpe + per block (4D² + 2MD + 9D + M) + final LayerNorm
    expect(e.params).toBe(600 * 96 + 256 * 96 + 2 * (4 * 96 * 96 + 2 * 384 * 96 + 9 * 96 + 384) + 2 * 96);
    expect(e.wasm.total).toBe(e.wasm.state + e.wasm.training + e.wasm.sampling);
    expect(e.trainSeq).toBe(256);
    expect(e.trainTokens).toBe(3072); // 12 rows of 256
    expect(e.wasm.sampling).toBe(0); // the onnx engine decodes outside the wasm heap
    expect(estimateEmbeddedMemory({ ...base, sampler: "jax" }).wasm.sampling).toBeGreaterThan(0);
    for (const k of ["dModel", "nLayers", "contextLength", "vocabSize"] as const) {
      expect(estimateEmbeddedMemory({ ...base, [k]: base[k] * 2 }).wasm.total).toBeGreaterThan(e.wasm.total);
    }
    expect(estimateEmbeddedMemory({ ...base, nHeads: 8 }).wasm.total).toBeGreaterThan(e.wasm.total);
  });

  it("the default config fits, with room to spare (both trainers)", () => {
    const onnx = resolveConfig({});
    expect(onnx.policy.trainer).toBe("onnx");
    const o = checkMemory(onnx, setupExperiment(onnx, searchRecipe))!;
    expect(o.wasm.training).toBe(0); // the onnx trainer's activations are native memory
    expect(o.wasm.peak).toBe(o.wasm.total);
    expect(o.host).toBeGreaterThan(0);
    expect(memoryWarning(o)).toBeUndefined();
    const config = resolveConfig(applyOverrides({}, { "policy.trainer": "jax" }));
    const s = setupExperiment(config, searchRecipe);
    expect(embeddedMemoryProblem(config, s.tokenizer.vocabSize)).toBeUndefined();
    const mem = checkMemory(config, s)!;
    expect(mem.wasm.total).toBeLessThan(WASM_HEAP_LIMIT_BYTES / 2);
    // A long run holds one set of buffers per micro-batch shape: more than one step, still under the limit.
    expect(mem.wasm.peak).toBeGreaterThan(mem.wasm.total);
    expect(mem.wasm.peak).toBeLessThan(WASM_HEAP_LIMIT_BYTES);
    expect(memoryWarning(mem)).toBeUndefined();
  });

  it("a remote (tinker) policy is not held to the embedded backend's limit", () => {
    const config = resolveConfig(applyOverrides({}, { "policy.backend": "tinker", "policy.dModel": "8192" }));
    expect(embeddedMemoryProblem(config, 1000)).toBeUndefined();
    expect(checkMemory(config, setupExperiment(config, searchRecipe))).toBeUndefined();
  });
});

describe("refused before anything runs", () => {
  it("a config whose first step fits but whose long run may not is warned about, not refused", () => {
    const config = resolveConfig(applyOverrides({}, { "policy.contextLength": "1024", "policy.trainer": "jax" }));
    const s = setupExperiment(config, searchRecipe);
    const mem = checkMemory(config, s)!;
    expect(mem.wasm.total).toBeLessThan(WASM_HEAP_LIMIT_BYTES);
    expect(memoryWarning(mem)).toMatch(/^memory: a long run can grow the embedded backend's wasm heap to ≈ [\d.]+ GiB .*lower policy\.contextLength or policy\.dModel/);
  });

  it("dry run: policy.dModel 8192 is refused in seconds, naming the field and what fits", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-mem-"));
    const t0 = performance.now();
    const p = dryRun(smoke(root, { "policy.dModel": "8192" }), searchRecipe);
    await expect(p).rejects.toThrow(ConfigError);
    await expect(p).rejects.toThrow(/policy\.dModel: 8192 needs ≈ [\d.]+ GiB of the embedded backend's wasm memory .*more than its 4 GiB .*allowed: policy\.dModel ≤ \d+/);
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it("dry run: a huge policy.contextLength is refused by the schema, a large one by the estimate", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-mem-"));
    expect(() => smoke(root, { "policy.contextLength": "100000000" })).toThrow("policy.contextLength: expected a number ≤ 1048576, got 100000000");
    const t0 = performance.now();
    const p = dryRun(smoke(root, { "policy.contextLength": "65536" }), searchRecipe);
    await expect(p).rejects.toThrow(/policy\.contextLength: 65536 needs ≈ [\d.]+ GiB .*allowed: policy\.contextLength ≤ \d+/);
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it("a real run refuses it before writing anything in the run folder", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-mem-run-"));
    const t0 = performance.now();
    await expect(runExperiment(smoke(root, { "policy.dModel": "8192" }), searchRecipe)).rejects.toThrow(/policy\.dModel: 8192 needs/);
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(existsSync(join(root, "smoke"))).toBe(false);
  });

  it("the estimate is close to the heap of a real training step (smoke shape, full context; jax trainer)", async () => {
    const trainer = "jax";
    const { EmbeddedBackend } = await import("../src/policy/embedded/backend.ts");
    const { wasmHeapBytes } = await import("../src/policy/embedded/jax.ts");
    const gpt = { vocabSize: 300, contextLength: 192, dModel: 32, nLayers: 1, nHeads: 2 };
    const be = await EmbeddedBackend.create(gpt, { seed: 0, trainerEngine: trainer });
    const T = gpt.contextLength;
    const rows = Math.floor(3072 / T);
    const datums = Array.from({ length: rows }, (_, r) => {
      const t = Array.from({ length: T + 1 }, (_, i) => (i * 7 + r) % gpt.vocabSize);
      const n = T;
      return { modelInput: t.slice(0, n), targetTokens: t.slice(1), weights: Array(n).fill(1), logprobs: Array(n).fill(-2), advantages: Array(n).fill(0.1), refLogprobs: Array(n).fill(-2) };
    });
    await be.forwardBackward(datums, "cross_entropy");
    await be.optimStep({ learningRate: 1e-3 });
    await be.forwardBackward(datums, "ppo", { klCoef: 0.01 });
    await be.optimStep({ learningRate: 1e-3 });
    const measured = wasmHeapBytes();
    const e = estimateEmbeddedMemory({ ...gpt, mlpRatio: 4, sampler: "onnx", trainer, reference: false });
    expect(e.wasm.total / measured).toBeGreaterThan(0.8);
    expect(e.wasm.total / measured).toBeLessThan(1.3);
    be.dispose();
  }, 60_000);
});

describe("one estimate: --dry-run reports the figure the run warns with (issue 29, part 10)", () => {
  /** The first `≈ <n> MiB|GiB` of a line: the estimate it leads with. */
  const figure = (line: string) => /≈ ([\d.]+ [MG]iB)/.exec(line)?.[1];
  /** The warning a run logs at start (before its run folder is touched), then the run is stopped there. */
  const runWarning = async (start: (reporter: Reporter) => Promise<unknown>): Promise<string> => {
    let warning: string | undefined;
    const stop = new Error("stopped after the memory warning");
    const reporter: Reporter = {
      ...silentReporter,
      log: (m: string) => {
        if (!m.startsWith("warning: memory:")) return;
        warning = m.slice("warning: ".length);
        throw stop;
      },
    };
    await expect(start(reporter)).rejects.toBe(stop);
    return warning!;
  };

  it("search env: a config whose long run can outgrow the heap (smoke model, context 1024)", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-mem-one-"));
    const config = smoke(root, { "policy.contextLength": "1024", "policy.trainer": "jax" });
    const warning = await runWarning((r) => runExperiment(config, searchRecipe, r));
    const lines = await dryRun(config, searchRecipe);
    const line = lines.find((l) => l.startsWith("memory:"))!;
    expect(figure(warning)).toMatch(/GiB$/);
    expect(figure(line)).toBe(figure(warning)); // before: the dry run led with the first step's need (398 MiB vs 5.1 GiB)
    expect(lines).toContain(`warning: ${warning}`);
    expect(existsSync(join(root, "smoke"))).toBe(false);
  }, 60_000);

  it("a recipe env (travel): the dry run says the run's figure and its warning", async () => {
    const root = mkdtempSync(join(tmpdir(), "arl-mem-one-"));
    const config = resolveConfig(applyOverrides(withRecipeDefaults({}, travelRecipe as EnvRecipe, true), { "run.dir": root, "policy.contextLength": "2560", "policy.trainer": "jax" }));
    const warning = await runWarning((r) => runExperiment(config, travelRecipe as EnvRecipe, r));
    const lines = await dryRun(config, travelRecipe as EnvRecipe);
    const line = lines.find((l) => l.startsWith("memory:"))!;
    expect(figure(line)).toBe(figure(warning)); // before: "memory: ≈ 778 MiB" (the first step) and no warning
    expect(lines).toContain(`warning: ${warning}`);
    expect(existsSync(join(root, config.run.name))).toBe(false);
  }, 60_000);
});

describe("GiB", () => {
  it("the limit is jax-js's wasm32 heap, 4 GiB", () => {
    expect(WASM_HEAP_LIMIT_BYTES).toBe(4 * GiB);
  });
});
