/**
 * A straightforward BM25 for the retrieval benchmark (bench/retrieval.ts) to compare `BM25Index` against: a plain
 * inverted index (`Map<term, postings>`), exhaustive scoring of every posting of every query term, then a full sort.
 * Same tokenizer (`tokenizeForIndex`), same text (`title + " " + text`), same Okapi BM25 as `BM25Index`:
 * idf = ln(1 + (N − n + 0.5)/(n + 0.5)), tf part = tf·(k1+1)/(tf + k1·(1 − b + b·dl/avgdl)), k1 = 0.9, b = 0.4,
 * summed over query terms (a repeated query term counts repeatedly); ties by insertion order.
 * The one switch is how a document's length `dl` is counted: in tokens (Lucene/Pyserini) or in distinct terms
 * (what `BM25Index` does, as MiniSearch did).
 */
import type { Passage } from "../src/core/types.ts";
import { tokenizeForIndex } from "../src/retrieval/bm25.ts";

/** How `dl` and `avgdl` are counted: `tokens` (Lucene) or `distinct` terms (BM25Index). */
export type LengthMode = "tokens" | "distinct";

/** Options of {@link ReferenceBM25}. */
export interface ReferenceOptions {
  /** Term-frequency saturation (default 0.9, Pyserini). */
  k1?: number;
  /** Length normalisation (default 0.4, Pyserini). */
  b?: number;
  /** Document length measure (default `tokens`). */
  length?: LengthMode;
}

/** One hit: the document's index in the input order and its BM25 score. */
export interface ReferenceHit {
  idx: number;
  score: number;
}

/**
 * The BM25 contribution of one query term to one document (dimensionless).
 * @param tf occurrences of the term in the document
 * @param df documents containing the term
 * @param n documents in the index
 * @param dl the document's length; @param avgdl the mean length (same unit as dl)
 */
export function bm25Term(tf: number, df: number, n: number, dl: number, avgdl: number, k1 = 0.9, b = 0.4): number {
  const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
  return (idf * tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * dl) / avgdl));
}

/** Postings of one term: parallel arrays of document indices (ascending) and term frequencies. */
interface Postings {
  docs: number[];
  tfs: number[];
}

/** The reference BM25 index over `title + " " + text` of each document. */
export class ReferenceBM25 {
  private readonly index = new Map<string, Postings>();
  private readonly lengths: number[] = [];
  private readonly avgdl: number;
  private readonly k1: number;
  private readonly b: number;

  constructor(docs: readonly { title: string; text: string }[], options: ReferenceOptions = {}) {
    this.k1 = options.k1 ?? 0.9;
    this.b = options.b ?? 0.4;
    const mode = options.length ?? "tokens";
    let total = 0;
    docs.forEach((d, idx) => {
      const counts = new Map<string, number>();
      const toks = tokenizeForIndex(`${d.title} ${d.text}`);
      for (const t of toks) counts.set(t, (counts.get(t) ?? 0) + 1);
      for (const [t, tf] of counts) {
        let p = this.index.get(t);
        if (!p) this.index.set(t, (p = { docs: [], tfs: [] }));
        p.docs.push(idx);
        p.tfs.push(tf);
      }
      const dl = mode === "tokens" ? toks.length : counts.size;
      this.lengths.push(dl);
      total += dl;
    });
    this.avgdl = docs.length > 0 ? total / docs.length : 0;
  }

  /** Number of indexed documents. */
  get size(): number {
    return this.lengths.length;
  }

  /** The `topK` best documents for `query`, best first (score descending, then input order); [] when nothing matches. */
  search(query: string, topK: number): ReferenceHit[] {
    const n = this.lengths.length;
    const scores = new Map<number, number>();
    for (const term of tokenizeForIndex(query)) {
      const p = this.index.get(term);
      if (!p) continue;
      for (let j = 0; j < p.docs.length; j++) {
        const d = p.docs[j];
        const s = bm25Term(p.tfs[j], p.docs.length, n, this.lengths[d], this.avgdl, this.k1, this.b);
        scores.set(d, (scores.get(d) ?? 0) + s);
      }
    }
    const hits = [...scores].map(([idx, score]) => ({ idx, score }));
    hits.sort((a, b) => b.score - a.score || a.idx - b.idx);
    return hits.slice(0, topK);
  }
}

/** A deterministic hash of three small integers to [0, 1). */
function hash01(a: number, b: number, c: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x632be5ab, 0xc2b2ae35) ^ Math.imul(c + 0x27d4eb2f, 0x165667b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return (h >>> 0) / 2 ** 32;
}

/**
 * `base` replicated to `n` passages for the retrieval benchmark. Copy 0 is the passage as it is; copy c ≥ 1 has id
 * `<id>:c`, drops each word of the text with probability 1/10 (a hash of passage, copy and word position:
 * deterministic) and ends with the copy's own token `v<c>`, so copies differ in length and term frequencies.
 */
export function replicate(base: readonly Passage[], n: number): Passage[] {
  if (base.length === 0 && n > 0) throw new Error("replicate: empty corpus");
  const out: Passage[] = [];
  for (let c = 0; out.length < n; c++) {
    for (let i = 0; i < base.length && out.length < n; i++) {
      const p = base[i];
      if (c === 0) {
        out.push({ id: p.id, title: p.title, text: p.text });
        continue;
      }
      const words = p.text.split(" ").filter((_, j) => hash01(i, c, j) >= 0.1);
      out.push({ id: `${p.id}:${c}`, title: p.title, text: `${words.join(" ")} v${c}` });
    }
  }
  return out;
}
