/**
 * Finding NaN / ±Infinity in results before they leave a component: `JSON.stringify` turns both into `null`, so a
 * broken loss would otherwise reach a client as `{"loss:sum": null}` and look like a success.
 */

/** Where the first non-finite number of a value sits, and what it is. */
export interface NonFiniteAt {
  /** Dotted path with indices, e.g. `metrics.loss:sum` or `loss_fn_outputs[0].logprobs.data[3]`. */
  path: string;
  /** The number found: NaN, Infinity or -Infinity. */
  value: number;
}

/**
 * The first NaN / ±Infinity in a JSON-like value (numbers, arrays, typed arrays, plain objects), depth first in
 * document order. Iterative, so deeply nested input cannot overflow the stack.
 * @param value what to search
 * @param root the path prefix of `value` (e.g. `"metrics"`)
 * @returns where the first one is, or undefined when every number is finite
 */
export function firstNonFinite(value: unknown, root = ""): NonFiniteAt | undefined {
  const stack: Array<[unknown, string]> = [[value, root]];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === "number") {
      if (!Number.isFinite(v)) return { path, value: v };
    } else if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      const xs = v as unknown as ArrayLike<number | bigint>;
      for (let i = 0; i < xs.length; i++) {
        const x = xs[i];
        if (typeof x === "number" && !Number.isFinite(x)) return { path: `${path}[${i}]`, value: x };
      }
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v !== null && typeof v === "object") {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i][1], path ? `${path}.${entries[i][0]}` : entries[i][0]]);
    }
  }
  return undefined;
}

/**
 * A computation whose result (a loss, a logprob, updated weights or optimizer state) came out NaN or ±Infinity and
 * was therefore refused: the state it would have changed is left as it was. `what` names the offending values.
 */
export class NonFiniteError extends Error {
  /**
   * @param what the non-finite values, e.g. `["loss (NaN)"]` or `["params.blocks.0.w1", "adam.v.wte"]`
   * @param message the full reason
   */
  constructor(
    readonly what: string[],
    message: string,
  ) {
    super(message);
    this.name = "NonFiniteError";
  }
}
