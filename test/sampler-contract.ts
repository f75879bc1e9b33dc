/**
 * The rules every embedded sampling engine shares (`BatchedSampler`), checked the same way for each engine: stop
 * token, `maxTokens`, context cap, empty results, bad requests, and seeded samples that do not depend on the batch.
 */
import { expect } from "vitest";
import type { SampledSequence, SampleOptions, SamplingClient } from "../src/core/sampling.ts";

/** A deterministic token sequence of length n over a vocabulary of V ids. */
export function seq(n: number, k: number, V: number): number[] {
  return Array.from({ length: n }, (_, i) => (i * k + 3 + k * k) % V);
}

/** Asserts the shared contract on a model with vocabulary 40 and context 64 (the tests' CFG). */
export async function expectStopAndValidation(client: SamplingClient): Promise<void> {
  const V = 40;
  const s = (n: number): number[] => seq(n, 3, V);
  const all = Array.from({ length: V }, (_, i) => i);
  const [stop] = await client.sample(s(4), { n: 1, maxTokens: 8, temperature: 1, seed: 1, stop: all });
  expect(stop.tokens.length).toBe(1);
  expect(stop.stopReason).toBe("stop");
  const [len] = await client.sample(s(4), { n: 1, maxTokens: 4, temperature: 0.7, seed: 1 });
  expect(len.tokens.length).toBe(4);
  expect(len.stopReason).toBe("length");
  const [ctx] = await client.sample(s(61), { n: 1, maxTokens: 10, temperature: 0, seed: 1 });
  expect(ctx.tokens.length).toBe(3);
  expect(ctx.stopReason).toBe("context");
  const [full] = await client.sample(s(64), { n: 1, maxTokens: 5, temperature: 1, seed: 1 });
  expect(full).toEqual({ tokens: [], logprobs: [], stopReason: "context" });
  const [none] = await client.sample(s(5), { n: 1, maxTokens: 0, temperature: 1, seed: 1 });
  expect(none).toEqual({ tokens: [], logprobs: [], stopReason: "length" });
  const [one] = await client.sample(s(5), { n: 1, maxTokens: 1, temperature: 1, seed: 1 });
  expect(one.tokens).toHaveLength(1);
  await expect(client.sample(s(65), { n: 1, maxTokens: 1, temperature: 1, seed: 1 })).rejects.toThrow(/65 tokens.*64/);
  await expect(client.sample([1, 99], { n: 1, maxTokens: 1, temperature: 1, seed: 1 })).rejects.toThrow(/99 outside/);
  await expect(client.sample([1], { n: 0, maxTokens: 1, temperature: 1, seed: 1 })).rejects.toThrow(/n must be/);
}

/**
 * Asserts that a seeded call (`prompt` with `opts`, n ≥ 2) samples the same tokens alone and batched with the
 * concurrent calls `others`, that the next seed samples others, and that the rows of one call are independent draws.
 * Returns the lone call's samples, for further checks.
 */
export async function expectBatchIndependent(
  client: SamplingClient,
  prompt: number[],
  opts: SampleOptions & { seed: number },
  others: [number[], SampleOptions][],
): Promise<SampledSequence[]> {
  const alone = await client.sample(prompt, opts);
  const [withOthers] = await Promise.all([client.sample(prompt, opts), ...others.map(([p, o]) => client.sample(p, o))]);
  expect(withOthers.map((s) => s.tokens)).toEqual(alone.map((s) => s.tokens));
  const other = await client.sample(prompt, { ...opts, seed: opts.seed + 1 });
  expect(other.map((s) => s.tokens)).not.toEqual(alone.map((s) => s.tokens));
  expect(alone[0].tokens).not.toEqual(alone[1].tokens);
  return alone;
}
