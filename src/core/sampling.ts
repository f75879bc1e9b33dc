/**
 * The sampling boundary: what a rollout needs from a model to write a turn — token ids in, sampled token ids and
 * their logprobs out — shaped like the Tinker API's SamplingClient so the embedded model, a local server or a GPU
 * cluster are interchangeable. Implementations live in `src/policy`. Source: Tinker API docs (SamplingClient).
 */
import type { StopReason } from "./types.ts";

/** Options of one `sample` call. */
export interface SampleOptions {
  /** Number of independent samples of the same prompt. */
  n: number;
  /** Maximum new tokens per sample (tokens). */
  maxTokens: number;
  /** Softmax temperature; 0 = greedy. */
  temperature: number;
  /** Token ids that end a sample (included in the output). */
  stop?: number[];
  /**
   * Strings that end a sample, for tokenizers where a protocol tag is several tokens (real BPE models). Remote
   * backends send them instead of `stop` when present; the embedded engine needs single-token `stop` ids.
   */
  stopStrings?: string[];
  /** Seed of this call's sampling randomness; the same seed and prompt give the same tokens. */
  seed: number;
  /**
   * The gateway rollout this call belongs to (`/rollout/<id>/v1`), when it belongs to one. Policies ignore it; a
   * scripted teacher (src/train/agentTeacher.ts) uses it to know its task without reading the prompt.
   */
  rolloutId?: string;
}

/** One sampled continuation. `tokens` and `logprobs` are `[new]`; logprobs in nats at temperature 1 of the
 * distribution actually sampled from (temperature-scaled). */
export interface SampledSequence {
  tokens: number[];
  logprobs: number[];
  stopReason: StopReason;
}

/** Samples continuations of prompts. Concurrent calls may be batched by the implementation. */
export interface SamplingClient {
  /**
   * @param promptTokens token ids `[prompt]`
   * @returns `n` sequences
   * @throws Error when the prompt is longer than the model's context window
   */
  sample(promptTokens: number[], options: SampleOptions): Promise<SampledSequence[]>;
}
