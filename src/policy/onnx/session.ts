/**
 * onnxruntime-node sessions of our GPT (`model.ts`): the session options this project runs them with, and host
 * copies of the trainer's weights to build them from.
 */
import type { InferenceSession } from "onnxruntime-node";
import { namedLeaves, type GPTConfig, type GPTParams } from "../embedded/gpt.ts";
import { buildGptModel, type GeluMode } from "./model.ts";
import { loadOrt, type Ort } from "./ort.ts";

/** How ONNX sessions run. */
export interface OnnxSessionOptions {
  /**
   * Intra-op threads of onnxruntime (its pool, the calling thread included; default 1). Measured on this
   * project's 2-core machine, decode steps (many small kernels) ran faster on 1 thread than on 2 (waking the pool
   * thread costs more than it saves; far more so when another process holds a core); prefills of many long prompts
   * gain a little from more. `bench/sampling.ts --threads N` re-measures. Results are identical run to run for a
   * given thread count.
   */
  threads?: number;
  /**
   * Let idle pool threads spin-wait for the next kernel (onnxruntime's `session.intra_op.allow_spinning`; default
   * false). Spinning lowers per-kernel latency but burns CPU between calls, which slows other work on the machine
   * (the trainer's jax-js workers, the environment).
   */
  spinning?: boolean;
  /** How the graph computes tanh-GELU (default "op20", see `GptModelOptions.gelu`). */
  gelu?: GeluMode;
}

/** A built session and what building it cost. */
export interface GptSession {
  session: InferenceSession;
  /** The onnxruntime-node module the session belongs to (for building its input tensors). */
  ort: Ort;
  /** Wall time to serialise the model and create the session (ms). */
  buildMs: number;
  /** Size of the serialised model (bytes). */
  modelBytes: number;
}

/**
 * Host copies of every parameter by its `paramShapes` name (each `[size]`, row-major).
 * @param params a params pytree; its leaves are read, not consumed (each read takes its own reference)
 */
export async function hostWeights(params: GPTParams): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (const [name, a] of namedLeaves(params)) out.set(name, (await a.ref.data()) as Float32Array);
  return out;
}

/**
 * Builds the ONNX model of `weights` and an onnxruntime-node session for it (CPU, sequential execution, all graph
 * optimisations, `interOpNumThreads` 1).
 * @param config model shape (defaults filled)
 * @param weights every parameter by name (see `hostWeights`)
 * @throws Error when a parameter is missing or mis-sized, onnxruntime-node cannot be loaded, or it rejects the model
 */
export async function createGptSession(
  config: Required<GPTConfig>,
  weights: Map<string, Float32Array>,
  options: OnnxSessionOptions = {},
): Promise<GptSession> {
  const ort = await loadOrt();
  const t0 = performance.now();
  const bytes = buildGptModel(config, weights, { gelu: options.gelu });
  const threads = options.threads ?? 1;
  if (!Number.isInteger(threads) || threads < 1) throw new Error(`ONNX sampler: threads must be a positive integer, got ${threads}`);
  const session = await ort.InferenceSession.create(bytes, {
    executionProviders: ["cpu"],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
    extra: { session: { intra_op: { allow_spinning: options.spinning ? "1" : "0" } } },
  });
  return { session, ort, buildMs: performance.now() - t0, modelBytes: bytes.length };
}
