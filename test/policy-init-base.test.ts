/**
 * `policy.init: base` (issue 32 part 4, src/train/base.ts): from a smoke base made once by `arl pretrain`,
 * `setupExperiment` takes the base's tokenizer and shape (the env's `texts()` unused), `createBackend` its weights
 * (a fresh optimizer), the `--agent` path's `agentTokenizer` the same; a missing or incomplete base folder and a config
 * that does not fit the base are ConfigErrors naming the field; `policy.init: scratch` is unchanged; and a tiny
 * `arl train` (warm start + 1 RL step) runs end to end from the base.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Datum } from "../src/core/types.ts";
import type { EnvRecipe } from "../src/env/recipe.ts";
import { searchRecipe, SMOKE_OVERRIDES } from "../src/envs/index.ts";
import { runAgentExperiment } from "../src/external/experiment.ts";
import { agentTokenizer } from "../src/external/worlds.ts";
import { baseDirOf, PACKAGE_BASE_DIR } from "../src/policy/config.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { GPTConfig } from "../src/policy/embedded/gpt.ts";
import { HfTokenizer } from "../src/policy/hf/tokenizer.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { PRETRAIN_SMOKE, resolvePretrainConfig } from "../src/pretrain/config.ts";
import { runPretrain, type BaseInfo } from "../src/pretrain/pretrain.ts";
import { createBackend } from "../src/train/backends.ts";
import { loadPolicy } from "../src/train/checkpoint.ts";
import { ConfigError, resolveConfig, type ExperimentConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { silentReporter } from "../src/train/reporter.ts";
import { runExperiment } from "../src/train/runner.ts";
import { dryRun } from "../src/train/dryRun.ts";
import { gptConfigOf, setupExperiment } from "../src/train/setup.ts";
import { searchAgent } from "./agent-helpers.ts";
import { configError } from "./config-helpers.ts";

const root = mkdtempSync(join(tmpdir(), "arl-init-base-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let baseDir = "";
let info: BaseInfo;

beforeAll(async () => {
  // The smoke base, shortened (3 steps, no reading probes): only its files matter here.
  const cfg = resolvePretrainConfig(applyOverrides({}, { ...PRETRAIN_SMOKE, "run.dir": join(root, "pretrain"), "optim.steps": "3", "run.probesPerCell": "0" }));
  baseDir = (await runPretrain(cfg)).baseDir;
  info = JSON.parse(readFileSync(join(baseDir, "base.json"), "utf8")) as BaseInfo;
}, 120_000);

const config = (extra: Record<string, string> = {}): ExperimentConfig =>
  resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "run.dir": root, "run.name": "x", "policy.init": "base", "policy.base": baseDir, ...extra }));

/** The search recipe, whose instance's `texts()` throws: a base's tokenizer must not read the env's words. */
const noTexts: EnvRecipe = {
  ...searchRecipe,
  build: (ctx) => ({
    ...searchRecipe.build(ctx),
    texts: () => {
      throw new Error("texts() called");
    },
  }),
};


/** A copy of the base folder without `file`. */
function baseWithout(file: string): string {
  const dir = join(root, `base-without-${file}`);
  cpSync(baseDir, dir, { recursive: true });
  rmSync(join(dir, file));
  return dir;
}

describe("policy.init / policy.base (config)", () => {
  it("defaults to scratch and the package's base/ folder (beside data/); an unknown init names the allowed values", () => {
    const c = resolveConfig({});
    expect(c.policy.init).toBe("scratch");
    expect(c.policy.base).toBeUndefined(); // unset in config.yaml: the package's folder, wherever it is installed
    expect(baseDirOf(c.policy)).toBe(PACKAGE_BASE_DIR);
    expect(existsSync(join(dirname(PACKAGE_BASE_DIR), "data", "wiki18-sample-1000.jsonl"))).toBe(true);
    expect(configError(() => resolveConfig({ policy: { init: "pretrained" } }))).toMatch(/policy\.init: expected one of "scratch", "base", got "pretrained"/);
  });
});

describe("policy.init: base", () => {
  it("setupExperiment: the base's tokenizer (env texts unused) and base.json's shape; the config's context for sampling", () => {
    const s = setupExperiment(config(), noTexts);
    expect(s.tokenizer).toBeInstanceOf(HfTokenizer);
    expect(s.tokenizer.vocabSize).toBe(info.config.vocabSize);
    expect(s.tokenizer.toJSON()).toEqual(JSON.parse(readFileSync(join(baseDir, "tokenizer.json"), "utf8")));
    expect(s.gpt).toEqual(info.config);
    expect(s.base).toEqual({ dir: baseDir, fingerprint: info.fingerprint });
    expect(s.limits.contextLength).toBe(192); // the smoke config's, under the base's 1024
    // search-r1's stops are special tokens of the base tokenizer: the sampler stops on their ids.
    expect(s.stops.stopStrings).toEqual([]);
    expect(s.stops.stop.map((id) => s.tokenizer.decode([id]))).toEqual(["</search>", "</answer>"]);
  });

  it("refuses a context longer than the base's, and the jax engines for a RoPE base, naming the field", () => {
    expect(configError(() => setupExperiment(config({ "policy.contextLength": "2048" }), searchRecipe))).toMatch(
      /policy\.contextLength: 2048 exceeds the base model's context of 1024 tokens .*allowed: ≤ 1024/,
    );
    expect(configError(() => setupExperiment(config({ "policy.sampler": "jax" }), searchRecipe))).toMatch(/policy\.sampler: the base model .* uses RoPE positions, which run on the onnx engines only; got jax, allowed: onnx/);
  });

  it("createBackend loads exactly the base's weights, with a fresh optimizer", async () => {
    const c = config();
    const s = setupExperiment(c, searchRecipe);
    const be = (await createBackend(c, s.gpt)) as EmbeddedBackend;
    const ref = await EmbeddedBackend.create(info.config as unknown as GPTConfig, { seed: 9, trainerEngine: "onnx", samplerEngine: "onnx" });
    await ref.load(baseDir, { optimizer: false });
    const fresh = await EmbeddedBackend.create(s.gpt, { seed: c.run.seed, trainerEngine: "onnx", samplerEngine: "onnx" });
    try {
      const ids = s.tokenizer.encode("<search> capital of France </search><information> Doc 1(Title: Paris) Paris is the capital. </information><answer> Paris </answer>");
      const datum: Datum = { modelInput: ids.slice(0, -1), targetTokens: ids.slice(1), weights: ids.slice(1).map(() => 1) };
      const [a] = await be.computeLogprobs([datum]);
      const [b] = await ref.computeLogprobs([datum]);
      const [f] = await fresh.computeLogprobs([datum]);
      expect(a).toHaveLength(ids.length - 1);
      expect(Math.max(...a.map((x, i) => Math.abs(x - b[i])))).toBeLessThan(1e-6);
      expect(Math.max(...a.map((x, i) => Math.abs(x - f[i])))).toBeGreaterThan(1e-3); // not the seed's fresh weights
      expect(be.step).toBe(0);
    } finally {
      for (const x of [be, ref, fresh]) x.dispose();
    }
  });

  it("a missing base folder, or one without base.json (or its weights), is a ConfigError naming policy.base and the file", async () => {
    const missing = join(root, "no-such-base");
    expect(configError(() => setupExperiment(config({ "policy.base": missing }), searchRecipe))).toMatch(new RegExp(`policy\\.base: ${missing}: no such folder`));
    const noInfo = baseWithout("base.json");
    expect(configError(() => setupExperiment(config({ "policy.base": noInfo }), searchRecipe))).toMatch(/policy\.base: .*base-without-base\.json: missing base\.json/);
    const noWeights = config({ "policy.base": baseWithout("tensors.bin") });
    await expect(createBackend(noWeights, info.config as unknown as GPTConfig)).rejects.toThrow(/policy\.base: .*missing tensors\.bin/);
    await expect(createBackend(noWeights, info.config as unknown as GPTConfig)).rejects.toBeInstanceOf(ConfigError);
    // Another shape than the base's (a caller that passed the policy fields' shape) is refused too.
    await expect(createBackend(config(), gptConfigOf(config(), info.config.vocabSize as number))).rejects.toThrow(/policy\.base: .*its weights do not load \(checkpoint .*config\.\w+ is/);
  });

  it("the --agent path: agentTokenizer gives the base's tokenizer, shape and fingerprint", async () => {
    const t = await agentTokenizer(config({ "policy.contextLength": "512" }), ["unused words"], {});
    expect(t.tokenizer).toBeInstanceOf(HfTokenizer);
    expect(t.tokenizer.vocabSize).toBe(info.config.vocabSize);
    expect(t.gpt).toEqual(info.config);
    expect(t.base?.fingerprint).toBe(info.fingerprint);
    await expect(agentTokenizer(config({ "policy.base": join(root, "no-such-base") }), [], {})).rejects.toThrow(/policy\.base: .*no such folder/);
  });

  it("a tiny arl train --agent (2 SFT steps, 1 RL step) runs end to end from the base", async () => {
    const c = config({ "run.name": "agent-e2e", "policy.contextLength": "512", "sft.steps": "2", "rl.steps": "1", "eval.maxTasks": "4" });
    // A self-reported reward that differs within a group (the answer's length), so the RL step updates.
    const summary = await runAgentExperiment(c, { agent: searchAgent([], (answer) => (answer.length % 5) / 4) });
    expect(summary.steps).toHaveLength(1);
    expect(Number.isFinite(summary.steps[0]["train/entropy"])).toBe(true);
    const p = await loadPolicy(join(root, "agent-e2e", "checkpoints", "final"));
    expect(p.tokenizer).toBeInstanceOf(HfTokenizer);
    expect(p.gpt).toEqual(info.config);
    (p.backend as EmbeddedBackend).dispose();
  }, 120_000);

  it("policy.init: scratch is unchanged: the env's word tokenizer and the policy fields' shape (policy.base unread)", () => {
    const c = config({ "policy.init": "scratch", "policy.base": join(root, "no-such-base") });
    const s = setupExperiment(c, searchRecipe);
    expect(s.tokenizer).toBeInstanceOf(WordTokenizer);
    expect(s.gpt).toEqual(gptConfigOf(c, s.tokenizer.vocabSize));
    expect(s.base).toBeUndefined();
  });

  it("an env without texts() from scratch takes the base's tokenizer (any text round-trips) and the policy fields' shape; without a base folder the error names policy.init", () => {
    const bare: EnvRecipe = { ...searchRecipe, build: (ctx) => ({ ...searchRecipe.build(ctx), texts: undefined }) };
    const c = config({ "policy.init": "scratch" });
    const s = setupExperiment(c, bare);
    expect(s.tokenizer).toBeInstanceOf(HfTokenizer);
    expect(s.tokenizer.vocabSize).toBeGreaterThanOrEqual(info.config.vocabSize as number);
    for (const text of ["order 12 of p-4821", "Ünïcode ✓ works"]) expect(s.tokenizer.decode(s.tokenizer.encode(text))).toBe(text);
    expect(s.gpt).toEqual(gptConfigOf(c, s.tokenizer.vocabSize));
    expect(s.base).toBeUndefined(); // fresh weights: only the tokenizer is the base's
    const e = configError(() => setupExperiment(config({ "policy.init": "scratch", "policy.base": join(root, "no-such-base") }), bare));
    expect(e).toMatch(/policy\.init: the search env lists no texts\(\).*policy\.base: .*no-such-base: no such folder/);
  });

  it("a tiny arl train (2 SFT steps, 1 RL step) runs end to end from the base", async () => {
    const c = config({ "run.name": "e2e", "sft.steps": "2", "rl.steps": "1", "eval.maxTasks": "4", "rl.maxTokensPerTurn": "48", "reward.weights.gen_tokens": "0.01" });
    // An untrained base answers nothing valid: the token price makes rewards differ within a group, so RL updates
    // (48 tokens a turn: at 16 every turn of one seed ran to the limit, all rewards equal, after the SFT weighting fix).
    const logs: string[] = [];
    const summary = await runExperiment(c, searchRecipe, { ...silentReporter, log: (m) => logs.push(m) });
    expect(logs.find((m) => m.startsWith("env search"))).toContain(`(base ${baseDir}, fingerprint ${info.fingerprint.slice(0, 12)})`);
    expect(summary.rows.map((r) => r.policy)).toEqual(["Direct", "RAG", "Warm start (SFT)", "RL (GRPO)"]);
    const lines = readFileSync(join(root, "e2e", "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.filter((l) => l.stage === "sft").map((l) => l.step)).toEqual([0, 1]);
    const rl = lines.filter((l) => l.stage === "rl");
    expect(rl.map((l) => l.step)).toEqual([0]);
    expect(rl[0]["train/informative_fraction"]).toBeGreaterThan(0);
    expect(Number.isFinite(rl[0]["train/entropy"])).toBe(true);
    // The final checkpoint is self-contained: the base's tokenizer and shape, loadable without the base.
    const p = await loadPolicy(join(root, "e2e", "checkpoints", "final"));
    expect(p.tokenizer).toBeInstanceOf(HfTokenizer);
    expect(p.gpt).toEqual(info.config);
    (p.backend as EmbeddedBackend).dispose();
    // --dry-run reports the base, and a --resume of the run finds its checkpoints of the base's tokenizer and shape.
    const lines2 = await dryRun(c, searchRecipe, { resume: true });
    expect(lines2.find((l) => l.startsWith("tokenizer:"))).toBe(
      `tokenizer: ${info.config.vocabSize} tokens from the base ${baseDir}; base model 2×32 (fingerprint ${info.fingerprint.slice(0, 12)}, its context 1024), context 192, training lengths padded to multiples of 16 (onnx trainer)`,
    );
    expect(lines2.at(-1)).toMatch(/^resume: would continue .*e2e from .*final/);
  }, 120_000);
});
