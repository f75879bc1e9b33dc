/**
 * The embedded backend's onnx training engine, host side: one `forwardBackward` call as micro-batches through
 * `../onnx/trainer.ts`, the gradients summed on the host (chunks in order, then the embedding lookup's rows scattered
 * into `wte`), and the metrics of the call — the same as the jax-js engine's (`backend.ts`), which shares
 * `lossMetrics`.
 */
import type { LossFnName } from "../../core/training.ts";
import type { Datum, Metrics } from "../../core/types.ts";
import type { OnnxTrainer, HostChunk } from "../onnx/trainer.ts";
import type { Batcher } from "./batching.ts";
import { scatterAddRows, type GPTConfig } from "./gpt.ts";
import { STAT, STAT_COUNT } from "./loss.ts";

/** A batch's loss setup as the backend resolved it (`lossPlan.ts`). */
export interface LossPlanned {
  lossFn: LossFnName;
  useKl: boolean;
  dualClip: boolean;
  hasQ: boolean;
  tokenCount: number;
  /** `[clipLow, clipHigh, klCoef, invDenom, clipRatioC, droBeta]`. */
  hp: number[];
}

/** What the onnx engine reads for one call. */
export interface OnnxEngineContext {
  trainer: OnnxTrainer;
  batcher: Batcher;
  config: Required<GPTConfig>;
  /** Current weights by name (host). */
  weights: Map<string, Float32Array>;
  /** The token embedding `[V·D]` (host), for the lookup of x0. */
  wte: Float32Array;
}

/**
 * Forward + backward of `datums` (validated) on the onnx engine.
 * @returns loss (nats per normalisation unit), metrics, pre-update logprobs `[batch][seq-1]` and the call's
 *   gradients by parameter name (host, full sizes)
 * @throws Error when onnxruntime-node cannot be loaded or rejects the inputs
 */
export async function onnxForwardBackward(
  ctx: OnnxEngineContext,
  datums: Datum[],
  plan: LossPlanned,
): Promise<{ loss: number; metrics: Metrics; logprobs: number[][]; grads: Map<string, Float32Array> }> {
  const { batcher, config } = ctx;
  const D = config.dModel;
  const logprobs: number[][] = new Array(datums.length);
  const stats = new Float64Array(STAT_COUNT);
  const dWte = new Float32Array(config.vocabSize * D);
  let loss = 0;
  let sum: Map<string, Float32Array> | null = null;
  for (const chunk of batcher.chunks(datums)) {
    const { x0, ids, targets } = batcher.hostTokens(datums, chunk, ctx.wte);
    const host: HostChunk = { rows: chunk.rows, T: chunk.T, x0, bias: batcher.hostBias(chunk.T), targets };
    const r = await ctx.trainer.train(plan, ctx.weights, host, batcher.hostLossInputs(datums, chunk, plan.hp));
    const wpe = new Float32Array(config.contextLength * D);
    wpe.set(r.grads.get("wpe")!);
    r.grads.set("wpe", wpe);
    if (sum === null) sum = r.grads;
    else for (const [name, g] of r.grads) addInto(sum.get(name)!, g);
    scatterAddRows(dWte, D, ids, r.gradX0);
    loss += r.loss;
    for (let i = 0; i < STAT_COUNT; i++) stats[i] += r.stats[i];
    batcher.unpackLogprobs(r.lp, datums, chunk, logprobs);
  }
  addInto(sum!.get("wte")!, dWte);
  return { loss, metrics: lossMetrics(stats, plan), logprobs, grads: sum! };
}

/** The metrics of one forwardBackward call from its summed statistics (`STAT` order; means over Σw). */
export function lossMetrics(stats: Float64Array, plan: { lossFn: LossFnName; useKl: boolean; dualClip: boolean; hasQ: boolean; tokenCount: number }): Metrics {
  const w = stats[STAT.tokens];
  const mean = (x: number): number => (w > 0 ? x / w : 0);
  const metrics: Metrics = { tokens: plan.tokenCount, entropy: mean(stats[STAT.entropy]) };
  if (plan.useKl || plan.hasQ) metrics.kl = mean(stats[STAT.kl]);
  if (plan.hasQ) metrics.ratio_mean = mean(stats[STAT.ratio]);
  if (plan.lossFn === "ppo" || plan.lossFn === "cispo" || plan.lossFn === "gspo") metrics.clip_fraction = mean(stats[STAT.clipped]);
  if (plan.dualClip) metrics.clip_fraction_lower = mean(stats[STAT.clippedLower]);
  return metrics;
}

/** Zero buffers of the same sizes, by name. */
export function zerosLike(m: Map<string, Float32Array>): Map<string, Float32Array> {
  return new Map([...m].map(([name, a]) => [name, new Float32Array(a.length)]));
}

/** a += b, elementwise (same length). */
export function addInto(a: Float32Array, b: Float32Array): void {
  for (let i = 0; i < a.length; i++) a[i] += b[i];
}
