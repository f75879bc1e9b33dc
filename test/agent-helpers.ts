/**
 * An in-process agent for the `--agent` tests: `examples/agents/openai-search-function.mjs` (the logic of
 * `openai-search.mjs` as an agent function — the real `openai` client, one `search` tool over the rollout's
 * `ARL_RETRIEVAL_URL`) wrapped to record the retrieval URL each rollout was given and, optionally, to report its own
 * reward, so experiments run without a child process per rollout.
 */
import type { AgentContext, AgentFunction, AgentResult } from "../src/train/agentRollouts.ts";
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
