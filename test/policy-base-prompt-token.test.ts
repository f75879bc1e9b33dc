/**
 * `policy.fixedPrompts` (issue 32: "a constant system prompt's cost is handled by the runtime"): from a smoke base made
 * once by `arl pretrain`, with `token` (the default) each of the env's constant system prompts
 * (`RecipeInstance.fixedPrompts`) is one added token of the base's tokenizer (ids V, V+1, …) that decodes back to the
 * exact text, the rest of every text encodes as under the base's tokenizer, the model has one more `wte` row per prompt
 * (the mean of the prompt's base-token rows; every other weight the base's), and a run's checkpoint saves and
 * reloads that tokenizer; with `text` the base's tokenizer and shape are used as they are. Ends with a tiny
 * `arl train --env travel` from the base.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Datum, Trajectory } from "../src/core/types.ts";
import type { EnvRecipe } from "../src/env/recipe.ts";
import { travelRecipe } from "../src/envs/index.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { loadCheckpoint } from "../src/policy/embedded/checkpoint.ts";
import type { GPTConfig } from "../src/policy/embedded/gpt.ts";
import { HfTokenizer } from "../src/policy/hf/tokenizer.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { PRETRAIN_SMOKE, resolvePretrainConfig } from "../src/pretrain/config.ts";
import { runPretrain, type BaseInfo } from "../src/pretrain/pretrain.ts";
import { createBackend } from "../src/train/backends.ts";
import { readBase } from "../src/train/base.ts";
import { loadPolicy, savePolicy } from "../src/train/checkpoint.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { dryRun } from "../src/train/dryRun.ts";
import { withRecipeDefaults } from "../src/train/recipeDefaults.ts";
import { silentReporter } from "../src/train/reporter.ts";
import { checkCheckpointShape } from "../src/train/resume.ts";
import { runExperiment } from "../src/train/runner.ts";
import { setupExperiment, type Setup } from "../src/train/setup.ts";
import { warmStartDemos } from "../src/train/warmStart.ts";

const travel = travelRecipe as EnvRecipe;
const root = mkdtempSync(join(tmpdir(), "arl-prompt-token-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let baseDir = "";
let info: BaseInfo;
/** The base's own tokenizer (no prompt tokens). */
let baseTok: HfTokenizer;
let V = 0;

beforeAll(async () => {
  // The smoke base, shortened (3 steps, no reading probes): only its files matter here.
  const cfg = resolvePretrainConfig(applyOverrides({}, { ...PRETRAIN_SMOKE, "run.dir": join(root, "pretrain"), "optim.steps": "3", "run.probesPerCell": "0" }));
  baseDir = (await runPretrain(cfg)).baseDir;
  info = JSON.parse(readFileSync(join(baseDir, "base.json"), "utf8")) as BaseInfo;
  baseTok = readBase(baseDir).tokenizer;
  V = baseTok.vocabSize;
}, 120_000);

/** The travel recipe's config (its defaults) from the smoke base. */
const config = (extra: Record<string, string> = {}): ExperimentConfig =>
  resolveConfig(applyOverrides(withRecipeDefaults({}, travel), { "run.dir": root, "run.name": "x", "policy.init": "base", "policy.base": baseDir, ...extra }));

/** The one fixed prompt of a travel setup (its system prompt: instructions + the tools' JSON schemas). */
const systemOf = (s: Setup): string => {
  const prompts = s.instance.fixedPrompts?.() ?? [];
  expect(prompts).toHaveLength(1);
  return prompts[0];
};

/** Hugging Face's Rust tokenizers (the Node bindings `trainBpe.ts` trains with): a second runtime of tokenizer.json. */
interface RustTokenizer {
  encode(text: string, pair: null, options: { addSpecialTokens: boolean }): Promise<{ getIds(): number[] }>;
  decode(ids: number[], skipSpecialTokens: boolean): Promise<string>;
}
const rust = createRequire(import.meta.url)("tokenizers") as { Tokenizer: { fromString(json: string): RustTokenizer } };

/** Quantile `p` of sorted lengths. */
const quantile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

/** The length quantiles of demonstrations (printed: the figures the report quotes). */
function lengths(demos: readonly Trajectory[]): { p50: number; p99: number; max: number } {
  const sorted = demos.map((d) => d.tokens.length).sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted[sorted.length - 1] };
}

describe("policy.fixedPrompts: token (the default)", () => {
  it("is the default, and a bad value names the field and the allowed values", () => {
    expect(resolveConfig({}).policy.fixedPrompts).toBe("token");
    expect(() => resolveConfig({ policy: { fixedPrompts: "prefix" } })).toThrow(/policy\.fixedPrompts: expected one of "token", "text", got "prefix"/);
  });

  it.each(["hermes", "react"])("%s: V+1 tokens; the system prompt is one id in the rendered prompt, the rest encodes as under the base, decode gives every demonstration back", async (protocol) => {
    const c = config({ "env.protocol": protocol, "sft.demosPerTask": "1", "sft.counterfactualWorlds": "0" });
    const s = setupExperiment(c, travel);
    const system = systemOf(s);
    expect(s.tokenizer).toBeInstanceOf(HfTokenizer);
    expect(s.tokenizer.vocabSize).toBe(V + 1);
    expect(s.gpt).toEqual({ ...info.config, vocabSize: V + 1 });
    expect(s.base).toEqual({ dir: baseDir, fingerprint: info.fingerprint, promptTokens: 1 });
    expect(s.tokenizer.encode(system)).toEqual([V]);
    expect(s.tokenizer.decode([V])).toBe(system);
    const n = baseTok.encode(system).length;
    expect(n).toBeGreaterThan(100);
    // The stops are still single tokens of the base's.
    expect(s.stops.stop.every((id) => id < V)).toBe(true);

    const demos = await warmStartDemos(s, c);
    const d = demos[0];
    const prompt = s.tokenizer.decode(d.tokens.slice(0, d.promptLength));
    expect(prompt.startsWith(`<|im_start|>system\n${system}<|im_end|>\n<|im_start|>user\n`)).toBe(true);
    expect(d.tokens.slice(0, d.promptLength).filter((id) => id === V)).toHaveLength(1);
    // The rest of the rendered prompt is exactly the base's ids: the base encodes the prompt's text as its own span.
    const plain = baseTok.encode(prompt);
    const at = d.tokens.indexOf(V);
    expect(plain.slice(at, at + n)).toEqual(baseTok.encode(system));
    expect([...plain.slice(0, at), V, ...plain.slice(at + n)]).toEqual(d.tokens.slice(0, d.promptLength));
    // Whole demonstrations round-trip byte for byte, and their plain text is n - 1 base tokens longer; the Rust
    // tokenizers crate reads the same tokenizer.json to the same ids and text (an ordinary HF tokenizer).
    const native = rust.Tokenizer.fromString(JSON.stringify(s.tokenizer.toJSON()));
    for (const demo of demos.slice(0, 40)) {
      const text = s.tokenizer.decode(demo.tokens);
      expect(s.tokenizer.decode(s.tokenizer.encode(text))).toBe(text);
      expect(s.tokenizer.encode(text)).toEqual(demo.tokens);
      expect(baseTok.encode(text).length).toBe(demo.tokens.length + n - 1);
      expect((await native.encode(text, null, { addSpecialTokens: false })).getIds()).toEqual(demo.tokens);
      expect(await native.decode(demo.tokens, false)).toBe(text);
    }
  }, 60_000);

  it("the travel demonstrations fit the base's context; read as text they are n − 1 tokens longer and cut", async () => {
    // One demonstration per task in the real world and one counterfactual copy, at the base's whole context.
    const extra = { "policy.contextLength": String(info.config.contextLength), "sft.demosPerTask": "1", "sft.counterfactualWorlds": "1" };
    const token = setupExperiment(config(extra), travel);
    const text = setupExperiment(config({ ...extra, "policy.fixedPrompts": "text" }), travel);
    const ctx = info.config.contextLength as number;
    const n = baseTok.encode(systemOf(token)).length;
    const a = await warmStartDemos(token, config(extra));
    const b = await warmStartDemos(text, config({ ...extra, "policy.fixedPrompts": "text" }));
    expect(b).toHaveLength(a.length);
    // Token: no demonstration reaches the context (a truncated one ran out of turns, not of room).
    expect(a.filter((d) => d.tokens.length >= ctx - 1)).toEqual([]);
    // Text: the same episodes, n − 1 tokens longer each where that fits, else cut at the context.
    let cut = 0;
    a.forEach((d, i) => {
      if (d.tokens.length + n - 1 <= ctx - 2) expect(b[i].tokens.length).toBe(d.tokens.length + n - 1);
      else {
        expect(b[i].truncated).toBe(true);
        cut++;
      }
    });
    const la = lengths(a);
    const lb = lengths(b);
    console.log(`travel demonstrations (smoke base, context ${ctx}, ${a.length}): token p50 ${la.p50} p99 ${la.p99} max ${la.max}; text p50 ${lb.p50} p99 ${lb.p99} max ${lb.max} (${cut} cut); prompt ${n} base tokens`);
    expect(lb.p50).toBeGreaterThanOrEqual(Math.min(ctx - 1, la.p50 + n - 1));
  }, 90_000);

  it("createBackend: wte row V is the mean of the prompt's base-token rows, everything else the base's; logprobs differ only by the new token's mass; the checkpoint reloads the tokenizer", async () => {
    const c = config();
    const s = setupExperiment(c, travel);
    const system = systemOf(s);
    const be = (await createBackend(c, s.gpt, undefined, s.tokenizer)) as EmbeddedBackend;
    const again = (await createBackend(c, s.gpt, undefined, s.tokenizer)) as EmbeddedBackend;
    const ref = await EmbeddedBackend.create(info.config as unknown as GPTConfig, { seed: 9, trainerEngine: "onnx", samplerEngine: "onnx" });
    await ref.load(baseDir, { optimizer: false });
    const dir = join(root, "weights");
    const saved = join(root, "saved-policy");
    try {
      await be.saveWeights(join(dir, "a"));
      await again.saveWeights(join(dir, "b"));
      const ext = (await loadCheckpoint(join(dir, "a"))).tensors;
      const base = (await loadCheckpoint(baseDir)).tensors;
      expect(readFileSync(join(dir, "a", "tensors.bin")).equals(readFileSync(join(dir, "b", "tensors.bin")))).toBe(true); // deterministic
      const D = info.config.dModel as number;
      const wte = ext.get("params.wte")!;
      const baseWte = base.get("params.wte")!;
      expect(wte).toHaveLength((V + 1) * D);
      expect(Math.max(...wte.slice(0, V * D).map((x, i) => Math.abs(x - baseWte[i])))).toBeLessThan(1e-6);
      const ids = baseTok.encode(system);
      const mean = Array.from({ length: D }, (_, d) => ids.reduce((sum, t) => sum + baseWte[t * D + d], 0) / ids.length);
      expect(Math.max(...mean.map((x, d) => Math.abs(x - wte[V * D + d])))).toBeLessThan(1e-6);
      expect([...ext.keys()].sort()).toEqual([...base.keys()].filter((k) => k.startsWith("params.")).sort());
      for (const [name, t] of ext) {
        if (name === "params.wte") continue;
        const b = base.get(name)!;
        expect(Math.max(...t.map((x, i) => Math.abs(x - b[i]))), name).toBeLessThan(1e-6);
      }

      // A datum without the prompt token: the same hidden states, so each logprob is the base's minus log(1 − p(V)).
      const tokens = baseTok.encode('<|im_start|>assistant\n<tool_call>\n{"name": "search_flights", "arguments": {"from": "PEK", "to": "SHA"}}\n</tool_call><|im_end|>');
      const datum: Datum = { modelInput: tokens.slice(0, -1), targetTokens: tokens.slice(1), weights: tokens.slice(1).map(() => 1) };
      const [lpExt] = await be.computeLogprobs([datum]);
      const [lpBase] = await ref.computeLogprobs([datum]);
      const [lpV] = await be.computeLogprobs([{ ...datum, targetTokens: datum.targetTokens.map(() => V) }]);
      const shifted = lpExt.map((x, i) => x - Math.log1p(-Math.exp(lpV[i])));
      expect(Math.max(...shifted.map((x, i) => Math.abs(x - lpBase[i])))).toBeLessThan(1e-4);
      console.log(`p(prompt token) at init over ${lpV.length} positions (smoke base): max ${Math.exp(Math.max(...lpV)).toExponential(2)}`);

      // The run's saved tokenizer reloads through loadPolicy (arl eval --checkpoint, serve, gateway) with the same ids,
      // and a --resume finds it equal to the config's.
      await savePolicy(saved, be, s.tokenizer, s.gpt);
      const p = await loadPolicy(saved);
      try {
        expect(p.tokenizer).toBeInstanceOf(HfTokenizer);
        expect(p.tokenizer.vocabSize).toBe(V + 1);
        expect(p.tokenizer.encode(`<|im_start|>system\n${system}<|im_end|>\n`)).toEqual(s.tokenizer.encode(`<|im_start|>system\n${system}<|im_end|>\n`));
        expect(p.tokenizer.encode(system)).toEqual([V]);
        expect(p.tokenizer.decode([V])).toBe(system);
        expect(p.gpt).toEqual(s.gpt);
        const [lpLoaded] = await p.backend.computeLogprobs([datum]);
        expect(lpLoaded).toEqual(lpExt);
        expect(() => checkCheckpointShape(saved, s)).not.toThrow();
      } finally {
        (p.backend as EmbeddedBackend).dispose();
      }
    } finally {
      for (const x of [be, again, ref]) x.dispose();
    }
  }, 60_000);

  it("the extended shape without the run's tokenizer, or the base's shape with a prompt token, is refused naming policy.base", async () => {
    const c = config();
    const s = setupExperiment(c, travel);
    await expect(createBackend(c, s.gpt)).rejects.toBeInstanceOf(ConfigError);
    await expect(createBackend(c, s.gpt)).rejects.toThrow(/policy\.base: .*1 more vocabulary rows than the base and no tokenizer names them/);
    await expect(createBackend(c, { ...s.gpt, nLayers: 3 }, undefined, s.tokenizer)).rejects.toThrow(/policy\.base: .*its weights do not load \(checkpoint .*: config\.nLayers is 2, this backend has 3\)/);
  });
});

describe("policy.fixedPrompts: text, and scratch", () => {
  it("text keeps the base's tokenizer and shape exactly", () => {
    const s = setupExperiment(config({ "policy.fixedPrompts": "text" }), travel);
    expect(s.tokenizer.toJSON()).toEqual(JSON.parse(readFileSync(join(baseDir, "tokenizer.json"), "utf8")));
    expect(s.gpt).toEqual(info.config);
    expect(s.base).toEqual({ dir: baseDir, fingerprint: info.fingerprint });
    expect(s.tokenizer.encode(systemOf(s))).toEqual(baseTok.encode(systemOf(s)));
  });

  it("with policy.init: scratch the word tokenizer keeps each fixed prompt as one token, whatever policy.fixedPrompts says", () => {
    for (const mode of ["token", "text"]) {
      const s = setupExperiment(config({ "policy.init": "scratch", "policy.fixedPrompts": mode }), travel);
      expect(s.tokenizer).toBeInstanceOf(WordTokenizer);
      expect(s.tokenizer.encode(systemOf(s))).toHaveLength(1);
      expect(s.base).toBeUndefined();
    }
  });
});

describe("a tiny arl train --env travel from the base", () => {
  it("2 SFT steps, 1 RL step of 2 × 2: runs, saves the prompt token with the checkpoint, and --dry-run names it", async () => {
    const c = config({
      "run.name": "travel-e2e",
      "sft.steps": "2",
      "sft.demosPerTask": "1",
      "sft.counterfactualWorlds": "0",
      "rl.steps": "1",
      "rl.tasksPerStep": "2",
      "rl.groupSize": "2",
      "eval.maxTasks": "2",
      "rl.maxTokensPerTurn": "16",
      "env.maxTurns": "3",
    });
    const logs: string[] = [];
    const summary = await runExperiment(c, travel, { ...silentReporter, log: (m) => logs.push(m) });
    expect(logs.find((m) => m.startsWith("env travel"))).toContain(`vocabulary ${V + 1} tokens (base ${baseDir}, fingerprint ${info.fingerprint.slice(0, 12)}, +1 learned prompt token (policy.fixedPrompts: token))`);
    expect(summary.rows.map((r) => r.policy)).toContain("Warm start (SFT)");
    const lines = readFileSync(join(root, "travel-e2e", "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l.stage === "sft").map((l) => l.step)).toEqual([0, 1]);
    expect(lines.filter((l) => l.stage === "rl").map((l) => l.step)).toEqual([0]);
    const p = await loadPolicy(join(root, "travel-e2e", "checkpoints", "final"));
    try {
      expect(p.gpt).toEqual({ ...info.config, vocabSize: V + 1 });
      expect(p.tokenizer.encode(systemOf(setupExperiment(c, travel)))).toEqual([V]);
    } finally {
      (p.backend as EmbeddedBackend).dispose();
    }
    const dry = await dryRun(c, travel, { resume: true });
    expect(dry.find((l) => l.startsWith("tokenizer:"))).toContain(`tokenizer: ${V + 1} tokens from the base ${baseDir}, +1 learned prompt token (policy.fixedPrompts: token); base model 2×32`);
    expect(dry.at(-1)).toMatch(/^resume: would continue .*travel-e2e from .*final/);
  }, 120_000);
});
