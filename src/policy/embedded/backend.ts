/**
 * The embedded CPU training backend: a small GPT (see `gpt.ts`) trained in-process on jax-js (wasm), behind the
 * Tinker-shaped `TrainingBackend` interface. Forward+backward and Adam are each one jit-compiled program; batches
 * are padded to bucketed shapes so a run compiles only a handful of programs (`batching.ts`). Beside it: the loss's
 * setup (`lossPlan.ts`), the state a checkpoint holds (`state.ts`) and the `gae` value head (`value.ts`).
 */
import { NonFiniteError, firstNonFinite } from "../../core/finite.ts";
import type { Datum, Metrics } from "../../core/types.ts";
import type { AdamParams, CriticHooks, ForwardBackwardResult, LossConfig, LossFnName, TrainingBackend, ValueHeadOptions } from "../../core/training.ts";
import type { SamplingClient } from "../../core/sampling.ts";
import { Batcher } from "./batching.ts";
import { saveCheckpoint } from "./checkpoint.ts";
import { initParamData, namedLeaves, paramShapes, paramsFromData, resolveConfig, scatterAddRows, type GPTConfig, type GPTParams } from "./gpt.ts";
import { blockUntilReady, jit, numpy as np, tree } from "./jax.ts";
import { makeHiddenProgram, makeLogprobProgram, makeTrainProgram, STAT, STAT_COUNT, type LogprobProgram } from "./loss.ts";
import { lossPlan } from "./lossPlan.ts";
import { adamInit, adamStep, type AdamState } from "./optim.ts";
import { hostAdamStep, type HostAdamState } from "./hostAdam.ts";
import { nonFiniteLeaves, readState, stateTensors } from "./state.ts";
import { valueHeadCritic } from "./value.ts";
import { OnnxSampler, type OnnxSamplerOptions } from "../onnx/sampler.ts";
import { OnnxTrainer } from "../onnx/trainer.ts";
import { ONNX_LENGTH_BUCKET } from "../config.ts";
import { addInto, lossMetrics, onnxForwardBackward, zerosLike, type LossPlanned } from "./hostEngine.ts";
import { BatchedSampler, type WeightsSnapshot } from "./batchedSampler.ts";
import { EmbeddedSampler, type SamplerOptions } from "./sampler.ts";

type Arr = np.Array;

/** Options of `EmbeddedBackend`. */
export interface EmbeddedBackendOptions {
  /** Seed of the deterministic parameter initialisation. */
  seed: number;
  /**
   * Padded sequence lengths are rounded up to a multiple of this (tokens; default {@link DEFAULT_LENGTH_BUCKET} of
   * the trainer: 64 for jax-js, whose every shape is a compile and a buffer set; 16 for onnx, where it only sets padding).
   */
  lengthBucket?: number;
  /**
   * Tokens per micro-batch (rows × padded length; default 3072). A full micro-batch at padded length T has
   * ⌊budget/T⌋ rows; with the jax-js trainer the last one of a call is padded to a power of two rows. Keeping rows × T
   * constant matters for memory: jax-js allocates every intermediate of a compiled program at once and reuses freed memory only
   * for buffers of the same size, so equal token counts let programs of different lengths share buffers.
   */
  maxTokensPerChunk?: number;
  /** Options of the sampling engine. */
  sampler?: SamplerOptions;
  /**
   * Which engine computes the sampler's logits (default "jax"): "jax" decodes on jax-js in this process's wasm
   * heap; "onnx" runs an ONNX graph of the same model on onnxruntime-node, rebuilt from the current weights when
   * they change (`../onnx/sampler.ts`). Both share batching, seeding and stopping; logprobs agree to ~1e-5 nats.
   */
  samplerEngine?: SamplerEngine;
  /** Options of the ONNX engine (threads, batching); used when `samplerEngine` is "onnx". */
  onnx?: OnnxSamplerOptions;
  /**
   * Which engine runs forward + backward (default "onnx"): "jax" runs jit-compiled jax-js programs in this process's
   * wasm heap; "onnx" runs a hand-written backward graph of the same model on onnxruntime-node
   * (`../onnx/trainGraph.ts`; 1.6–1.8× PyTorch's step on the base shape and 7.8–8.8× on a larger one, BENCHMARKS.md).
   * AdamW, checkpoints and the sampler are the same for both; gradients agree to ~1e-5 relative
   * (test/policy-onnx-train.test.ts).
   */
  trainerEngine?: TrainerEngine;
  /** onnxruntime intra-op threads of the "onnx" trainer (default: the machine's cores). */
  trainerThreads?: number;
}

/** The training engines of the embedded backend (see `EmbeddedBackendOptions.trainerEngine`). */
export type TrainerEngine = "jax" | "onnx";
/** Every `TrainerEngine`, for validation messages. */
export const TRAINER_ENGINES: readonly TrainerEngine[] = ["jax", "onnx"];

/** The sampling engines of the embedded backend (see `EmbeddedBackendOptions.samplerEngine`). */
export type SamplerEngine = "jax" | "onnx";
/**
 * Each trainer's default `lengthBucket` (tokens): jax-js 64 (each padded shape is a compiled program with its own
 * buffers in the 4 GiB wasm heap); onnx {@link ONNX_LENGTH_BUCKET} (no compile per shape: the bucket only sets padding).
 */
export const DEFAULT_LENGTH_BUCKET: Readonly<Record<TrainerEngine, number>> = { jax: 64, onnx: ONNX_LENGTH_BUCKET };

/** Every `SamplerEngine`, for validation messages. */
export const SAMPLER_ENGINES: readonly SamplerEngine[] = ["jax", "onnx"];

const LOSS_FNS: readonly LossFnName[] = ["cross_entropy", "importance_sampling", "ppo", "cispo", "dro", "gspo"];

const addTrees = jit((a: GPTParams, b: GPTParams): GPTParams => tree.map((x: Arr, y: Arr) => x.add(y), a, b) as GPTParams);

/**
 * A `TrainingBackend` running a GPT on the CPU in this process.
 *
 * Gradients of successive `forwardBackward` calls are summed until `optimStep` applies them.
 * `samplingClient()` returns this backend's sampling engine: each sampling batch uses the weights current when it
 * starts (so after `optimStep`, new batches see the new weights).
 */
export class EmbeddedBackend implements TrainingBackend {
  /** The model shape (defaults filled). */
  readonly config: Required<GPTConfig>;
  private params: GPTParams;
  /** Host copies of the embedding tables (`[V*D]`, `[C*D]`), for host-side gathers; replaced after each update. */
  private wteHost: Float32Array;
  private wpeHost: Float32Array;
  private adam: AdamState<GPTParams>;
  private grads: GPTParams | null = null;
  private readonly batcher: Batcher;
  private readonly logprobProgram: LogprobProgram;
  private readonly sampler: BatchedSampler;
  /** Bumped whenever the weights change (the sampler rebuilds derived copies when it differs). */
  private weightsVersion = 0;
  /** The params object `weightsVersion` was assigned to (updates and loads replace the object). */
  private versionedParams: GPTParams | null = null;
  private disposed = false;
  /** The onnx training engine, or null on jax-js. */
  private readonly onnxTrainer: OnnxTrainer | null;
  /**
   * The onnx engine's training state on the host (weights, Adam moments: the source of truth there) and its
   * accumulated gradients; `params` (device arrays, for the samplers) is rebuilt from it lazily after an update.
   */
  private host: HostAdamState | null = null;
  private hostGrads: Map<string, Float32Array> | null = null;
  private paramsStale = false;
  private readonly ndim: Map<string, number>;

  /**
   * @param config model shape
   * @param options seed (or a bare seed number) and batching options
   * @throws Error on an invalid config
   */
  constructor(config: GPTConfig, options: EmbeddedBackendOptions | number) {
    const opts: EmbeddedBackendOptions = typeof options === "number" ? { seed: options } : options;
    this.config = resolveConfig(config);
    const data = new Map(initParamData(this.config, opts.seed));
    this.params = paramsFromData(this.config, data);
    this.wteHost = data.get("wte")!;
    this.wpeHost = data.get("wpe")!;
    this.adam = adamInit(this.params);
    this.logprobProgram = makeLogprobProgram(this.config.nHeads);
    // RoPE and token-shift models run on the onnx engines only, so they default to its sampler.
    const engine = opts.samplerEngine ?? (this.config.positional === "rope" || this.config.tokenShift ? "onnx" : "jax");
    if (!SAMPLER_ENGINES.includes(engine)) {
      throw new Error(`unknown samplerEngine "${engine}" (expected ${SAMPLER_ENGINES.join(", ")})`);
    }
    const trainer = opts.trainerEngine ?? "onnx";
    if (!TRAINER_ENGINES.includes(trainer)) {
      throw new Error(`unknown trainerEngine "${trainer}" (expected ${TRAINER_ENGINES.join(", ")})`);
    }
    const onnxOnly = this.config.positional === "rope" ? 'policy.positional "rope"' : this.config.tokenShift ? "policy.tokenShift" : undefined;
    if (onnxOnly && (engine === "jax" || trainer === "jax")) throw new Error(`${onnxOnly} runs on the onnx engines only (got sampler ${engine}, trainer ${trainer}); set policy.sampler and policy.trainer to onnx`);
    this.batcher = new Batcher(this.config, {
      lengthBucket: opts.lengthBucket ?? DEFAULT_LENGTH_BUCKET[trainer],
      maxTokensPerChunk: opts.maxTokensPerChunk ?? 3072,
      padRowsToPow2: trainer === "jax",
    });
    this.onnxTrainer = trainer === "onnx" ? new OnnxTrainer(this.config, { threads: opts.trainerThreads }) : null;
    this.ndim = new Map(paramShapes(this.config).map(([name, shape]) => [name, shape.length]));
    if (this.onnxTrainer) this.host = { step: 0, weights: data, m: zerosLike(data), v: zerosLike(data) };
    this.sampler =
      engine === "onnx"
        ? new OnnxSampler(this.config, () => this.borrowParams(), { ...opts.onnx, maxBatchRows: opts.onnx?.maxBatchRows ?? opts.sampler?.maxBatchRows })
        : new EmbeddedSampler(this.config, () => this.borrowParams(), opts.sampler);
  }

  /**
   * Async factory (same as the constructor; async so callers need not change if initialisation ever awaits).
   * @throws Error on an invalid config
   */
  static async create(config: GPTConfig, options: EmbeddedBackendOptions | number): Promise<EmbeddedBackend> {
    return new EmbeddedBackend(config, options);
  }

  /** A new reference to the current weights (the caller must dispose `params`). @throws Error after dispose */
  borrowParams(): WeightsSnapshot {
    this.checkAlive();
    if (this.paramsStale && this.host) {
      tree.dispose(this.params);
      this.params = paramsFromData(this.config, this.host.weights);
      this.paramsStale = false;
    }
    if (this.params !== this.versionedParams) {
      this.versionedParams = this.params;
      this.weightsVersion++;
    }
    return { params: tree.ref(this.params), wte: this.wteHost, wpe: this.wpeHost, version: this.weightsVersion, host: this.host?.weights };
  }

  /** Number of Adam updates applied so far. */
  get step(): number {
    return this.host ? this.host.step : this.adam.step;
  }

  /**
   * Forward + backward on a batch; adds the gradients of the aggregated loss to the accumulator.
   * @param datums `[batch]`, each with arrays `[seq-1]`, 1 ≤ seq-1 ≤ contextLength
   * @param options `requireFinite`: a result whose loss, a metric or a logprob is NaN/±Inf throws `NonFiniteError`
   *   and adds nothing to the accumulator (a server answering an error must leave no trace); default false: such a
   *   result is returned and its gradients accumulated, for the caller to discard (`discardGradients`)
   * @returns loss (nats per normalisation unit), metrics (`tokens`, `entropy` nats, `kl`, `ratio_mean`,
   *   `clip_fraction` for ppo / gspo / cispo, `clip_fraction_lower` with dual clip) and the pre-update logprobs
   *   `[batch][seq-1]` (nats)
   * @throws Error on an empty batch, a malformed datum, missing sampler logprobs/advantages for RL losses,
   *   `normalization: "constant"` without `constantLength`, or `clipRatioC` ≤ 1; NonFiniteError (see `options`)
   */
  async forwardBackward(datums: Datum[], lossFn: LossFnName, config: LossConfig = {}, options: { requireFinite?: boolean } = {}): Promise<ForwardBackwardResult> {
    this.checkAlive();
    if (!LOSS_FNS.includes(lossFn)) throw new Error(`unknown loss function "${lossFn}" (expected ${LOSS_FNS.join(", ")})`);
    this.batcher.validate(datums);
    const { useKl, hasQ, dualClip, tokenCount, hp } = lossPlan(datums, lossFn, config);
    if (this.onnxTrainer) return this.forwardBackwardOnnx(datums, { lossFn, useKl, dualClip, hasQ, tokenCount, hp }, options);
    const program = makeTrainProgram({ lossFn, useKl, nHeads: this.config.nHeads, dualClip });

    const logprobs: number[][] = new Array(datums.length);
    const stats = new Float64Array(STAT_COUNT);
    let loss = 0;
    const D = this.config.dModel;
    const dWte = new Float32Array(this.config.vocabSize * D); // embedding-lookup part of ∂L/∂wte
    // The sums keep the order runs have always had — ((accumulator + chunk 1) + chunk 2 …) + embedding rows — so a
    // run's metrics stay byte-identical (a separate per-call sum changed float rounding wherever two calls share an
    // update, as RL + PTX replay do). `before` is an extra reference to the accumulator as it was: a call that throws,
    // or is refused below, puts it back, so it adds nothing.
    const before = this.grads === null ? null : (tree.ref(this.grads) as GPTParams);
    let acc: GPTParams | null = this.grads;
    try {
      for (const chunk of this.batcher.chunks(datums)) {
        const { x0, ids, inputs } = this.batcher.packInputs(datums, chunk, hp, this.wteHost);
        const [[surrogate, aux], [grads, gX0]] = program(tree.ref(this.params), x0, this.batcher.bias(chunk.T), inputs);
        surrogate.dispose();
        acc = acc === null ? grads : addTrees(acc, grads);
        scatterAddRows(dWte, D, ids, await gX0.data());
        loss += (await aux.loss.data())[0];
        const s = await aux.stats.data();
        for (let i = 0; i < STAT_COUNT; i++) stats[i] += s[i];
        this.batcher.unpackLogprobs(await aux.lp.data(), datums, chunk, logprobs);
      }
      acc!.wte = acc!.wte.add(np.array(dWte, { shape: [this.config.vocabSize, D] }));
    } catch (e) {
      if (acc) tree.dispose(acc); // the new sums, or (nothing added yet) the second reference to `before`
      this.grads = before;
      throw e;
    }
    const metrics = lossMetrics(stats, { lossFn, useKl, dualClip, hasQ, tokenCount });
    const bad = options.requireFinite ? firstNonFinite({ loss, metrics, logprobs }) : undefined;
    if (bad) {
      tree.dispose(acc!);
      this.grads = before;
      throw new NonFiniteError([bad.path], `forward_backward: ${bad.path} is ${bad.value} (not finite); its gradients were not accumulated`);
    }
    if (before) tree.dispose(before);
    this.grads = acc;
    // Keep the accumulator materialised so queued work does not pile up across calls.
    await blockUntilReady(this.grads!);
    return { loss, metrics, logprobs };
  }

  /** `forwardBackward` on the onnx engine: the call's gradients summed on the host, then added to the accumulator. */
  private async forwardBackwardOnnx(datums: Datum[], plan: LossPlanned, options: { requireFinite?: boolean }): Promise<ForwardBackwardResult> {
    const r = await onnxForwardBackward({ trainer: this.onnxTrainer!, batcher: this.batcher, config: this.config, weights: this.host!.weights, wte: this.wteHost }, datums, plan);
    const { loss, metrics, logprobs } = r;
    const bad = options.requireFinite ? firstNonFinite({ loss, metrics, logprobs }) : undefined;
    if (bad) throw new NonFiniteError([bad.path], `forward_backward: ${bad.path} is ${bad.value} (not finite); its gradients were not accumulated`);
    if (this.hostGrads === null) this.hostGrads = r.grads;
    else for (const [name, g] of r.grads) addInto(this.hostGrads.get(name)!, g);
    return { loss, metrics, logprobs };
  }

  /**
   * Target-token logprobs under the current weights (no gradient).
   * @returns `[batch][seq-1]` nats @throws Error on a malformed datum
   */
  async computeLogprobs(datums: Datum[]): Promise<number[][]> {
    this.checkAlive();
    this.batcher.validate(datums);
    const out: number[][] = new Array(datums.length);
    if (this.onnxTrainer) {
      const weights = this.host!.weights;
      for (const chunk of this.batcher.chunks(datums)) {
        const { x0, targets } = this.batcher.hostTokens(datums, chunk, this.wteHost);
        const lp = await this.onnxTrainer.logprobs(weights, { rows: chunk.rows, T: chunk.T, x0, bias: this.batcher.hostBias(chunk.T), targets });
        this.batcher.unpackLogprobs(lp, datums, chunk, out);
      }
      return out;
    }
    for (const chunk of this.batcher.chunks(datums)) {
      const { rows, T, x0, targets } = this.batcher.packTokens(datums, chunk, this.wteHost);
      const lp = this.logprobProgram(tree.ref(this.params), x0, this.batcher.bias(T), np.array(targets, { shape: [rows, T], dtype: np.int32 }));
      this.batcher.unpackLogprobs(await lp.data(), datums, chunk, out);
    }
    return out;
  }

  /**
   * The trunk's final hidden states (after the last LayerNorm, what the LM head reads) at every input position, no
   * gradient: the features of the `gae` value head (`value.ts`). Row t is the state after `modelInput[0..t]`, i.e.
   * before target t.
   * @returns per datum `[seq-1][dModel]`, flattened row-major (Float32Array of (seq-1)·dModel)
   * @throws Error on a malformed datum
   */
  async hiddenStates(datums: Datum[]): Promise<Float32Array[]> {
    this.checkAlive();
    this.batcher.validate(datums);
    const D = this.config.dModel;
    const out: Float32Array[] = new Array(datums.length);
    const weights = this.onnxTrainer ? this.host!.weights : null;
    for (const chunk of this.batcher.chunks(datums)) {
      const T = chunk.T;
      let h: Float32Array;
      if (this.onnxTrainer) {
        const { x0, targets } = this.batcher.hostTokens(datums, chunk, this.wteHost);
        h = await this.onnxTrainer.hidden(weights!, { rows: chunk.rows, T, x0, bias: this.batcher.hostBias(T), targets });
      } else {
        const { x0 } = this.batcher.packTokens(datums, chunk, this.wteHost);
        h = (await makeHiddenProgram(this.config.nHeads)(tree.ref(this.params), x0, this.batcher.bias(T)).data()) as Float32Array;
      }
      chunk.ids.forEach((di, r) => {
        const n = datums[di].modelInput.length;
        out[di] = h.slice(r * T * D, (r * T + n) * D);
      });
    }
    return out;
  }

  /**
   * The `gae` critic: a linear value head on this model's trunk features ({@link hiddenStates}, `value.ts`), starting
   * at V ≡ 0, its state saved as `value-head.json`. Each call makes a new head.
   */
  valueHead(options: ValueHeadOptions): CriticHooks {
    return valueHeadCritic(this, options);
  }

  /**
   * Applies the accumulated gradients with AdamW and clears them.
   * When the gradient norm is NaN or ±Inf, or the update would leave a NaN/±Inf in the weights or either Adam
   * moment, the update is refused: weights and Adam state stay as they were, the gradients are dropped, and the
   * result carries `skipped: 1` (a NaN would otherwise poison every weight and both Adam moments for good).
   * @param options `requireFinite`: a refused update throws `NonFiniteError` naming what went non-finite (the
   *   gradients, or tensors like `params.blocks.0.w1` / `adam.v.wte`) instead of returning `skipped: 1`
   * @returns `{ grad_norm }` (global L2 norm before clipping), `step` (and `skipped: 1` when refused)
   * @throws Error when no gradients were accumulated, or on invalid hyper-parameters; NonFiniteError (see `options`)
   */
  async optimStep(adam: AdamParams, options: { requireFinite?: boolean } = {}): Promise<Metrics> {
    this.checkAlive();
    if (this.host) return this.optimStepHost(adam, options);
    if (this.grads === null) throw new Error("optimStep: no accumulated gradients (call forwardBackward first)");
    const grads = this.grads;
    this.grads = null;
    // The update consumes its inputs; extra references keep the old state alive until the norm is known to be finite.
    const old = { params: this.params, m: this.adam.m, v: this.adam.v };
    const r = await adamStep(tree.ref(old.params), grads, { step: this.adam.step, m: tree.ref(old.m), v: tree.ref(old.v) }, adam);
    if (!Number.isFinite(r.gradNorm) || r.nonFinite > 0) {
      const what = !Number.isFinite(r.gradNorm) ? [`the accumulated gradients (grad norm ${r.gradNorm})`] : options.requireFinite ? await nonFiniteLeaves(r.params, r.state) : [];
      tree.dispose(r.params);
      tree.dispose(r.state.m);
      tree.dispose(r.state.v);
      if (options.requireFinite) {
        const named = what.length > 4 ? [...what.slice(0, 4), `${what.length - 4} more`] : what;
        throw new NonFiniteError(what, `optim_step: the update would make ${named.join(", ")} non-finite (NaN/Inf); refused — weights and Adam state unchanged, the accumulated gradients dropped`);
      }
      return { grad_norm: r.gradNorm, step: this.adam.step, skipped: 1 };
    }
    tree.dispose(old.params);
    tree.dispose(old.m);
    tree.dispose(old.v);
    this.params = r.params;
    this.adam = r.state;
    // Wait for the whole update (the sampler may run its decode steps synchronously, which needs finished inputs).
    await blockUntilReady([this.params, this.adam.m, this.adam.v]);
    await this.refreshHostTables();
    return { grad_norm: r.gradNorm, step: r.state.step };
  }

  /** `optimStep` on the onnx engine's host state (hostAdam.ts), with the same refusal rules. */
  private async optimStepHost(adam: AdamParams, options: { requireFinite?: boolean }): Promise<Metrics> {
    if (this.hostGrads === null) throw new Error("optimStep: no accumulated gradients (call forwardBackward first)");
    const grads = this.hostGrads;
    this.hostGrads = null;
    const r = hostAdamStep(this.host!, grads, this.ndim, adam);
    if (!Number.isFinite(r.gradNorm) || r.nonFinite.length > 0) {
      if (options.requireFinite) {
        const what = !Number.isFinite(r.gradNorm) ? [`the accumulated gradients (grad norm ${r.gradNorm})`] : r.nonFinite;
        const named = what.length > 4 ? [...what.slice(0, 4), `${what.length - 4} more`] : what;
        throw new NonFiniteError(what, `optim_step: the update would make ${named.join(", ")} non-finite (NaN/Inf); refused — weights and Adam state unchanged, the accumulated gradients dropped`);
      }
      return { grad_norm: r.gradNorm, step: this.host!.step, skipped: 1 };
    }
    this.host = r.state;
    this.paramsStale = true;
    this.wteHost = r.state.weights.get("wte")!;
    this.wpeHost = r.state.weights.get("wpe")!;
    return { grad_norm: r.gradNorm, step: r.state.step };
  }

  /** Drops the accumulated gradients (weights and Adam state untouched); a no-op when there are none. */
  async discardGradients(): Promise<void> {
    this.checkAlive();
    this.hostGrads = null;
    if (this.grads) tree.dispose(this.grads);
    this.grads = null;
  }

  /**
   * Host copies of the accumulated (not yet applied) gradients by parameter name (`paramShapes` order), or null
   * when there are none. For tests and debugging.
   */
  async pendingGradients(): Promise<Map<string, Float32Array> | null> {
    this.checkAlive();
    if (this.host) return this.hostGrads === null ? null : new Map([...this.hostGrads].map(([k, g]) => [k, g.slice()]));
    if (this.grads === null) return null;
    const out = new Map<string, Float32Array>();
    for (const [name, a] of namedLeaves(this.grads)) out.set(name, (await a.ref.data()) as Float32Array);
    return out;
  }

  /** The sampling engine over this backend's current weights (concurrent calls are batched). */
  samplingClient(): SamplingClient {
    this.checkAlive();
    return this.sampler;
  }

  /**
   * Writes config, weights and Adam state under `dir` (atomic per file, with a sha256 manifest).
   * Pending (un-applied) gradients are not saved.
   */
  async save(dir: string): Promise<void> {
    this.checkAlive();
    if (this.host) {
      const h = this.host;
      const tensors: [string, Float32Array][] = [];
      for (const [prefix, m] of [["params.", h.weights], ["adam.m.", h.m], ["adam.v.", h.v]] as const) for (const [name, a] of m) tensors.push([prefix + name, a]);
      await saveCheckpoint(dir, { config: this.config, adamStep: h.step }, tensors);
      return;
    }
    const tensors = await stateTensors(this.params, this.adam);
    await saveCheckpoint(dir, { config: this.config, adamStep: this.adam.step }, tensors);
  }

  /** Writes config and weights only under `dir` (checkpoint format; `load(dir, {optimizer: false})` reads it; ⅓ of `save`). */
  async saveWeights(dir: string): Promise<void> {
    this.checkAlive();
    const tensors: [string, Float32Array][] = this.host
      ? [...this.host.weights].map(([name, a]) => [`params.${name}`, a])
      : (await stateTensors(this.params, this.adam)).filter(([name]) => name.startsWith("params."));
    await saveCheckpoint(dir, { config: this.config, adamStep: 0 }, tensors);
  }

  /**
   * Replaces weights and Adam state with those saved under `dir`; clears pending gradients. `optimizer: false`
   * loads the weights only and restarts Adam (zero moments, step 0).
   * @throws Error naming the file when a file is missing or fails its checksum, or when the saved model shape
   *   differs from this backend's; NonFiniteError naming the tensor when one holds NaN/±Inf (nothing is loaded)
   */
  async load(dir: string, options: { optimizer?: boolean } = {}): Promise<void> {
    this.checkAlive();
    const { params, adam } = await readState(dir, this.config, options.optimizer ?? true);
    tree.dispose(this.params);
    tree.dispose(this.adam.m);
    tree.dispose(this.adam.v);
    if (this.grads) tree.dispose(this.grads);
    this.grads = null;
    this.params = params;
    this.adam = adam;
    this.paramsStale = false;
    if (this.host) {
      const named = new Map(await stateTensors(params, adam));
      const sub = (prefix: string) => new Map(paramShapes(this.config).map(([name]) => [name, named.get(prefix + name)!]));
      this.host = { step: adam.step, weights: sub("params."), m: sub("adam.m."), v: sub("adam.v.") };
      this.hostGrads = null;
    }
    await this.refreshHostTables();
  }

  /** Frees all device memory of this backend; later calls throw. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.sampler instanceof OnnxSampler) this.sampler.release().catch(() => undefined); // frees onnxruntime's session
    this.onnxTrainer?.release().catch(() => undefined);
    this.host = null;
    this.hostGrads = null;
    tree.dispose(this.params);
    tree.dispose(this.adam.m);
    tree.dispose(this.adam.v);
    if (this.grads) tree.dispose(this.grads);
    this.grads = null;
  }

  // -------------------------------------------------------------------------------------------------------------

  private async refreshHostTables(): Promise<void> {
    if (this.host) {
      this.wteHost = this.host.weights.get("wte")!;
      this.wpeHost = this.host.weights.get("wpe")!;
      return;
    }
    this.wteHost = (await this.params.wte.ref.data()) as Float32Array;
    this.wpeHost = (await this.params.wpe.ref.data()) as Float32Array;
  }

  private checkAlive(): void {
    if (this.disposed) throw new Error("EmbeddedBackend used after dispose()");
  }
}
