/**
 * Turns on WebAssembly relaxed SIMD before jax-js generates its kernels, so its matmul-like reductions use fused
 * multiply-add (`f32x4.relaxed_madd`, which jax-js emits when the runtime validates it). Node 22+ has relaxed SIMD
 * by default; Node 20's V8 ships it behind `--experimental-wasm-relaxed-simd`, which is process-wide and settable at
 * run time (worker threads see it too).
 *
 * Results stay deterministic on one machine (V8 lowers relaxed_madd to the same instruction every time: FMA where
 * the CPU has it); they may differ in the last bits from a machine without FMA. `ARL_RELAXED_SIMD=0` leaves it off.
 * Must be evaluated before `@jax-js/jax` (import `./jax.ts`, which imports this first).
 */
import { setFlagsFromString } from "node:v8";

/** A module using one `f32x4.relaxed_madd` (jax-js's own feature probe). */
const PROBE = "0061736d0100000001080160037b7b7b017b030201000a0d010b00200020012002fd85020b";

/** Whether relaxed SIMD is available to jax-js in this process. */
export const relaxedSimd: boolean = (() => {
  const validate = (): boolean => {
    try {
      return WebAssembly.validate(Buffer.from(PROBE, "hex"));
    } catch {
      return false;
    }
  };
  if (validate()) return true;
  if (process.env.ARL_RELAXED_SIMD === "0") return false;
  try {
    setFlagsFromString("--experimental-wasm-relaxed-simd");
  } catch {
    return false;
  }
  return validate();
})();
