/**
 * A small seeded pseudo-random generator (SplitMix32 seeding + Mulberry32 stream) whose whole state is one
 * 32-bit integer, so it can be saved in a checkpoint and restored exactly. Used for data order, task sampling and
 * sampler seeds — never for cryptography.
 */
export class Rng {
  private state: number;

  /** @param seed any finite number; non-integers are truncated. */
  constructor(seed: number) {
    this.state = Rng.mix(Math.trunc(seed) >>> 0);
  }

  /** SplitMix32-style finaliser so nearby seeds give unrelated streams. */
  private static mix(x: number): number {
    x = (x + 0x9e3779b9) >>> 0;
    x = Math.imul(x ^ (x >>> 16), 0x85ebca6b) >>> 0;
    x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35) >>> 0;
    return (x ^ (x >>> 16)) >>> 0;
  }

  /** Uniform float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in [0, n). @throws Error when n is not a positive integer */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0) throw new Error(`Rng.int: n must be a positive integer, got ${n}`);
    return Math.floor(this.next() * n);
  }

  /** A fresh 31-bit seed for a child generator or a sampler call. */
  seed(): number {
    return Math.floor(this.next() * 0x7fffffff);
  }

  /** One element chosen uniformly. @throws Error on an empty array */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("Rng.pick: empty array");
    return items[this.int(items.length)];
  }

  /** A shuffled copy (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }

  /** The whole generator state (for checkpoints). */
  getState(): number {
    return this.state;
  }

  /** Restores a state returned by `getState`. */
  setState(state: number): void {
    this.state = state >>> 0;
  }
}
