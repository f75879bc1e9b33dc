/**
 * An in-process agent for the `--agent` tests: the logic of `examples/agents/openai-search.mjs` (the real `openai`
 * client, one `search` tool over the rollout's `ARL_RETRIEVAL_URL`, at most four model calls) as an `AgentFunction`,
 * so experiments run without a child process per rollout. It records the retrieval URL each rollout was given.
 */
import OpenAI from "openai";
import type { AgentFunction } from "../src/train/agentRollouts.ts";

const searchTool = {
  type: "function" as const,
  function: {
    name: "search",
    description: "Search Wikipedia; returns the top passages for the query.",
    parameters: { type: "object", properties: { query: { type: "string", description: "what to search for" } }, required: ["query"] },
  },
};

/** The top 3 passages for `query` from a Search-R1 `/retrieve` server, as `Doc i(Title: T) text` lines. */
async function search(url: string, query: string): Promise<string> {
  const res = await fetch(`${url}/retrieve`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ queries: [query], topk: 3, return_scores: true }) });
  if (!res.ok) return `search failed: HTTP ${res.status}`;
  const { result } = (await res.json()) as { result: Array<Array<{ document: { contents: string } }>> };
  const hits = result[0] ?? [];
  if (hits.length === 0) return "No results.";
  return hits.map(({ document }, i) => {
    const [title, ...text] = document.contents.split("\n");
    return `Doc ${i + 1}(Title: ${title.replace(/^"|"$/g, "")}) ${text.join(" ")}`;
  }).join("\n");
}

/**
 * The search agent; `seen` collects `[rolloutId, ARL_RETRIEVAL_URL]` of every rollout it ran; with `selfReward` it
 * reports its own reward (`POST rewardURL`) instead of leaving the grading to the trainer.
 */
export function searchAgent(seen: Array<[string, string]> = [], selfReward?: (answer: string) => number): AgentFunction {
  return async ({ baseURL, apiKey, task, env, rolloutId, rewardURL }) => {
    const url = env.ARL_RETRIEVAL_URL;
    if (!url) throw new Error("no ARL_RETRIEVAL_URL");
    seen.push([rolloutId, url]);
    const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "system", content: "Answer the question. Use the search tool when you do not know the answer. Reply with the answer only." },
      { role: "user", content: task.question },
    ];
    let answer = "";
    for (let i = 0; i < 4; i++) {
      const res = await client.chat.completions.create({ model: "policy", messages, tools: [searchTool], temperature: 1, max_tokens: 48 });
      const msg = res.choices[0].message;
      messages.push(msg);
      answer = msg.content ?? "";
      const calls = (msg.tool_calls ?? []).filter((c) => c.type === "function");
      if (calls.length === 0) break;
      for (const call of calls) {
        let query = "";
        try {
          query = String((JSON.parse(call.function.arguments) as { query?: unknown }).query ?? "").trim();
        } catch {
          // unreadable arguments: an empty search
        }
        messages.push({ role: "tool", tool_call_id: call.id, content: call.function.name === "search" ? await search(url, query) : `unknown tool ${call.function.name}` });
      }
    }
    if (selfReward) {
      const r = await fetch(rewardURL, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` }, body: JSON.stringify({ value: selfReward(answer.trim()) }) });
      if (!r.ok) throw new Error(`reward: HTTP ${r.status} ${await r.text()}`);
    }
    return { answer: answer.trim() };
  };
}
