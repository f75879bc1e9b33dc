/**
 * A minimal Web `Worker` global for Node, built on `worker_threads`, so that jax-js's wasm backend runs its kernels
 * on a pool of threads sharing one `WebAssembly.Memory` (jax-js only multi-threads when `SharedArrayBuffer` and
 * `Worker` exist, and it decides once, when its module is first evaluated).
 *
 * Must be evaluated before `@jax-js/jax`: import `./jax.ts` (which imports this file first) rather than the library.
 * Threads: `ARL_JAX_THREADS` (default: `os.availableParallelism()`); `ARL_JAX_THREADS=0` or `1` leaves jax-js
 * single-threaded (no shim). Kernels are split by output range, one range per thread, so results do not depend on
 * the thread count's scheduling: same inputs → same bits.
 */
import { availableParallelism } from "node:os";
import { resolveObjectURL } from "node:buffer";
import { Worker as NodeWorker } from "node:worker_threads";

/** Code run in each thread: receives the kernel-runner source as its first message, then behaves like a Web Worker. */
const BOOTSTRAP = `
const { parentPort } = require("node:worker_threads");
globalThis.self = globalThis;
globalThis.postMessage = (m) => parentPort.postMessage(m);
parentPort.once("message", (src) => {
  (0, eval)(src);
  parentPort.on("message", (data) => globalThis.self.onmessage({ data }));
});
`;

type MessageHandler = ((e: { data: unknown }) => void) | null;
type ErrorHandler = ((e: { message: string }) => void) | null;

/** The subset of the Web Worker API that jax-js's `WasmWorkerPool` uses. */
class ShimWorker {
  onmessage: MessageHandler = null;
  onerror: ErrorHandler = null;
  private readonly worker: NodeWorker;
  /** Messages posted before the source arrived; sent in order once it has. */
  private queue: unknown[] | null = [];
  /** Messages posted and not yet answered (jax-js's pool answers each init / kernel / routine message once). */
  private pending = 0;

  constructor(url: string | URL) {
    this.worker = new NodeWorker(BOOTSTRAP, { eval: true });
    // Ref while busy: a thread keeps the process alive only while it owes an answer, so a script that awaits a
    // kernel is not cut short, and one that is done exits (idle threads used to hold every library script open).
    // The listeners go on first: attaching a message listener refs the worker's port again.
    this.worker.on("message", (data: unknown) => {
      this.pending = Math.max(0, this.pending - 1);
      if (this.pending === 0) this.worker.unref();
      this.onmessage?.({ data });
    });
    this.worker.on("error", (err: Error) => {
      this.pending = 0;
      this.worker.unref();
      this.onerror?.({ message: err.message });
    });
    this.worker.unref();
    const blob = resolveObjectURL(String(url));
    if (!blob) throw new Error(`threads shim: cannot resolve worker source ${String(url)}`);
    void blob.text().then((src) => {
      this.worker.postMessage(src);
      const queued = this.queue ?? [];
      this.queue = null;
      for (const m of queued) this.worker.postMessage(m);
    });
  }

  postMessage(message: unknown): void {
    if (this.pending++ === 0) this.worker.ref();
    if (this.queue) this.queue.push(message);
    else this.worker.postMessage(message);
  }

  terminate(): void {
    void this.worker.terminate();
  }
}

/** Number of threads jax-js will use (1 = single-threaded, shim not installed). */
export const jaxThreads: number = (() => {
  const env = process.env.ARL_JAX_THREADS;
  const n = env === undefined || env === "" ? availableParallelism() : Math.max(0, Math.trunc(Number(env)));
  return Number.isFinite(n) && n > 1 ? n : 1;
})();

const g = globalThis as Record<string, unknown>;
if (jaxThreads > 1 && typeof g.Worker === "undefined" && typeof SharedArrayBuffer !== "undefined") {
  g.Worker = ShimWorker;
  // jax-js sizes its pool from navigator.hardwareConcurrency (absent before Node 21 → it would use 4).
  const nav = g.navigator as { hardwareConcurrency?: number } | undefined;
  if (nav === undefined) g.navigator = { hardwareConcurrency: jaxThreads };
  else if (nav.hardwareConcurrency !== jaxThreads) {
    try {
      Object.defineProperty(nav, "hardwareConcurrency", { value: jaxThreads, configurable: true });
    } catch {
      // Read-only navigator: jax-js then uses the platform's count, which is also fine.
    }
  }
}
