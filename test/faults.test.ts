/**
 * Issue 5 (rollouts): agentic RL keeps training through failing tools and loses nothing. Each fault kind at a 30 %
 * rate goes through a full rollout batch (8 tasks × 4 members, a scripted agent that searches then answers): the
 * batch finishes within its deadline, every episode is accounted for, faults become error observations priced by
 * the `tool_error` term. Failure modes from verl #3070, verl #2445, verl PR #1948, AReaL PR #892, TRL #5144.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { tool } from "../src/env/tool.ts";
import type { Task, Trajectory } from "../src/core/types.ts";
import { FAULT_KINDS, withFaults, type FaultKind, type FaultOptions, type FaultRecord } from "../src/env/faults.ts";
import { SearchEnv, searchEnvFactory, type SearchEnvConfig } from "../src/envs/search/env.ts";
import { buildWorld, worldTexts } from "../src/envs/search/world.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { ScriptedAgent, type TurnGenerator } from "../src/rollout/agent.ts";
import { rolloutBatch, rolloutGroups, rolloutMetrics, runEpisode, type RolloutBatch } from "../src/rollout/rollout.ts";
import { computeReward, rewardGroups } from "../src/reward/compose.ts";
import { assertTrajectory, trajectoryToDatum } from "../src/algo/datum.ts";
import { resolveConfig } from "../src/train/config.ts";
import { applyOverrides } from "../src/train/configFile.ts";

const world = buildWorld({ seed: 0, numCountries: 12 });
const index = new BM25Index([...world.passages]);
const tok = WordTokenizer.fromTexts([...worldTexts(world), "question : Doc ( Title : ) error tool search : injected fault fail"]);
const tasks = world.train.slice(0, 8);
const GROUP = 4;
const EPISODES = tasks.length * GROUP;
const limits = { contextLength: 256, maxObservationTokens: 96 };
/** Searches the question, then answers the gold (so every episode that runs to its end answers). */
const agent = new ScriptedAgent(tok, (ctx) => (ctx.turnIndex === 0 ? `<search> ${ctx.task.question} </search>` : `<answer> ${ctx.task.answers[0]} </answer>`));
/** Per-attempt tool timeout of these tests (ms): a hang costs this much. */
const TIMEOUT_MS = 200;
/** The batch's per-episode deadline (ms). */
const DEADLINE_MS = 5_000;

/** A factory of search envs whose tools are wrapped with `faults`; `injected` collects every env's faults. */
function faultyEnvs(faults: FaultOptions, extra: Partial<SearchEnvConfig> = {}) {
  const injected: FaultRecord[][] = [];
  const makeEnv = () =>
    new SearchEnv({
      retriever: index,
      topK: 3,
      maxTurns: 4,
      timeoutMs: TIMEOUT_MS,
      backoffMs: 5,
      ...extra,
      wrapTool: (t) => {
        const f = withFaults(t, faults);
        injected.push(f.injected);
        return f;
      },
    });
  return { makeEnv, injected: () => injected.flat() };
}

async function runBatch(kind: FaultKind | readonly FaultKind[], opts: { seed?: number; retries?: number; maxConcurrency?: number } = {}) {
  const kinds = typeof kind === "string" ? [kind] : kind;
  const { makeEnv, injected } = faultyEnvs({ rate: 0.3, kinds, seed: opts.seed ?? 7, slowMs: 50 }, { retries: opts.retries ?? 0 });
  const t0 = performance.now();
  const batch = await rolloutBatch(tasks, { makeEnv, agent, tokenizer: tok, limits }, { groupSize: GROUP, seed: 1, episodeDeadlineMs: DEADLINE_MS, minGroupSize: 2 });
  const wallMs = performance.now() - t0;
  await rewardGroups(batch.groups, { weights: { em: 1, tool_error: 0.1 } });
  return { batch, wallMs, injected: injected(), trajs: batch.groups.flatMap((g) => g.trajectories) };
}

const errorsOf = (t: Trajectory) => t.turns.filter((x) => x.toolError !== undefined);
const term = (t: Trajectory, name: string) => t.reward!.terms.find((x) => x.name === name)!;
const expectedKind: Record<FaultKind, string | null> = { fail: "error", hang: "timeout", slow: null, garbage: "invalid_output", huge: "oversize" };
const faultSet = (b: RolloutBatch) => b.groups.flatMap((g) => g.trajectories.filter((t) => errorsOf(t).length > 0).map((t) => `${t.task.id}#${t.member}`));

describe("fault injection through a full rollout batch (each kind at 30 %)", () => {
  it.each(FAULT_KINDS.map((k) => [k]))("%s: completes within the deadline, every episode accounted for, penalties applied", async (kind) => {
    const { batch, wallMs, injected, trajs } = await runBatch(kind);
    // Every episode accounted for: all of them finished (nothing dropped), every one answered.
    expect(trajs.length + batch.dropped.length).toBe(EPISODES);
    expect(batch.dropped).toEqual([]);
    expect(trajs.every((t) => t.answer !== null && t.endedBy === undefined)).toBe(true);
    // Within its deadline: a hang costs one tool timeout, concurrently; huge outputs are 10 MB strings each.
    expect(wallMs).toBeLessThan(DEADLINE_MS);
    if (kind === "hang") expect(wallMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    // About 30 % of the 32 first calls faulted (one search per episode, no retries).
    expect(injected.every((f) => f.kind === kind && f.attempt === 0)).toBe(true);
    expect(injected.length).toBeGreaterThanOrEqual(4);
    expect(injected.length).toBeLessThanOrEqual(18);
    const failed = trajs.flatMap(errorsOf);
    if (expectedKind[kind] === null) {
      expect(failed).toEqual([]); // slow: delayed, then the real result
    } else {
      expect(failed.length).toBe(injected.length);
      expect(new Set(failed.map((x) => x.toolError))).toEqual(new Set([expectedKind[kind]]));
      // The failure is an error observation (capped in tokens), and the episode went on to its answer.
      for (const x of failed) {
        expect(x.observation).toMatch(/^\n\n<information> error : tool search : /); // as the word tokenizer decodes it
        expect(x.observationTokens).toBeLessThanOrEqual(limits.maxObservationTokens);
      }
    }
    // The penalty: tool_error = −(failed calls) per trajectory; total = em − 0.1 × failures.
    for (const t of trajs) {
      expect(term(t, "tool_error").value).toBe(0 - errorsOf(t).length);
      expect(t.reward!.total).toBeCloseTo(term(t, "em").value - 0.1 * errorsOf(t).length, 12);
    }
    expect(rolloutMetrics(batch)).toEqual({ dropped: 0, tool_errors: failed.length / EPISODES });
  });

  it("retries recover retryable failures; plain failures stay errors", async () => {
    const { injected, trajs } = await runBatch("fail", { retries: 2 });
    const first = injected.filter((f) => f.attempt === 0);
    const plain = first.filter((f) => !f.retryable).length;
    expect(first.some((f) => f.retryable)).toBe(true);
    expect(plain).toBeGreaterThan(0);
    // A retryable fault errors only when every attempt (1 + 2 retries) faulted with a retryable fail, or a retry
    // drew a plain one.
    const keysFailedForGood = new Set(
      injected.filter((f) => (f.attempt === 2 && f.retryable) || !f.retryable).map((f) => f.key),
    );
    expect(trajs.flatMap(errorsOf).length).toBe(keysFailedForGood.size);
    expect(keysFailedForGood.size).toBeLessThan(first.length);
  });

  it("is deterministic: the same seed faults the same episodes; another seed, others", async () => {
    const a = await runBatch(["fail", "garbage"], { seed: 3 });
    const b = await runBatch(["fail", "garbage"], { seed: 3 });
    const c = await runBatch(["fail", "garbage"], { seed: 4 });
    expect(faultSet(a.batch)).toEqual(faultSet(b.batch));
    expect(faultSet(a.batch).length).toBeGreaterThan(0);
    expect(faultSet(c.batch)).not.toEqual(faultSet(a.batch));
    expect(a.trajs.map((t) => t.tokens)).toEqual(b.trajs.map((t) => t.tokens));
  });

  it("all kinds mixed, with a per-tool concurrency limit shared by the batch (config path)", async () => {
    const config = resolveConfig(
      applyOverrides({}, { "env.faults.rate": "0.3", "env.faults.slowMs": "20", "env.faults.hugeChars": "1000000", "env.tools.timeoutMs": "100", "env.tools.maxConcurrency": "4" }),
    );
    expect(config.env.faults.kinds).toEqual([...FAULT_KINDS]);
    const makeEnv = searchEnvFactory(index, config.env);
    const t0 = performance.now();
    const batch = await rolloutBatch(tasks, { makeEnv, agent, tokenizer: tok, limits }, { groupSize: GROUP, seed: 2, episodeDeadlineMs: DEADLINE_MS, minGroupSize: 2 });
    expect(performance.now() - t0).toBeLessThan(DEADLINE_MS);
    const trajs = batch.groups.flatMap((g) => g.trajectories);
    expect(trajs.length).toBe(EPISODES);
    expect(trajs.every((t) => t.answer !== null)).toBe(true);
    expect(trajs.flatMap(errorsOf).length).toBeGreaterThan(0);
  });
});

describe("the config's defaults change nothing", () => {
  it("env.tools / env.faults / env.episodeDeadlineMs defaults: the plain call of before; field errors name the field", () => {
    const c = resolveConfig({});
    expect(c.env.tools).toEqual({ timeoutMs: 10000, retries: 0, backoffMs: 100, maxBackoffMs: 5000, maxConcurrency: 0, maxOutputChars: 100000, maxResultBytes: 16 * 1024 * 1024 });
    expect(c.env.faults.rate).toBe(0);
    expect(c.env.episodeDeadlineMs).toBe(0);
    expect(() => resolveConfig({ env: { faults: { rate: 2 } } })).toThrow(/env\.faults\.rate/);
    expect(() => resolveConfig({ env: { faults: { kinds: ["explode"] } } })).toThrow(/env\.faults\.kinds/);
    expect(() => withFaults(agentTool(), { rate: 0.5, kinds: ["explode" as FaultKind] })).toThrow('faults.kinds: unknown kind "explode"; allowed: fail, hang, slow, garbage, huge');
  });
});

/** A trivial tool for option checks. */
function agentTool() {
  return tool({ name: "t", description: "", inputSchema: z.object({}), execute: () => 1 });
}

describe("nothing vanishes: failed episodes are dropped with their reason", () => {
  /** Throws on task 0 always, on the first 3 episodes of task 1 and the first of task 2 (counted per task). */
  class FlakyAgent implements TurnGenerator {
    private readonly seen = new Map<string, number>();
    async generate(context: number[], ctx: Parameters<TurnGenerator["generate"]>[1]) {
      if (ctx.turnIndex === 0) {
        const n = this.seen.get(ctx.task.id) ?? 0;
        this.seen.set(ctx.task.id, n + 1);
        const limit = ctx.task.id === tasks[0].id ? Infinity : ctx.task.id === tasks[1].id ? 3 : ctx.task.id === tasks[2].id ? 1 : 0;
        if (n < limit) throw new Error("sampler: HTTP 500");
      }
      return agent.generate(context, ctx);
    }
  }
  const makeEnv = () => new SearchEnv({ retriever: index, topK: 3, maxTurns: 4 });

  it("rolloutBatch counts every episode: kept groups + dropped (with reasons) = tasks × groupSize", async () => {
    const batch = await rolloutBatch(tasks, { makeEnv, agent: new FlakyAgent(), tokenizer: tok, limits }, { groupSize: GROUP, seed: 1, minGroupSize: 2 });
    const kept = batch.groups.flatMap((g) => g.trajectories);
    expect(kept.length + batch.dropped.length).toBe(EPISODES);
    const reasons = (id: string) => batch.dropped.filter((d) => d.taskId === id).map((d) => d.reason).sort();
    expect(reasons(tasks[0].id)).toEqual(Array(4).fill("generator_error"));
    expect(reasons(tasks[1].id)).toEqual(["generator_error", "generator_error", "generator_error", "group_incomplete"]);
    expect(reasons(tasks[2].id)).toEqual(["generator_error"]);
    expect(batch.dropped[0].error).toMatch(/^rollout: generator on task .* turn 0: sampler: HTTP 500$/);
    // Task 2's group trains on its 3 remaining members; tasks 0 and 1 are gone; the rest are whole.
    expect(batch.groups.map((g) => g.task.id)).toEqual(tasks.slice(2).map((t) => t.id));
    expect(batch.groups[0].trajectories.length).toBe(3);
    expect(rolloutMetrics(batch)).toEqual({ dropped: 9, "dropped/generator_error": 8, "dropped/group_incomplete": 1, tool_errors: 0 });
  });

  it("rolloutGroups (callers that need every episode) throws after the batch, naming each failed episode", async () => {
    await expect(rolloutGroups(tasks.slice(0, 1), { makeEnv, agent: new FlakyAgent(), tokenizer: tok, limits }, { groupSize: 2, seed: 1 })).rejects.toThrow(
      new RegExp(`^rollout: 2 of 2 episodes failed: ${tasks[0].id.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}#0 \\(generator_error\\)`),
    );
    const bad: Task = { ...tasks[0], id: "bad", question: "   " };
    const b = await rolloutBatch([bad], { makeEnv, agent, tokenizer: tok, limits }, { groupSize: 1, seed: 1 });
    expect(b.dropped).toMatchObject([{ taskId: "bad", member: 0, reason: "env_reset_error" }]);
  });
});

describe("per-episode deadline (verl #2445: a multi-turn rollout never finishes)", () => {
  it("a tool that hangs past a long timeout is cut at the episode deadline; the episode ends truncated", async () => {
    const { makeEnv } = faultyEnvs({ rate: 1, kinds: ["hang"] }, { timeoutMs: 60_000 });
    const t0 = performance.now();
    const batch = await rolloutBatch(tasks.slice(0, 2), { makeEnv, agent, tokenizer: tok, limits }, { groupSize: 2, seed: 1, episodeDeadlineMs: 150 });
    expect(performance.now() - t0).toBeLessThan(2_000);
    const trajs = batch.groups.flatMap((g) => g.trajectories);
    expect(trajs.length).toBe(4);
    for (const t of trajs) {
      expect(t).toMatchObject({ truncated: true, endedBy: "deadline", answer: null });
      expect(t.turns.map((x) => x.toolError)).toEqual(["deadline"]);
      expect(t.turns[0].observation).toBe(""); // nothing appended after the deadline
      assertTrajectory(t);
    }
    const r = await computeReward(trajs[0], { weights: { tool_error: 1 } });
    expect(r.total).toBe(-1);
  });

  it("a slow policy that never answers is stopped by the deadline between turns", async () => {
    const slowSearcher: TurnGenerator = {
      generate: async (context, ctx) => {
        await new Promise((r) => setTimeout(r, 40));
        return agent.generate(context, { ...ctx, turnIndex: 0 });
      },
    };
    const env = () => new SearchEnv({ retriever: index, topK: 1, maxTurns: 1000 });
    const t = await runEpisode(tasks[0], { makeEnv: env, agent: slowSearcher, tokenizer: tok, limits: { contextLength: 100_000, maxObservationTokens: 16 } }, 1, { deadlineMs: 150 });
    expect(t).toMatchObject({ truncated: true, endedBy: "deadline" });
    expect(t.turns.length).toBeGreaterThanOrEqual(2);
    expect(t.turns.length).toBeLessThanOrEqual(6);
  });
});

describe("token integrity (TRL #5144: trained tokens drift from the sampled ones)", () => {
  it("the tokens trained on are exactly the tokens sampled; a mismatch names the trajectory and position", async () => {
    const batch = await rolloutBatch(tasks.slice(0, 1), { makeEnv: () => new SearchEnv({ retriever: index }), agent, tokenizer: tok, limits }, { groupSize: 2, seed: 1 });
    const t = batch.groups[0].trajectories[1];
    expect(t.member).toBe(1);
    expect(t.sampled!.map((s) => s.tokens.length)).toEqual(t.turns.map((x) => x.sampledTokens));
    assertTrajectory(t);
    const d = trajectoryToDatum(t, 1);
    expect(d.targetTokens).toEqual(t.tokens.slice(1));
    // Corrupt one sampled position (as a re-tokenisation would): the check names task, member, position, tokens.
    const pos = t.sampled![1].start + 1;
    const corrupted = { ...t, tokens: t.tokens.map((x, i) => (i === pos ? x + 1 : x)) };
    const msg = `token integrity: trajectory ${t.task.id}#1 position ${pos}: trained token ${t.tokens[pos] + 1}, sampled ${t.tokens[pos]}`;
    expect(() => assertTrajectory(corrupted)).toThrow(msg);
    expect(() => trajectoryToDatum(corrupted, 1)).toThrow(msg);
    // A shortened trajectory lost sampled tokens: caught too.
    const cut = { ...t, tokens: t.tokens.slice(0, -1), lossMask: t.lossMask.slice(0, -1), logprobs: t.logprobs.slice(0, -1) };
    expect(() => assertTrajectory(cut)).toThrow(/^token integrity: trajectory .*#1 position \d+: trained token undefined, sampled \d+$/);
  });
});
