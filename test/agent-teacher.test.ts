/**
 * The warm-start teacher behind the gateway: it finds the task in the prompt, plays a search persona as Hermes tool
 * calls, and knows what its own queries retrieved (the same BM25 index the agent's tool calls), so an unchanged agent's
 * demonstration episodes are honest: the careful persona searches an unknown fact and answers it from the evidence.
 */
import { describe, expect, it } from "vitest";
import { buildWorld, valuesOf, worldTexts, type CountryAttribute } from "../src/envs/search/world.ts";
import { goodQuery, personaTurn } from "../src/envs/search/scripted.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { RETRIEVAL_TOPK, teacherSampler } from "../src/external/teacher.ts";

const world = buildWorld({ seed: 0 });
const tok = WordTokenizer.fromTexts([...worldTexts(world), `<tool_call>\n{"name": "search", "arguments": {"query": "capital of france"}}\n</tool_call><|im_end|>`, "Doc 1(Title: )"], hermesProtocol.specialTokens);
const index = new BM25Index([...world.passages]);
const opts = { n: 1, maxTokens: 64, temperature: 1, stop: [], seed: 1 };
const turnOf = (persona: "careful" | "guesser") => (ctx: Parameters<typeof personaTurn>[1]) => personaTurn(persona, ctx, (a) => valuesOf(world, a as CountryAttribute));
const teacher = (persona: "careful" | "guesser") => teacherSampler(world.train, tok, index, { turn: turnOf(persona), seed: 0 });
const text = async (persona: "careful" | "guesser", prompt: string) => tok.decode((await teacher(persona).sample(tok.encode(prompt), opts))[0].tokens);

describe("teacherSampler", () => {
  // An unknown fact whose good query retrieves its evidence (most do).
  const unknown = world.train.find((t) => t.known === false && t.kind === "single-hop" && index.search(goodQuery(t, 0)!, RETRIEVAL_TOPK).some((p) => t.evidenceIds?.includes(p.id)))!;
  const known = world.train.find((t) => t.known === true && t.kind === "single-hop")!;
  const user = (q: string) => `<|im_start|>system\nAnswer the question.<|im_end|>\n<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n`;

  it("searches an unknown fact with a good query as a Hermes tool call, then answers from what that query retrieved", async () => {
    const first = await text("careful", user(unknown.question));
    expect(first).toContain("<tool_call>");
    expect(first.replace(/\s+/g, " ")).toContain(`query ": " ${goodQuery(unknown, 0)} "`);
    const hits = index.search(goodQuery(unknown, 0)!, RETRIEVAL_TOPK);
    const second = await text("careful", `${user(unknown.question)}${first}\n<|im_start|>user\n<tool_response>\n${hits.map((p) => p.text).join("\n")}\n</tool_response><|im_end|>\n<|im_start|>assistant\n`);
    expect(second.trim()).toBe(`${unknown.answers[0]} <|im_end|>`);
    expect(second).not.toContain("<tool_call>");
  });

  it("answers a known fact from memory, and the guesser never searches", async () => {
    expect((await text("careful", user(known.question))).trim()).toBe(`${known.answers[0]} <|im_end|>`);
    expect(await text("guesser", user(unknown.question))).not.toContain("<tool_call>");
  });

  it("refuses a prompt that holds no task's question", async () => {
    await expect(teacher("careful").sample(tok.encode(user("what is this")), opts)).rejects.toThrow(/none of the tasks' questions/);
  });

  it("knows a rollout's task from its id, so an agent may word the question its own way", async () => {
    const byId = teacherSampler(world.train, tok, index, { turn: turnOf("careful"), seed: 0, taskOf: (id) => (id === "r1" ? known : undefined) });
    const reworded = tok.encode(user("tell me about it"));
    expect(tok.decode((await byId.sample(reworded, { ...opts, rolloutId: "r1" }))[0].tokens).trim()).toBe(`${known.answers[0]} <|im_end|>`);
    await expect(byId.sample(reworded, { ...opts, rolloutId: "r2" })).rejects.toThrow(/rollout r2 is not one of the teacher's, and the prompt holds none of the tasks' questions/);
    // an id it does not know, with the question in the prompt: found by the question, as before
    expect((await byId.sample(tok.encode(user(unknown.question)), { ...opts, rolloutId: "r2" }))[0].tokens).toEqual((await teacher("careful").sample(tok.encode(user(unknown.question)), opts))[0].tokens);
  });
});
