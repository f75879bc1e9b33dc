// The search agent of openai-search.mjs as a function, for `arl train --agent-module` (and the library's
// `trainAgent({ agent })`): it runs in the trainer's process, once per rollout, with the rollout's context instead of
// environment variables and stdin. It imports only the `openai` client (and the `search` tool's fetch in retrieve.mjs).
//
//   ctx.baseURL / ctx.apiKey     the rollout's OpenAI endpoint on the training gateway
//   ctx.task                     the task: {id, question, answers, kind, ...}
//   ctx.env.ARL_RETRIEVAL_URL    the retrieval server of the rollout's world (POST {url}/retrieve)
//   ctx.signal                   aborted at the rollout's deadline
//   returns                      {answer}
import OpenAI from "openai";
import { retrieve } from "./retrieve.mjs";

const MAX_CALLS = 4;
const SYSTEM = "Answer the question. Use the search tool when you do not know the answer. Reply with the answer only.";
const searchTool = {
  type: "function",
  function: {
    name: "search",
    description: "Search Wikipedia; returns the top passages for the query.",
    parameters: { type: "object", properties: { query: { type: "string", description: "what to search for" } }, required: ["query"] },
  },
};

/** One rollout: at most four model calls; runs the `search` calls; answers with the last reply's text. */
export default async function searchAgent({ baseURL, apiKey, task, env, signal }) {
  const url = env.ARL_RETRIEVAL_URL;
  if (!url) throw new Error("openai-search-function: the rollout has no ARL_RETRIEVAL_URL");
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const messages = [
    { role: "system", content: SYSTEM },
    { role: "user", content: task.question },
  ];
  let answer = "";
  for (let i = 0; i < MAX_CALLS; i++) {
    const res = await client.chat.completions.create({ model: "policy", messages, tools: [searchTool], temperature: 1, max_tokens: 48 }, { signal });
    const msg = res.choices[0].message;
    messages.push(msg);
    answer = msg.content ?? "";
    const calls = (msg.tool_calls ?? []).filter((c) => c.type === "function");
    if (calls.length === 0) break;
    for (const call of calls) {
      let query = "";
      try {
        query = String(JSON.parse(call.function.arguments).query ?? "").trim();
      } catch {
        // unreadable arguments: an empty search
      }
      const content = call.function.name === "search" ? await retrieve(url, query, signal) : `unknown tool ${call.function.name}`;
      messages.push({ role: "tool", tool_call_id: call.id, content });
    }
  }
  return { answer: answer.trim() };
}
