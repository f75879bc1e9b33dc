/**
 * One token drawn from a row of logits, as every sampling engine draws it (`BatchedSampler`): inverse-CDF sampling
 * at a temperature with one `rng.next()`, computed in float64, so the same seed and logits give the same token on the
 * jax-js and ONNX engines.
 */
import type { Rng } from "../../core/rng.ts";

/** Draws tokens from rows of logits over a vocabulary of `vocabSize`, with a reusable `[V]` float64 workspace. */
export class TokenSampler {
  private readonly scratch: Float64Array;

  /** @param vocabSize V, the length of a logits row */
  constructor(readonly vocabSize: number) {
    this.scratch = new Float64Array(vocabSize);
  }

  /**
   * Draws one token from the logits row `logits[offset .. offset+V)` at `temperature` (0 = greedy: the first
   * maximum) by inverse-CDF sampling with one `rng.next()`; computed in float64.
   * @returns the token and its logprob (nats) under softmax(logits / temperature), the distribution sampled from;
   *   for greedy, under softmax(logits)
   */
  draw(logits: Float32Array, offset: number, temperature: number, rng: Rng): { token: number; logprob: number } {
    const V = this.vocabSize;
    const scratch = this.scratch;
    const inv = temperature > 0 ? 1 / temperature : 1;
    let m = -Infinity;
    let arg = 0;
    for (let i = 0; i < V; i++) {
      const x = logits[offset + i];
      if (x > m) {
        m = x;
        arg = i;
      }
    }
    let z = 0;
    for (let i = 0; i < V; i++) {
      const e = Math.exp((logits[offset + i] - m) * inv);
      scratch[i] = e;
      z += e;
    }
    let token = arg;
    if (temperature > 0) {
      const u = rng.next() * z;
      let acc = 0;
      token = -1;
      for (let i = 0; i < V; i++) {
        acc += scratch[i];
        if (acc > u) {
          token = i;
          break;
        }
      }
      // Float rounding can leave u ≥ acc; fall back to the last token with mass.
      if (token < 0) for (let i = V - 1; i >= 0 && token < 0; i--) if (scratch[i] > 0) token = i;
    }
    return { token, logprob: (logits[offset + token] - m) * inv - Math.log(z) };
  }
}
