/**
 * The embedded backend's training math on onnxruntime-node: one session per graph (`trainGraph.ts`: a loss spec's
 * forward + backward, the logprob forward, the hidden-state forward), built once per process and shape-agnostic
 * (B and T are dynamic), with the weights fed as inputs on every call. The optimizer stays with the backend.
 *
 * Threads: onnxruntime's intra-op pool (`threads`, default the machine's cores). Results are identical run to run
 * for a given thread count (its GEMM and reduction partitions depend only on the shapes and the thread count), not
 * across thread counts.
 */
import { availableParallelism } from "node:os";
import type { InferenceSession, Tensor } from "onnxruntime-node";
import { paramShapes, ropeTables, type GPTConfig } from "../embedded/gpt.ts";
import { buildTrainGraph, type TrainGraphLoss, type TrainGraphMode } from "./trainGraph.ts";
import { loadOrt, type Ort } from "./ort.ts";

/** One padded micro-batch on the host: `rows × T` tokens. */
export interface HostChunk {
  rows: number;
  T: number;
  /** Token embeddings `[rows·T·D]` (gathered from wte on the host). */
  x0: Float32Array;
  /** Causal bias `[T·T]`. */
  bias: Float32Array;
  /** Target ids `[rows·T]`. */
  targets: Int32Array;
}

/** A micro-batch's per-token loss inputs, each `[rows·T]` (zeros where absent), and lossPlan's `hp` `[6]`. */
export interface HostLossInputs {
  weights: Float32Array;
  samplerLp: Float32Array;
  advantages: Float32Array;
  refLp: Float32Array;
  hp: Float32Array;
}

/** What one training micro-batch returns. */
export interface ChunkResult {
  /** The loss (nats per normalisation unit, `hp[3]` applied). */
  loss: number;
  /** Target logprobs `[rows·T]` (nats). */
  lp: Float32Array;
  /** Sums of w·x (loss.ts's STAT order) `[7]`. */
  stats: Float32Array;
  /** ∂L/∂param by `paramShapes` name; `wpe`'s is `[T·D]` (the caller pads to the context). */
  grads: Map<string, Float32Array>;
  /** ∂L/∂x0 `[rows·T·D]`: the token-embedding lookup's gradient, for the caller's scatter into wte. */
  gradX0: Float32Array;
}

/** Options of {@link OnnxTrainer}. */
export interface OnnxTrainerOptions {
  /** onnxruntime intra-op threads (default `os.availableParallelism()`). */
  threads?: number;
}

/** Forward/backward sessions of one model shape (see the file comment). */
export class OnnxTrainer {
  private readonly sessions = new Map<string, Promise<InferenceSession>>();
  private ort: Ort | null = null;
  private readonly threads: number;
  private readonly shapes: Map<string, number[]>;

  /** @throws Error when `threads` is not a positive integer */
  constructor(
    private readonly config: Required<GPTConfig>,
    options: OnnxTrainerOptions = {},
  ) {
    this.threads = options.threads ?? availableParallelism();
    if (!Number.isInteger(this.threads) || this.threads < 1) throw new Error(`ONNX trainer: threads must be a positive integer, got ${this.threads}`);
    this.shapes = new Map(paramShapes(config));
  }

  /**
   * Forward + backward of one micro-batch under `loss`.
   * @param weights every parameter by name (host, `paramShapes` sizes)
   * @throws Error when onnxruntime-node cannot be loaded or rejects the inputs
   */
  async train(loss: TrainGraphLoss, weights: Map<string, Float32Array>, chunk: HostChunk, inputs: HostLossInputs): Promise<ChunkResult> {
    const key = `train:${loss.lossFn}:${loss.useKl}:${loss.dualClip === true}`;
    const session = await this.session(key, "train", loss);
    const ort = this.ort!;
    const bt = [chunk.rows, chunk.T];
    const feeds = this.feeds(weights, chunk);
    feeds.weights = new ort.Tensor("float32", inputs.weights, bt);
    feeds.sampler_lp = new ort.Tensor("float32", inputs.samplerLp, bt);
    feeds.advantages = new ort.Tensor("float32", inputs.advantages, bt);
    feeds.ref_lp = new ort.Tensor("float32", inputs.refLp, bt);
    feeds.hp = new ort.Tensor("float32", inputs.hp, [6]);
    const out = await session.run(feeds);
    const grads = new Map<string, Float32Array>();
    for (const [name, t] of Object.entries(out)) if (name.startsWith("grad.") && name !== "grad.x0") grads.set(name.slice(5), t.data as Float32Array);
    return {
      loss: (out.loss.data as Float32Array)[0],
      lp: out.lp.data as Float32Array,
      stats: out.stats.data as Float32Array,
      grads,
      gradX0: out["grad.x0"].data as Float32Array,
    };
  }

  /** Target logprobs `[rows·T]` (nats) of one micro-batch, no gradient. @throws Error as `train` */
  async logprobs(weights: Map<string, Float32Array>, chunk: HostChunk): Promise<Float32Array> {
    const session = await this.session("logprob", "logprob");
    const out = await session.run(this.feeds(weights, chunk));
    return out.lp.data as Float32Array;
  }

  /** Final hidden states `[rows·T·D]` (after the last LayerNorm) of one micro-batch. @throws Error as `train` */
  async hidden(weights: Map<string, Float32Array>, chunk: HostChunk): Promise<Float32Array> {
    const session = await this.session("hidden", "hidden");
    const out = await session.run(this.feeds(weights, chunk, false));
    return out.hidden.data as Float32Array;
  }

  /** Frees every session. */
  async release(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    for (const s of all) await (await s).release();
  }

  private feeds(weights: Map<string, Float32Array>, chunk: HostChunk, withTargets = true): Record<string, Tensor> {
    const ort = this.ort!;
    const D = this.config.dModel;
    const feeds: Record<string, Tensor> = {};
    for (const [name, data] of weights) feeds[name] = new ort.Tensor("float32", data, this.shapes.get(name)!);
    feeds.x0 = new ort.Tensor("float32", chunk.x0, [chunk.rows, chunk.T, D]);
    feeds.bias = new ort.Tensor("float32", chunk.bias, [chunk.T, chunk.T]);
    if (this.config.positional === "rope") {
      const { cos, sin } = ropeTables(chunk.T, D / this.config.nHeads);
      feeds.rope_cos = new ort.Tensor("float32", cos, [chunk.T, D / this.config.nHeads]);
      feeds.rope_sin = new ort.Tensor("float32", sin, [chunk.T, D / this.config.nHeads]);
    }
    if (withTargets) feeds.targets = new ort.Tensor("int64", BigInt64Array.from(chunk.targets, (t) => BigInt(t)), [chunk.rows, chunk.T]);
    return feeds;
  }

  private session(key: string, mode: TrainGraphMode, loss?: TrainGraphLoss): Promise<InferenceSession> {
    let s = this.sessions.get(key);
    if (!s) {
      s = (async () => {
        const ort = await loadOrt();
        this.ort = ort;
        return ort.InferenceSession.create(buildTrainGraph(this.config, mode, loss), {
          executionProviders: ["cpu"],
          intraOpNumThreads: this.threads,
          interOpNumThreads: 1,
          executionMode: "sequential",
          graphOptimizationLevel: "all",
          extra: { session: { intra_op: { allow_spinning: "0" } } },
        });
      })();
      s.catch(() => this.sessions.delete(key));
      this.sessions.set(key, s);
    }
    return s;
  }
}
