/**
 * Lazy access to onnxruntime-node: its native library (≈ 20 MB, ~150 ms to load) is loaded on the first ONNX
 * session, not when the embedded backend's module is imported, so runs on the jax-js sampler never load it.
 */
export type Ort = typeof import("onnxruntime-node");

let loading: Promise<Ort> | null = null;

/**
 * The onnxruntime-node module (loaded once).
 * @throws Error (rejects) when the package or its native binary for this platform cannot be loaded
 */
export function loadOrt(): Promise<Ort> {
  loading ??= import("onnxruntime-node").then(
    (m) => ((m as { default?: Ort }).default ?? m) as Ort,
    (e: unknown) => {
      loading = null;
      throw new Error(`ONNX sampler: cannot load onnxruntime-node (${e instanceof Error ? e.message : String(e)})`);
    },
  );
  return loading;
}
