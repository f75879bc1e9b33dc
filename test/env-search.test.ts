import { describe, expect, it } from "vitest";
import type { Task } from "../src/core/types.ts";
import { INVALID_ACTION_OBSERVATION } from "../src/protocol/searchR1.ts";
import { SearchEnv, searchCorpus } from "../src/envs/search/env.ts";
import { buildWorld } from "../src/envs/search/world.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";

const world = buildWorld();
const task = world.train.find((t) => t.id.startsWith("capital:")) as Task;
const country = world.countries.find((c) => `capital:${c.cca3}` === task.id);

describe("SearchEnv", () => {
  it("search then answer", async () => {
    const env = new SearchEnv({ retriever: new BM25Index(world.passages) });
    expect(await env.reset(task)).toBe(`question : ${task.question}\n`);
    const s1 = await env.step(`<search> capital of ${country?.name} </search>`);
    expect(s1.done).toBe(false);
    expect(s1.info.passages?.[0].id).toBe(`country:${country?.cca3}:capital`);
    expect(s1.info.passages).toHaveLength(3);
    expect(s1.observation.startsWith(`\n\n<information>Doc 1(Title: ${country?.name}) `)).toBe(true);
    expect(s1.observation.endsWith("</information>\n\n")).toBe(true);
    const s2 = await env.step(`<answer> ${country?.capital} </answer>`);
    expect(s2).toEqual({ observation: "", done: true, info: { action: { type: "answer", answer: country?.capital } } });
    expect(env.stats).toEqual({ turns: 2, searches: 1, invalidActions: 0 });
    await expect(env.step("<answer> x </answer>")).rejects.toThrow(/episode is done/);
  });

  it("invalid action → corrective observation, counted", async () => {
    const env = new SearchEnv({ retriever: new BM25Index(world.passages) });
    await env.reset(task);
    const s = await env.step("paris");
    expect(s.observation).toBe(INVALID_ACTION_OBSERVATION);
    expect(s.done).toBe(false);
    expect(s.info.action.type).toBe("invalid");
    expect(env.stats.invalidActions).toBe(1);
  });

  it("max turns → done, truncated", async () => {
    const env = new SearchEnv({ retriever: new BM25Index(world.passages), maxTurns: 2 });
    await env.reset(task);
    expect((await env.step("<search> a </search>")).done).toBe(false);
    const last = await env.step("<search> b </search>");
    expect(last).toMatchObject({ observation: "", done: true, info: { truncated: true } });
  });

  it("a throwing retriever becomes an error observation", async () => {
    const env = new SearchEnv({ retriever: { search: () => { throw new Error("index offline"); } } });
    await env.reset(task);
    const s = await env.step("<search> q </search>");
    expect(s.done).toBe(false);
    expect(s.observation).toBe("\n\n<information>error: tool search: index offline</information>\n\n");
    expect(s.info.error).toBe("tool search: index offline");
    const slow = new SearchEnv({ retriever: { search: () => new Promise(() => {}) }, timeoutMs: 20 });
    await slow.reset(task);
    expect((await slow.step("<search> q </search>")).info.error).toMatch(/timed out after 20 ms/);
  });

  it("validates config and task", async () => {
    expect(() => new SearchEnv({ retriever: new BM25Index([]), topK: 0 })).toThrow(/topK must be a positive integer/);
    await expect(new SearchEnv({ retriever: new BM25Index([]) }).reset({ ...task, question: " " })).rejects.toThrow(/question/);
  });

  it("searchCorpus", async () => {
    const r = await searchCorpus("data/wiki18-sample-1000.jsonl", "radio", 2);
    expect(r).toHaveLength(2);
  });
});

describe("search query cap", () => {
  it("a query over MAX_SEARCH_QUERY_CHARS is an error observation, not a long synchronous search", async () => {
    const { SearchEnv, MAX_SEARCH_QUERY_CHARS } = await import("../src/envs/search/env.ts");
    const { BM25Index } = await import("../src/retrieval/bm25.ts");
    const env = new SearchEnv({ retriever: new BM25Index([{ id: "1", title: "T", text: "capital of peru is lima" }]), topK: 1, maxTurns: 3 });
    await env.reset({ id: "t", kind: "capital", question: "capital of peru ?", answers: ["lima"] });
    const r = await env.step(`<search> ${"peru ".repeat(MAX_SEARCH_QUERY_CHARS / 5 + 10)} </search>`);
    expect(r.done).toBe(false);
    expect(r.observation).toMatch(/query: a query is at most 2048 characters/);
    expect((await env.step("<search> capital of peru </search>")).observation).toContain("lima");
  });
});
