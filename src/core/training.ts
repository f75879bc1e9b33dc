/**
 * The training boundary: everything the RL loop needs from model math, shaped like the Tinker training API
 * (`forward_backward`, `optim_step`, `save_weights`, `sample`) so the embedded CPU model, a local server, or a GPU
 * cluster are interchangeable. Implementations live in `src/policy`. Source: Tinker API docs (TrainingClient /
 * SamplingClient) and tinker-cookbook.
 */
import type { SamplingClient } from "./sampling.ts";
import type { Datum, Metrics } from "./types.ts";

/**
 * Loss function names, identical to the Tinker API's so configs move between backends unchanged: Tinker's
 * `LossFnType` (`cispo`, `dro`: Tinker docs "Loss functions") and SkyRL's Tinker server's `gspo` (skyrl/tinker/api.py
 * :622 @ a956457). The embedded backend implements all six; `src/algo/losses.ts` is their reference.
 */
export type LossFnName = "cross_entropy" | "importance_sampling" | "ppo" | "cispo" | "dro" | "gspo";

/**
 * Options of a loss.
 * - `clipLow`/`clipHigh`: PPO ratio clip thresholds (ratio clipped to `[1-clipLow, 1+clipHigh]`; default 0.2/0.2).
 * - `klCoef`: coefficient of the k3 KL estimator to the reference policy (needs `Datum.refLogprobs`); 0 = off.
 * - `normalization`: how per-token losses are aggregated. `tokens`: divided by the number of loss-masked tokens in
 *   the batch (GRPO / token-mean); `constant`: divided by `constantLength × batch` (Dr.GRPO, Liu et al. 2025 §3.1);
 *   `sum`: not divided (the Tinker API's losses are sums over tokens; remote clients pre-scale weights/advantages).
 * - `constantLength`: the constant (tokens) used by `normalization: "constant"`.
 */
export interface LossConfig {
  clipLow?: number;
  clipHigh?: number;
  klCoef?: number;
  normalization?: "tokens" | "constant" | "sum";
  constantLength?: number;
  /** `ppo` only: dual-clip bound c > 1 (veRL `clip_ratio_c`; Ye et al. 2020); undefined = no dual clip. */
  clipRatioC?: number;
  /** `dro` only: the quadratic penalty β (Tinker `loss_fn_config.beta`; default 0.05). */
  droBeta?: number;
}

/** Result of `forwardBackward`. `logprobs[i]` is `[seq-1]` for `datums[i]` (nats, current policy, pre-update). */
export interface ForwardBackwardResult {
  /** The aggregated loss (nats per token for cross entropy). */
  loss: number;
  /** e.g. `clip_fraction`, `kl`, `entropy`, `ratio_mean`, `tokens`. */
  metrics: Metrics;
  logprobs: number[][];
}

/** Adam hyper-parameters of one `optimStep` (Tinker's `AdamParams`). */
export interface AdamParams {
  learningRate: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
  /** Global gradient-norm clip; 0 or undefined = off. */
  gradClip?: number;
}

/** A model that can be trained: Tinker's TrainingClient. */
export interface TrainingBackend {
  /** Forward and backward on a batch; gradients accumulate until `optimStep`. */
  forwardBackward(datums: Datum[], lossFn: LossFnName, config?: LossConfig): Promise<ForwardBackwardResult>;
  /** Logprobs of each datum's target tokens under the current weights (no gradient), `[batch][seq-1]` nats. */
  computeLogprobs(datums: Datum[]): Promise<number[][]>;
  /**
   * Applies accumulated gradients with Adam and clears them. Returns e.g. `grad_norm`. A backend may refuse an update
   * whose gradient norm is not finite, or that would leave NaN/Inf in the weights or Adam moments (the embedded one
   * keeps its weights and Adam state and reports `skipped: 1`).
   */
  optimStep(adam: AdamParams): Promise<Metrics>;
  /**
   * Drops the accumulated (not yet applied) gradients without touching weights or optimizer state — how a trainer
   * skips a step whose loss is NaN/Inf. Optional: a backend without it cannot skip a step cleanly.
   */
  discardGradients?(): Promise<void>;
  /** A sampling client over the current weights (re-created after each update). */
  samplingClient(): SamplingClient;
  /** Writes weights + optimizer state under `dir`. */
  save(dir: string): Promise<void>;
  /** Reads weights + optimizer state from `dir`. @throws Error naming the file when missing or corrupt */
  load(dir: string): Promise<void>;
  /**
   * Optional capability: a new critic for `rl.advantage: gae` (a value head over this model's features, starting at
   * V ≡ 0), which the trainer makes once per backend and keeps. Absent on backends without one (Tinker).
   */
  valueHead?(options: ValueHeadOptions): CriticHooks;
}

/** Options of a backend's value head (`TrainingBackend.valueHead`; config `rl.critic*`, `rl.cliprangeValue`). */
export interface ValueHeadOptions {
  /** Adam learning rate of the head. */
  learningRate: number;
  /** Value clipping around the old values (verl `critic.cliprange_value`, reward units). */
  cliprange: number;
  /** Adam steps per `update` call (on the same batch). */
  updates: number;
}

/** What `rl.advantage: gae` needs from a critic (a backend's `valueHead`). */
export interface CriticHooks {
  /** V(s_t) for every target position `[batch][seq-1]` (reward units), pre-update. */
  values(datums: Datum[]): Promise<number[][]>;
  /**
   * One critic update on `returns` `[batch][seq-1]` with the old values for clipping; returns its metrics
   * (`vf_loss`, `vf_clipfrac`, …).
   */
  update(datums: Datum[], returns: number[][], oldValues: number[][]): Promise<Metrics>;
  /** The critic's state as JSON text for a checkpoint (`value-head.json`); absent when it keeps none. */
  stateText?(): string;
  /** Restores `stateText()`'s output. @throws Error when it does not fit this critic */
  restoreText?(text: string): void;
}
