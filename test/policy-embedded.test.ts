import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { causalBias, forward, namedLeaves, type GPTConfig, type GPTParams } from "../src/policy/embedded/gpt.ts";
import { grad, nn, numpy as np, tree, wasmHeapBytes } from "../src/policy/embedded/jax.ts";
import { adamInit, adamStep } from "../src/policy/embedded/optim.ts";
import { expectBatchIndependent, expectStopAndValidation } from "./sampler-contract.ts";

const CFG: GPTConfig = { vocabSize: 40, contextLength: 64, dModel: 32, nLayers: 2, nHeads: 2 };
const tmpDirs: string[] = [];
afterAll(() => {
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});

/** A deterministic token sequence. */
function seq(n: number, k: number, V = CFG.vocabSize): number[] {
  return Array.from({ length: n }, (_, i) => (i * k + 3 + k * k) % V);
}

/** A datum over `tokens` with the given weights (default: all 1). */
function datum(tokens: number[], weights?: number[]): Datum {
  const n = tokens.length - 1;
  return {
    modelInput: tokens.slice(0, -1),
    targetTokens: tokens.slice(1),
    weights: weights ?? new Array(n).fill(1),
  };
}

describe("sampler", () => {
  it("returns the training forward's logprobs at temperature 1 (within 1e-4), across a mixed batch", async () => {
    const be = await EmbeddedBackend.create(CFG, 7);
    const client = be.samplingClient();
    const prompts = [seq(5, 3), seq(17, 7), seq(33, 11)];
    // Concurrent calls of different prompt lengths form one batch.
    const results = await Promise.all(
      prompts.map((p, i) => client.sample(p, { n: 2, maxTokens: 12, temperature: 1, seed: 100 + i })),
    );
    const datums: Datum[] = [];
    const expected: number[][] = [];
    results.forEach((samples, i) => {
      for (const s of samples) {
        expect(s.tokens.length).toBe(12);
        expect(s.stopReason).toBe("length");
        datums.push(datum([...prompts[i], ...s.tokens]));
        expected.push(s.logprobs);
      }
    });
    const lps = await be.computeLogprobs(datums);
    lps.forEach((lp, j) => {
      const tail = lp.slice(lp.length - expected[j].length);
      tail.forEach((x, t) => expect(Math.abs(x - expected[j][t])).toBeLessThan(1e-4));
    });
  });

  it("samples from the updated weights after optimStep", async () => {
    const be = await EmbeddedBackend.create(CFG, 8);
    const client = be.samplingClient();
    const prompt = seq(9, 5);
    const opts = { n: 2, maxTokens: 8, temperature: 1, seed: 3 };
    const before = await client.sample(prompt, opts);
    await be.forwardBackward([datum(seq(30, 7)), datum(seq(25, 3))], "cross_entropy");
    await be.optimStep({ learningRate: 0.05 });
    const after = await be.samplingClient().sample(prompt, opts);
    expect(after[0].logprobs).not.toEqual(before[0].logprobs);
    const lps = await be.computeLogprobs(after.map((s) => datum([...prompt, ...s.tokens])));
    lps.forEach((lp, j) => lp.slice(prompt.length - 1).forEach((x, t) => expect(Math.abs(x - after[j].logprobs[t])).toBeLessThan(1e-4)));
  });

  it("gives identical samples for the same seed, whatever the batch composition", async () => {
    const be = await EmbeddedBackend.create(CFG, 3);
    const opts = { n: 3, maxTokens: 10, temperature: 1, seed: 42 };
    await expectBatchIndependent(be.samplingClient(), seq(9, 5), opts, [
      [seq(30, 3), { ...opts, seed: 1 }],
      [seq(2, 7), { ...opts, n: 5, seed: 2 }],
    ]);
  });

  it("splits batches larger than maxBatchRows without changing the samples", async () => {
    const big = await EmbeddedBackend.create(CFG, 4);
    const small = await EmbeddedBackend.create(CFG, { seed: 4, sampler: { maxBatchRows: 4 } });
    const run = (be: EmbeddedBackend) =>
      Promise.all([seq(6, 3), seq(20, 5), seq(11, 7)].map((p, i) => be.samplingClient().sample(p, { n: 3, maxTokens: 6, temperature: 1, seed: i })));
    const a = await run(big);
    const b = await run(small);
    expect(b.map((r) => r.map((x) => x.tokens))).toEqual(a.map((r) => r.map((x) => x.tokens)));
    b.flat().forEach((x, i) => x.logprobs.forEach((lp, t) => expect(Math.abs(lp - a.flat()[i].logprobs[t])).toBeLessThan(1e-4)));
  });

  it("ends rows by stop token, length and context; rejects over-long prompts", async () => {
    const be = await EmbeddedBackend.create(CFG, 1);
    const client = be.samplingClient();
    await expectStopAndValidation(client);
  });

  it("does not grow the wasm heap over 200 decode steps (no leaked arrays)", async () => {
    const be = await EmbeddedBackend.create(CFG, 2);
    const client = be.samplingClient();
    // Context 64 would cap the rows, so use a model with a long context for this test.
    const longBe = await EmbeddedBackend.create({ ...CFG, contextLength: 256 }, 2);
    const longClient = longBe.samplingClient();
    const opts = { n: 4, maxTokens: 200, temperature: 1, seed: 9 };
    await longClient.sample(seq(8, 3), opts); // warm-up: compiles and sizes the heap
    const before = wasmHeapBytes();
    for (let i = 0; i < 2; i++) {
      const [r] = await longClient.sample(seq(8, 3), { ...opts, seed: 10 + i });
      expect(r.tokens.length).toBe(200);
    }
    expect(wasmHeapBytes()).toBe(before);
    be.dispose();
    longBe.dispose();
    void client;
  });
});

describe("losses", () => {
  const toks = [seq(12, 3), seq(7, 5)];
  // Some weight-0 positions (prompt-like) and one fractional weight.
  const weights = [
    [0, 0, 0, 1, 1, 1, 1, 1, 0.5, 1, 1],
    [0, 1, 1, 1, 1, 1],
  ];
  /** Sampler logprobs q = lp − log r for a chosen ratio pattern, and advantages of both signs. */
  const ratios = [1.5, 0.5, 1.1, 0.7, 1.3, 0.95];
  const advs = [1, -1, 2, -0.5];

  async function setup() {
    const be = await EmbeddedBackend.create(CFG, 11);
    const base = toks.map((t, i) => datum(t, weights[i]));
    const lp = await be.computeLogprobs(base);
    const datums: Datum[] = base.map((d, i) => ({
      ...d,
      logprobs: lp[i].map((x, t) => x - Math.log(ratios[(t + i) % ratios.length])),
      advantages: lp[i].map((_, t) => advs[(t + 2 * i) % advs.length]),
      refLogprobs: lp[i].map((x, t) => x + 0.3 * Math.sin(t + i)),
    }));
    return { be, datums, lp };
  }

  /** Expected aggregate in plain JS (float64). */
  function expected(
    datums: Datum[],
    lp: number[][],
    per: (lp: number, q: number, a: number, ref: number) => number,
    denom?: number,
  ): number {
    let num = 0;
    let wsum = 0;
    datums.forEach((d, i) =>
      d.weights.forEach((w, t) => {
        num += w * per(lp[i][t], d.logprobs![t], d.advantages![t], d.refLogprobs![t]);
        wsum += w;
      }),
    );
    return num / (denom ?? wsum);
  }

  it("cross_entropy, importance_sampling, ppo (with clipping), k3 KL and both normalizations", async () => {
    const { be, datums, lp } = await setup();
    const close = (a: number, b: number) => expect(Math.abs(a - b)).toBeLessThan(1e-5 * Math.max(1, Math.abs(b)));

    const ce = await be.forwardBackward(datums, "cross_entropy");
    close(ce.loss, expected(datums, lp, (l) => -l));
    ce.logprobs.forEach((row, i) => row.forEach((x, t) => expect(Math.abs(x - lp[i][t])).toBeLessThan(1e-6)));

    const is = await be.forwardBackward(datums, "importance_sampling");
    close(is.loss, expected(datums, lp, (l, q, a) => -Math.exp(l - q) * a));

    const ppoTerm = (l: number, q: number, a: number, lo = 0.2, hi = 0.2) => {
      const r = Math.exp(l - q);
      return -Math.min(r * a, Math.min(Math.max(r, 1 - lo), 1 + hi) * a);
    };
    const ppo = await be.forwardBackward(datums, "ppo");
    close(ppo.loss, expected(datums, lp, (l, q, a) => ppoTerm(l, q, a)));
    // Clip active where the clipped objective is smaller than the unclipped one.
    const clipFrac = expected(datums, lp, (l, q, a) => {
      const r = Math.exp(l - q);
      return Math.min(Math.max(r, 0.8), 1.2) * a < r * a - 1e-9 ? 1 : 0;
    });
    expect(clipFrac).toBeGreaterThan(0);
    close(ppo.metrics.clip_fraction, clipFrac);
    close(ppo.metrics.ratio_mean, expected(datums, lp, (l, q) => Math.exp(l - q)));

    const ppoAsym = await be.forwardBackward(datums, "ppo", { clipLow: 0.1, clipHigh: 0.4 });
    close(ppoAsym.loss, expected(datums, lp, (l, q, a) => ppoTerm(l, q, a, 0.1, 0.4)));

    const k3 = (l: number, ref: number) => Math.exp(ref - l) - (ref - l) - 1;
    const kl = await be.forwardBackward(datums, "ppo", { klCoef: 0.25 });
    close(kl.loss, expected(datums, lp, (l, q, a, ref) => ppoTerm(l, q, a) + 0.25 * k3(l, ref)));
    close(kl.metrics.kl, expected(datums, lp, (l, _q, _a, ref) => k3(l, ref)));

    const drgrpo = await be.forwardBackward(datums, "importance_sampling", { normalization: "constant", constantLength: 20 });
    close(drgrpo.loss, expected(datums, lp, (l, q, a) => -Math.exp(l - q) * a, 20 * datums.length));

    const tokens = weights.flat().filter((w) => w !== 0).length;
    expect(ce.metrics.tokens).toBe(tokens);
    expect(ce.metrics.entropy).toBeGreaterThan(0);
    expect(ce.metrics.entropy).toBeLessThanOrEqual(Math.log(CFG.vocabSize) + 1e-5);
    await expect(be.forwardBackward(datums, "ppo", { normalization: "constant" })).rejects.toThrow(/constantLength/);
  });

  it("computes the same gradients as autodiff of the plain loss (cross_entropy; ppo + k3 KL)", async () => {
    const { datums } = await setup();
    const V = CFG.vocabSize;
    const T = Math.max(...datums.map((d) => d.modelInput.length));
    const B = datums.length;
    // Padded host arrays for the reference.
    const pad = (get: (d: Datum) => number[] | undefined) => {
      const a = new Float32Array(B * T);
      datums.forEach((d, i) => a.set(get(d) ?? [], i * T));
      return np.array(a, { shape: [B, T] });
    };
    const oneHot = (get: (d: Datum) => number[]) => {
      const a = new Float32Array(B * T * V);
      datums.forEach((d, i) => get(d).forEach((t, j) => (a[(i * T + j) * V + t] = 1)));
      return np.array(a, { shape: [B, T, V] });
    };
    const wTotal = datums.reduce((s, d) => s + d.weights.reduce((a, b) => a + b, 0), 0);
    /** The plain loss, differentiated by jax-js (eager), with a one-hot embedding so wte gets both paths. */
    const refLoss = (kind: "ce" | "ppo", p: GPTParams): np.Array => {
      const x0 = np.matmul(oneHot((d) => d.modelInput), p.wte.ref);
      const logp = nn.logSoftmax(forward(p, x0, np.array(causalBias(T), { shape: [T, T] }), CFG.nHeads), -1);
      const lp = logp.mul(oneHot((d) => d.targetTokens)).sum(-1);
      const w = pad((d) => d.weights);
      let ell: np.Array;
      if (kind === "ce") ell = lp.neg();
      else {
        const r = np.exp(lp.ref.sub(pad((d) => d.logprobs)));
        const A = pad((d) => d.advantages);
        const obj = np.minimum(r.ref.mul(A.ref), np.clip(r, 0.8, 1.2).mul(A));
        const dd = pad((d) => d.refLogprobs).sub(lp);
        ell = obj.neg().add(np.exp(dd.ref).sub(dd).sub(1).mul(0.3));
      }
      return ell.mul(w).sum().mul(1 / wTotal);
    };
    for (const kind of ["ce", "ppo"] as const) {
      const be = await EmbeddedBackend.create(CFG, 11);
      await be.forwardBackward(datums, kind === "ce" ? "cross_entropy" : "ppo", { klCoef: kind === "ce" ? 0 : 0.3 });
      const got = (await be.pendingGradients())!;
      const snap = be.borrowParams();
      const g = grad((p: GPTParams) => refLoss(kind, p))(snap.params) as GPTParams;
      let maxErr = 0;
      let maxAbs = 0;
      for (const [name, arr] of namedLeaves(g)) {
        const ref = (await arr.ref.data()) as Float32Array;
        const mine = got.get(name)!;
        ref.forEach((x, i) => {
          maxErr = Math.max(maxErr, Math.abs(x - mine[i]));
          maxAbs = Math.max(maxAbs, Math.abs(x));
        });
      }
      tree.dispose(g);
      expect(maxAbs).toBeGreaterThan(1e-3);
      expect(maxErr).toBeLessThan(1e-4 * maxAbs);
      be.dispose();
    }
  });

  it("ignores weight-0 tokens: changing their targets leaves loss and gradients unchanged", async () => {
    const { datums } = await setup();
    const changed = datums.map((d) => ({ ...d, targetTokens: d.targetTokens.map((t, i) => (d.weights[i] === 0 ? (t + 5) % CFG.vocabSize : t)) }));
    const a = await EmbeddedBackend.create(CFG, 11);
    const b = await EmbeddedBackend.create(CFG, 11);
    const ra = await a.forwardBackward(datums, "ppo");
    const rb = await b.forwardBackward(changed, "ppo");
    expect(rb.loss).toBe(ra.loss);
    const ga = await a.optimStep({ learningRate: 1e-2 });
    const gb = await b.optimStep({ learningRate: 1e-2 });
    expect(gb.grad_norm).toBe(ga.grad_norm);
    expect(await b.computeLogprobs(datums)).toEqual(await a.computeLogprobs(datums));
  });

  it("is deterministic: same seed, same data → identical numbers", async () => {
    const { datums } = await setup();
    const run = async () => {
      const be = await EmbeddedBackend.create(CFG, 5);
      const r = await be.forwardBackward(datums, "ppo", { klCoef: 0.1 });
      const g = await be.optimStep({ learningRate: 1e-2, gradClip: 1 });
      const lp = await be.computeLogprobs(datums);
      be.dispose();
      return { loss: r.loss, metrics: r.metrics, g, lp };
    };
    expect(await run()).toEqual(await run());
  });
});

describe("adam", () => {
  it("matches a hand-computed two-step AdamW with weight decay and gradient clipping", async () => {
    const p0 = { a: [0.5, -1.0], b: [[1.0, 2.0], [-0.5, 0.25]] };
    const grads = [
      { a: [0.1, -0.2], b: [[0.3, 0.0], [-0.4, 0.5]] },
      { a: [-0.05, 0.1], b: [[0.2, -0.1], [0.0, 0.3]] },
    ];
    const hp = { learningRate: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1, gradClip: 0.5 };
    // Reference in float64.
    const flat = (t: { a: number[]; b: number[][] }) => [...t.a, ...t.b.flat()];
    const decays = [false, false, true, true, true, true]; // only the matrix decays
    let p = flat(p0);
    let m = p.map(() => 0);
    let v = p.map(() => 0);
    const norms: number[] = [];
    grads.forEach((gt, k) => {
      const t = k + 1;
      let g = flat(gt);
      const norm = Math.sqrt(g.reduce((s, x) => s + x * x, 0));
      norms.push(norm);
      const scale = Math.min(1, hp.gradClip / (norm + 1e-6));
      g = g.map((x) => x * scale);
      m = m.map((mi, i) => hp.beta1 * mi + (1 - hp.beta1) * g[i]);
      v = v.map((vi, i) => hp.beta2 * vi + (1 - hp.beta2) * g[i] * g[i]);
      p = p.map((pi, i) => {
        const decayed = decays[i] ? pi - hp.learningRate * hp.weightDecay * pi : pi;
        const mh = m[i] / (1 - hp.beta1 ** t);
        const vh = v[i] / (1 - hp.beta2 ** t);
        return decayed - (hp.learningRate * mh) / (Math.sqrt(vh) + hp.eps);
      });
    });

    const toArr = (t: { a: number[]; b: number[][] }) => ({ a: np.array(t.a), b: np.array(t.b) });
    let params = toArr(p0);
    let state = adamInit(params);
    const gotNorms: number[] = [];
    for (const g of grads) {
      const r = await adamStep(params, toArr(g), state, hp);
      params = r.params;
      state = r.state;
      gotNorms.push(r.gradNorm);
    }
    expect(state.step).toBe(2);
    const got = [...(await params.a.ref.data()), ...(await params.b.ref.data())];
    got.forEach((x, i) => expect(Math.abs(x - p[i])).toBeLessThan(1e-6));
    gotNorms.forEach((x, i) => expect(Math.abs(x - norms[i])).toBeLessThan(1e-6));
    tree.dispose(params);
    tree.dispose(state.m);
    tree.dispose(state.v);
  });
});

describe("checkpoint", () => {
  it("round-trips weights and Adam state; detects corrupt and missing files", async () => {
    const dir = mkdtempSync(join(tmpdir(), "arl-ckpt-"));
    tmpDirs.push(dir);
    const datums = [datum(seq(10, 3)), datum(seq(14, 7))];
    const a = await EmbeddedBackend.create(CFG, 21);
    await a.forwardBackward(datums, "cross_entropy");
    await a.optimStep({ learningRate: 1e-2 });
    await a.save(dir);
    const b = await EmbeddedBackend.create(CFG, 99);
    await b.load(dir);
    expect(b.step).toBe(1);
    expect(await b.computeLogprobs(datums)).toEqual(await a.computeLogprobs(datums));
    // Same Adam moments → the next update is identical too.
    for (const be of [a, b]) {
      await be.forwardBackward(datums, "cross_entropy");
      await be.optimStep({ learningRate: 1e-2 });
    }
    expect(await b.computeLogprobs(datums)).toEqual(await a.computeLogprobs(datums));

    const binPath = join(dir, "tensors.bin");
    const bin = readFileSync(binPath);
    bin[100] ^= 0xff;
    writeFileSync(binPath, bin);
    await expect(b.load(dir)).rejects.toThrow(/tensors\.bin/);
    unlinkSync(join(dir, "meta.json"));
    await expect(b.load(dir)).rejects.toThrow(/meta\.json/);
    const other = await EmbeddedBackend.create({ ...CFG, dModel: 16 }, 1);
    await a.save(dir);
    await expect(other.load(dir)).rejects.toThrow(/dModel/);
  });
});
