/**
 * Memory soak of the embedded backend under an RL-like workload: each iteration samples 4 turns for 128 episodes
 * with growing prompts (observations appended), computes reference logprobs, runs 2 PPO(+KL) minibatch updates
 * and one SFT update, then prints the wasm heap. The heap should plateau after the first iteration (jax-js keeps
 * freed buffers for reuse; it can never exceed 4 GiB).
 *
 *   node --import tsx bench/memory-soak.ts [dModel,nLayers,nHeads] [iterations]     (default 96,2,4 and 6)
 */
import { Rng } from "../src/core/rng.ts";
import type { Datum } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { wasmHeapBytes } from "../src/policy/embedded/jax.ts";
import type { SampledSequence } from "../src/core/sampling.ts";

const [D, L, H] = (process.argv[2] ?? "96,2,4").split(",").map(Number);
const iterations = Number(process.argv[3] ?? 6);
const V = 900;
const C = 256;
const gpt = { vocabSize: V, contextLength: C, dModel: D, nLayers: L, nHeads: H };
const policy = await EmbeddedBackend.create(gpt, 0);
const reference = await EmbeddedBackend.create(gpt, 0);
const client = policy.samplingClient();
const rng = new Rng(3);
const t0 = performance.now();
for (let it = 0; it < iterations; it++) {
  const ctx = Array.from({ length: 128 }, () => Array.from({ length: 60 + rng.int(60) }, () => rng.int(V)));
  for (let turn = 0; turn < 4; turn++) {
    const outs = await Promise.all(
      ctx.map((c, i): Promise<SampledSequence[]> =>
        c.length >= C
          ? Promise.resolve([{ tokens: [], logprobs: [], stopReason: "context" }])
          : client.sample(c, { n: 1, maxTokens: 16, temperature: 1, seed: it * 1000 + i * 10 + turn, stop: [5] }),
      ),
    );
    outs.forEach(([o], i) => {
      ctx[i].push(...o.tokens);
      const obs = Array.from({ length: 10 + rng.int(40) }, () => rng.int(V));
      ctx[i].push(...obs.slice(0, Math.max(0, C - ctx[i].length)));
    });
  }
  const datums: Datum[] = ctx.map((t) => ({
    modelInput: t.slice(0, -1),
    targetTokens: t.slice(1),
    weights: t.slice(1).map(() => (rng.next() < 0.3 ? 1 : 0)),
    logprobs: t.slice(1).map(() => -2),
    advantages: t.slice(1).map(() => rng.next() - 0.5),
  }));
  const refLp = await reference.computeLogprobs(datums);
  datums.forEach((d, i) => (d.refLogprobs = refLp[i]));
  for (let mb = 0; mb < 2; mb++) {
    await policy.forwardBackward(datums.slice(mb * 64, mb * 64 + 64), "ppo", { klCoef: 0.01 });
    await policy.optimStep({ learningRate: 1e-3, gradClip: 1 });
  }
  await policy.forwardBackward(
    datums.slice(0, 32).map((d) => ({ ...d, weights: d.weights.map(() => 1) })),
    "cross_entropy",
  );
  await policy.optimStep({ learningRate: 1e-3 });
  const lens = ctx.map((c) => c.length);
  console.log(
    `iteration ${it}: heap ${(wasmHeapBytes() / 2 ** 20).toFixed(0)} MB, ${((performance.now() - t0) / 1000).toFixed(0)} s, ` +
      `sequence lengths ${Math.min(...lens)}–${Math.max(...lens)}`,
  );
}
process.exit(0);
