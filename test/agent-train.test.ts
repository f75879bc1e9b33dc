/**
 * `trainAgent` end to end: an unchanged agent written with the real `openai` client (one that calls a tool, reads
 * the result and answers) runs G rollouts per task against per-rollout gateway URLs in front of the embedded policy;
 * the trainer grades what the agent answers, computes group advantages and updates the policy, and the next step's
 * rollouts sample from the new weights. Also: an agent as a child process, and an agent that fails.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Task } from "../src/core/types.ts";
import { startGateway, type RunningGateway } from "../src/gateway/server.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import type { AgentFunction } from "../src/external/rollouts.ts";
import { FUNCTION_AGENT_ABORT_GRACE_MS, runAgentRollout, trainAgent } from "../src/external/train.ts";

const weatherTool = { type: "function" as const, function: { name: "get_weather", description: "The weather of a city.", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } };
const cities = ["paris", "oslo", "lima", "rome"];
const tasks: Task[] = cities.map((c) => ({ id: `w:${c}`, question: `What is the weather in ${c} ?`, answers: [`sunny in ${c}`], kind: "weather" }));

/** The user's agent: plain `openai` client code with a tool loop (it knows nothing of agentic-rl). */
const agent: AgentFunction = async ({ baseURL, apiKey, task }) => {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "system", content: "You are a weather assistant." }, { role: "user", content: task.question }];
  for (let turn = 0; turn < 3; turn++) {
    const r = await client.chat.completions.create({ model: "policy", messages, tools: [weatherTool], temperature: 1, max_tokens: 12 });
    const m = r.choices[0].message;
    messages.push(m);
    if (!m.tool_calls?.length) return { answer: m.content ?? "" };
    for (const tc of m.tool_calls) {
      const city = tc.type === "function" ? String((JSON.parse(tc.function.arguments || "{}") as { city?: unknown }).city ?? "") : "";
      messages.push({ role: "tool", tool_call_id: tc.id, content: `sunny in ${city}` });
    }
  }
  return { answer: "" };
};

let gateway: RunningGateway;
let backend: EmbeddedBackend;
let tok: WordTokenizer;

beforeAll(async () => {
  const texts = [hermesProtocol.system([{ name: "get_weather", description: "The weather of a city.", parameters: weatherTool.function.parameters }], "You are a weather assistant."), ...tasks.map((t) => t.question), ...cities.map((c) => `sunny in ${c} .`), `<tool_call>\n{"name": "get_weather", "arguments": {"city": "paris"}}\n</tool_call>`];
  tok = WordTokenizer.fromTexts(texts, hermesProtocol.specialTokens);
  backend = await EmbeddedBackend.create({ vocabSize: tok.vocabSize, contextLength: 384, dModel: 32, nLayers: 1, nHeads: 2 }, 7);
  gateway = await startGateway({ policy: { name: "tiny", sampler: backend.samplingClient(), tokenizer: tok, contextLength: 384, maxTokens: 12 }, seed: 3 });
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  backend?.dispose();
});

/** Reward: the share of the gold answer's words in the agent's answer (graded here; the agent reports nothing). */
const grade = (task: Task, answer: string | undefined) => {
  const want = task.answers[0].split(" ");
  const got = new Set((answer ?? "").toLowerCase().split(/\s+/));
  return want.filter((w) => got.has(w)).length / want.length;
};

describe("trainAgent: RL on an unchanged openai-client agent through the gateway", () => {
  it("rolls out G episodes per task, grades them, updates the policy on exactly the sampled tokens, and serves the new weights", async () => {
    const probe = { modelInput: [1, 2, 3], targetTokens: [2, 3, 4], weights: [1, 1, 1] };
    const before = await backend.computeLogprobs([probe]);
    const records: Array<{ step: number; completion: number[][]; datumTargets: number }> = [];
    const steps = await trainAgent({
      agent, backend, gateway, tasks, grade, steps: 2, tasksPerStep: 2, groupSize: 3, seed: 11, rolloutDeadlineMs: 30_000,
      adam: { learningRate: 3e-3 }, lossFn: "importance_sampling",
      onStep: (step, _m, recs) => {
        records.push({ step, completion: recs.flatMap((r) => r.calls.map((c) => c.completionTokens)), datumTargets: recs.reduce((a, r) => a + r.segments.reduce((b, s) => b + s.lossMask.filter((x) => x === 1).length, 0), 0) });
      },
    });
    expect(steps).toHaveLength(2);
    for (const m of steps) {
      expect(m.rewarded + m.dropped).toBe(6); // 2 tasks × G = 3
      expect(m.dropped).toBe(0);
      expect(m.datums).toBeGreaterThanOrEqual(m.rewarded); // ≥ 1 segment per rollout
    }
    // Every sampled completion token is a trained (masked-in) token of some segment: nothing re-tokenised.
    for (const r of records) expect(r.datumTargets).toBe(r.completion.reduce((a, c) => a + c.length, 0));
    const updated = steps.filter((m) => m["train/loss"] !== undefined);
    expect(updated.length).toBeGreaterThan(0); // an untrained policy's answers differ, so rewards differ within a group
    const after = await backend.computeLogprobs([probe]);
    expect(after[0]).not.toEqual(before[0]);
  }, 120_000);

  it("drops a rollout whose agent fails, with its reason, and trains on the rest", async () => {
    let n = 0;
    const flaky: AgentFunction = async (ctx) => {
      if (n++ % 3 === 0) throw new Error("tool backend down");
      return agent(ctx);
    };
    const [m] = await trainAgent({ agent: flaky, backend, gateway, tasks, grade, steps: 1, tasksPerStep: 1, groupSize: 3, seed: 5, rolloutDeadlineMs: 30_000, adam: { learningRate: 1e-3 },
      onStep: (_s, _m, recs) => expect(recs.filter((r) => r.status === "dropped").map((r) => r.dropReason)).toEqual(["agent threw: tool backend down"]) });
    expect([m.rewarded, m.dropped]).toEqual([2, 1]);
  }, 60_000);

  it("drops a rollout whose agent is still running at its deadline, saying so", async () => {
    const stuck: AgentFunction = (ctx) => new Promise((resolve) => ctx.signal.addEventListener("abort", () => resolve({ answer: "late" }), { once: true }));
    const r = await runAgentRollout({ agent: stuck, gateway, grade, rolloutDeadlineMs: 300 }, "stuck-1", tasks[0]);
    expect([r.status, r.dropReason]).toEqual(["dropped", "the agent was still running at the rollout's deadline of 300 ms (aborted: ctx.signal); no reward"]);
  });

  it("gives up on a function agent that ignores ctx.signal and never returns (found by review: it hung the run)", async () => {
    const t0 = Date.now();
    const r = await runAgentRollout({ agent: () => new Promise(() => {}), gateway, grade, rolloutDeadlineMs: 300 }, "hang-1", tasks[0]);
    expect([r.status, r.dropReason]).toEqual(["dropped", "the agent was still running at the rollout's deadline of 300 ms (aborted: ctx.signal); no reward"]);
    expect(Date.now() - t0).toBeLessThan(300 + FUNCTION_AGENT_ABORT_GRACE_MS + 5_000); // bounded, not forever
  }, 30_000);

  it("drops a rollout whose agent returns an answer that is not a string, naming its type", async () => {
    const numeric: AgentFunction = async (ctx) => ({ ...(await agent(ctx)), answer: 42 as unknown as string });
    const r = await runAgentRollout({ agent: numeric, gateway, grade, rolloutDeadlineMs: 30_000 }, "numeric-1", tasks[0]);
    expect([r.status, r.dropReason]).toEqual(["dropped", "the agent's answer must be a string, got a number (42)"]);
  }, 30_000);

  it("drops a rollout whose agent never called the model (nothing to train on; a 0 reward would still move its group's baseline)", async () => {
    let n = 0;
    const lazy: AgentFunction = async (ctx) => (n++ === 0 ? { answer: "sunny" } : agent(ctx));
    const [m] = await trainAgent({ agent: lazy, backend, gateway, tasks, grade, steps: 1, tasksPerStep: 1, groupSize: 3, seed: 6, rolloutDeadlineMs: 30_000, adam: { learningRate: 1e-3 }, concurrency: 1,
      onStep: (_s, _m, recs) => expect(recs.filter((r) => r.status === "dropped").map((r) => r.dropReason)).toEqual(["the agent finished without calling the model (no completion to train on)"]) });
    expect([m.rewarded, m.dropped]).toEqual([2, 1]);
  }, 60_000);

  it("runs an agent given as a command: a child process with OPENAI_BASE_URL, reporting its own reward", async () => {
    const script = `
      const r = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer " + process.env.OPENAI_API_KEY }, body: JSON.stringify({ model: "p", messages: [{ role: "user", content: "weather in oslo ?" }], max_tokens: 4 }) });
      const j = await r.json();
      if (!r.ok) { console.error(JSON.stringify(j)); process.exit(2); }
      await fetch(process.env.ARL_REWARD_URL, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ value: j.choices[0].message.content.length % 2, parts: { parity: 1 } }) });
      console.log(JSON.stringify({ answer: j.choices[0].message.content }));`;
    const dir = mkdtempSync(join(tmpdir(), "arl-agent-"));
    writeFileSync(join(dir, "agent.mjs"), script);
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(join(dir, "agent.mjs"))}`;
    const [m] = await trainAgent({ agent: command, backend, gateway, tasks, grade: () => { throw new Error("the agent rewarded itself"); }, steps: 1, tasksPerStep: 1, groupSize: 2, seed: 9, rolloutDeadlineMs: 30_000, adam: { learningRate: 1e-3 },
      onStep: (_s, _m, recs) => {
        for (const r of recs) expect(r.reward?.parts, r.dropReason).toEqual({ parity: 1 });
      } });
    expect([m.rewarded, m.dropped]).toEqual([2, 0]);
  }, 60_000);
});
