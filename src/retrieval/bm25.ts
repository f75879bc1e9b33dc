/**
 * BM25 retrieval over passages with MiniSearch, configured to behave like Search-R1's sparse retriever
 * (Pyserini `LuceneSearcher` with its defaults k1 = 0.9, b = 0.4; Search-R1 `search_r1/search/retrieval_server.py`
 * `BM25Retriever`).
 */
import MiniSearch from "minisearch";
import type { Passage } from "../core/types.ts";

/** Pyserini's default BM25 parameters (`LuceneSearcher.set_bm25(k1=0.9, b=0.4)`); `d = 0` disables BM25+. */
export const PYSERINI_BM25 = { k: 0.9, b: 0.4, d: 0 } as const;

/**
 * Lowercase word tokenizer: maximal runs of Unicode letters/digits. No stemming or stop words (Pyserini's default
 * analyzer stems with Porter and drops English stop words; we keep words as they are so the tiny word-level policy
 * and the retriever see the same tokens).
 */
export function tokenizeForIndex(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** The document MiniSearch stores: `idx` = insertion order, the single indexed field `contents`. */
interface IndexedDoc {
  idx: number;
  contents: string;
}

/**
 * An in-memory BM25 index over passages.
 *
 * Scoring: plain Okapi BM25 summed over query terms, idf = ln(1 + (N − n + 0.5)/(n + 0.5)),
 * tf part = tf·(k1+1)/(tf + k1·(1 − b + b·dl/avgdl)), k1 = 0.9, b = 0.4 (dl: see below). Title and text are indexed as one field
 * `title + " " + text`, like Pyserini's single `contents` field (wiki-18 `contents` = `"Title"\ntext`), so there is
 * no per-field (BM25F) double counting. MiniSearch multiplies each score by the number of distinct matched query
 * terms; we divide that back out. Differences from Lucene that remain: MiniSearch measures a document's length
 * `dl` (and `avgdl`) in *distinct* terms, Lucene in tokens (quantised); Lucene omits the constant (k1+1) factor;
 * no stemming/stop words. Rankings can therefore differ from Pyserini's on near-ties and repetitive passages.
 * Query terms are OR-combined; repeated query terms count repeatedly (as in a Lucene boolean query).
 */
export class BM25Index {
  private readonly mini: MiniSearch<IndexedDoc>;
  private readonly passages: Passage[];
  private readonly byId = new Map<string, number>();

  /**
   * Indexes the passages (their `score` fields are dropped; other fields are returned with each hit).
   * @throws Error on a duplicate passage id (naming it and both positions)
   */
  constructor(passages: readonly Passage[]) {
    // Every field but the score is kept (fact, source and reliability feed evidence rewards).
    this.passages = passages.map(({ score: _score, ...p }) => ({ ...p }));
    this.passages.forEach((p, i) => {
      const prev = this.byId.get(p.id);
      if (prev !== undefined) throw new Error(`BM25Index: duplicate passage id ${JSON.stringify(p.id)} at ${prev} and ${i}`);
      this.byId.set(p.id, i);
    });
    this.mini = new MiniSearch<IndexedDoc>({
      idField: "idx",
      fields: ["contents"],
      storeFields: [],
      tokenize: tokenizeForIndex,
      processTerm: (term) => term,
      searchOptions: { bm25: { ...PYSERINI_BM25 }, prefix: false, fuzzy: false, combineWith: "OR" },
    });
    this.mini.addAll(this.passages.map((p, idx) => ({ idx, contents: `${p.title} ${p.text}` })));
  }

  /** Number of indexed passages. */
  get size(): number {
    return this.passages.length;
  }

  /** The passage with this id, or undefined. */
  get(id: string): Passage | undefined {
    const i = this.byId.get(id);
    return i === undefined ? undefined : { ...this.passages[i] };
  }

  /**
   * The `topK` best passages for `query`, best first, each a copy with `score` (BM25, higher is better).
   * Ties: score descending, then insertion order. A query with no word tokens, or no matching term, gives [].
   * @throws Error when topK is not a positive integer
   */
  search(query: string, topK: number): Passage[] {
    if (!Number.isInteger(topK) || topK <= 0) throw new Error(`BM25Index.search: topK must be a positive integer, got ${topK}`);
    if (tokenizeForIndex(query).length === 0) return [];
    const hits = this.mini
      .search(query)
      .map((r) => ({ idx: r.id as number, score: r.score / Math.max(1, r.queryTerms.length) }));
    hits.sort((a, b) => b.score - a.score || a.idx - b.idx);
    return hits.slice(0, topK).map((h) => ({ ...this.passages[h.idx], score: h.score }));
  }
}
