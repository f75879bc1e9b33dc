/**
 * What a search tool asks of a retrieval backend: the top `topK` passages for a query, in rank order (BM25Index, a
 * remote retrieval server, a dense index…).
 */
import type { Passage } from "../core/types.ts";

/** Anything that returns the `topK` best passages for a query, best first (BM25Index, a remote retriever…). */
export interface Retriever {
  search(query: string, topK: number): Passage[] | Promise<Passage[]>;
}
