/**
 * Scripted researchers whose episodes are the warm-start demonstrations. Every document is named by its local id
 * (the episode is scoped to the question's company, `scopeDocs`), and every query is a fixed phrase, so no action
 * copies the company's name. `careful` follows the seed's sequence: `search(filing call costs)` → open `filing`
 * (revenue change) → open `call` (management commentary) → `search(industry news)` → open `news` (the sector's
 * industry news) → open `costs` (cost structure), noting each document that states a reason right after opening it
 * (`note({})`: the tool records the reasons the document states; no note when it names none) → answers `notes`
 * (`NOTES_ANSWER`: the notebook holds every reason it read, each citing the document it was read in). Each other
 * persona is `careful` with ONE habit, drawn once per episode (from the episode's seed) at `HABIT_RATE`:
 * - `one-doc`: stops after the first document (the filing) and answers (a guess citing the filing when it found
 *   nothing there);
 * - `padder`: reads and notes everything, then pads the answer with every label, each citing its stage's document;
 * - `endless`: searches over and over (`ENDLESS_SEARCHES` queries), never opens a document, then guesses;
 * - `skip-industry`: never looks at the industry news;
 * - `skip-costs`: never opens the cost report;
 * - `wrong-year`: opens the year before's (2024) filing, call notes and news (the `-prior` documents) and cites them.
 * Every persona notes what it reads as `careful` does (`endless` opens nothing, so it notes nothing); why a notebook:
 * `tools.ts`.
 * Personas act only on what they saw: the question (`ctx.task.data`, only to check it is a research task) and the
 * texts of earlier tool results. `personaAction` gives the action, `scriptedTurn` its text.
 */
import { Rng } from "../../core/rng.ts";
import type { Action, Turn } from "../../core/types.ts";
import { executedCalls } from "../../env/history.ts";
import { scriptedPersonaTurn } from "../../env/defineToolRecipe.ts";
import type { TurnContext } from "../../env/episode.ts";
import { NOTES_ANSWER } from "./grader.ts";
import { REASON_STAGE, REASONS, type Reason, type ResearchDoc, type ResearchQuestion, type Stage } from "./world.ts";

/** The personas. */
export const RESEARCH_PERSONAS = ["careful", "one-doc", "padder", "endless", "skip-industry", "skip-costs", "wrong-year"] as const;
/** A persona's name. */
export type ResearchPersona = (typeof RESEARCH_PERSONAS)[number];

/**
 * Weights of the warm-start mixture (sum 1). Measured success of the mixture and of each persona: the README and
 * `test/env-research.test.ts`.
 */
export const RESEARCH_PERSONA_WEIGHTS: Readonly<Record<ResearchPersona, number>> = {
  careful: 0.12,
  "one-doc": 0.15,
  padder: 0.3,
  endless: 0.1,
  "skip-industry": 0.14,
  "skip-costs": 0.14,
  "wrong-year": 0.05,
};

/** Per-episode rate of each non-careful persona's habit. */
export const HABIT_RATE = 0.9;
/** Searches the `endless` persona makes before it guesses. */
export const ENDLESS_SEARCHES = 6;

/** The careful persona's first query (the company's own documents: filing, call notes, cost report). */
export const COMPANY_QUERY = "filing call costs";
/** The careful persona's second query (the sector's industry news). */
export const INDUSTRY_QUERY = "industry news";
/** The `endless` persona's queries, in turn. */
export const ENDLESS_QUERIES = ["revenue", "reasons", "decline", "sales", "news", "costs"] as const;

/** The text of an answer: `label id ; label id`. */
export function answerText(claims: ReadonlyArray<{ label: string; cite: string }>): string {
  return claims.map((c) => `${c.label} ${c.cite}`).join(" ; ");
}

/** One executed call seen in the history: name, arguments, and the text it returned (undefined on an error). */
interface Seen {
  name: string;
  args: Record<string, unknown>;
  text: string | undefined;
}

function seenCalls(history: readonly Turn[]): Seen[] {
  return executedCalls(history).map((c) => ({ name: c.name, args: c.args, text: c.ok && typeof c.value === "string" ? c.value : undefined }));
}

const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args }] });

/** The reason labels a document text names (`cause cost_increase`, `cited price_cut , competition`, `saw currency`). */
export function reasonsIn(text: string): Reason[] {
  const words = new Set(text.split(/\s+/));
  return REASONS.filter((r) => words.has(r));
}

/**
 * The action `persona` takes next (see the file doc), from the question and the tool results seen so far.
 * @throws Error when the task has no research question (`data`)
 */
export function personaAction(persona: ResearchPersona, ctx: Pick<TurnContext, "task" | "history" | "seed" | "turnIndex">): Action {
  const q = ctx.task.data as ResearchQuestion | undefined;
  if (q === undefined) throw new Error(`research persona: task ${ctx.task.id} has no research question (data)`);
  // One generator per episode: the seed of turn i is the episode's seed + i.
  const rng = new Rng(ctx.seed - ctx.turnIndex);
  const habit = persona !== "careful" && rng.next() < HABIT_RATE ? persona : "careful";
  const calls = seenCalls(ctx.history);
  const searches = calls.filter((c) => c.name === "search");
  const opened = new Map<string, string>();
  for (const c of calls) if (c.name === "open" && c.text !== undefined && typeof c.args.id === "string") opened.set(c.args.id.replace(/\s+/g, ""), c.text);
  const prior = habit === "wrong-year";
  // The local id the persona opens for `stage` (the wrong-year habit opens the year before's filing, call and news).
  const kindId = (stage: Stage): ResearchDoc["kind"] => (prior && stage !== "costs" ? (`${stage}-prior` as const) : stage);
  const guess = (cite: string): Action => ({ type: "answer", answer: answerText([{ label: REASONS[rng.int(REASONS.length)], cite }]) });

  // Note what the document just opened states, before anything else (the endless habit never opens one).
  const last = calls[calls.length - 1];
  if (last !== undefined && last.name === "open" && last.text !== undefined) {
    const found = reasonsIn(last.text);
    if (found.length > 0) return call("note", {});
  }
  if (habit === "endless") {
    if (searches.length < ENDLESS_SEARCHES) return call("search", { query: ENDLESS_QUERIES[searches.length % ENDLESS_QUERIES.length] });
    return guess("filing");
  }
  if (searches.length === 0) return call("search", { query: COMPANY_QUERY });
  const filingId = kindId("filing");
  const filing = opened.get(filingId);
  if (filing === undefined) return call("open", { id: filingId });
  const stageText = new Map<Stage, { id: string; text: string }>([["filing", { id: filingId, text: filing }]]);
  if (habit === "one-doc") return answerFrom(stageText, () => guess(filingId));
  const callId = kindId("call");
  const callText = opened.get(callId);
  if (callText === undefined) return call("open", { id: callId });
  stageText.set("call", { id: callId, text: callText });
  if (habit !== "skip-industry") {
    const newsId = kindId("news");
    const news = opened.get(newsId);
    if (news === undefined) {
      if (searches.length < 2) return call("search", { query: INDUSTRY_QUERY });
      return call("open", { id: newsId });
    }
    stageText.set("news", { id: newsId, text: news });
  }
  if (habit !== "skip-costs") {
    const costsId = kindId("costs");
    const costs = opened.get(costsId);
    if (costs === undefined) return call("open", { id: costsId });
    stageText.set("costs", { id: costsId, text: costs });
  }
  if (habit === "padder") return { type: "answer", answer: answerText(REASONS.map((r) => ({ label: r, cite: kindId(REASON_STAGE[r]) }))) };
  return answerFrom(stageText, () => guess(filingId));
}

/**
 * The answer of a persona that read `stageText`: `notes` (`NOTES_ANSWER`: its notebook holds every reason it read,
 * each citing the document it was read in) when it read any reason, else `none()` (a guess).
 */
function answerFrom(stageText: ReadonlyMap<Stage, { id: string; text: string }>, none: () => Action): Action {
  const read = [...stageText.values()].some((doc) => reasonsIn(doc.text).length > 0);
  return read ? { type: "answer", answer: NOTES_ANSWER } : none();
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `RESEARCH_PERSONAS`
 */
export const scriptedTurn = scriptedPersonaTurn("research", RESEARCH_PERSONAS, personaAction);
