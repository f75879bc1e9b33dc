import { describe, expect, it } from "vitest";
import type { Task, Trajectory, TrajectoryGroup } from "../src/core/types.ts";
import { SearchEnv, type SearchTool } from "../src/envs/search/env.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../src/core/sampling.ts";
import { PolicyAgent } from "../src/rollout/agent.ts";
import { LaneGate } from "../src/rollout/lanes.ts";
import { episodeSeed, rolloutBatch, type RolloutBatch } from "../src/rollout/rollout.ts";
import { retriever, tok } from "./toy-search.ts";

const tasks: Task[] = Array.from({ length: 4 }, (_, i) => ({
  id: `t${i}`,
  question: "what is the capital of france ?",
  answers: ["paris"],
  kind: "single-hop",
  known: false,
}));
const GROUP = 4;
const stop = [tok.id("</search>"), tok.id("</answer>")];
const endSearch = tok.id("</search>");
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The turn an episode writes: it searches 1–3 times (fixed by its seed), then answers. The turn index is the number
 * of searches already in the context; the episode seed is the call's seed minus it (the rollout passes seed + turn).
 */
function script(prompt: readonly number[], seed: number): number[] {
  const turn = prompt.filter((t) => t === endSearch).length;
  const searches = 1 + ((seed - turn) % 3);
  return tok.encode(turn < searches ? "<search> france capital </search>" : "<answer> paris </answer>");
}

/**
 * A batching sampler like the embedded one (calls made before its next `setImmediate` form one batch) that writes
 * scripted turns and records each batch's call seeds. With `noise`, a logprob depends on the batch's size — as the
 * float noise of real logits depends on batch composition — so a timing-dependent batch shows in the trajectories.
 */
class FakeBatchSampler implements SamplingClient {
  batches: number[][] = [];
  private queue: Array<{ prompt: number[]; opts: SampleOptions; resolve: (r: SampledSequence[]) => void }> = [];
  constructor(private readonly noise: boolean) {}
  sample(prompt: number[], opts: SampleOptions): Promise<SampledSequence[]> {
    return new Promise((resolve) => {
      if (this.queue.length === 0) setImmediate(() => this.flush());
      this.queue.push({ prompt, opts, resolve });
    });
  }
  private flush(): void {
    const q = this.queue;
    this.queue = [];
    this.batches.push(q.map((r) => r.opts.seed));
    for (const r of q) {
      const tokens = script(r.prompt, r.opts.seed).slice(0, r.opts.maxTokens);
      const lp = this.noise ? -0.01 * q.length : -0.1;
      r.resolve([{ tokens, logprobs: tokens.map(() => lp), stopReason: "stop" }]);
    }
  }
}

/** A deterministic latency per tool call (ms): 0 for salt 0, else 0, 8, 16 or 24 ms by a hash of (salt, call key). */
function delayOf(salt: number, key: string): number {
  if (salt === 0) return 0;
  let h = 0x811c9dc5 ^ salt;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return ((h >>> 0) % 4) * 8;
}

/** Search envs whose tool waits `delayOf(salt, callKey)` before the real search. */
function makeEnv(salt: number) {
  const jitter = (t: SearchTool): SearchTool => ({
    ...t,
    execute: async (input, ctx) => {
      const d = delayOf(salt, ctx.callKey ?? "");
      if (d > 0) await sleep(d);
      return t.execute(input, ctx);
    },
  });
  return () => new SearchEnv({ retriever, topK: 1, maxTurns: 4, wrapTool: jitter });
}

const limits = { contextLength: 256, maxObservationTokens: 64 };

async function runFake(lanes: number, salt: number, noise = true): Promise<{ batch: RolloutBatch; batches: number[][] }> {
  const sampler = new FakeBatchSampler(noise);
  const agent = new PolicyAgent(sampler, tok, { temperature: 1, maxTokensPerTurn: 16, stop });
  const batch = await rolloutBatch(tasks, { makeEnv: makeEnv(salt), agent, tokenizer: tok, limits }, { groupSize: GROUP, seed: 11, lanes });
  return { batch, batches: sampler.batches };
}

/** Every trajectory of a batch, in (task, member) order. */
const trajs = (groups: TrajectoryGroup[]): Trajectory[] => groups.flatMap((g) => g.trajectories);
/** Batches as sorted seed lists, in a canonical order (rounds of different lanes may run in either order). */
const canon = (batches: number[][]): string[] => batches.map((b) => JSON.stringify([...b].sort((x, y) => x - y))).sort();

describe("sampling lanes", () => {
  it("without lanes, tool timing changes which episodes share a batch, and with it the trajectories", async () => {
    const calm = await runFake(0, 0);
    const jittered = await runFake(0, 1);
    expect(calm.batches.length).toBe(4); // one batch per turn (up to 3 searches + the answer): tools return in one tick
    expect(jittered.batches.length).toBeGreaterThan(4);
    expect(trajs(jittered.batch.groups)).not.toEqual(trajs(calm.batch.groups));
  });

  for (const lanes of [1, 2, 3]) {
    it(`lanes = ${lanes}: the same batches and trajectories whatever the tool timing`, async () => {
      const runs = [await runFake(lanes, 0), await runFake(lanes, 1), await runFake(lanes, 2), await runFake(lanes, 1)];
      for (const r of runs) {
        expect(r.batch.dropped).toEqual([]);
        expect(trajs(r.batch.groups)).toEqual(trajs(runs[0].batch.groups));
        expect(canon(r.batches)).toEqual(canon(runs[0].batches));
      }
      // Each batch is one turn of one lane's live episodes (job i is in lane i % lanes).
      const jobOf = new Map<number, number>();
      tasks.forEach((_, t) => {
        for (let m = 0; m < GROUP; m++) for (let turn = 0; turn < 4; turn++) jobOf.set(episodeSeed(11, t, m) + turn, t * GROUP + m);
      });
      for (const b of runs[0].batches) expect(new Set(b.map((seed) => jobOf.get(seed)! % lanes)).size).toBe(1);
      expect(runs[0].batches.length).toBeGreaterThanOrEqual(lanes * 2);
      const turns = trajs(runs[0].batch.groups).map((t) => t.turns.length);
      expect(turns.reduce((a, b) => a + b, 0)).toBe(runs[0].batches.reduce((a, b) => a + b.length, 0));
    });
  }

  it("lanes change nothing but batch composition: with composition-independent logits, trajectories equal lanes off", async () => {
    const off = await runFake(0, 0, false);
    for (const lanes of [1, 2, 4]) {
      const on = await runFake(lanes, 2, false);
      expect(trajs(on.batch.groups)).toEqual(trajs(off.batch.groups));
    }
  });

  it("an episode that throws or ends early leaves its lane; the others finish", async () => {
    const sampler = new FakeBatchSampler(true);
    const inner = new PolicyAgent(sampler, tok, { temperature: 1, maxTokensPerTurn: 16, stop });
    // Member 1 of task 0 fails at its second turn; task 2's env cannot even start.
    const agent = {
      generate: (ctx: number[], c: Parameters<PolicyAgent["generate"]>[1]) =>
        c.task.id === "t0" && c.turnIndex === 1 && c.seed % 2 === 0 ? Promise.reject(new Error("boom")) : inner.generate(ctx, c),
    };
    const env = makeEnv(1);
    const factory = (() => {
      let n = 0;
      return () => {
        const e = env();
        const k = n++;
        if (k >= 8 && k < 12) throw new Error("no env");
        return e;
      };
    })();
    const batch = await rolloutBatch(tasks, { makeEnv: factory, agent, tokenizer: tok, limits }, { groupSize: GROUP, seed: 11, lanes: 2 });
    const reasons = batch.dropped.map((d) => d.reason);
    expect(reasons.filter((r) => r === "env_reset_error").length).toBe(4);
    const failing = Array.from({ length: GROUP }, (_, m) => episodeSeed(11, 0, m) + 1).filter((seed) => seed % 2 === 0).length;
    expect(failing).toBeGreaterThan(0);
    expect(reasons.filter((r) => r === "generator_error").length).toBe(failing);
    expect(batch.groups.reduce((a, g) => a + g.trajectories.length, 0) + batch.dropped.length).toBe(tasks.length * GROUP);
  });

  it("refuses a bad lane count and a concurrency limit below the batch", async () => {
    const agent = new PolicyAgent(new FakeBatchSampler(false), tok, { temperature: 1, maxTokensPerTurn: 16, stop });
    await expect(rolloutBatch(tasks, { makeEnv: makeEnv(0), agent, tokenizer: tok, limits }, { groupSize: GROUP, seed: 1, lanes: 1.5 })).rejects.toThrow(/lanes must be an integer/);
    await expect(rolloutBatch(tasks, { makeEnv: makeEnv(0), agent, tokenizer: tok, limits }, { groupSize: GROUP, seed: 1, lanes: 2, concurrency: 4 })).rejects.toThrow(/concurrency 4 < 16/);
    expect(() => new LaneGate(agent, 0, 4)).toThrow(/lanes must be an integer ≥ 1/);
  });

  it("with the embedded sampler: bit-identical tokens and logprobs across tool timings (lanes = 2)", async () => {
    const backend = new EmbeddedBackend({ vocabSize: tok.vocabSize, contextLength: 256, dModel: 16, nLayers: 1, nHeads: 2 }, { seed: 3 });
    const real = backend.samplingClient();
    const run = async (salt: number) => {
      const inner = new Map<number, SampledSequence>();
      // The real sampler decodes as many tokens as the scripted turn (random weights do not search); the turn is
      // the script's tokens with the sampler's logprobs.
      const sampler: SamplingClient = {
        sample: (prompt, opts) => {
          const tokens = script(prompt, opts.seed).slice(0, opts.maxTokens);
          return real.sample(prompt, { ...opts, maxTokens: tokens.length, stop: [] }).then(([s]) => {
            inner.set(opts.seed, s);
            return [{ tokens, logprobs: s.logprobs, stopReason: "stop" as const }];
          });
        },
      };
      const agent = new PolicyAgent(sampler, tok, { temperature: 1, maxTokensPerTurn: 16, stop });
      const batch = await rolloutBatch(tasks, { makeEnv: makeEnv(salt), agent, tokenizer: tok, limits }, { groupSize: GROUP, seed: 5, lanes: 2 });
      return { trajs: trajs(batch.groups), inner: [...inner].sort((a, b) => a[0] - b[0]) };
    };
    const a = await run(0);
    const b = await run(1);
    const c = await run(2);
    expect(a.trajs.length).toBe(tasks.length * GROUP);
    expect(a.trajs.some((t) => t.searches >= 2)).toBe(true);
    expect(b).toEqual(a);
    expect(c).toEqual(a);
  });
});
