/**
 * What a recipe's world and tasks are drawn with: one independent seeded stream per purpose (`worldStream(seed,
 * "tickets")`), a string hash for deterministic choices such as which tasks are held out, checked split sizes and the
 * draw of distinct train and test tasks.
 */
import { Rng } from "../core/rng.ts";
import type { Task } from "../core/types.ts";

/**
 * 32-bit FNV-1a of a string, over the first UTF-16 unit of each code point (as every built-in world has drawn it).
 * @returns an integer in [0, 2³²)
 */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (const ch of s) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

/**
 * A stream of a world's randomness for one `purpose`: FNV-1a of the purpose mixed with the seed (truncated to an
 * integer), so each draw of a world is independent of the others and adding one leaves the rest unchanged.
 */
export function worldStream(seed: number, purpose: string): Rng {
  return new Rng((fnv1a(purpose) ^ Math.imul(Math.trunc(seed) >>> 0, 0x9e3779b1)) >>> 0);
}

/**
 * `value` when it is an integer in `[min, max]`. @throws Error `<name> must be an integer in [min, max], got <value>`
 */
export function taskCount(name: string, value: number, [min, max]: readonly [number, number]): number {
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer in [${min}, ${max}], got ${value}`);
  return value;
}

/** A drawn task: its split, a signature no other task may share (e.g. its text) and the task at index `n` of it. */
export interface SplitCandidate<D> {
  held: boolean;
  signature: string;
  task(split: "train" | "test", n: number): Task<D>;
}

/**
 * `numTrain` training and `numTest` held-out tasks, drawn one candidate at a time (`draw`: undefined when a draw fails)
 * and kept while its split has room and its signature is new; after 200 tries per task the splits stay short.
 */
export function drawSplit<D>(numTrain: number, numTest: number, draw: () => SplitCandidate<D> | undefined): { train: Task<D>[]; test: Task<D>[] } {
  const out = { train: [] as Task<D>[], test: [] as Task<D>[] };
  const seen = new Set<string>();
  for (let tries = 0; (out.train.length < numTrain || out.test.length < numTest) && tries < 200 * (numTrain + numTest); tries++) {
    const c = draw();
    if (c === undefined) continue;
    const split = c.held ? "test" : "train";
    if (out[split].length >= (c.held ? numTest : numTrain) || seen.has(c.signature)) continue;
    seen.add(c.signature);
    out[split].push(c.task(split, out[split].length));
  }
  return out;
}
