/**
 * How much memory the embedded backend (jax-js on wasm) needs for a model shape, and why a config's shape cannot
 * fit its 4 GiB wasm32 heap: checked at `--dry-run` and before a run touches its folder (src/train), reported by
 * src/train/memoryReport.ts. The formula and its calibration are in `estimateEmbeddedMemory`'s docstring.
 */
import { totalmem } from "node:os";
import type { GPTConfig } from "./gpt.ts";
import { trainLengthBucket, type PolicySection } from "../config.ts";

/**
 * What the memory check reads of an experiment config (any `ExperimentConfig` is one): the policy section, the rows
 * an RL step samples, and whether a reference policy is loaded (`rl.klCoef > 0`, or the detectors' KL monitor).
 */
export interface EmbeddedMemoryConfig {
  policy: PolicySection;
  rl: { tasksPerStep: number; groupSize: number; klCoef: number };
  detectors: { enabled: boolean; referenceKl: boolean };
}

/**
 * jax-js's wasm heap, where the embedded backend keeps every array: one wasm32 `WebAssembly.Memory` (at most 65 536
 * pages of 64 KiB; jax-js's allocator throws "Allocation exceeds the 4 GiB memory32 limit" past it), bytes.
 */
export const WASM_HEAP_LIMIT_BYTES = 4 * 2 ** 30;

/**
 * What the embedded backend's memory depends on (see `estimateEmbeddedMemory`): the model shape (V = vocabSize,
 * C = contextLength, D = dModel, L = nLayers, H = nHeads, r = mlpRatio, default 4) and how it runs.
 */
export interface EmbeddedMemoryShape extends GPTConfig {
  /** Sampling engine: `jax` decodes in the wasm heap, `onnx` in onnxruntime's (native) memory. */
  sampler: "jax" | "onnx";
  /**
   * Training engine (default "jax"): `jax` holds every training intermediate in the wasm heap; `onnx` runs forward +
   * backward in onnxruntime's native memory (its activations count under `host`, and the wasm heap holds the state only).
   */
  trainer?: "jax" | "onnx";
  /** Whether a reference policy (a second set of weights) is loaded: `rl.klCoef > 0` or the KL monitor. */
  reference: boolean;
  /** Longest sequence trained on or sampled (tokens; default C: an episode may grow to the context window). */
  seqLen?: number;
  /** Tokens per training micro-batch (default 3072, `EmbeddedBackend`'s `maxTokensPerChunk`). */
  trainTokens?: number;
  /** Padded training lengths are multiples of this (tokens; default 64, `EmbeddedBackend`'s `lengthBucket`). */
  lengthBucket?: number;
  /** Rows decoded together, B (default 256, the sampler's `maxBatchRows`, its most). */
  sampleRows?: number;
  /** Prompt tokens per prefill call (default 4096, the jax sampler's `prefillTokens`). */
  prefillTokens?: number;
}

/** `estimateEmbeddedMemory`'s result; sizes in bytes. */
export interface EmbeddedMemoryEstimate {
  /** Parameters of the model (a count, not bytes). */
  params: number;
  /** Padded length T of the longest training micro-batch (tokens). */
  trainSeq: number;
  /** Tokens N = rows·T of that micro-batch. */
  trainTokens: number;
  /**
   * jax-js's wasm heap (limit `WASM_HEAP_LIMIT_BYTES`), bytes: `total` = state + training + sampling is what the
   * first full-length step needs (a config above the limit cannot run); `peak` is what a long run can grow to when
   * its micro-batches take every padded length and row count (one set of buffers per shape; see the formula).
   */
  wasm: { state: number; training: number; sampling: number; total: number; peak: number };
  /**
   * Outside the wasm heap, bytes: host copies of the weights, the onnx sampler's KV cache and, with the onnx trainer,
   * its micro-batch activations and host Adam moments (checked against RAM at start).
   */
  host: number;
  /** The training engine the estimate is for. */
  trainer: "onnx" | "jax";
}

/**
 * Estimates the memory of the embedded backend (jax-js on wasm, `src/policy/embedded/`) for a model shape, in bytes
 * (float32 = 4 bytes). jax-js allocates every intermediate of a compiled program at once and reuses a freed buffer
 * only for one of the same size, so the heap is the sum of what its programs hold; the constants are fitted on
 * measured heaps:
 *
 *   P        = (V + C)·D + L·(4D² + 2MD + 9D + M) + 2D        parameters (M = r·D)
 *   state    = 4·P·(8 + ref)  (onnx trainer: 4·P·(3 + ref))   weights, gradient accumulator, Adam m and v and the
 *                                                              update's new copies (the old ones live until the norm is
 *                                                              known finite); ref = 1 with a reference policy (weights)
 *   T        = min(C, 64·⌈seqLen/64⌉),  N = max(1, ⌊3072/T⌋)·T  a full training micro-batch (rows × padded length)
 *   act(n,t) = 4·n·(L·((40 + 15r)·D + 14·H·t) + 13·V + 10·D)   buffers of the cross-entropy and PPO(+KL) programs on a
 *                                                              micro-batch of n tokens at length t: per layer ≈ 40+15r
 *                                                              of [n, D] and 14 of [n, H, t] (attention), 13 of [n, V]
 *   training = act(N, T)
 *   sampling = 4·L·(9·B·S·D + 4·R·S·H·S)   (jax engine only)   prompt KV cache and decode temporaries, S = min(C,
 *                                                              32·⌈seqLen/32⌉), and the prefill's attention (R rows of
 *                                                              ≈ 4096 tokens); 0 for onnx
 *   total    = state + training + sampling                     the first full-length step
 *   peak     = state + Σ over distinct n of act's [n,·] part + Σ over distinct n·t of its attention part
 *              (+ the same sum over the sampler's shapes)      every micro-batch shape (t = 64, 128, … ≤ T; rows full or
 *                                                              a power of two below) keeps buffers of its own sizes
 *   host     = 4·(4·P + (onnx ? 5·L·B·D·C : 0))                host tables and checkpoint copies; onnx: its weights, the
 *                                                              KV cache [B, H, hd, C] ×2 per layer and its buffers
 *              (+ act(N, T) + 16·P with the onnx trainer)      its activations (same order as jax-js's, unmeasured) and
 *                                                              the host weights, moments and gradients; training = 0
 *
 * Batch sizes (sft.batchSize, rl.tasksPerStep × rl.groupSize, rl.ptxBatchSize) enter only through B ≤ 256 and
 * N ≤ max(3072, T): the backend splits a training batch into micro-batches of ≈ 3072 tokens and decodes at most 256
 * rows at once. Calibration (jax-js 0.1.25, Node 20; heap after one cross-entropy and one PPO step at full context):
 * 13 shapes d48–d384, L 1–4, H 2–8, C 128–1024, V 600–2400 within ±1 %, 4 others up to 3.7 GiB within ±2 %, and a
 * shape whose `total` is 4.2 GiB failed with jax-js's allocation error; the smoke run's heap 126 MiB vs `total` 124;
 * the default config's heap after 10 SFT + 2 RL steps 1877 MiB vs `total` 635 and `peak` 2473 (docs/reliability.md).
 * @returns the parameter count, the micro-batch's shape and bytes by part
 */
export function estimateEmbeddedMemory(shape: EmbeddedMemoryShape): EmbeddedMemoryEstimate {
  return estimate(shape, true);
}

/** `estimateEmbeddedMemory`, with `peak` left at `total` unless `withPeak` (its enumeration of shapes costs more). */
function estimate(shape: EmbeddedMemoryShape, withPeak: boolean): EmbeddedMemoryEstimate {
  const { vocabSize: V, contextLength: C, dModel: D, nLayers: L, nHeads: H } = shape;
  const r = shape.mlpRatio ?? 4;
  const M = r * D;
  const seqLen = Math.min(C, shape.seqLen ?? C);
  const B = shape.sampleRows ?? 256;
  const budget = shape.trainTokens ?? 3072;
  const prefillTokens = shape.prefillTokens ?? 4096;
  const params = (V + C) * D + L * (4 * D * D + 2 * M * D + 9 * D + M) + 2 * D;
  // jax-js: weights, gradient accumulator, Adam m and v, and the update's new copies; onnx trainer: the device copy of
  // the weights (the samplers read it) and Adam's moments, which load() and the initial state keep there.
  const state = 4 * params * ((shape.trainer === "onnx" ? 3 : 8) + (shape.reference ? 1 : 0));
  /** Bytes of a micro-batch's [n, ·]-sized buffers and of its attention-sized ones (n tokens at length t). */
  const rowsPart = (n: number) => 4 * n * (L * (40 + 15 * r) * D + 13 * V + 10 * D);
  const attnPart = (n: number, t: number) => 4 * n * L * 14 * H * t;
  const bucket = shape.lengthBucket ?? 64;
  const T = Math.min(C, Math.ceil(seqLen / bucket) * bucket);
  const fullRows = (t: number) => Math.max(1, Math.floor(budget / t));
  const N = fullRows(T) * T;
  const onnxTrainer = shape.trainer === "onnx";
  const activations = rowsPart(N) + attnPart(N, T);
  const training = onnxTrainer ? 0 : activations;
  // Every shape the backend can form up to T: lengths 64, 128, … (and C itself), rows full or a power of two below.
  const tokenSizes = new Set<number>();
  const attnSizes = new Set<number>();
  for (let t = bucket; withPeak && !onnxTrainer; t += bucket) {
    const len = Math.min(t, T);
    for (let rows = 1; rows < fullRows(len); rows *= 2) {
      tokenSizes.add(rows * len);
      attnSizes.add(rows * len * len);
    }
    tokenSizes.add(fullRows(len) * len);
    attnSizes.add(fullRows(len) * len * len);
    if (len >= T) break;
  }
  let peakTraining = 0;
  for (const n of tokenSizes) peakTraining += rowsPart(n);
  for (const a of attnSizes) peakTraining += attnPart(a, 1);
  let sampling = 0;
  let peakSampling = 0;
  if (shape.sampler === "jax") {
    const S = Math.min(C, Math.ceil(seqLen / 32) * 32);
    const prefillRows = (p: number, b: number) => Math.min(b, 2 ** Math.floor(Math.log2(Math.max(1, Math.floor(prefillTokens / p)))));
    const sample = (b: number, p: number) => 4 * L * 9 * b * p * D;
    const prefill = (b: number, p: number) => 4 * L * 4 * prefillRows(p, b) * p * H * p;
    sampling = sample(B, S) + prefill(B, S);
    const cache = new Set<number>();
    const attn = new Set<number>();
    for (let p = 32; withPeak; p += 32) {
      const len = Math.min(p, S);
      for (let b = 1; b <= B; b *= 2) {
        cache.add(b * len);
        attn.add(prefillRows(len, b) * len * len);
      }
      if (len >= S) break;
    }
    for (const bp of cache) peakSampling += 4 * L * 9 * bp * D;
    for (const a of attn) peakSampling += 4 * L * 4 * a * H;
  }
  const host = 4 * (4 * params + (shape.sampler === "onnx" ? 5 * L * B * D * C : 0)) + (onnxTrainer ? activations + 4 * 4 * params : 0);
  return {
    params,
    trainSeq: T,
    trainTokens: N,
    wasm: { state, training, sampling, total: state + training + sampling, peak: withPeak ? state + peakTraining + peakSampling : state + training + sampling },
    host,
    trainer: onnxTrainer ? "onnx" : "jax",
  };
}

/**
 * The embedded-memory shape of a config: its policy fields, the tokenizer's vocabulary, whether RL loads a reference
 * policy, and the rows sampled together (an RL step's episodes or the questions evaluated at once, ≤ 256).
 */
export function embeddedMemoryShape(config: EmbeddedMemoryConfig, vocabSize: number, evalRows = 256): EmbeddedMemoryShape {
  const p = config.policy;
  const rows = Math.max(1, config.rl.tasksPerStep * config.rl.groupSize, evalRows);
  return {
    vocabSize,
    contextLength: p.contextLength,
    dModel: p.dModel,
    nLayers: p.nLayers,
    nHeads: p.nHeads,
    mlpRatio: p.mlpRatio,
    sampler: p.sampler,
    trainer: p.trainer,
    reference: config.rl.klCoef > 0 || (config.detectors.enabled && config.detectors.referenceKl),
    sampleRows: Math.min(256, 2 ** Math.ceil(Math.log2(rows))),
    trainTokens: p.microBatchTokens,
    lengthBucket: trainLengthBucket(p),
  };
}

/** Bytes as GiB with one decimal. */
function gib(bytes: number): string {
  const g = bytes / 2 ** 30;
  return g === 0 ? "0" : g < 0.1 ? "< 0.1" : g >= 1e6 ? g.toExponential(1) : g.toFixed(1);
}

/**
 * Why a config's embedded model cannot fit jax-js's 4 GiB wasm heap — or, with the onnx trainer, the machine's RAM
 * (`os.totalmem()`) for its native activations (`estimateEmbeddedMemory`'s `host`) — or undefined when it
 * fits or the policy is remote (`policy.backend: tinker`: the server holds the model). The message names the policy
 * field that, lowered alone, brings the estimate under the limit (the one furthest above what fits), the largest
 * value it may take then, and the others that would also do: `policy.dModel: 8192 needs ≈ 28.4 GiB of the embedded
 * backend's wasm memory (…), more than its 4 GiB limit …; allowed: policy.dModel ≤ 1792 with the other policy fields
 * as set …`. When no field alone is enough, it names them all.
 * @param vocabSize the tokenizer's vocabulary (the world's words)
 * @param evalRows questions evaluated at once (their episodes share sampling batches)
 */
export function embeddedMemoryProblem(config: EmbeddedMemoryConfig, vocabSize: number, evalRows = 256): string | undefined {
  if (config.policy.backend !== "embedded") return undefined;
  const base = embeddedMemoryShape(config, vocabSize, evalRows);
  const e = estimate(base, false);
  const hostLimit = totalmem();
  // The onnx trainer's activations live in native memory: bounded by the machine's RAM instead of the wasm heap.
  const fitsEstimate = (x: EmbeddedMemoryEstimate, s: EmbeddedMemoryShape) => x.wasm.total <= WASM_HEAP_LIMIT_BYTES && (s.trainer !== "onnx" || x.host <= hostLimit);
  if (fitsEstimate(e, base)) return undefined;
  const fits = (s: EmbeddedMemoryShape) => fitsEstimate(estimate(s, false), s);
  /** The largest of `n` ascending candidates `valueAt(0 … n−1)` that fits (the estimate grows with each), or undefined. */
  const largest = (n: number, valueAt: (i: number) => number, at: (v: number) => EmbeddedMemoryShape): number | undefined => {
    if (n <= 0 || !fits(at(valueAt(0)))) return undefined;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (fits(at(valueAt(mid)))) lo = mid;
      else hi = mid - 1;
    }
    return valueAt(lo);
  };
  /** `largest` over from, from + step, … below `limit`. */
  const upTo = (from: number, limit: number, step: number, at: (v: number) => EmbeddedMemoryShape): number | undefined =>
    largest(Math.ceil((limit - from) / step), (i) => from + i * step, at);
  const p = config.policy;
  // dModel stays a multiple of nHeads (and ≥ 8); nHeads a divisor of dModel.
  const heads = Array.from({ length: p.nHeads - 1 }, (_, i) => i + 1).filter((h) => p.dModel % h === 0);
  const candidates: Array<{ field: string; value: number; max: number | undefined }> = [
    { field: "dModel", value: p.dModel, max: upTo(Math.ceil(8 / p.nHeads) * p.nHeads, p.dModel, p.nHeads, (v) => ({ ...base, dModel: v })) },
    { field: "contextLength", value: p.contextLength, max: upTo(32, p.contextLength, 1, (v) => ({ ...base, contextLength: v })) },
    { field: "nLayers", value: p.nLayers, max: upTo(1, p.nLayers, 1, (v) => ({ ...base, nLayers: v })) },
    { field: "nHeads", value: p.nHeads, max: largest(heads.length, (i) => heads[i], (v) => ({ ...base, nHeads: v })) },
    { field: "mlpRatio", value: p.mlpRatio, max: upTo(1, p.mlpRatio, 1, (v) => ({ ...base, mlpRatio: v })) },
  ];
  const breakdown =
    (base.trainer === "onnx"
      ? `the device copy of the weights and Adam's moments of ${e.params.toLocaleString("en-US")} parameters ${gib(e.wasm.state)} GiB (the onnx trainer's activations live outside the heap)`
      : `weights, gradients and Adam state of ${e.params.toLocaleString("en-US")} parameters ${gib(e.wasm.state)} GiB; ` +
        `a training micro-batch of ${e.trainTokens} tokens at length ${e.trainSeq} ${gib(e.wasm.training)} GiB`) +
    (base.sampler === "jax" ? `; jax sampling of ${base.sampleRows} rows ${gib(e.wasm.sampling)} GiB` : "");
  const over =
    e.wasm.total > WASM_HEAP_LIMIT_BYTES
      ? `≈ ${gib(e.wasm.total)} GiB of the embedded backend's wasm memory (${breakdown}), more than its 4 GiB limit (jax-js keeps its arrays in one wasm32 heap)`
      : `≈ ${gib(e.host)} GiB of native memory (the onnx trainer's activations for a micro-batch of ${e.trainTokens} tokens at length ${e.trainSeq}, and the host copies of ${e.params.toLocaleString("en-US")} parameters), more than this machine's ${gib(hostLimit)} GiB`;
  const remote = "or policy.backend tinker for a remote model";
  const fixers = candidates.filter((c) => c.max !== undefined).sort((a, b) => b.value / b.max! - a.value / a.max!);
  if (fixers.length > 0) {
    const [f, ...others] = fixers;
    const also = others.length > 0 ? ` (or, alone: ${others.map((o) => `policy.${o.field} ≤ ${o.max}`).join(", ")})` : "";
    return `policy.${f.field}: ${f.value} needs ${over}; allowed: policy.${f.field} ≤ ${f.max} with the other policy fields as set${also}, ${remote}`;
  }
  return `policy: ${candidates.map((c) => `policy.${c.field} ${c.value}`).join(", ")} need ${over}; no one of them lowered alone fits: lower several (e.g. policy.dModel and policy.nLayers), ${remote}`;
}
