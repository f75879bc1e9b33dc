import { describe, expect, it } from "vitest";
import { emCheck, normalizeAnswer, subEmCheck, tokenF1 } from "../src/reward/em.ts";

describe("normalizeAnswer (Search-R1 qa_em.py: lower → punct → articles → whitespace)", () => {
  const table: [string, string, string][] = [
    ["plain lowercase", "Paris", "paris"],
    ["leading article + case", "The Eiffel Tower", "eiffel tower"],
    ["all three articles", "A cat, an owl, the dog", "cat owl dog"],
    ["article inside a word is kept", "theater", "theater"],
    ["'an' inside 'another' is kept", "another one", "another one"],
    ["ASCII punctuation is deleted, not spaced", "U.S.A.", "usa"],
    ["hyphens deleted → words glued", "rock-n-roll", "rocknroll"],
    // punct removed BEFORE articles: "the-end" → "theend", which is not the word "the"
    ["punct before articles", "the-end", "theend"],
    ["underscore is in string.punctuation", "_the", ""],
    ["unicode guillemets are NOT stripped", "«Paris»", "«paris»"],
    ["curly apostrophe is NOT stripped", "Paris’", "paris’"],
    ["ASCII apostrophe is stripped", "Paris'", "paris"],
    ["whitespace collapsed (tab, newline, nbsp, ideographic space)", "  New \t York\n\u00a0City\u3000", "new york city"],
    // Python str.split() does not treat U+FEFF as whitespace; JS \s would
    ["BOM is not whitespace in Python", "\ufeffparis", "\ufeffparis"],
    // Python \b is Unicode-aware: é and digits are word characters, so no boundary before "the"
    ["unicode word char blocks article boundary", "éthe", "éthe"],
    ["digit blocks article boundary", "1the", "1the"],
    ["only articles", "a an the", ""],
    ["empty string", "", ""],
  ];
  it.each(table)("%s: %j → %j", (_name, input, expected) => {
    expect(normalizeAnswer(input)).toBe(expected);
  });
});

describe("emCheck / subEmCheck", () => {
  it("matches any of several golds", () => {
    expect(emCheck("the Big Apple", ["New York City", "big apple"])).toBe(1);
    expect(emCheck("Boston", ["New York City", "big apple"])).toBe(0);
  });
  it("accepts a single gold string like Search-R1", () => {
    expect(emCheck("PARIS.", "paris")).toBe(1);
  });
  it("unicode punctuation blocks a match", () => {
    expect(emCheck("«Paris»", ["Paris"])).toBe(0);
  });
  it("no golds → 0; empty matches empty", () => {
    expect(emCheck("Paris", [])).toBe(0);
    expect(emCheck("", [""])).toBe(1);
    expect(emCheck("the", ["a"])).toBe(1); // both normalise to ""
  });
  it("subEm is a character substring test on normalised text", () => {
    expect(subEmCheck("The capital is Paris, France", ["paris"])).toBe(1);
    expect(subEmCheck("Parisian", ["Paris"])).toBe(1); // substring, not token
    expect(subEmCheck("Lyon", ["Paris", "Marseille"])).toBe(0);
    expect(subEmCheck("Paris", ["Paris, France"])).toBe(0); // gold longer than prediction
  });
});

describe("tokenF1 (SQuAD v1.1)", () => {
  it("partial overlap", () => {
    // pred "the Eiffel Tower in Paris" → [eiffel, tower, in, paris] (4); gold → [eiffel, tower] (2)
    // same = 2; P = 2/4 = 0.5; R = 2/2 = 1; F1 = 2·0.5·1/(0.5+1) = 2/3
    expect(tokenF1("the Eiffel Tower in Paris", ["Eiffel Tower"])).toBeCloseTo(2 / 3, 12);
  });
  it("counts multiplicity and takes the max over golds", () => {
    // vs "paris": pred [paris, paris], gold [paris]: same = min(2,1) = 1; P = 1/2, R = 1 → F1 = 2/3
    // vs "paris paris france": same = 2; P = 2/2 = 1, R = 2/3 → F1 = 2·1·(2/3)/(5/3) = 0.8
    expect(tokenF1("Paris paris", ["paris"])).toBeCloseTo(2 / 3, 12);
    expect(tokenF1("Paris paris", ["paris", "paris paris france"])).toBeCloseTo(0.8, 12);
  });
  it("exact → 1, disjoint / empty → 0", () => {
    expect(tokenF1("The Beatles", ["beatles"])).toBe(1);
    expect(tokenF1("Lyon", ["Paris"])).toBe(0);
    expect(tokenF1("", ["Paris"])).toBe(0);
    expect(tokenF1("", [""])).toBe(0); // v1.1: no overlap → 0
    expect(tokenF1("Paris", [])).toBe(0);
  });
});
