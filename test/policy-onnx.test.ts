/**
 * The ONNX sampling engine (src/policy/onnx/): its logprobs equal the trainer's forward (`computeLogprobs`, the
 * PPO-ratio path) within 1e-4 nats on random and trained weights, it samples the same tokens as the jax-js
 * sampler for the same seed, follows the same stop/length/context rules, sees weight updates, and is
 * deterministic run to run.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend, type EmbeddedBackendOptions } from "../src/policy/embedded/backend.ts";
import type { GPTConfig } from "../src/policy/embedded/gpt.ts";
import { OnnxSampler } from "../src/policy/onnx/sampler.ts";
import type { SampledSequence, SampleOptions } from "../src/core/sampling.ts";
import { createBackend } from "../src/train/backends.ts";
import { resolveConfig } from "../src/train/config.ts";
import { expectBatchIndependent, expectStopAndValidation } from "./sampler-contract.ts";

const CFG: GPTConfig = { vocabSize: 40, contextLength: 64, dModel: 32, nLayers: 2, nHeads: 2 };
const TOL = 1e-4;

/** A deterministic token sequence. */
function seq(n: number, k: number, V = CFG.vocabSize): number[] {
  return Array.from({ length: n }, (_, i) => (i * k + 3 + k * k) % V);
}

function datum(tokens: number[]): Datum {
  return { modelInput: tokens.slice(0, -1), targetTokens: tokens.slice(1), weights: new Array(tokens.length - 1).fill(1) };
}

function onnxBackend(seed: number, extra: Partial<EmbeddedBackendOptions> = {}, cfg: GPTConfig = CFG): Promise<EmbeddedBackend> {
  return EmbeddedBackend.create(cfg, { seed, samplerEngine: "onnx", ...extra });
}

/** Samples every (prompt, options) concurrently, so they form one batch. */
function sampleAll(be: EmbeddedBackend, calls: [number[], SampleOptions][]): Promise<SampledSequence[][]> {
  const client = be.samplingClient();
  return Promise.all(calls.map(([p, o]) => client.sample(p, o)));
}

/**
 * Max |sampler logprob − trainer logprob| over all sampled tokens (the trainer scores prompt + sampled tokens with
 * `computeLogprobs`; the sampled tokens' logprobs are the last `tokens.length` entries).
 */
async function maxLogprobDiff(be: EmbeddedBackend, prompts: number[][], results: SampledSequence[][]): Promise<number> {
  const datums: Datum[] = [];
  const expected: number[][] = [];
  results.forEach((samples, i) => {
    for (const s of samples) {
      if (s.tokens.length === 0) continue;
      datums.push(datum([...prompts[i], ...s.tokens]));
      expected.push(s.logprobs);
    }
  });
  const lps = await be.computeLogprobs(datums);
  let max = 0;
  lps.forEach((lp, j) => {
    const tail = lp.slice(lp.length - expected[j].length);
    tail.forEach((x, t) => (max = Math.max(max, Math.abs(x - expected[j][t]))));
  });
  return max;
}

/** A few cross-entropy updates with a large learning rate, so the weights are far from their initialisation. */
async function train(be: EmbeddedBackend, steps: number): Promise<void> {
  for (let i = 0; i < steps; i++) {
    await be.forwardBackward([datum(seq(40, 7)), datum(seq(33, 3)), datum(seq(50, 11))], "cross_entropy");
    await be.optimStep({ learningRate: 0.02 });
  }
}

describe("ONNX sampler", () => {
  it("matches the trainer's logprobs (1e-4) and the jax sampler's tokens, random and trained weights, mixed batch", async () => {
    const be = await onnxBackend(7);
    const jax = await EmbeddedBackend.create(CFG, 7);
    const prompts = [seq(5, 3), seq(17, 7), seq(33, 11), seq(1, 5)];
    const calls = (seed: number, temperature: number): [number[], SampleOptions][] =>
      prompts.map((p, i) => [p, { n: 3, maxTokens: 12, temperature, seed: seed + i }]);
    const diffs: number[] = [];
    for (const stage of ["random", "trained"]) {
      if (stage === "trained") {
        await train(be, 6);
        await train(jax, 6);
      }
      const results = await sampleAll(be, calls(100, 1));
      for (const samples of results) {
        expect(samples).toHaveLength(3);
        for (const s of samples) {
          expect(s.tokens).toHaveLength(12);
          expect(s.stopReason).toBe("length");
        }
      }
      diffs.push(await maxLogprobDiff(be, prompts, results));
      // Same seed, same draws: the jax sampler gives the same tokens (logits agree to ~1e-5).
      const jaxResults = await sampleAll(jax, calls(100, 1));
      expect(results.map((r) => r.map((s) => s.tokens))).toEqual(jaxResults.map((r) => r.map((s) => s.tokens)));
      // Greedy: the same tokens as the jax sampler, and logprobs (under softmax(logits)) equal the trainer's.
      const greedy = await sampleAll(be, calls(5, 0));
      const jaxGreedy = await sampleAll(jax, calls(5, 0));
      expect(greedy.map((r) => r.map((s) => s.tokens))).toEqual(jaxGreedy.map((r) => r.map((s) => s.tokens)));
      diffs.push(await maxLogprobDiff(be, prompts, greedy));
    }
    for (const d of diffs) expect(d).toBeLessThan(TOL);
    be.dispose();
    jax.dispose();
  });

  it.each([
    ["RoPE", { positional: "rope" }],
    ["RoPE + token shift", { positional: "rope", tokenShift: true }],
    ["learned positions + token shift", { tokenShift: true }],
    ["RoPE + token shift over 3 tokens", { positional: "rope", tokenShift: true, shiftWindow: 3 }],
  ] as const)("%s models: sampler logprobs match the trainer's (1e-4), random and trained weights, through the KV cache", async (_name, extra) => {
    const cfg: GPTConfig = { ...CFG, ...extra };
    const be = await onnxBackend(9, {}, cfg);
    const prompts = [seq(5, 3), seq(17, 7), seq(40, 11), seq(1, 5)];
    const calls = (seed: number, temperature: number): [number[], SampleOptions][] =>
      prompts.map((p, i) => [p, { n: 2, maxTokens: 16, temperature, seed: seed + i }]);
    const diffs: number[] = [];
    for (const stage of ["random", "trained"]) {
      if (stage === "trained") await train(be, 6);
      diffs.push(await maxLogprobDiff(be, prompts, await sampleAll(be, calls(100, 1))));
      diffs.push(await maxLogprobDiff(be, prompts, await sampleAll(be, calls(5, 0))));
    }
    for (const d of diffs) expect(d).toBeLessThan(TOL);
    // Positions matter: the same tokens at other offsets score differently (a RoPE graph that ignored positions would not).
    const [a, b] = await be.computeLogprobs([datum(seq(20, 7)), datum([...seq(3, 5), ...seq(20, 7)])]);
    expect(Math.max(...a.map((x, t) => Math.abs(x - b[t + 3])))).toBeGreaterThan(1e-3);
    be.dispose();
  });

  it("drops finished rows mid-batch without changing the others (stop tokens at different steps)", async () => {
    const be = await onnxBackend(11);
    const prompts = [seq(9, 5), seq(21, 3), seq(4, 7)];
    // Stop on a quarter of the vocabulary: rows end at different steps, so the running rows get compacted.
    const stop = Array.from({ length: 10 }, (_, i) => i * 4);
    const results = await sampleAll(
      be,
      prompts.map((p, i) => [p, { n: 6, maxTokens: 30, temperature: 1, seed: 40 + i, stop }]),
    );
    const lengths = results.flat().map((s) => s.tokens.length);
    expect(new Set(lengths).size).toBeGreaterThan(3);
    for (const s of results.flat()) {
      if (s.stopReason === "stop") expect(stop).toContain(s.tokens[s.tokens.length - 1]);
      else expect(s.tokens).toHaveLength(30);
      expect(s.tokens.slice(0, -1).some((t) => stop.includes(t))).toBe(false);
    }
    expect(await maxLogprobDiff(be, prompts, results)).toBeLessThan(TOL);
    // Each row alone (no compaction, no other rows) gives the same tokens.
    const alone = await be.samplingClient().sample(prompts[1], { n: 6, maxTokens: 30, temperature: 1, seed: 41, stop });
    expect(alone.map((s) => s.tokens)).toEqual(results[1].map((s) => s.tokens));
    be.dispose();
  });

  it("ends rows by stop token, length and context; rejects bad requests", async () => {
    const be = await onnxBackend(1);
    const client = be.samplingClient();
    await expectStopAndValidation(client);
    // A context-capped row and a long one in the same batch.
    const [a, b] = await sampleAll(be, [
      [seq(62, 5), { n: 2, maxTokens: 10, temperature: 1, seed: 3 }],
      [seq(3, 5), { n: 1, maxTokens: 10, temperature: 1, seed: 4 }],
    ]);
    expect(a.map((s) => [s.tokens.length, s.stopReason])).toEqual([
      [2, "context"],
      [2, "context"],
    ]);
    expect(b[0].tokens).toHaveLength(10);
    expect(await maxLogprobDiff(be, [seq(62, 5), seq(3, 5)], [a, b])).toBeLessThan(TOL);
    be.dispose();
  });

  it("gives the same samples whatever the batch composition, and splits batches over maxBatchRows", async () => {
    const be = await onnxBackend(3);
    const opts = { n: 3, maxTokens: 10, temperature: 1, seed: 42 };
    const alone = await expectBatchIndependent(be.samplingClient(), seq(9, 5), opts, [
      [seq(30, 3), { ...opts, seed: 1 }],
      [seq(9, 5), { ...opts, n: 5, seed: 2 }], // same prompt: shares the prefill
    ]);
    const split = await onnxBackend(3, { onnx: { maxBatchRows: 2 } });
    const splitAlone = await split.samplingClient().sample(seq(9, 5), opts);
    expect(splitAlone.map((s) => s.tokens)).toEqual(alone.map((s) => s.tokens));
    be.dispose();
    split.dispose();
  });

  it("samples from the updated weights after optimStep and load (one session rebuild per version)", async () => {
    const be = await onnxBackend(8);
    const client = be.samplingClient() as OnnxSampler;
    expect(client).toBeInstanceOf(OnnxSampler);
    const prompt = seq(9, 5);
    const opts = { n: 2, maxTokens: 8, temperature: 1, seed: 3 };
    const before = await client.sample(prompt, opts);
    await client.sample(prompt, opts);
    expect(client.rebuilds).toHaveLength(1);
    await train(be, 1);
    const after = await client.sample(prompt, opts);
    expect(client.rebuilds).toHaveLength(2);
    expect(after[0].logprobs).not.toEqual(before[0].logprobs);
    expect(await maxLogprobDiff(be, [prompt], [after])).toBeLessThan(TOL);
    // Gradients computed but discarded leave the weights as they were: no rebuild.
    await be.forwardBackward([datum(seq(10, 3))], "cross_entropy");
    await be.discardGradients();
    expect(await client.sample(prompt, opts)).toEqual(after);
    expect(client.rebuilds).toHaveLength(2);
    // load() brings back saved weights: the next batch samples from them.
    const dir = mkdtempSync(join(tmpdir(), "arl-onnx-"));
    try {
      await be.save(dir);
      await train(be, 1);
      const moved = await client.sample(prompt, opts);
      expect(moved[0].logprobs).not.toEqual(after[0].logprobs);
      await be.load(dir);
      expect(await client.sample(prompt, opts)).toEqual(after);
      expect(client.rebuilds).toHaveLength(4);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    be.dispose();
  });

  it("is deterministic: two runs give identical tokens and logprobs (1 and 2 threads)", async () => {
    const run = async (threads: number): Promise<SampledSequence[][]> => {
      const be = await onnxBackend(5, { onnx: { threads } });
      await train(be, 2);
      const out = await sampleAll(
        be,
        [seq(12, 3), seq(30, 7), seq(2, 5)].map((p, i) => [p, { n: 4, maxTokens: 20, temperature: 0.9, seed: i, stop: [0, 1, 2] }]),
      );
      be.dispose();
      return out;
    };
    for (const threads of [1, 2]) {
      const a = await run(threads);
      const b = await run(threads);
      expect(b).toEqual(a);
    }
  });

  it("is chosen by policy.sampler in the config (default onnx; unknown values name the allowed ones)", async () => {
    expect(resolveConfig({}).policy.sampler).toBe("onnx");
    const be = (await createBackend(resolveConfig({}), CFG)) as EmbeddedBackend;
    expect(be.samplingClient()).toBeInstanceOf(OnnxSampler);
    be.dispose();
    const jaxBe = (await createBackend(resolveConfig({ policy: { sampler: "jax" } }), CFG)) as EmbeddedBackend;
    expect(jaxBe.samplingClient()).not.toBeInstanceOf(OnnxSampler);
    jaxBe.dispose();
    expect(() => resolveConfig({ policy: { sampler: "tfjs" } })).toThrow(/policy\.sampler.*"jax", "onnx"/);
    expect(() => new EmbeddedBackend(CFG, { seed: 0, samplerEngine: "tfjs" as "jax" })).toThrow(/samplerEngine "tfjs".*jax, onnx/);
  });
});
