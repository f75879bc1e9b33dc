import type { FastifyRequest } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeChatAgent, parseAgentKinds, type AgentTrajectory } from "../src/baselines/index.ts";
import { parseReactAction } from "../src/baselines/react.ts";
import { assertTrajectory } from "../src/algo/datum.ts";
import { searchAction, searchQuery, type Action } from "../src/core/types.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import { computeReward } from "../src/reward/compose.ts";
import { createApp, listen, type RunningServer } from "../src/http/server.ts";
import { serveOpenAI } from "../src/serve/openai.ts";
import { evaluate, evaluateEpisodes } from "../src/train/eval.ts";
import { ScriptedSampler, tinySetup } from "./openai-helpers.ts";

const { config, s, tasks } = tinySetup();
/** An action's kind, naming a Search-R1 search call "search" (any other action keeps its `type`). */
const kindOf = (a: Action) => (searchQuery(a) !== undefined ? "search" : a.type);
const tok = s.tokenizer;
let be: EmbeddedBackend;
let embedded: RunningServer;
let scripted: RunningServer;
let small: RunningServer;
let fake: RunningServer;
const fakeRequests: Array<Record<string, unknown>> = [];

/** Replies of the fake chat server, by agent (system prompt) and by the number of assistant turns so far. */
function fakeReply(body: { messages: Array<{ role: string; content?: string }>; tools?: unknown[] }) {
  const turn = body.messages.filter((m) => m.role === "assistant").length;
  const call = (name: string, args: string) => ({ role: "assistant", content: null, tool_calls: [{ id: `call_${turn}`, type: "function", function: { name, arguments: args } }] });
  if (body.tools) {
    const fc = [call("search", "{not json"), call("lookup", '{"query":"x"}'), { role: "assistant", content: "" }, call("search", '{"query": ""}')];
    return { message: fc[turn], finish: fc[turn].content === null ? "tool_calls" : "stop" };
  }
  const react = ["I think it is dublin", "Thought: hmm\nAction: lookup[x]", "Thought: search it\nAction: Search[capital of ireland]\nObservation: made up", "Thought: done\nAction 2: finish[Dublin]"];
  return { message: { role: "assistant", content: react[turn] }, finish: "stop" };
}

beforeAll(async () => {
  be = await EmbeddedBackend.create(s.gpt, 7);
  embedded = await serveOpenAI({ name: "tiny", sampler: be.samplingClient(), tokenizer: tok, contextLength: s.gpt.contextLength });
  scripted = await serveOpenAI({ name: "scripted", sampler: new ScriptedSampler(tok, tasks), tokenizer: tok, contextLength: s.gpt.contextLength });
  small = await serveOpenAI({ name: "scripted", sampler: new ScriptedSampler(tok, tasks), tokenizer: tok, contextLength: 40 });
  const app = createApp();
  app.post("/v1/chat/completions", async (req: FastifyRequest) => {
    const body = req.body as Parameters<typeof fakeReply>[0];
    fakeRequests.push(req.body as Record<string, unknown>);
    const { message, finish } = fakeReply(body);
    return { id: "x", object: "chat.completion", created: 0, model: "fake", choices: [{ index: 0, message, finish_reason: finish, logprobs: null }] };
  });
  fake = await listen(app);
});
afterAll(async () => {
  await Promise.all([embedded?.close(), scripted?.close(), small?.close(), fake?.close()]);
  be?.dispose();
});

const agentFor = (kind: Parameters<typeof makeChatAgent>[0], url: string, model: string, temperature = 0) =>
  makeChatAgent(kind, { baseURL: `${url}/v1`, model, makeEnv: s.instance.makeEnv(0), tokenizer: tok, temperature, maxTokens: 16, maxRetries: 0 });

/** Checks what every agent trajectory must satisfy, then scores it. */
async function checkAndScore(t: AgentTrajectory) {
  assertTrajectory(t);
  expect(t.trainable).toBe(false);
  expect(t.lossMask.every((m) => m === 0)).toBe(true);
  expect(t.tokens.slice(0, t.promptLength)).toEqual(tok.promptTokens(`question : ${t.task.question}\n`));
  expect(t.searches).toBe(t.turns.filter((x) => searchQuery(x.action) !== undefined).length);
  expect(t.invalidActions).toBe(t.turns.filter((x) => x.action.type === "invalid").length);
  const sampled = t.turns.reduce((a, x) => a + x.sampledTokens + x.observationTokens, 0);
  expect(t.tokens.length).toBe(t.promptLength + sampled);
  t.reward = await computeReward(t);
  return t.reward;
}

describe("prompt-driven agents over OpenAI-compatible HTTP", () => {
  it("prompt and function-calling agents search, read and answer through arl serve openai (scripted policy): EM 1", async () => {
    for (const kind of ["prompt", "function-calling"] as const) {
      const r = await evaluateEpisodes(tasks.slice(0, 4), agentFor(kind, scripted.url, "scripted").runner, { seed: 3 });
      expect(r.all.n).toBe(4);
      expect(r.all.em, kind).toBe(1);
      expect(r.all.searches).toBe(1);
      for (const t of r.trajectories as AgentTrajectory[]) {
        expect(t.agent).toBe(kind);
        expect(t.turns.map((x) => kindOf(x.action))).toEqual(["search", "answer"]);
        expect(t.turns[0].passages?.length).toBeGreaterThan(0);
        expect(t.truncated).toBe(false);
        const reward = await checkAndScore(t);
        expect(reward.terms.find((x) => x.name === "em")?.value).toBe(1);
      }
      const t = r.trajectories[0] as AgentTrajectory;
      if (kind === "function-calling") {
        // The search went out as a tool call and its passages came back as a tool message with the call's id.
        const assistant = t.messages[2] as { tool_calls: Array<{ id: string; function: { name: string; arguments: string } }> };
        expect(assistant.tool_calls[0].function.name).toBe("search");
        expect(t.messages[3]).toMatchObject({ role: "tool", tool_call_id: assistant.tool_calls[0].id });
        expect(String((t.messages[3] as { content: string }).content)).toMatch(/^Doc 1\(Title: /);
        expect(t.turns[0].actionText).toBe(`<search> ${JSON.parse(assistant.tool_calls[0].function.arguments).query} </search>`);
      } else {
        expect(t.messages[3]).toMatchObject({ role: "user" });
        expect(String((t.messages[3] as { content: string }).content)).toContain("<information>");
      }
    }
  });

  it("the prompt agent through the server reproduces the embedded policy's own evaluation (same seeds, same turns)", async () => {
    const sub = tasks.slice(0, 8);
    const opts = { mode: "agent" as const, temperature: 1, maxTokensPerTurn: 16, seed: 21 };
    const [viaHttp, direct] = await Promise.all([
      evaluateEpisodes(sub, agentFor("prompt", embedded.url, "tiny", 1).runner, { seed: 21 }),
      evaluate(sub, { sampler: be.samplingClient(), tokenizer: tok, makeEnv: s.instance.makeEnv(0), limits: s.limits }, opts),
    ]);
    // Text cannot carry a sampled <bos>/<pad> (decoding drops them), so episodes where the untrained policy sampled
    // one diverge after it; every other episode must match turn for turn.
    let compared = 0;
    viaHttp.trajectories.forEach((t, i) => {
      const d = direct.trajectories[i];
      const firstLossy = d.turns.findIndex((_, k) => {
        const start = d.promptLength + d.turns.slice(0, k).reduce((a, x) => a + x.sampledTokens + x.observationTokens, 0);
        return d.tokens.slice(start, start + d.turns[k].sampledTokens).some((x) => x === tok.bos || x === tok.pad);
      });
      const upTo = firstLossy < 0 ? d.turns.length : firstLossy + 1;
      expect(t.turns.slice(0, upTo).map((x) => x.actionText)).toEqual(d.turns.slice(0, upTo).map((x) => x.actionText));
      if (firstLossy >= 0) return;
      compared++;
      expect([t.answer, t.searches, t.invalidActions, t.truncated]).toEqual([d.answer, d.searches, d.invalidActions, d.truncated]);
      expect(t.tokens).toEqual(d.tokens);
    });
    expect(compared).toBeGreaterThanOrEqual(3);
  });

  it("every agent runs real episodes of the embedded policy to valid, scored trajectories (ReAct: invalid actions, no crash)", async () => {
    for (const kind of parseAgentKinds("all")) {
      const r = await evaluateEpisodes(tasks.slice(0, 3), agentFor(kind, embedded.url, "tiny", 1).runner, { seed: 5, concurrency: 3 });
      for (const t of r.trajectories as AgentTrajectory[]) {
        const reward = await checkAndScore(t);
        expect(Number.isFinite(reward.total)).toBe(true);
        expect(t.turns.length).toBeGreaterThan(0);
        expect(t.turns.length).toBeLessThanOrEqual(config.env.maxTurns);
        // The tiny policy writes Search-R1 tags, never `Action: …[…]`: every ReAct turn is an invalid action.
        if (kind === "react") expect(t.invalidActions).toBe(t.turns.length);
      }
    }
  });

  it("malformed tool calls and empty replies are penalised invalid actions, explained to the model", async () => {
    fakeRequests.length = 0;
    const t = (await agentFor("function-calling", fake.url, "fake").runEpisode(tasks[0], 1)) as AgentTrajectory;
    expect(t.invalidActions).toBe(4);
    expect(t.truncated).toBe(true);
    expect(t.answer).toBeNull();
    expect(t.turns.map((x) => (x.action.type === "invalid" ? x.action.reason : x.action.type))).toEqual([
      expect.stringMatching(/^function-calling: arguments of search are not valid JSON/),
      'function-calling: unknown tool "lookup" (allowed: search)',
      "function-calling: empty reply (no tool call and no answer)",
      "function-calling: invalid arguments of search: query: Too small: expected string to have >=1 characters",
    ]);
    const reward = await checkAndScore(t);
    expect(reward.terms.find((x) => x.name === "invalid")?.value).toBe(-4);
    // Each tool call was answered with its id; the empty reply got a user nudge.
    expect(t.messages[3]).toMatchObject({ role: "tool", tool_call_id: "call_0" });
    expect(String((t.messages[3] as { content: string }).content)).toMatch(/^error: function-calling: arguments of search are not valid JSON/);
    expect(t.messages[7]).toMatchObject({ role: "user", content: "function-calling: empty reply (no tool call and no answer). Call the search tool, or reply with the final answer." });
    // The tool schema sent: JSON Schema from the zod schema, without the draft marker.
    const tools = fakeRequests[0].tools as Array<{ type: string; function: { name: string; parameters: Record<string, unknown> } }>;
    expect(tools[0]).toMatchObject({ type: "function", function: { name: "search", parameters: { type: "object", required: ["query"], properties: { query: { type: "string", minLength: 1 } } } } });
    expect(tools[0].function.parameters.$schema).toBeUndefined();
    expect(fakeRequests.map((r) => r.seed)).toEqual([1, 2, 3, 4]);
  });

  it("ReAct: unparseable replies and unknown verbs are invalid; search[…] and finish[…] drive the env", async () => {
    fakeRequests.length = 0;
    const t = (await agentFor("react", fake.url, "fake").runEpisode(tasks[0], 1)) as AgentTrajectory;
    expect(t.turns.map((x) => x.action)).toEqual([
      { type: "invalid", reason: "react: no action line of the form Action: search[query] or Action: finish[answer]" },
      { type: "invalid", reason: 'react: unknown action "lookup" (allowed: search, finish)' },
      searchAction("capital of ireland"),
      { type: "answer", answer: "Dublin" },
    ]);
    expect([t.invalidActions, t.searches, t.answer, t.truncated]).toEqual([2, 1, "Dublin", false]);
    await checkAndScore(t);
    expect(fakeRequests[0].stop).toEqual(["Observation:"]);
    // The invented observation was dropped from the conversation; the real one came back as "Observation: Doc 1…".
    expect(t.messages[6]).toEqual({ role: "assistant", content: "Thought: search it\nAction: Search[capital of ireland]\n" });
    expect(String((t.messages[7] as { content: string }).content)).toMatch(/^Observation: Doc 1\(Title: /);
    expect(parseReactAction("Thought: x\nAction: finish[]")).toEqual({ invalid: "react: empty argument in finish[]" });
  });

  it("a conversation that outgrows the server's context ends the episode truncated, not in an exception", async () => {
    const t = (await agentFor("prompt", small.url, "scripted").runEpisode(tasks[0], 1)) as AgentTrajectory;
    expect(t.truncated).toBe(true);
    expect(t.turns.map((x) => kindOf(x.action))).toEqual(["search"]);
    await checkAndScore(t);
  });

  it("server errors other than context overflow fail loudly, naming the server and model", async () => {
    await expect(agentFor("prompt", scripted.url, "nope").runEpisode(tasks[0], 1)).rejects.toThrow(
      new RegExp(`prompt agent: ${scripted.url}/v1 \\(model "nope"\\): 404`),
    );
    expect(() => parseAgentKinds("prompt,bogus")).toThrow('--agent: expected one of prompt, function-calling, react or all (comma-separated), got "bogus"');
  });
});
