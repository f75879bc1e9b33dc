// The onnx training engine (src/policy/onnx/trainGraph.ts, trainer.ts) against the jax-js one on the same weights
// and batches: every loss function's loss, statistics, pre-update logprobs and gradients; then determinism and a
// few steps of training.
import { describe, expect, it } from "vitest";
import type { LossConfig, LossFnName } from "../src/core/training.ts";
import type { Datum } from "../src/core/types.ts";
import { Rng } from "../src/core/rng.ts";
import { DEFAULT_LENGTH_BUCKET, EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { Batcher } from "../src/policy/embedded/batching.ts";
import { resolveConfig as resolveGpt } from "../src/policy/embedded/gpt.ts";
import { ONNX_LENGTH_BUCKET, PolicyConfig, trainLengthBucket } from "../src/policy/config.ts";

const GPT = { vocabSize: 40, contextLength: 48, dModel: 32, nLayers: 2, nHeads: 4 };

/** Datums of mixed lengths (so chunks pad), with sampler/reference logprobs near the model's and mixed-sign advantages. */
function batch(seed: number): Datum[] {
  const rng = new Rng(seed);
  return Array.from({ length: 7 }, (_, i) => {
    const n = 5 + ((i * 11) % 40);
    const toks = Array.from({ length: n + 1 }, () => Math.floor(rng.next() * GPT.vocabSize));
    return {
      modelInput: toks.slice(0, -1),
      targetTokens: toks.slice(1),
      weights: toks.slice(1).map((_, t) => (t < 2 ? 0 : 1)),
      logprobs: toks.slice(1).map(() => -Math.log(GPT.vocabSize) + (rng.next() - 0.5) * 0.6),
      refLogprobs: toks.slice(1).map(() => -Math.log(GPT.vocabSize) + (rng.next() - 0.5) * 0.2),
      advantages: toks.slice(1).map(() => (i % 2 === 0 ? 1 : -1) * (0.5 + rng.next())),
    };
  });
}

/** max |a − b| / (max |b| + tiny) over every tensor of a map. */
function relErr(a: Map<string, Float32Array>, b: Map<string, Float32Array>): { name: string; err: number } {
  let worst = { name: "", err: 0 };
  for (const [name, want] of b) {
    const got = a.get(name)!;
    let scale = 1e-12;
    for (const x of want) scale = Math.max(scale, Math.abs(x));
    let d = 0;
    for (let i = 0; i < want.length; i++) d = Math.max(d, Math.abs(got[i] - want[i]));
    if (d / scale > worst.err) worst = { name, err: d / scale };
  }
  return worst;
}

const CASES: [LossFnName, LossConfig][] = [
  ["cross_entropy", {}],
  ["importance_sampling", {}],
  ["ppo", { clipLow: 0.1, clipHigh: 0.15 }],
  ["ppo", { clipLow: 0.1, clipHigh: 0.15, clipRatioC: 1.5, klCoef: 0.1 }],
  ["cispo", { clipLow: 0.1, clipHigh: 0.2 }],
  ["dro", { droBeta: 0.1 }],
  ["gspo", { clipLow: 0.002, clipHigh: 0.003, normalization: "sum" }],
];

describe("onnx trainer vs jax-js trainer", () => {
  it.each(CASES)("%s %j: loss, metrics, logprobs and gradients agree", async (lossFn, config) => {
    const jax = new EmbeddedBackend(GPT, { seed: 3, lengthBucket: 16, maxTokensPerChunk: 128 });
    const onnx = new EmbeddedBackend(GPT, { seed: 3, lengthBucket: 16, maxTokensPerChunk: 128, trainerEngine: "onnx" });
    const datums = batch(5);
    const a = await onnx.forwardBackward(datums, lossFn, config);
    const b = await jax.forwardBackward(datums, lossFn, config);
    expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-4 * Math.max(1, Math.abs(b.loss)));
    for (const [k, v] of Object.entries(b.metrics)) expect(Math.abs(a.metrics[k] - v), k).toBeLessThan(1e-4 * Math.max(1, Math.abs(v)));
    expect(Object.keys(a.metrics).sort()).toEqual(Object.keys(b.metrics).sort());
    let lpErr = 0;
    b.logprobs.forEach((row, i) => row.forEach((x, t) => (lpErr = Math.max(lpErr, Math.abs(a.logprobs[i][t] - x)))));
    expect(lpErr).toBeLessThan(1e-4);
    const worst = relErr((await onnx.pendingGradients())!, (await jax.pendingGradients())!);
    expect(worst.err, worst.name).toBeLessThan(2e-5); // measured ≤ 5.6e-6
    jax.dispose();
    onnx.dispose();
  });

  it("computeLogprobs and hiddenStates agree", async () => {
    const jax = new EmbeddedBackend(GPT, { seed: 4, lengthBucket: 16 });
    const onnx = new EmbeddedBackend(GPT, { seed: 4, lengthBucket: 16, trainerEngine: "onnx" });
    const datums = batch(6);
    const [a, b] = [await onnx.computeLogprobs(datums), await jax.computeLogprobs(datums)];
    b.forEach((row, i) => row.forEach((x, t) => expect(Math.abs(a[i][t] - x)).toBeLessThan(1e-4)));
    const [ha, hb] = [await onnx.hiddenStates(datums), await jax.hiddenStates(datums)];
    hb.forEach((h, i) => h.forEach((x, j) => expect(Math.abs(ha[i][j] - x)).toBeLessThan(1e-3)));
    jax.dispose();
    onnx.dispose();
  });

  it("trains: same seed → same bytes, and the loss falls", async () => {
    const run = async () => {
      const be = new EmbeddedBackend(GPT, { seed: 9, lengthBucket: 16, trainerEngine: "onnx" });
      const datums = batch(8);
      const losses: number[] = [];
      for (let s = 0; s < 8; s++) {
        losses.push((await be.forwardBackward(datums, "cross_entropy")).loss);
        await be.optimStep({ learningRate: 3e-3 });
      }
      const grads = (await be.forwardBackward(datums, "cross_entropy")).logprobs;
      be.dispose();
      return { losses, grads };
    };
    const [r1, r2] = [await run(), await run()];
    expect(r1).toEqual(r2);
    expect(r1.losses[7]).toBeLessThan(r1.losses[0] - 0.3);
  });

  it("padding changes nothing: another length bucket and micro-batch size give the same loss and gradients", async () => {
    // The onnx trainer pads to fine buckets without power-of-two rows (src/policy/embedded/batching.ts); padded
    // positions carry weight 0 and sit after each row's tokens, so causally they cannot reach a real token.
    const fine = new EmbeddedBackend(GPT, { seed: 3, trainerEngine: "onnx" });
    const coarse = new EmbeddedBackend(GPT, { seed: 3, trainerEngine: "onnx", lengthBucket: 48, maxTokensPerChunk: 96 });
    const datums = batch(5);
    const a = await fine.forwardBackward(datums, "ppo", { clipLow: 0.1, clipHigh: 0.15 });
    const b = await coarse.forwardBackward(datums, "ppo", { clipLow: 0.1, clipHigh: 0.15 });
    expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-5 * Math.max(1, Math.abs(b.loss)));
    const worst = relErr((await fine.pendingGradients())!, (await coarse.pendingGradients())!);
    expect(worst.err, worst.name).toBeLessThan(1e-5);
    fine.dispose();
    coarse.dispose();
  });
});

describe("micro-batching per trainer", () => {
  const cfg = resolveGpt({ ...GPT, contextLength: 256 });
  const datums: Datum[] = [70, 65, 40, 33, 20].map((n) => ({ modelInput: new Array<number>(n).fill(1), targetTokens: new Array<number>(n).fill(1), weights: new Array<number>(n).fill(1) }));

  it("the onnx trainer pads lengths to 16 and never pads rows; jax-js pads to 64 and the last rows to a power of two", () => {
    const onnx = new Batcher(cfg, { lengthBucket: DEFAULT_LENGTH_BUCKET.onnx, maxTokensPerChunk: 320, padRowsToPow2: false });
    expect(onnx.chunks(datums).map((c) => [c.T, c.rows, c.ids.length])).toEqual([[80, 4, 4], [32, 1, 1]]);
    const jax = new Batcher(cfg, { lengthBucket: DEFAULT_LENGTH_BUCKET.jax, maxTokensPerChunk: 640 });
    // 640 / 128 = 5 rows fit: one full chunk.
    expect(jax.chunks(datums).map((c) => [c.T, c.rows])).toEqual([[128, 5]]);
    expect(jax.chunks(datums.slice(0, 3)).map((c) => [c.T, c.rows])).toEqual([[128, 4]]);
  });

  it("policy.lengthBucket when set, else 16 (onnx) or policy.jaxLengthBucket (jax-js)", () => {
    expect(ONNX_LENGTH_BUCKET).toBe(DEFAULT_LENGTH_BUCKET.onnx);
    const p = (o: Record<string, unknown>) => trainLengthBucket(PolicyConfig.parse(o));
    expect(p({})).toBe(16);
    expect(p({ trainer: "jax" })).toBe(64);
    expect(p({ trainer: "jax", jaxLengthBucket: 128 })).toBe(128);
    expect(p({ jaxLengthBucket: 128 })).toBe(16);
    expect(p({ trainer: "jax", lengthBucket: 32, jaxLengthBucket: 128 })).toBe(32);
    expect(p({ lengthBucket: 32 })).toBe(32);
  });
});
