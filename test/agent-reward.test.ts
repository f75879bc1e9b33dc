/**
 * Reward terms on an external agent's transcript (issue 15 part 3): `agentTrajectory` builds the `Trajectory` the
 * gateway's record and the retrieval server's log describe, and the search env's terms score it exactly as they score
 * an in-process policy; the retrieval server reports what it served per rollout path. Hand-made records; the numbers
 * are the `composite` preset's weights (src/reward/presets.ts) times the terms' values worked out in each comment.
 */
import { describe, expect, it } from "vitest";
import type { Passage, Task } from "../src/core/types.ts";
import type { GatewayCall, GatewaySegment } from "../src/gateway/types.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { REWARD_PRESETS } from "../src/reward/presets.ts";
import { createWorldsRetrievalApp } from "../src/serve/retrieval.ts";
import { RetrievalLog, agentTrajectory, gradeTranscript, type RetrievalCall } from "../src/external/reward.ts";

const task = (known: boolean): Task => ({ id: "q", question: "What is the capital of Avaloria?", answers: ["Brindle"], kind: "single-hop", known, evidenceIds: known ? [] : ["p1"] });
const passage = (id: string, text: string): Passage => ({ id, title: "Avaloria", text });
const call = (index: number, content: string, toolCalls: GatewayCall["toolCalls"] = [], extra: Partial<GatewayCall> = {}): GatewayCall => ({
  index, promptTokens: [1, 2], completionTokens: [3, 4, 5], logprobs: [-0.1, -0.2, -0.3], finishReason: toolCalls.length > 0 ? "tool_calls" : "stop", content, toolCalls, invalid: false, ms: 1, ...extra,
});
const segments: GatewaySegment[] = [{ tokens: [1, 2, 3, 4, 5], lossMask: [0, 0, 1, 1, 1], logprobs: [0, 0, -0.1, -0.2, -0.3], promptLength: 2, calls: [0] }];
const composite = { weights: REWARD_PRESETS.composite.weights };

describe("agentTrajectory: the trajectory an agent's calls and its retrieval requests describe", () => {
  it("one turn per call; the k-th search tool call carries the k-th query's served passages; counts from the server", () => {
    const calls = [call(0, "", [{ name: "search", arguments: { query: "capital of Avaloria" } }]), call(1, "Brindle")];
    const served: RetrievalCall[] = [{ queries: ["capital of Avaloria"], hits: [[passage("p1", "The capital of Avaloria is Brindle.")]] }];
    const traj = agentTrajectory(task(false), "Brindle", { calls, segments }, served);
    expect(traj.turns.map((t) => t.action.type)).toEqual(["tool_call", "answer"]);
    expect(traj.turns[0].passages?.map((p) => p.id)).toEqual(["p1"]);
    expect(traj.turns[1].passages).toBeUndefined();
    expect(traj.searches).toBe(1);
    expect(traj.toolCalls).toEqual({ search: 1 });
    expect(traj.answer).toBe("Brindle");
    expect(traj.tokens).toEqual([1, 2, 3, 4, 5]);
    expect(traj.lossMask).toEqual([0, 0, 1, 1, 1]);
  });

  it("queries sent outside any search tool call attach to the last turn; the server's count wins over the transcript's", () => {
    // The agent searched twice on its own (e.g. a retrieval step before the model) and never called a search tool.
    const served: RetrievalCall[] = [{ queries: ["a", "b"], hits: [[passage("p1", "x")], [passage("p2", "y")]] }];
    const traj = agentTrajectory(task(false), undefined, { calls: [call(0, "", [], { finishReason: "length" })], segments }, served);
    expect(traj.searches).toBe(2);
    expect(traj.turns[0].passages?.map((p) => p.id)).toEqual(["p1", "p2"]);
    expect(traj.answer).toBeNull();
    expect(traj.truncated).toBe(true); // no answer, the last call stopped at its token budget
  });

  it("an invalid call is an invalid action, counted", () => {
    const traj = agentTrajectory(task(true), "x", { calls: [call(0, "<tool_call>{bad", [], { invalid: true }), call(1, "x")], segments }, []);
    expect(traj.turns[0].action.type).toBe("invalid");
    expect(traj.invalidActions).toBe(1);
  });
});

describe("gradeTranscript: the composite preset on agent transcripts", () => {
  it("a searched, grounded, correct answer to an unknown fact: em 1 + format 0.1 − search cost 0.02 = 1.08", async () => {
    const calls = [call(0, "", [{ name: "search", arguments: { query: "capital of Avaloria" } }]), call(1, "Brindle")];
    const r = await gradeTranscript(task(false), "Brindle", { calls, segments }, [{ queries: ["capital of Avaloria"], hits: [[passage("p1", "The capital of Avaloria is Brindle.")]] }], { reward: composite });
    // em 1 (×1), format 1 (×0.1), guess 0, needless_search 0 (needs 1 search: one evidence id), ignored_evidence 0,
    // fabricated_citation 0, search_cost −1 (×0.02), invalid 0.
    expect(r.parts).toMatchObject({ em: 1, format: 1, guess: 0, needless_search: 0, ignored_evidence: 0, search_cost: -1, invalid: 0 });
    expect(r.value).toBeCloseTo(1.08, 12);
  });

  it("a guess on an unknown fact (no search) pays the guess penalty: 0 + 0.1 − 0.3 = −0.2; on a known fact it does not", async () => {
    const guessed = await gradeTranscript(task(false), "Quill", { calls: [call(0, "Quill")], segments }, [], { reward: composite });
    expect(guessed.parts?.guess).toBe(-1);
    expect(guessed.value).toBeCloseTo(-0.2, 12); // em 0, format 0.1, guess −0.3
    const known = await gradeTranscript(task(true), "Brindle", { calls: [call(0, "Brindle")], segments }, [], { reward: composite });
    expect(known.parts?.guess).toBe(0);
    expect(known.value).toBeCloseTo(1.1, 12); // em 1, format 0.1: a known fact needs no search
  });

  it("search then ignore: the gold was served, the answer is wrong: 0 + 0.1 − 0.2 − 0.02 = −0.12", async () => {
    const calls = [call(0, "", [{ name: "search", arguments: { query: "capital of Avaloria" } }]), call(1, "Quill")];
    const r = await gradeTranscript(task(false), "Quill", { calls, segments }, [{ queries: ["capital of Avaloria"], hits: [[passage("p1", "The capital of Avaloria is Brindle.")]] }], { reward: composite });
    expect(r.parts?.ignored_evidence).toBe(-1);
    expect(r.value).toBeCloseTo(-0.12, 12);
  });
});

describe("createWorldsRetrievalApp: per-rollout paths report what they served", () => {
  it("/worlds/<k>/rollouts/<id>/retrieve answers as /worlds/<k>/retrieve and logs the hits under the rollout", async () => {
    const worlds = [new BM25Index([passage("a1", "Brindle is the capital")]), new BM25Index([passage("b1", "Quill is the capital"), passage("b2", "rivers and hills")])];
    const log = new RetrievalLog();
    const seen: Array<[string, number]> = [];
    const app = createWorldsRetrievalApp(worlds, { onRetrieve: (id, k, queries, hits) => { seen.push([id, k]); log.record(id, queries, hits); } });
    const body = { queries: ["capital"], topk: 1, return_scores: true };
    const plain = await app.inject({ method: "POST", url: "/worlds/1/retrieve", payload: body });
    const mine = await app.inject({ method: "POST", url: "/worlds/1/rollouts/r-7/retrieve", payload: body });
    expect(mine.statusCode).toBe(200);
    expect(mine.json()).toEqual(plain.json());
    expect(seen).toEqual([["r-7", 1]]); // the plain path logs nothing
    const calls = log.take("r-7");
    expect(calls).toHaveLength(1);
    expect(calls[0].queries).toEqual(["capital"]);
    expect(calls[0].hits[0].map((p) => p.id)).toEqual(["b1"]);
    expect(log.take("r-7")).toEqual([]); // taken once
    expect((await app.inject({ method: "POST", url: "/worlds/5/rollouts/r-7/retrieve", payload: body })).statusCode).toBe(404);
    expect((await app.inject({ method: "POST", url: "/worlds/0/rollouts/r-7/retrieve", payload: { queries: "x" } })).statusCode).toBe(400);
    await app.close();
  });
});
