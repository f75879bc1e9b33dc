// The byte-level BPE trainer (src/policy/hf/trainBpe.ts): the tokenizer.json it writes loads in HfTokenizer
// (@huggingface/tokenizers), encodes any text without an unknown token, decodes back exactly, splits digits, keeps
// special tokens whole, honours the vocabulary budget, and is reproduced byte for byte by a second training.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { HfTokenizer } from "../src/policy/hf/tokenizer.ts";
import { byteSymbols, trainByteLevelBpe } from "../src/policy/hf/trainBpe.ts";

const repo = resolve(import.meta.dirname, "..");
/** The wiki-18 sample the project ships (the first 300 passages): real English text with names, dates and numbers. */
const wiki = readFileSync(join(repo, "data", "wiki18-sample-1000.jsonl"), "utf8")
  .split("\n")
  .filter(Boolean)
  .slice(0, 300)
  .map((l) => (JSON.parse(l) as { contents: string }).contents);
const SPECIALS = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"];
const load = (json: ReturnType<typeof trainByteLevelBpe>["json"]) => new HfTokenizer({ json, config: undefined, source: "(trained)" });

describe("trainByteLevelBpe", () => {
  const trained = trainByteLevelBpe(wiki, { vocabSize: 1024, specialTokens: SPECIALS });
  const tok = load(trained.json);

  it("has exactly the budget: 256 byte symbols + merges + special tokens, every byte symbol present", () => {
    expect(trained.merges).toBe(1024 - 256 - SPECIALS.length);
    expect(trained.mergesLearned).toBeGreaterThan(trained.merges);
    expect(tok.vocabSize).toBe(1024);
    // Our table is the one the trainer's byte-level pre-tokenizer uses (its own alphabet, from the bindings).
    const native = createRequire(import.meta.url)("tokenizers") as { byteLevelAlphabet(): string[] };
    expect(new Set(byteSymbols())).toEqual(new Set(native.byteLevelAlphabet()));
  });

  it("round-trips text it never saw — other scripts, emoji, control characters, JSON, ids — with no unknown token", () => {
    const samples = [
      "Book mu5101 then h204; passport X1234567 — total €1,249.50 (2026-12-07T09:30Z).",
      '{"id":"p-4821","stock":[12,0,7],"ok":true,"note":null}\n\t- tab\r\nCRLF  double  spaces',
      "日本語のテキスト, Ελληνικά, русский, emoji 😁🚀 and a ZWJ family 👩‍👩‍👧",
      "\u0000\u0001 control \u007f and a lone combining mark \u0301",
      "",
    ];
    for (const s of samples) {
      const ids = tok.encode(s);
      expect(ids.every((id) => Number.isInteger(id) && id >= 0 && id < tok.vocabSize)).toBe(true);
      expect(tok.decode(ids)).toBe(s);
    }
  });

  it("splits every digit, so an unseen number or id is a sequence of known pieces", () => {
    const digitIds = new Set("0123456789".split("").map((d) => tok.encode(d)[0]));
    expect(digitIds.size).toBe(10);
    const ids = tok.encode("mu98765432");
    const digits = ids.filter((id) => digitIds.has(id));
    expect(digits.length).toBe(8); // one token per digit, none merged with another or with a letter
    expect(tok.decode(ids)).toBe("mu98765432");
  });

  it("matches each special token whole, as one id, inside any text", () => {
    const ids = tok.encode("<|im_start|>assistant\n<tool_call>{}</tool_call><|im_end|>");
    for (const [i, s] of SPECIALS.entries()) expect(ids).toContain(1024 - SPECIALS.length + i);
    expect(ids.filter((id) => id >= 1024 - SPECIALS.length).length).toBe(4);
  });

  it("is deterministic: a second training gives the same document byte for byte", () => {
    expect(JSON.stringify(trainByteLevelBpe(wiki, { vocabSize: 1024, specialTokens: SPECIALS }).json)).toBe(JSON.stringify(trained.json));
  });

  it("a smaller budget keeps a prefix of the same merges", () => {
    const small = trainByteLevelBpe(wiki, { vocabSize: 512 });
    const mergesOf = (t: ReturnType<typeof trainByteLevelBpe>) => t.json.model.merges as string[][];
    expect(mergesOf(small)).toEqual(mergesOf(trained).slice(0, 256));
  });

  it("refuses a budget without room for the byte symbols and special tokens, and empty or repeated specials", () => {
    expect(() => trainByteLevelBpe(wiki, { vocabSize: 259, specialTokens: SPECIALS })).toThrow("vocabSize must be an integer ≥ 256 + 4 special tokens = 260, got 259");
    expect(() => trainByteLevelBpe(wiki, { vocabSize: 300, specialTokens: [""] })).toThrow("an empty string cannot be a token");
    expect(() => trainByteLevelBpe(wiki, { vocabSize: 300, specialTokens: ["<a>", "<a>"] })).toThrow("each may appear once");
  });
});
