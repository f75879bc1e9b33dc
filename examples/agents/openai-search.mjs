#!/usr/bin/env node
// A plain search agent written with the `openai` npm client: chat completions with one `search` tool, at most four
// model calls. It imports nothing from agentic-rl — it is the kind of agent you already have.
//
// Contract (what `arl train --agent "node examples/agents/openai-search.mjs"` gives it):
//   env OPENAI_BASE_URL / OPENAI_API_KEY  the endpoint to call (read by `new OpenAI()` itself)
//   env ARL_RETRIEVAL_URL                 a Search-R1 retrieval server (POST {url}/retrieve)
//   stdin                                 the task as one JSON line: {id, question, answers, kind, ...}
//   stdout                                last line {"answer": "..."}
import OpenAI from "openai";

const MAX_CALLS = 4;
const SYSTEM = "Answer the question. Use the search tool when you do not know the answer. Reply with the answer only.";
const RETRIEVAL_URL = process.env.ARL_RETRIEVAL_URL;
if (!RETRIEVAL_URL) {
  console.error("openai-search: set ARL_RETRIEVAL_URL to a retrieval server (e.g. `arl serve retrieval`)");
  process.exit(2);
}

const searchTool = {
  type: "function",
  function: {
    name: "search",
    description: "Search Wikipedia; returns the top passages for the query.",
    parameters: { type: "object", properties: { query: { type: "string", description: "what to search for" } }, required: ["query"] },
  },
};

/** The top 3 passages for `query`, as Search-R1 writes them: `Doc 1(Title: T) text` one per line. */
async function search(query) {
  const res = await fetch(`${RETRIEVAL_URL.replace(/\/+$/, "")}/retrieve`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ queries: [query], topk: 3, return_scores: true }),
  });
  if (!res.ok) return `search failed: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`;
  const { result } = await res.json();
  const hits = result[0] ?? [];
  if (hits.length === 0) return "No results.";
  return hits
    .map(({ document }, i) => {
      const [title, ...text] = document.contents.split("\n");
      return `Doc ${i + 1}(Title: ${title.replace(/^"|"$/g, "")}) ${text.join(" ")}`;
    })
    .join("\n");
}

async function readTask() {
  let s = "";
  for await (const chunk of process.stdin) s += chunk;
  return JSON.parse(s);
}

const task = await readTask();
const client = new OpenAI();
const messages = [
  { role: "system", content: SYSTEM },
  { role: "user", content: task.question },
];
let answer = "";
for (let i = 0; i < MAX_CALLS; i++) {
  const res = await client.chat.completions.create({ model: "policy", messages, tools: [searchTool], temperature: 1, max_tokens: 48 });
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
    const content = call.function.name === "search" ? await search(query) : `unknown tool ${call.function.name}`;
    messages.push({ role: "tool", tool_call_id: call.id, content });
  }
}
console.log(JSON.stringify({ answer: answer.trim() }));
