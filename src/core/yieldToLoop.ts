/**
 * Lets the event loop turn during long stretches of promise-chained work. Awaiting a promise that is already resolved
 * (a synchronous tool, a scripted agent) runs as a microtask, and the event loop — timers, I/O, and the signal
 * handlers of src/cli/interrupt.ts — only runs once the microtask queue is empty. The warm start's demonstrations are
 * all such work, so Ctrl-C during them was handled only after the whole warm start (45 s later in issue 29's probe,
 * SIGTERM not for 90–170 s).
 */

/**
 * Loop turns are taken only inside `withLoopTurns` scopes: work whose results cannot depend on when the loop turns.
 * A batching sampler (src/policy/embedded/sampler.ts) batches the calls made before its next `setImmediate`, so a
 * turn taken at a wall-clock moment in an RL rollout could split a batch and change the logits' float noise; that
 * sampler turns the loop itself between its decode steps anyway.
 */
let scopes = 0;

/**
 * Runs `work` with loop turns on (process-wide, for its duration; scopes nest): `loopTurnDue` may then ask callers to
 * let the event loop turn. For work with no batching sampler, e.g. rollouts of scripted agents (the warm start's
 * demonstrations, a scripted baseline's evaluation).
 * @returns what `work` returns (its rejection too)
 */
export async function withLoopTurns<T>(work: () => Promise<T>): Promise<T> {
  scopes++;
  try {
    return await work();
  } finally {
    scopes--;
  }
}

/** How long promise-chained work may hold the event loop before `loopTurnDue` asks it to let the loop turn (ms). */
export const LOOP_TURN_MS = 50;

let lastTurn = performance.now();
let pending: Promise<void> | null = null;

/**
 * Undefined outside a `withLoopTurns` scope, or while the event loop turned within the last `LOOP_TURN_MS` ms, else a promise that resolves once it has
 * turned (a `setImmediate`, after timers, I/O and signals). Every caller that asks while a turn is pending gets that
 * same promise, so concurrent workers (e.g. a rollout's episodes) all park at their next boundary and the microtask
 * queue empties. Call it at a boundary of long work and await only a promise: `const t = loopTurnDue(); if (t) await
 * t;` — nothing is awaited when no turn is due. A turn may change which of several concurrent tasks runs first, never
 * what each computes (a rollout's results are placed by index and independent of completion order).
 */
export function loopTurnDue(): Promise<void> | undefined {
  if (pending !== null) return pending;
  if (scopes === 0) return undefined;
  if (performance.now() - lastTurn < LOOP_TURN_MS) return undefined;
  pending = new Promise<void>((resolve) =>
    setImmediate(() => {
      pending = null;
      lastTurn = performance.now();
      resolve();
    }),
  );
  return pending;
}
