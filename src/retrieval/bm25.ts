/**
 * BM25 retrieval over passages, configured to behave like Search-R1's sparse retriever (Pyserini `LuceneSearcher`
 * with its defaults k1 = 0.9, b = 0.4; Search-R1 `search_r1/search/retrieval_server.py` `BM25Retriever`).
 *
 * The index is an inverted index in typed arrays. It replaced MiniSearch 7.2 (which allocates several
 * objects per matching document per query and has no top-k: 100 000 passages took ~1 s per question), and gives
 * the same scores bit for bit and the same rankings (bench/retrieval.ts checks it; benchmark in BENCHMARKS.md).
 */
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

/**
 * An in-memory BM25 index over passages.
 *
 * Scoring: plain Okapi BM25 summed over query terms, idf = ln(1 + (N − n + 0.5)/(n + 0.5)),
 * tf part = tf·(k1+1)/(tf + k1·(1 − b + b·dl/avgdl)), k1 = 0.9, b = 0.4. Title and text are indexed as one field
 * `title + " " + text`, like Pyserini's single `contents` field (wiki-18 `contents` = `"Title"\ntext`), so there is
 * no per-field (BM25F) double counting. Differences from Lucene: a document's length `dl` (and `avgdl`) is counted
 * in *distinct* terms (as MiniSearch did), Lucene counts tokens (quantised); Lucene omits the constant (k1+1)
 * factor; no stemming/stop words. Rankings can therefore differ from Pyserini's on near-ties and repetitive
 * passages. Query terms are OR-combined; repeated query terms count repeatedly (as in a Lucene boolean query).
 *
 * Cost: build O(tokens); a query scores every posting of its terms (O(Σ document frequencies), no allocation per
 * posting) and keeps the top k by insertion. Memory: 12 bytes per (term, passage) pair plus 14 bytes per passage
 * of query scratch space, which every search reuses (search is synchronous, so calls never interleave).
 */
export class BM25Index {
  private readonly passages: Passage[];
  private readonly byId = new Map<string, number>();
  private readonly termIds = new Map<string, number>();
  /** Postings of term t: `docs[start[t] .. start[t+1])` (ascending passage index) and their tf parts. */
  private readonly start: Int32Array;
  private readonly docs: Int32Array;
  /** tf·(k1+1)/(tf + k1·(1 − b + b·dl/avgdl)) per posting, computed once (idf is applied per query). */
  private readonly parts: Float64Array;
  /** Query scratch: score and number of distinct matched query terms per passage, and the passages touched. */
  private readonly scores: Float64Array;
  private readonly matched: Uint16Array;
  private readonly touched: Int32Array;

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
    const n = this.passages.length;
    // Pass 1: each passage's distinct term ids and frequencies, flat (no per-term arrays to grow); df per term.
    let flatT = new Int32Array(1 << 16);
    let flatF = new Int32Array(1 << 16);
    let df = new Int32Array(1 << 12);
    const docEnd = new Int32Array(n);
    const dl = new Float64Array(n);
    let m = 0;
    let avgdl = 0;
    const counts = new Map<string, number>();
    for (let d = 0; d < n; d++) {
      counts.clear();
      for (const t of tokenizeForIndex(`${this.passages[d].title} ${this.passages[d].text}`)) counts.set(t, (counts.get(t) ?? 0) + 1);
      dl[d] = counts.size;
      // MiniSearch's running mean, kept so that scores (and so rankings at near-ties) stay bit-identical.
      avgdl = (avgdl * d + counts.size) / (d + 1);
      if (m + counts.size > flatT.length) {
        let cap = flatT.length * 2;
        while (m + counts.size > cap) cap *= 2;
        flatT = grow(flatT, cap);
        flatF = grow(flatF, cap);
      }
      for (const [t, tf] of counts) {
        let id = this.termIds.get(t);
        if (id === undefined) {
          id = this.termIds.size;
          this.termIds.set(t, id);
          if (id >= df.length) df = grow(df, df.length * 2);
        }
        df[id]++;
        flatT[m] = id;
        flatF[m++] = tf;
      }
      docEnd[d] = m;
    }
    // Pass 2: every term's postings contiguous (CSR), passages ascending.
    const nTerms = this.termIds.size;
    this.start = new Int32Array(nTerms + 1);
    for (let t = 0; t < nTerms; t++) this.start[t + 1] = this.start[t] + df[t];
    const fill = this.start.slice(0, nTerms);
    this.docs = new Int32Array(m);
    this.parts = new Float64Array(m);
    const { k, b } = PYSERINI_BM25;
    for (let d = 0, j = 0; d < n; d++) {
      const norm = k * (1 - b + (b * dl[d]) / avgdl);
      for (; j < docEnd[d]; j++) {
        const p = fill[flatT[j]]++;
        this.docs[p] = d;
        this.parts[p] = (flatF[j] * (k + 1)) / (flatF[j] + norm);
      }
    }
    this.scores = new Float64Array(n);
    this.matched = new Uint16Array(n);
    this.touched = new Int32Array(n);
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
    const { scores, matched, touched, start, docs, parts } = this;
    const n = this.passages.length;
    const seen = new Set<number>();
    let nTouched = 0;
    for (const term of tokenizeForIndex(query)) {
      const id = this.termIds.get(term);
      if (id === undefined) continue;
      const df = start[id + 1] - start[id];
      const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
      const first = !seen.has(id);
      seen.add(id);
      for (let j = start[id]; j < start[id + 1]; j++) {
        const d = docs[j];
        if (matched[d] === 0) touched[nTouched++] = d;
        scores[d] += idf * parts[j];
        if (first) matched[d]++;
      }
    }
    // Top k by insertion into a sorted list of at most k (score descending, then passage index); resets the scratch.
    const top: { idx: number; score: number }[] = [];
    for (let i = 0; i < nTouched; i++) {
      const d = touched[i];
      const q = matched[d];
      // ×q÷q: MiniSearch multiplied by the matched-term count and BM25Index divided it back out; the rounding is
      // kept so that scores stay bit-identical to the MiniSearch-based index (same rankings, same training runs).
      const score = (scores[d] * q) / q;
      scores[d] = 0;
      matched[d] = 0;
      const last = top[topK - 1];
      if (last && (score < last.score || (score === last.score && d > last.idx))) continue;
      let p = Math.min(top.length, topK - 1);
      while (p > 0 && (top[p - 1].score < score || (top[p - 1].score === score && top[p - 1].idx > d))) {
        top[p] = top[p - 1];
        p--;
      }
      top[p] = { idx: d, score };
    }
    return top.map((h) => ({ ...this.passages[h.idx], score: h.score }));
  }
}

/** A copy of `a` with length `length` (≥ a.length). */
function grow(a: Int32Array, length: number): Int32Array<ArrayBuffer> {
  const out = new Int32Array(length);
  out.set(a);
  return out;
}
