import { describe, expect, it } from "vitest";
import { searchAction, type Action } from "../src/core/types.ts";
import { INVALID_ACTION_OBSERVATION, formatPassages, informationObservation, parseSearchR1Action } from "../src/protocol/searchR1.ts";

describe("parseSearchR1Action", () => {
  const valid: [string, string, Action][] = [
    ["valid search", "<search> capital of  france </search>", searchAction("capital of france")],
    ["valid answer", "<answer>paris</answer>", { type: "answer", answer: "paris" }],
    ["think then search", "<think> i need the capital </think>\n<search> france </search>", searchAction("france")],
    ["two actions → the first", "<search> a </search> <answer> b </answer>", searchAction("a")],
    ["answer before search → the answer", "<answer> b </answer><search> a </search>", { type: "answer", answer: "b" }],
    ["text after answer ignored", "<answer> paris </answer> and some more text", { type: "answer", answer: "paris" }],
    ["multi-line contents collapsed", "<answer>\n united\n  states \n</answer>", { type: "answer", answer: "united states" }],
    ["tags inside think ignored", "<think> <answer> x </answer> </think> <search> y </search>", searchAction("y")],
    ["stray closing tag before is ignored", "</answer> <search> q </search>", searchAction("q")],
  ];
  it.each(valid)("%s", (_name, text, expected) => {
    expect(parseSearchR1Action(text)).toEqual(expected);
  });

  const invalid: [string, string, RegExp][] = [
    ["malformed (no tags)", "the capital is paris", /^no action/],
    ["misspelt tag", "< search > q </search>", /^no action/],
    ["only think", "<think> hmm </think>", /^no action/],
    ["empty text", "", /^no action/],
    ["unclosed search", "<search> capital of france", /^unclosed <search>/],
    ["unclosed answer", "<answer> paris", /^unclosed <answer>/],
    ["nested", "<search> <answer> x </answer> </search>", /^nested action: <answer> inside <search>/],
    ["unclosed then answer", "<search> q <answer> a </answer>", /^nested action/],
    ["mismatched close", "<search> q </answer>", /^mismatched tags/],
    ["empty query", "<search>   </search>", /^empty query/],
    ["empty answer", "<answer></answer>", /^empty answer/],
  ];
  it.each(invalid)("%s → invalid", (_name, text, reason) => {
    const a = parseSearchR1Action(text);
    expect(a.type).toBe("invalid");
    if (a.type === "invalid") expect(a.reason).toMatch(reason);
  });
});

describe("Search-R1 strings", () => {
  it("corrective observation is verbatim", () => {
    expect(INVALID_ACTION_OBSERVATION).toBe(
      "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n",
    );
  });
  it("formatPassages and the information wrapper (_passages2string + strip)", () => {
    const s = formatPassages([
      { id: "1", title: "France", text: "france is a country ." },
      { id: "2", title: "Paris", text: "paris is a city ." },
    ]);
    expect(s).toBe("Doc 1(Title: France) france is a country .\nDoc 2(Title: Paris) paris is a city .\n");
    expect(informationObservation(s)).toBe(
      "\n\n<information>Doc 1(Title: France) france is a country .\nDoc 2(Title: Paris) paris is a city .</information>\n\n",
    );
    expect(formatPassages([])).toBe("");
  });
});

describe("stripThink", () => {
  it("removes complete think blocks exactly as the lazy regex does (linear time; long unclosed runs were quadratic)", async () => {
    const fc = (await import("fast-check")).default;
    const { stripThink } = await import("../src/protocol/think.ts");
    const re = /<think>[\s\S]*?<\/think>/g;
    const piece = fc.constantFrom("<think>", "</think>", "<search>", "</search>", "a", " ", "\n", "<thin", "k>", "é");
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (parts) => {
        const s = parts.join("");
        return stripThink(s) === s.replace(re, " ") && stripThink(s, true) === s.replace(re, (m) => " ".repeat(m.length));
      }),
      { numRuns: 3000, seed: 7 },
    );
    const long = "<think>".repeat(60_000) + "<search> q </search>";
    expect(stripThink(long)).toBe(long);
  });
});
