/**
 * Issue 15 part 5: the example agents (examples/agents/*.mjs) — plain agents written with the `openai` client and the
 * AI SDK that import nothing from agentic-rl — run as real child processes by `runAgentCommand`, against a real
 * gateway (a scripted sampler: deterministic hermes tool calls) and a real Search-R1 retrieval server over a tiny
 * BM25 index. Each must search for the question, answer from the retrieved passage, and leave one exact segment.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Passage, Task } from "../src/core/types.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { listen, type RunningServer } from "../src/http/server.ts";
import { createRetrievalApp } from "../src/serve/retrieval.ts";
import { startGateway, type RunningGateway } from "../src/gateway/server.ts";
import { runAgentCommand, type AgentContext } from "../src/external/rollouts.ts";
import { ScriptedSampler, qwenTokenizer } from "./gateway-helpers.ts";

const KEY = "examples-key";
const tok = qwenTokenizer();
const passages: Passage[] = [
  { id: "0", title: "Peru", text: "Lima is the capital of Peru." },
  { id: "1", title: "Cusco", text: "Cusco was the capital of the Inca Empire, in the south of Peru." },
  { id: "2", title: "Kenya", text: "Nairobi is the capital of Kenya." },
  { id: "3", title: "Mombasa", text: "Mombasa is the largest port of Kenya." },
  { id: "4", title: "Germany", text: "Berlin is the capital of Germany." },
];

/**
 * The script of the policy, by prompt: no tool response after the last user turn yet → call `search` with the
 * question's last three words; else answer with the first word of the first retrieved passage
 * (`Doc 1(Title: T) <word> …`, as both agents write search results).
 */
function searchScript(prompt: string): string {
  const lastUser = prompt.slice(prompt.lastIndexOf("<|im_start|>user"));
  if (!lastUser.includes("<tool_response>")) {
    const question = /<\|im_start\|>user\n([^]*?)<\|im_end\|>/.exec(prompt)?.[1] ?? "";
    const query = question.replace(/\?\s*$/, "").trim().split(/\s+/).slice(-3).join(" ");
    return `<tool_call>\n{"name": "search", "arguments": ${JSON.stringify({ query })}}\n</tool_call><|im_end|>`;
  }
  const word = /Doc 1\(Title: [^)]*\) (\w+)/.exec(lastUser)?.[1] ?? "unknown";
  return `${word}<|im_end|>`;
}

let retrieval: RunningServer;
let gw: RunningGateway;
let sampler: ScriptedSampler;
const received: string[][] = [];

beforeAll(async () => {
  const app = createRetrievalApp(new BM25Index(passages), { defaultTopk: 3 });
  app.addHook("preHandler", async (req) => {
    if (req.url === "/retrieve") received.push((req.body as { queries: string[] }).queries);
  });
  retrieval = await listen(app, { host: "127.0.0.1", port: 0 });
  sampler = new ScriptedSampler(tok, searchScript);
  gw = await startGateway({ policy: { name: "arl/policy", sampler, tokenizer: tok, contextLength: 4096 }, apiKey: KEY, seed: 3, deadlineMs: 30_000 });
});
afterAll(async () => {
  await Promise.all([gw?.close(), retrieval?.close()]);
});

const cases: Array<{ file: string; task: Task; query: string; title: string; answer: string }> = [
  { file: "examples/agents/openai-search.mjs", task: { id: "peru", question: "What is the capital of Peru?", answers: ["Lima"], kind: "single-hop" }, query: "capital of Peru", title: "Peru", answer: "Lima" },
  { file: "examples/agents/ai-sdk-search.mjs", task: { id: "kenya", question: "What is the capital of Kenya?", answers: ["Nairobi"], kind: "single-hop" }, query: "capital of Kenya", title: "Kenya", answer: "Nairobi" },
];

describe("example agents (plain openai / AI SDK code, run as child processes)", () => {
  it.each(cases)("$file searches, answers from the passage, and its rollout is one exact segment", async ({ file, task, query, title, answer }) => {
    const id = `example-${task.id}`;
    gw.registry.open(id, { meta: { taskId: task.id } });
    const before = received.length;
    const sampledBefore = sampler.returned.length;
    const ctx: AgentContext = {
      baseURL: gw.baseUrl(id),
      apiKey: KEY,
      rolloutId: id,
      rewardURL: `${gw.url}/rollout/${id}/reward`,
      task,
      signal: new AbortController().signal,
      env: { ARL_RETRIEVAL_URL: retrieval.url }, // the rollout's world: runAgentCommand puts it in the agent's environment
    };
    const result = await runAgentCommand(`${JSON.stringify(process.execPath)} ${file}`, ctx, { timeoutMs: 20_000 });
    expect(result).toEqual({ answer });

    // The retrieval server got the model's query (from the question), once.
    expect(received.slice(before)).toEqual([[query]]);

    gw.registry.finish(id);
    gw.registry.reward(id, result.answer === task.answers[0] ? 1 : 0);
    const rec = await gw.registry.wait(id);
    expect(rec.status).toBe("rewarded");
    expect(rec.reward).toEqual({ value: 1 });
    expect(rec.calls.map((c) => c.finishReason)).toEqual(["tool_calls", "stop"]);
    expect(rec.calls[0].toolCalls).toEqual([{ name: "search", arguments: { query } }]);
    expect(rec.calls.every((c) => !c.invalid)).toBe(true);
    // Recorded exactly as sampled.
    const sampled = sampler.returned.slice(sampledBefore);
    expect(rec.calls.map((c) => [c.promptTokens, c.completionTokens, c.logprobs])).toEqual(sampled.map((s) => [s.prompt, s.sample.tokens, s.sample.logprobs]));
    // Both agents send temperature 1 and a 48-token completion limit.
    expect(sampled.map((s) => [s.options.temperature, s.options.maxTokens])).toEqual([[1, 48], [1, 48]]);

    // Two calls, ONE segment: prompt₀ completion₀ observation₁ completion₁, the tool result masked.
    expect(rec.mismatches).toBe(0);
    expect(rec.segments).toHaveLength(1);
    const seg = rec.segments[0];
    expect(seg.calls).toEqual([0, 1]);
    const [c0, c1] = rec.calls;
    expect(seg.tokens).toEqual([...c1.promptTokens, ...c1.completionTokens]);
    expect(seg.tokens.slice(0, c0.promptTokens.length + c0.completionTokens.length)).toEqual([...c0.promptTokens, ...c0.completionTokens]);
    expect(seg.promptLength).toBe(c0.promptTokens.length);
    const sampledMask = seg.lossMask.map((m, i) => (m === 1 ? i : -1)).filter((i) => i >= 0);
    const p0 = c0.promptTokens.length;
    const p1 = c1.promptTokens.length;
    expect(sampledMask).toEqual([
      ...c0.completionTokens.map((_, i) => p0 + i),
      ...c1.completionTokens.map((_, i) => p1 + i),
    ]);
    const observation = tok.decode(seg.tokens.slice(p0 + c0.completionTokens.length, p1));
    expect(observation).toMatch(/^\n<\|im_start\|>user\n<tool_response>\nDoc 1\(Title: .*\n<\/tool_response><\|im_end\|>\n<\|im_start\|>assistant\n$/s);
    expect(observation).toContain(`Doc 1(Title: ${title}) ${answer} is the capital of ${title}.\nDoc 2(Title: `);
    expect(tok.decode(c1.completionTokens)).toBe(`${answer}<|im_end|>`);
  }, 30_000);

  it("an agent without ARL_RETRIEVAL_URL fails with a clear reason (the rollout would be dropped with it)", async () => {
    const id = "example-no-retrieval";
    gw.registry.open(id);
    const ctx: AgentContext = { baseURL: gw.baseUrl(id), apiKey: KEY, rolloutId: id, rewardURL: `${gw.url}/rollout/${id}/reward`, task: cases[0].task, signal: new AbortController().signal, env: {} };
    const cmd = `env -u ARL_RETRIEVAL_URL ${JSON.stringify(process.execPath)} ${cases[0].file}`;
    const r = await runAgentCommand(cmd, ctx, { timeoutMs: 20_000 });
    expect(r.error).toMatch(/exited with code 2: openai-search: set ARL_RETRIEVAL_URL/);
    gw.registry.drop(id, r.error!);
  }, 30_000);
});
