/**
 * The search-r1 protocol (src/protocol/searchR1.ts): a `Protocol` over the unchanged Search-R1 parser and strings
 * of the same module (PeterGriffinJin/Search-R1 `search_r1/llm_agent/generation.py`), byte-identical to the search
 * env's prompt and observations.
 */
import { describe, expect, it } from "vitest";
import type { Action, Passage } from "../src/core/types.ts";
import { INFORMATION_CLOSE, INVALID_ACTION_OBSERVATION, formatPassages, informationObservation, PROTOCOL_TAGS, searchR1Protocol as sr1 } from "../src/protocol/searchR1.ts";
import type { ToolJsonSchema } from "../src/protocol/types.ts";
import { searchPrompt } from "../src/envs/search/env.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";

const search: ToolJsonSchema = { name: "search", description: "Retrieve passages.", parameters: { type: "object" } };
const opts = { tools: [search] };
const searchFor = (query: string): Action => ({ type: "tool_call", calls: [{ name: "search", arguments: { query } }] });

describe("search-r1 parse", () => {
  it("a search is the call search({query})", () => {
    expect(sr1.parse("<think> I should look it up. </think>\n<search> capital of france </search>", opts)).toEqual(searchFor("capital of france"));
  });

  it("a search without a search tool is invalid", () => {
    expect(sr1.parse("<search> x </search>", { tools: [] })).toEqual({ type: "invalid", reason: "unknown tool search; no tools are available" });
    const other: ToolJsonSchema = { name: "lookup", description: "", parameters: {} };
    const a = sr1.parse("<search> x </search>", { tools: [other] });
    expect(a.type === "invalid" && a.reason.startsWith("unknown tool search")).toBe(true);
  });

  it("a malformed action (empty query, mismatched or nested tags) is invalid", () => {
    expect(sr1.parse("<search>   </search>", opts)).toEqual({ type: "invalid", reason: "empty query in <search></search>" });
    expect(sr1.parse("<search> x </answer>", opts).type).toBe("invalid");
    expect(sr1.parse("<search> <answer> x </answer> </search>", opts).type).toBe("invalid");
    expect(sr1.parse("just text", opts).type).toBe("invalid");
  });

  it("an unclosed tag is invalid", () => {
    expect(sr1.parse("<search> capital of france", opts)).toEqual({ type: "invalid", reason: "unclosed <search>: no </search> follows" });
  });

  it("two calls: the first one counts, as in Search-R1 (later text is ignored)", () => {
    expect(sr1.parse("<search> a </search> <search> b </search>", opts)).toEqual(searchFor("a"));
  });

  it("text after the action is ignored, as in Search-R1", () => {
    expect(sr1.parse("<answer> Paris </answer> and more text", opts)).toEqual({ type: "answer", answer: "Paris" });
  });

  it("parses the word tokenizer's decoding", () => {
    const text = sr1.format(searchFor("Capital of France"));
    const tok = WordTokenizer.fromTexts([text], sr1.specialTokens);
    expect(sr1.parse(tok.decode(tok.encode(text)), opts)).toEqual(searchFor("capital of france"));
  });
});

describe("search-r1 format and strings", () => {
  it("format writes the scripted personas' turns and round-trips", () => {
    expect(sr1.format(searchFor("capital of france"))).toBe("<search> capital of france </search>");
    expect(sr1.format({ type: "answer", answer: "Paris" })).toBe("<answer> Paris </answer>");
    for (const a of [searchFor("capital of france"), { type: "answer", answer: "Paris" } as Action]) expect(sr1.parse(sr1.format(a), opts)).toEqual(a);
    expect(sr1.parse(sr1.format({ type: "invalid", reason: "bad <search> tag" }), opts).type).toBe("invalid");
    expect(() => sr1.format({ type: "tool_call", calls: [{ name: "lookup", arguments: {} }] })).toThrow(/one search/);
  });

  it("system and prompt reproduce the search env's prompt byte for byte", () => {
    expect(sr1.system([search], "")).toBe("");
    expect(sr1.system([search], "Answer the question.")).toBe("Answer the question.");
    expect(sr1.prompt("", "question : what is the capital of france ?\n")).toBe(searchPrompt("what is the capital of france ?"));
  });

  it("observation: <information> around the passages, or the error", () => {
    const passages: Passage[] = [{ id: "1", title: "France", text: "Paris is the capital of France." }];
    const ok = sr1.observation([{ name: "search", ok: true, content: formatPassages(passages), value: passages }]);
    expect(ok).toEqual({ text: informationObservation(formatPassages(passages)), close: INFORMATION_CLOSE });
    expect(ok.text).toBe("\n\n<information>Doc 1(Title: France) Paris is the capital of France.</information>\n\n");
    const err = sr1.observation([{ name: "search", ok: false, content: "tool search: boom", errorKind: "error" }]);
    expect(err.text).toBe("\n\n<information>error: tool search: boom</information>\n\n");
    const prefixed = sr1.observation([{ name: "search", ok: false, content: "error: tool search: boom", errorKind: "error" }]);
    expect(prefixed.text).toBe(err.text);
    expect(sr1.invalidObservation("whatever")).toBe(INVALID_ACTION_OBSERVATION);
  });

  it("stops and special tokens", () => {
    expect(sr1.stops).toEqual(["</search>", "</answer>"]);
    expect(sr1.specialTokens).toEqual([...PROTOCOL_TAGS]);
    expect(sr1.specialTokens).toHaveLength(8);
  });
});
