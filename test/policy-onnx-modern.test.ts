/**
 * The onnx trainer's RoPE and token-shift paths (src/policy/onnx/trainGraph.ts, gpt.ts `positional`, `tokenShift`):
 * the hand-written backward equals the loss's directional derivative measured by central finite differences, for
 * every parameter and the token-embedding input together; and the jax-js engines refuse such models by name.
 * Sources: RoPE as in Su et al. 2021 §3.4 (rotate-half layout of Llama / GPT-NeoX); the token shift as RWKV's.
 */
import { describe, expect, it } from "vitest";
import { Rng } from "../src/core/rng.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { initParamData, resolveConfig, type GPTConfig } from "../src/policy/embedded/gpt.ts";
import { OnnxTrainer } from "../src/policy/onnx/trainer.ts";

async function directionalCheck(extra: Partial<GPTConfig>): Promise<{ fd: number; analytic: number }> {
  const cfg = resolveConfig({ vocabSize: 17, contextLength: 16, dModel: 16, nLayers: 2, nHeads: 2, ...extra });
  const w = new Map(initParamData(cfg, 1));
  for (const [k, v] of w) if (k.includes("wqkv")) for (let i = 0; i < v.length; i++) v[i] *= 8; // sharper attention: positions matter
  const tr = new OnnxTrainer(cfg, { threads: 1 });
  const rng = new Rng(2);
  const rows = 3;
  const T = 9;
  const D = 16;
  const x0 = Float32Array.from({ length: rows * T * D }, () => rng.next() - 0.5);
  const bias = new Float32Array(T * T);
  for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) bias[i * T + j] = -1e9;
  const chunk = { rows, T, x0, bias, targets: Int32Array.from({ length: rows * T }, () => rng.int(17)) };
  const z = new Float32Array(rows * T);
  const inputs = { weights: new Float32Array(rows * T).fill(1), samplerLp: z, advantages: z, refLp: z, hp: new Float32Array([0.2, 0.2, 0, 1, 3, 0]) };
  const loss = { lossFn: "cross_entropy" as const, useKl: false };
  const r = await tr.train(loss, w, chunk, inputs);
  // A random direction over every parameter (wpe's gradient is [T·D]: the rows the chunk reached) and x0.
  const dirs = new Map<string, Float32Array>();
  let analytic = 0;
  for (const [name, g] of [...r.grads, ["x0", r.gradX0] as [string, Float32Array]]) {
    const d = Float32Array.from({ length: g.length }, () => rng.next() - 0.5);
    dirs.set(name, d);
    for (let i = 0; i < g.length; i++) analytic += g[i] * d[i];
  }
  const shifted = (eps: number) => {
    const w2 = new Map([...w].map(([n, a]) => [n, Float32Array.from(a, (x, i) => x + eps * (dirs.get(n)?.[i] ?? 0))]));
    return { w2, x: Float32Array.from(x0, (x, i) => x + eps * dirs.get("x0")![i]) };
  };
  const eps = 1e-3;
  const plus = shifted(eps);
  const minus = shifted(-eps);
  const lp = (await tr.train(loss, plus.w2, { ...chunk, x0: plus.x }, inputs)).loss;
  const lm = (await tr.train(loss, minus.w2, { ...chunk, x0: minus.x }, inputs)).loss;
  await tr.release();
  return { fd: (lp - lm) / (2 * eps), analytic };
}

describe("onnx trainer: RoPE and token shift", () => {
  it.each([
    ["RoPE", { positional: "rope" }],
    ["token shift", { tokenShift: true }],
    ["RoPE + token shift", { positional: "rope", tokenShift: true }],
    ["RoPE + token shift over 3 tokens", { positional: "rope", tokenShift: true, shiftWindow: 3 }],
    ["learned positions (reference)", {}],
  ] as const)("%s: the gradient's directional derivative matches central differences (1 %%)", async (_name, extra) => {
    const { fd, analytic } = await directionalCheck(extra);
    expect(Math.abs(analytic)).toBeGreaterThan(0.05);
    expect(Math.abs(fd - analytic) / Math.abs(analytic)).toBeLessThan(0.01);
  });

  it("jax-js engines refuse RoPE and token-shift models by name", () => {
    const base = { vocabSize: 17, contextLength: 16, dModel: 16, nLayers: 1, nHeads: 2 };
    expect(() => new EmbeddedBackend({ ...base, positional: "rope" }, { seed: 0, trainerEngine: "jax", samplerEngine: "onnx" })).toThrow(/policy\.positional "rope" runs on the onnx engines only/);
    expect(() => new EmbeddedBackend({ ...base, tokenShift: true }, { seed: 0, samplerEngine: "jax" })).toThrow(/policy\.tokenShift runs on the onnx engines only/);
    expect(() => resolveConfig({ ...base, positional: "alibi" as "rope" })).toThrow(/positional must be one of learned, rope/);
    expect(() => resolveConfig({ ...base, tokenShift: true, shiftWindow: 4 })).toThrow(/shiftWindow must be 1, 2 or 3, got 4/);
    expect(() => resolveConfig({ ...base, dModel: 18, tokenShift: true, shiftWindow: 2 })).toThrow(/shiftWindow 2 needs dModel divisible by 4, got 18/);
  });
});
