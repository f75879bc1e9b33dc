/**
 * The research tools, bound to one world and one episode's state: `search` (BM25 over the corpus,
 * `src/retrieval/bm25.ts`, title + text indexed as one field) and `open` (a document's full text). The answer is not a
 * tool: it is the protocol's final answer (`parseResearchAnswer`).
 *
 * Arguments arrive as the embedded word tokenizer decodes them (`"red falcon"`, `"red - falcon - call"`): queries are
 * lower-cased with whitespace collapsed, document ids lose all whitespace. Results are plain text, exactly what the
 * policy sees: `search` lists the ids of the best `SEARCH_TOP_K` documents, best first (`red-falcon-filing
 * red-falcon-call …`), or `no documents match`; `open` shows `title : text`.
 *
 * The tool is named `search` with a string `query`, so `Trajectory.searches` counts its calls (the `search_cost` term
 * and the `tool_spam` detector read that).
 */
import { z } from "zod";
import type { Passage } from "../../core/types.ts";
import { tool, type Tool } from "../../env/tool.ts";
import { BM25Index } from "../../retrieval/bm25.ts";
import { researchIndex, type ResearchWorld } from "./world.ts";

/** Documents `search` lists. */
export const SEARCH_TOP_K = 6;

/** What `search` shows when nothing matches. */
export const NO_MATCH = "no documents match";

/** An episode's research state: every `search` query and every document opened (ids, in call order). */
export interface ResearchState {
  queries: string[];
  opened: string[];
}

/** A query as `search` reads it: lower-case, whitespace collapsed and trimmed. */
export function normQuery(s: string): string {
  return s.toLowerCase().replace(/\s+/g, " ").trim();
}

/** A document id as `open` reads it: lower-case, every whitespace removed (`"red - falcon - call"` → `red-falcon-call`). */
export function normId(s: string): string {
  return s.toLowerCase().replace(/\s+/g, "");
}

/** Arguments of `search`. */
export const SEARCH_INPUT = z.object({ query: z.string() });
/** Arguments of `open`. */
export const OPEN_INPUT = z.object({ id: z.string() });

/** Tool names, in prompt order. */
export const RESEARCH_TOOL_NAMES = ["search", "open"] as const;

const indexes = new WeakMap<ResearchWorld, BM25Index>();

/** The BM25 index of a world's corpus (built once per world object; passages are `{id, title, text}`). */
export function corpusIndex(world: ResearchWorld): BM25Index {
  let ix = indexes.get(world);
  if (ix === undefined) {
    const passages: Passage[] = world.docs.map((d) => ({ id: d.id, title: d.title, text: d.text }));
    indexes.set(world, (ix = new BM25Index(passages)));
  }
  return ix;
}

/** The text `search(query)` shows in `world`: the best ids, space-separated, or `NO_MATCH`. @throws Error on an empty query */
export function searchText(world: ResearchWorld, query: string): string {
  const q = normQuery(query);
  if (q === "") throw new Error("query must not be empty");
  const hits = corpusIndex(world).search(q, SEARCH_TOP_K);
  return hits.length === 0 ? NO_MATCH : hits.map((h) => h.id).join(" ");
}

/** The text `open(id)` shows: `title : text`. @throws Error `unknown document "x"` */
export function openText(world: ResearchWorld, id: string): string {
  const d = researchIndex(world).doc.get(normId(id));
  if (d === undefined) throw new Error(`unknown document "${normId(id)}"`);
  return `${d.title} : ${d.text}`;
}

/**
 * The two tools over `world`, recording the episode in `state`.
 * - `search({query})` → the ids of the best `SEARCH_TOP_K` documents (BM25), best first, space-separated, or
 *   `no documents match`; records the query; @throws `query must not be empty`;
 * - `open({id})` → `title : text` of the document; records the id (normalised); @throws `unknown document "x"`.
 */
export function researchTools(world: ResearchWorld, state: ResearchState): Tool[] {
  const search = tool({
    name: "search",
    description: "Search the documents; returns document ids, best first.",
    inputSchema: SEARCH_INPUT,
    execute: ({ query }): string => {
      const text = searchText(world, query);
      state.queries.push(normQuery(query));
      return text;
    },
  });
  const open = tool({
    name: "open",
    description: "Open a document by id.",
    inputSchema: OPEN_INPUT,
    execute: ({ id }): string => {
      const text = openText(world, id);
      state.opened.push(normId(id));
      return text;
    },
  });
  return [search, open] as Tool[];
}
