#!/usr/bin/env node
// A plain search agent written with the `openai` npm client: chat completions with one `search` tool, at most four
// model calls. It imports nothing from agentic-rl — it is the kind of agent you already have. The loop itself is
// openai-search-function.mjs (the same agent as a function, for `--agent-module`); this file is its command form.
//
// Contract (what `arl train --agent "node examples/agents/openai-search.mjs"` gives it):
//   env OPENAI_BASE_URL / OPENAI_API_KEY  the endpoint to call
//   env ARL_RETRIEVAL_URL                 a Search-R1 retrieval server (POST {url}/retrieve)
//   stdin                                 the task as one JSON line: {id, question, answers, kind, ...}
//   stdout                                last line {"answer": "..."}
import searchAgent from "./openai-search-function.mjs";

const RETRIEVAL_URL = process.env.ARL_RETRIEVAL_URL;
if (!RETRIEVAL_URL) {
  console.error("openai-search: set ARL_RETRIEVAL_URL to a retrieval server (e.g. `arl serve retrieval`)");
  process.exit(2);
}

let s = "";
for await (const chunk of process.stdin) s += chunk;
const { answer } = await searchAgent({
  baseURL: process.env.OPENAI_BASE_URL,
  apiKey: process.env.OPENAI_API_KEY,
  task: JSON.parse(s),
  env: { ARL_RETRIEVAL_URL: RETRIEVAL_URL },
});
console.log(JSON.stringify({ answer }));
