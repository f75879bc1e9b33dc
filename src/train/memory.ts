/**
 * A full garbage collection on demand, so a long run's memory follows what it holds rather than how lazily V8
 * collects. V8 sizes its old space from the machine's RAM and collects it late, so without this a run's RSS keeps
 * rising for hundreds of steps on garbage it would collect anyway (bench/end-to-end.ts measures it). The training
 * loop calls it every `run.gcEvery` RL steps; a full collection of this process's heap takes milliseconds to tens
 * of milliseconds.
 *
 * `gc` is not exposed to scripts by default: `--expose-gc` is set at run time and the function taken from a new
 * context (the flag applies to contexts created after it is set).
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let gc: (() => void) | null | undefined;

/**
 * Runs a full (major) garbage collection of the V8 heap.
 * @returns false when the runtime offers no way to trigger one (nothing is done then); never throws
 */
export function collectGarbage(): boolean {
  if (gc === undefined) {
    const own = (globalThis as { gc?: () => void }).gc;
    if (typeof own === "function") gc = own;
    else {
      try {
        setFlagsFromString("--expose-gc");
        const fromContext: unknown = runInNewContext("gc");
        gc = typeof fromContext === "function" ? (fromContext as () => void) : null;
      } catch {
        gc = null;
      }
    }
  }
  if (!gc) return false;
  gc();
  return true;
}
