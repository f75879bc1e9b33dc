/**
 * An in-process agent for the `--agent` tests: `examples/agents/openai-search-function.mjs` (the logic of
 * `openai-search.mjs` as an agent function — the real `openai` client, one `search` tool over the rollout's
 * `ARL_RETRIEVAL_URL`) wrapped to record the retrieval URL each rollout was given and, optionally, to report its own
 * reward, so experiments run without a child process per rollout.
 */
import type { AgentContext, AgentFunction, AgentResult } from "../src/external/rollouts.ts";
// @ts-expect-error — a plain .mjs example without type declarations (it takes an AgentContext, returns {answer})
import exampleAgent from "../examples/agents/openai-search-function.mjs";

const example = exampleAgent as (ctx: AgentContext) => Promise<AgentResult>;

/**
 * The example agent; `seen` collects `[rolloutId, ARL_RETRIEVAL_URL]` of every rollout it ran; with `selfReward` it
 * reports its own reward (`POST rewardURL`) instead of leaving the grading to the trainer.
 */
export function searchAgent(seen: Array<[string, string]> = [], selfReward?: (answer: string) => number): AgentFunction {
  return async (ctx) => {
    seen.push([ctx.rolloutId, ctx.env.ARL_RETRIEVAL_URL ?? ""]);
    const { answer = "" } = await example(ctx);
    if (selfReward) {
      const r = await fetch(ctx.rewardURL, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${ctx.apiKey}` }, body: JSON.stringify({ value: selfReward(answer) }) });
      if (!r.ok) throw new Error(`reward: HTTP ${r.status} ${await r.text()}`);
    }
    return { answer };
  };
}

/**
 * An agent whose search tool is not the example agents': `lookup({"q": "…"})` (the real `openai` client, the
 * rollout's `ARL_RETRIEVAL_URL`, top 3, Search-R1's `Doc i(Title: …)` lines), for `--agent-tool`.
 */
export const lookupAgent: AgentFunction = async ({ baseURL, apiKey, task, env, signal }) => {
  const { default: OpenAI } = await import("openai");
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const tools = [{ type: "function" as const, function: { name: "lookup", description: "Look it up.", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } } }];
  const messages: Array<Record<string, unknown>> = [{ role: "user", content: task.question }];
  let answer = "";
  for (let i = 0; i < 4; i++) {
    const res = await client.chat.completions.create({ model: "policy", messages: messages as never, tools, max_tokens: 48 }, { signal });
    const msg = res.choices[0].message;
    messages.push(msg as unknown as Record<string, unknown>);
    answer = msg.content ?? "";
    const calls = (msg.tool_calls ?? []).filter((c) => c.type === "function");
    if (calls.length === 0) break;
    for (const call of calls) {
      if (call.function.name !== "lookup") {
        messages.push({ role: "tool", tool_call_id: call.id, content: `unknown tool ${call.function.name}` });
        continue;
      }
      const q = String((JSON.parse(call.function.arguments) as { q?: unknown }).q ?? "");
      const r = await fetch(`${env.ARL_RETRIEVAL_URL}/retrieve`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ queries: [q], topk: 3, return_scores: true }), signal });
      const { result } = (await r.json()) as { result: Array<Array<{ document: { contents: string } }>> };
      const content = (result[0] ?? []).map(({ document }, k) => `Doc ${k + 1}(Title: ${document.contents.split("\n")[0]}) ${document.contents.split("\n").slice(1).join(" ")}`).join("\n");
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  return { answer: answer.trim() };
};
