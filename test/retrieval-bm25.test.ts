import { describe, expect, it } from "vitest";
import type { Passage } from "../src/core/types.ts";
import { BM25Index, tokenizeForIndex } from "../src/retrieval/bm25.ts";
import { loadCorpus } from "../src/retrieval/corpus.ts";

const fixture: Passage[] = [
  { id: "a", title: "Apple", text: "apple pie is a dessert made with apples" },
  { id: "b", title: "Banana", text: "banana bread often contains apple sauce and banana" },
  { id: "c", title: "Cherry", text: "cherry tart" },
  { id: "d", title: "Apple orchard", text: "an apple orchard grows apple trees" },
  { id: "e", title: "Cherry", text: "cherry tart" },
];

/**
 * Reference Okapi BM25 (k1 0.9, b 0.4) over title + text, to check the MiniSearch configuration. Document length
 * is counted in distinct terms, as MiniSearch does.
 */
function reference(query: string, docs: Passage[]): number[] {
  const toks = docs.map((d) => tokenizeForIndex(`${d.title} ${d.text}`));
  const len = toks.map((t) => new Set(t).size);
  const avg = len.reduce((s, l) => s + l, 0) / len.length;
  return toks.map((t, i) =>
    tokenizeForIndex(query).reduce((s, q) => {
      const n = toks.filter((x) => x.includes(q)).length;
      const tf = t.filter((x) => x === q).length;
      if (tf === 0) return s;
      const idf = Math.log(1 + (docs.length - n + 0.5) / (n + 0.5));
      return s + (idf * tf * 1.9) / (tf + 0.9 * (0.6 + (0.4 * len[i]) / avg));
    }, 0),
  );
}

describe("BM25Index", () => {
  const index = new BM25Index(fixture);
  it("ranks the fixture in the expected order with BM25 scores", () => {
    const r = index.search("apple orchard", 5);
    expect(r.map((p) => p.id)).toEqual(["d", "a", "b"]);
    const ref = reference("apple orchard", fixture);
    for (const p of r) expect(p.score).toBeCloseTo(ref[fixture.findIndex((f) => f.id === p.id)], 10);
  });
  it("respects topK, breaks ties by insertion order, ignores case", () => {
    expect(index.search("APPLE", 1).map((p) => p.id)).toEqual(["d"]);
    const tie = index.search("cherry", 3);
    expect(tie.map((p) => p.id)).toEqual(["c", "e"]);
    expect(tie[0].score).toBe(tie[1].score);
  });
  it("no prefix matching, empty query → []", () => {
    expect(index.search("appl", 3)).toEqual([]);
    expect(index.search("", 3)).toEqual([]);
    expect(index.search(" ?! ", 3)).toEqual([]);
    expect(() => index.search("apple", 0)).toThrow(/topK/);
  });
  it("rejects duplicate ids", () => {
    expect(() => new BM25Index([fixture[0], fixture[0]])).toThrow(/duplicate passage id "a"/);
  });
  it("wiki-18 sample: 1000 passages, 'radio' ranks a passage containing it first", async () => {
    const passages = await loadCorpus("data/wiki18-sample-1000.jsonl");
    expect(passages).toHaveLength(1000);
    const top = new BM25Index(passages).search("radio", 3);
    expect(top).toHaveLength(3);
    expect(`${top[0].title} ${top[0].text}`.toLowerCase()).toMatch(/\bradio\b/);
    expect(top[0].score ?? 0).toBeGreaterThanOrEqual(top[1].score ?? 0);
  });
});
