/**
 * The one entry point to jax-js inside the embedded backend: turns on relaxed SIMD, installs the worker-thread shim and a heap
 * probe first, then re-exports the library. Import jax-js through this module so both are in place before jax-js creates
 * its wasm backend (it does so when its module is evaluated).
 */
import "./wasm-features.ts";
import "./threads.ts";
import "./heap-probe.ts";

export * from "@jax-js/jax";
export { jaxThreads } from "./threads.ts";
export { relaxedSimd } from "./wasm-features.ts";
export { wasmHeapBytes } from "./heap-probe.ts";
