/**
 * The embedded backend's memory estimate as the console says it, in one place: `--dry-run`'s `memory:` line and the
 * warning a run (or lab) logs at start name the same figure — what a long run can grow jax-js's wasm heap to
 * (`wasm.peak` of `estimateEmbeddedMemory`), with the first step's need beside it — so the dry run never reports a
 * smaller number than the run then warns with.
 */
import { WASM_HEAP_LIMIT_BYTES, type EmbeddedMemoryEstimate } from "../policy/embedded/memory.ts";

/** Bytes as the estimate is shown: whole MiB below 1 GiB, GiB with one decimal from there (`657 MiB`, `4.5 GiB`). */
export function heapSize(bytes: number): string {
  return bytes < 2 ** 30 ? `${Math.ceil(bytes / 2 ** 20)} MiB` : `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/**
 * The estimate's own words, shared by {@link memoryLine} and {@link memoryWarning}: `≈ <peak> (one set of buffers
 * per micro-batch length and row count; the first step needs ≈ <total>)`.
 */
export function memoryEstimateText(mem: EmbeddedMemoryEstimate): string {
  return `≈ ${heapSize(mem.wasm.peak)} (one set of buffers per micro-batch length and row count; the first step needs ≈ ${heapSize(mem.wasm.total)})`;
}

/**
 * `--dry-run`'s memory line. jax-js trainer: `memory: a long run can grow the embedded backend's wasm heap to ≈ … of
 * its 4 GiB limit (<n> parameters, a <N>-token training micro-batch at length <T>), ≈ <host> outside it`; onnx
 * trainer (the default): `memory: training needs ≈ <host> of native memory (…) and ≈ <wasm> of the … wasm heap`.
 */
export function memoryLine(mem: EmbeddedMemoryEstimate): string {
  if (mem.trainer === "onnx") {
    // The onnx trainer keeps its activations and Adam state in native memory; the wasm heap holds only the weights
    // the jax-js programs read (and the jax-js sampler's buffers when that sampler is chosen).
    return (
      `memory: training needs ≈ ${heapSize(mem.host)} of native memory (onnx trainer: a ${mem.trainTokens}-token micro-batch at length ${mem.trainSeq}, ` +
      `host copies of the ${mem.params} parameters and Adam's moments) and ≈ ${heapSize(mem.wasm.peak)} of the embedded backend's ${WASM_HEAP_LIMIT_BYTES / 2 ** 30} GiB wasm heap`
    );
  }
  return (
    `memory: a long run can grow the embedded backend's wasm heap to ${memoryEstimateText(mem)} of its ${WASM_HEAP_LIMIT_BYTES / 2 ** 30} GiB limit ` +
    `(${mem.params} parameters, a ${mem.trainTokens}-token training micro-batch at length ${mem.trainSeq}), ≈ ${heapSize(mem.host)} outside it`
  );
}

/**
 * A warning when a long run can grow the embedded backend's heap past its 4 GiB limit (`wasm.peak`: one set of
 * buffers per micro-batch shape), or undefined; its figure is {@link memoryLine}'s.
 */
export function memoryWarning(mem: EmbeddedMemoryEstimate | undefined): string | undefined {
  if (mem === undefined || mem.wasm.peak <= WASM_HEAP_LIMIT_BYTES) return undefined;
  return (
    `memory: a long run can grow the embedded backend's wasm heap to ${memoryEstimateText(mem)}, more than its 4 GiB; ` +
    `if it stops with "Allocation exceeds the 4 GiB memory32 limit", lower policy.contextLength or policy.dModel`
  );
}
