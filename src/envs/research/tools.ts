/**
 * The research tools, bound to one world and one episode's state: `search` (BM25, `src/retrieval/bm25.ts`, title +
 * text indexed as one field) and `open` (a document's full text), both scoped to the episode's company
 * (`ResearchState.company`): they see its 6 documents and its sector's 3 (`scopeDocs`) and name them by local id —
 * the document's kind (`filing`, `call`, `costs`, `press`, `filing-prior`, `call-prior`, `news`, `news-prior`,
 * `outlook`), so that no call copies the company's name (the 2 × 96 policy measured not doing it, README run m2). The
 * answer is not a tool: it is the protocol's final answer (`parseResearchAnswer`), added to the notebook's claims.
 *
 * Arguments arrive as the embedded word tokenizer decodes them (`"filing call costs"`, `"call - prior"`): queries are
 * lower-cased with whitespace collapsed, document ids lose all whitespace. Results are plain text, exactly what the
 * policy sees: `search` lists the local ids of the best `SEARCH_TOP_K` documents, best first (`costs filing call
 * filing-prior call-prior`), or `no documents match`; `open` shows `title : text`. The state records each opened
 * document by its full id (`red-falcon-call`), which is what the grader checks citations against.
 *
 * The tool is named `search` with a string `query`, so `Trajectory.searches` counts its calls (the `search_cost` term
 * and the `tool_spam` detector read that).
 *
 * `note` is the episode's notebook: `note({})` records each reason the document opened last states, citing that
 * document, and shows the whole notebook (`notes : lost_customer filing ; competition call`). The tool does the
 * reading: which label a document names is the tool's work, the decisions are the policy's — which documents to open
 * (the four stages, last year's, not the year before's), whether to note them, when to stop, and what to claim
 * beyond the notebook. Why: the 2 × 96 policy trained from scratch did not tell which of a stage's three labels a
 * document names (README: the call notes' labels were claimed about as often when stated as when not, runs p0 and n2;
 * after RL in run d it noted `price_cut` whatever the call said), and did not read a label 100–250 tokens back (probe
 * c1); reading a label out of a sentence is what any pretrained LLM does, and not what this env teaches. The
 * notebook is the episode's answer (`grader.ts`: the claims are the notes plus what the final answer adds; the answer
 * `notes` adds nothing).
 */
import { z } from "zod";
import type { Passage } from "../../core/types.ts";
import { tool, type Tool } from "../../env/tool.ts";
import { BM25Index } from "../../retrieval/bm25.ts";
import { LOCAL_IDS, researchIndex, resolveDocId, scopeDocs, type Reason, type ResearchWorld } from "./world.ts";

/** Documents `search` lists. */
export const SEARCH_TOP_K = 6;

/** What `search` shows when nothing matches. */
export const NO_MATCH = "no documents match";

/** One notebook entry: a reason label and the local id of the document it was noted from (`price_cut`, `call`). */
export interface ResearchNote {
  label: Reason;
  cite: string;
}

/**
 * An episode's research state: the question's `company` (its name; the scope of the tools), every `search` query,
 * every document opened (full ids, in call order) and the notebook (`note`'s entries, in note order, no duplicates).
 */
export interface ResearchState {
  company: string;
  queries: string[];
  opened: string[];
  notes: ResearchNote[];
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

/** Arguments of `note`: none (`{}`); the reasons are those the document opened last states. */
export const NOTE_INPUT = z.object({});

/** Tool names, in prompt order. */
export const RESEARCH_TOOL_NAMES = ["search", "open", "note"] as const;

/** The notebook as `note` shows it: `notes : lost_customer filing ; price_cut call` (`notes :` when empty). */
export function notebookText(notes: readonly ResearchNote[]): string {
  return notes.length === 0 ? "notes :" : `notes : ${notes.map((n) => `${n.label} ${n.cite}`).join(" ; ")}`;
}

/**
 * Adds each reason the document opened last states (`ResearchDoc.states`: a 2025 stage document's causes, a 2024
 * document's other causes, none for the press release or the outlook) to `state.notes`, citing that document by its
 * local id, and returns the notebook text. A reason already noted with the same citation is not added twice; a
 * document that states none leaves the notebook as it was.
 * @throws Error `open a document first`
 */
export function addNotes(world: ResearchWorld, state: ResearchState): string {
  const last = state.opened[state.opened.length - 1];
  if (last === undefined) throw new Error("open a document first");
  const doc = researchIndex(world).doc.get(last)!;
  for (const label of doc.states) {
    if (!state.notes.some((n) => n.label === label && n.cite === doc.kind)) state.notes.push({ label, cite: doc.kind });
  }
  return notebookText(state.notes);
}

const indexes = new WeakMap<ResearchWorld, Map<string, BM25Index>>();

/**
 * The BM25 index of the documents an episode about `company` sees (`scopeDocs`; passages `{id: local id, title, text}`),
 * built once per world object and company.
 * @throws Error when `company` is not in the world
 */
export function scopeIndex(world: ResearchWorld, company: string): BM25Index {
  let byCompany = indexes.get(world);
  if (byCompany === undefined) indexes.set(world, (byCompany = new Map()));
  let ix = byCompany.get(company);
  if (ix === undefined) {
    const passages: Passage[] = scopeDocs(world, company).map((d) => ({ id: d.kind, title: d.title, text: d.text }));
    byCompany.set(company, (ix = new BM25Index(passages)));
  }
  return ix;
}

/**
 * The text `search(query)` shows in an episode about `company`: the best local ids, space-separated, or `NO_MATCH`.
 * @throws Error on an empty query, or when `company` is not in the world
 */
export function searchText(world: ResearchWorld, company: string, query: string): string {
  const q = normQuery(query);
  if (q === "") throw new Error("query must not be empty");
  const hits = scopeIndex(world, company).search(q, SEARCH_TOP_K);
  return hits.length === 0 ? NO_MATCH : hits.map((h) => h.id).join(" ");
}

/**
 * The full id of the document that `open(id)` opens in an episode about `company`: `id` normalised, a local id of
 * `LOCAL_IDS`; undefined for anything else (another company's document, a full id, a typo).
 */
export function openedDocId(world: ResearchWorld, company: string, id: string): string | undefined {
  const local = normId(id);
  const c = researchIndex(world).company.get(company);
  if (c === undefined || !(LOCAL_IDS as readonly string[]).includes(local)) return undefined;
  return resolveDocId(c, local);
}

/** The text `open(id)` shows in an episode about `company`: `title : text`. @throws Error `unknown document "x"` */
export function openText(world: ResearchWorld, company: string, id: string): string {
  const full = openedDocId(world, company, id);
  const d = full === undefined ? undefined : researchIndex(world).doc.get(full);
  if (d === undefined) throw new Error(`unknown document "${normId(id)}"`);
  return `${d.title} : ${d.text}`;
}

/**
 * The three tools over `world`, scoped to `state.company` and recording the episode in `state`.
 * - `search({query})` → the local ids of the best `SEARCH_TOP_K` of the episode's documents (BM25), best first,
 *   space-separated, or `no documents match`; records the query; @throws `query must not be empty`;
 * - `open({id})` → `title : text` of the episode's document with local id `id`; records its full id;
 *   @throws `unknown document "x"`;
 * - `note({})` → the notebook after adding the reasons the document opened last states, each citing it (`addNotes`);
 *   @throws `open a document first`.
 */
export function researchTools(world: ResearchWorld, state: ResearchState): Tool[] {
  const search = tool({
    name: "search",
    description: "Search the company's documents and its industry's; returns document ids, best first.",
    inputSchema: SEARCH_INPUT,
    execute: ({ query }): string => {
      const text = searchText(world, state.company, query);
      state.queries.push(normQuery(query));
      return text;
    },
  });
  const open = tool({
    name: "open",
    description: "Open a document by id (filing, call, costs, press, filing-prior, call-prior, news, news-prior, outlook).",
    inputSchema: OPEN_INPUT,
    execute: ({ id }): string => {
      const text = openText(world, state.company, id);
      state.opened.push(openedDocId(world, state.company, id)!);
      return text;
    },
  });
  const note = tool({
    name: "note",
    description: "Note the reasons the document opened last states; returns every note so far.",
    inputSchema: NOTE_INPUT,
    execute: (): string => addNotes(world, state),
  });
  return [search, open, note] as Tool[];
}
