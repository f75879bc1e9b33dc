/**
 * Issue 29 (Ctrl-C during the warm start): a rollout of a scripted agent over a synchronous tool — the warm start's
 * demonstrations — lets the event loop turn while it runs, so signal handlers and timers run within about
 * `LOOP_TURN_MS`, not after the whole batch (SIGINT was handled 45 s late). A timer stands in for the signal: both are
 * delivered only when the loop turns. A generator that may batch (not a `ScriptedAgent`) never gets such a turn, and
 * the trajectories are the same either way.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Task, Trajectory } from "../src/core/types.ts";
import { LOOP_TURN_MS, loopTurnDue, withLoopTurns } from "../src/core/yieldToLoop.ts";
import { tool } from "../src/env/tool.ts";
import { toolEnv } from "../src/env/toolEnv.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { ScriptedAgent, type TurnGenerator } from "../src/rollout/agent.ts";
import { rolloutBatch } from "../src/rollout/rollout.ts";

const busyMs = 4;
// A tool that holds the thread, as the tester's get_weather busy-waiting 40 ms per call.
const busy = tool({ name: "busy", description: "", inputSchema: z.object({}), execute: () => { const end = performance.now() + busyMs; while (performance.now() < end); return { ok: 1 }; } });
const tasks: Task[] = Array.from({ length: 20 }, (_, i) => ({ id: `t${i}`, question: "look it up", answers: [], kind: "k" }));
const env = toolEnv({ protocol: hermesProtocol, instructions: "x", tools: [busy], maxTurns: 4 });
const call = hermesProtocol.format({ type: "tool_call", calls: [{ name: "busy", arguments: {} }] });
const answer = hermesProtocol.format({ type: "answer", answer: "done" });

async function run(scripted: boolean) {
  const prompt = await env().reset(tasks[0]);
  const tok = WordTokenizer.fromTexts([prompt, call, answer, hermesProtocol.observation([{ name: "busy", ok: true, content: '{"ok":1}' }]).text], hermesProtocol.specialTokens);
  const script = new ScriptedAgent(tok, (ctx) => (ctx.turnIndex < 2 ? call : answer));
  const agent: TurnGenerator = scripted ? script : { generate: (c, ctx) => script.generate(c, ctx) };
  let finished = 0;
  let ticks = 0;
  let finishedAtFirstTick = -1;
  const timer = setInterval(() => {
    if (ticks++ === 0) finishedAtFirstTick = finished;
  }, 1);
  try {
    const batch = await rolloutBatch(tasks, { makeEnv: env, agent, tokenizer: tok, limits: { contextLength: 4096, maxObservationTokens: 64 } }, { groupSize: 2, seed: 3, onEpisode: () => finished++ });
    const trajectories = batch.groups.flatMap((g) => g.trajectories);
    return { ticks, finishedAtFirstTick, finished, trajectories };
  } finally {
    clearInterval(timer);
  }
}

/** A trajectory without its wall-clock fields (tool latency). */
const stable = (t: Trajectory) => JSON.parse(JSON.stringify(t, (k, v) => (k === "toolLatencyMs" ? undefined : v)));

describe("long synchronous rollouts let the event loop turn", () => {
  it("a scripted agent's rollout over a busy synchronous tool runs timers (signal handlers) while it goes on", async () => {
    // 40 episodes × 2 calls × 4 ms ≈ 320 ms of held thread, many times LOOP_TURN_MS.
    expect(40 * 2 * busyMs).toBeGreaterThan(4 * LOOP_TURN_MS);
    const r = await run(true);
    expect(r.finished).toBe(40);
    expect(r.ticks, "the loop never turned during the rollout").toBeGreaterThanOrEqual(2);
    expect(r.finishedAtFirstTick).toBeLessThan(40); // the first timer ran before the last episode finished
  });

  it("a generator that may batch gets no turn (its batches stay the same), and the trajectories are the same either way", async () => {
    const plain = await run(false);
    expect(plain.ticks).toBe(0);
    const scripted = await run(true);
    expect(scripted.trajectories.map(stable)).toEqual(plain.trajectories.map(stable));
  });

  it("loopTurnDue asks for a turn only inside withLoopTurns, and then one shared turn", async () => {
    const start = performance.now();
    while (performance.now() - start < LOOP_TURN_MS + 5);
    expect(loopTurnDue()).toBeUndefined();
    await withLoopTurns(async () => {
      const a = loopTurnDue();
      expect(a).toBeInstanceOf(Promise);
      expect(loopTurnDue()).toBe(a); // every caller parks on the same turn
      let ran = false;
      setImmediate(() => (ran = true));
      await a;
      expect(loopTurnDue()).toBeUndefined(); // just turned
      await new Promise((r) => setImmediate(r));
      expect(ran).toBe(true);
    });
  });
});
