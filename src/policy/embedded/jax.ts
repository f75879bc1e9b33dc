/// <reference lib="esnext.float16" preserve="true" />
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

/*
 * jax-js's declarations name `Float16Array` (TypeScript's lib `esnext.float16`, referenced above) and the WebGPU types
 * `GPUDevice` / `GPUBuffer` (from `@webgpu/types`, which it does not depend on). Our own `.d.ts` reach jax-js's through
 * the embedded model's types, so a consumer's `tsc` without `skipLibCheck` failed on them (issue 29). The reference is
 * kept in our emitted `jax.d.ts` (`preserve`), and the two WebGPU names are declared as empty interfaces: we never touch
 * a GPU, and an empty interface merges with `@webgpu/types`' full one where a consumer has it.
 * test/library-pack.test.ts type-checks a consumer project without `skipLibCheck`.
 */
declare global {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface GPUDevice {}
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface GPUBuffer {}
}
