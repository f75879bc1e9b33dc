/**
 * Reward terms on a black-box agent's transcript (issue 15 part 3: "the trainer scores the finished transcript with
 * the env's grader / reward terms"). The search env's terms (`REWARD_TERMS`: EM, guess, needless search, grounded,
 * ignored evidence, search cost, …) are functions of a `Trajectory`; an agent written with the `openai` client or the
 * AI SDK has no `Trajectory`, only the gateway's record of its model calls and the searches it sent to the env's
 * retrieval server. `agentTrajectory` builds the `Trajectory` those two describe — one turn per model call, each search
 * tool call carrying the passages the retrieval server really returned for it (`RetrievalLog`, fed by
 * `createWorldsRetrievalApp`'s `onRetrieve` on the rollout's own `ARL_RETRIEVAL_URL`) — so the same `computeReward`
 * scores an external agent and an in-process policy alike. Nothing is parsed out of the agent's messages: what it
 * searched and what it was shown come from the server that served it.
 */
import type { Action, Passage, Task, Trajectory, Turn } from "../core/types.ts";
import type { RolloutSnapshot } from "../gateway/registry.ts";
import type { GatewayReward } from "../gateway/types.ts";
import { computeReward, type RewardConfig } from "../reward/compose.ts";

/** One request an agent sent to its retrieval URL: the queries and what was returned (`hits` `[query][hit]`). */
export interface RetrievalCall {
  queries: readonly string[];
  hits: readonly Passage[][];
}

/**
 * What each rollout's search tool was served, by rollout id, in arrival order. Bounded by what the rollouts ask (the
 * retrieval server's own request limits); `take` removes a rollout's entry once it is graded.
 */
export class RetrievalLog {
  private readonly byRollout = new Map<string, RetrievalCall[]>();

  /** Records one request of rollout `rolloutId` (`createWorldsRetrievalApp`'s `onRetrieve`). */
  record(rolloutId: string, queries: readonly string[], hits: readonly Passage[][]): void {
    const calls = this.byRollout.get(rolloutId) ?? [];
    calls.push({ queries: [...queries], hits: hits.map((h) => [...h]) });
    this.byRollout.set(rolloutId, calls);
  }

  /** The rollout's requests so far ([] when it sent none), removed from the log. */
  take(rolloutId: string): RetrievalCall[] {
    const calls = this.byRollout.get(rolloutId) ?? [];
    this.byRollout.delete(rolloutId);
    return calls;
  }
}

/**
 * The `Trajectory` an agent's rollout describes, for the reward terms:
 * - one turn per model call (`snapshot.calls`, in order): a call that returned tool calls is a `tool_call` action, an
 *   invalid one (markup the protocol could not parse) an `invalid` action, the rest `answer` actions of their content;
 * - the retrieval requests (`retrievals`, in arrival order), one query each, are the searches: the k-th query is
 *   attached (its passages on `turn.passages`) to the call that made the k-th `search` tool call, and queries beyond
 *   the calls' `search` tool calls (an agent that searches outside its tool calls) to the last call;
 * - `searches` and `toolCalls.search` count the queries the retrieval server answered (what the env served, not what
 *   the agent claims), and `toolCalls` also counts the calls' other tools by name;
 * - `answer` is what the agent returned (null without one), `invalidActions` the invalid calls, `truncated` true when
 *   it returned no answer and its last call stopped at its token budget;
 * - `tokens` / `lossMask` / `logprobs` are the gateway's segments concatenated `[seq]` (the tokens RL trains on), so
 *   the token-cost terms count sampled tokens; `promptLength` 0.
 * @param task the rollout's task (its `known` / `evidenceIds` drive the necessity terms)
 * @param answer the agent's answer, undefined when it gave none
 * @param snapshot the gateway's record of the rollout (`registry.snapshot(id)`)
 * @param retrievals what the rollout's retrieval URL served (`RetrievalLog.take(id)`)
 * @param searchTool the agent's search tool's name (`--agent-tool`; its calls are paired with the retrievals in order)
 */
export function agentTrajectory(task: Task, answer: string | undefined, snapshot: Pick<RolloutSnapshot, "calls" | "segments">, retrievals: readonly RetrievalCall[], searchTool = "search"): Trajectory {
  const queries = retrievals.flatMap((r) => r.queries.map((q, i) => ({ query: q, passages: r.hits[i] ?? [] })));
  let next = 0;
  const toolCalls: Record<string, number> = {};
  const turns: Turn[] = snapshot.calls.map((call) => {
    const calls = call.toolCalls;
    for (const c of calls) if (c.name !== searchTool) toolCalls[c.name] = (toolCalls[c.name] ?? 0) + 1;
    const action: Action = call.invalid
      ? { type: "invalid", reason: "tool-call markup the protocol could not parse" }
      : calls.length > 0
        ? { type: "tool_call", calls }
        : { type: "answer", answer: call.content };
    const served = calls.filter((c) => c.name === searchTool).flatMap(() => (next < queries.length ? [queries[next++]] : []));
    const passages = served.flatMap((s) => s.passages);
    const turn: Turn = {
      actionText: call.content,
      action,
      observation: passages.map((p) => `${p.title}: ${p.text}`).join("\n"),
      sampledTokens: call.completionTokens.length,
      observationTokens: 0,
      stopReason: call.finishReason === "length" ? "length" : "stop",
    };
    if (calls.length > 0) turn.tool = calls[0].name;
    if (served.length > 0) turn.passages = passages;
    return turn;
  });
  if (next < queries.length && turns.length > 0) {
    const last = turns[turns.length - 1];
    last.passages = [...(last.passages ?? []), ...queries.slice(next).flatMap((q) => q.passages)];
  }
  if (queries.length > 0) toolCalls[searchTool] = queries.length;
  const last = snapshot.calls[snapshot.calls.length - 1];
  return {
    task,
    tokens: snapshot.segments.flatMap((s) => s.tokens),
    lossMask: snapshot.segments.flatMap((s) => s.lossMask),
    logprobs: snapshot.segments.flatMap((s) => s.logprobs),
    promptLength: 0,
    turns,
    answer: answer ?? null,
    searches: queries.length,
    toolCalls,
    invalidActions: snapshot.calls.filter((c) => c.invalid).length,
    truncated: answer === undefined && last?.finishReason === "length",
  };
}

/**
 * The trainer's reward of a rollout the agent did not reward itself: `reward`'s terms (e.g. the `outcome-only`
 * preset's EM, or `composite`'s guess / needless-search / grounded / ignored-evidence terms) over `agentTrajectory`,
 * each term's value kept as a named part (`reward/<term>` in the metrics). Group-relative terms see no group here
 * (each rollout is graded as it finishes): `needless_search` and `otc` use the task's own need (`task.known`), and are
 * 0 where the task does not say.
 * @param options `reward`: the terms and weights; `searchTool`: the agent's search tool's name (default `search`)
 * @returns `{value: Σ value × weight, parts: {term: value}}`
 * @throws Error from `validateRewardConfig` for an unknown term or a non-finite weight
 */
export async function gradeTranscript(
  task: Task,
  answer: string | undefined,
  snapshot: Pick<RolloutSnapshot, "calls" | "segments">,
  retrievals: readonly RetrievalCall[],
  options: { reward: RewardConfig; searchTool?: string },
): Promise<GatewayReward> {
  const breakdown = await computeReward(agentTrajectory(task, answer, snapshot, retrievals, options.searchTool), options.reward);
  return { value: breakdown.total, parts: Object.fromEntries(breakdown.terms.map((t) => [t.name, t.value])) };
}
