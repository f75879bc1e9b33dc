#!/usr/bin/env node
// A plain search agent written with the AI SDK: `generateText` with one zod-typed `search` tool, at most four steps,
// over an OpenAI-compatible provider. It imports nothing from agentic-rl — it is the kind of agent you already have.
//
// Contract (what `arl train --agent "node examples/agents/ai-sdk-search.mjs"` gives it):
//   env OPENAI_BASE_URL / OPENAI_API_KEY  the endpoint to call
//   env ARL_RETRIEVAL_URL                 a Search-R1 retrieval server (POST {url}/retrieve)
//   stdin                                 the task as one JSON line: {id, question, answers, kind, ...}
//   stdout                                last line {"answer": "..."}
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";
import { retrieve } from "./retrieve.mjs";

const SYSTEM = "Answer the question. Use the search tool when you do not know the answer. Reply with the answer only.";
const RETRIEVAL_URL = process.env.ARL_RETRIEVAL_URL;
if (!RETRIEVAL_URL) {
  console.error("ai-sdk-search: set ARL_RETRIEVAL_URL to a retrieval server (e.g. `arl serve retrieval`)");
  process.exit(2);
}

async function readTask() {
  let s = "";
  for await (const chunk of process.stdin) s += chunk;
  return JSON.parse(s);
}

const task = await readTask();
const provider = createOpenAICompatible({ name: "arl", baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });
const { text } = await generateText({
  model: provider.chatModel("policy"),
  system: SYSTEM,
  prompt: task.question,
  tools: {
    search: tool({
      description: "Search Wikipedia; returns the top passages for the query.",
      inputSchema: z.object({ query: z.string().describe("what to search for") }),
      execute: async ({ query }) => retrieve(RETRIEVAL_URL, query.trim()),
    }),
  },
  stopWhen: stepCountIs(4),
  temperature: 1,
  maxOutputTokens: 48,
});
console.log(JSON.stringify({ answer: text.trim() }));
