/**
 * The long-document tools, bound to one episode's handbook and state: `search({query})` lists the paragraphs that name
 * a facility of the query, in handbook order (its own paragraph and the notices naming it alike: `p2 p5 p7`, or `no
 * paragraph matches`); `read({id})` shows one paragraph's text. Ids arrive as the word tokenizer decodes them
 * (`"p 3"`): whitespace is removed. The tool is named `search` with a string `query`, so `Trajectory.searches` counts
 * its calls.
 */
import { z } from "zod";
import { tool, type Tool } from "../../env/tool.ts";
import { FACILITIES, type HandbookQuestion } from "./world.ts";

/** An episode's state: the paragraph ids read, in call order. */
export interface LongdocState {
  read: string[];
}

/** What `search` shows when nothing matches. */
export const NO_MATCH = "no paragraph matches";
/** Tool names, in prompt order. */
export const LONGDOC_TOOL_NAMES = ["search", "read"] as const;

/** A paragraph id as `read` reads it: lower-case, whitespace removed. */
export function normParagraphId(s: string): string {
  return s.toLowerCase().replace(/\s+/g, "");
}

/** The text `search(query)` shows. @throws Error on an empty query */
export function searchText(q: HandbookQuestion, query: string): string {
  const words = query.toLowerCase().split(/[^a-z]+/).filter((w) => (FACILITIES as readonly string[]).includes(w));
  if (query.trim() === "") throw new Error("query must not be empty");
  const hits = q.paragraphs.filter((p) => p.facilities.some((f) => words.includes(f)));
  return hits.length === 0 ? NO_MATCH : hits.map((p) => p.id).join(" ");
}

/**
 * The two tools over a question's handbook, recording reads in `state`.
 * @throws (inside `execute`) `query must not be empty`; `unknown paragraph "x" (p1 … p8)`
 */
export function longdocTools(q: HandbookQuestion, state: LongdocState): Tool[] {
  const search = tool({
    name: "search",
    description: "Search the handbook; returns the ids of the paragraphs that name the facility, in order.",
    inputSchema: z.object({ query: z.string() }),
    execute: ({ query }): string => searchText(q, query),
  });
  const read = tool({
    name: "read",
    description: "Read one paragraph of the handbook by id.",
    inputSchema: z.object({ id: z.string() }),
    execute: ({ id }): string => {
      const p = q.paragraphs.find((x) => x.id === normParagraphId(id));
      if (p === undefined) throw new Error(`unknown paragraph "${normParagraphId(id)}" (p1 … p${q.paragraphs.length})`);
      state.read.push(p.id);
      return p.text;
    },
  });
  return [search, read] as Tool[];
}
