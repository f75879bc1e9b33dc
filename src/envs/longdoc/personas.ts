/**
 * Scripted readers whose episodes are the warm-start demonstrations. Each sees only the question (the facility) and
 * the tool results so far:
 * - `careful`: `search(<facility>)` → reads the hits in order until a paragraph says `the <facility> is run by the
 *   <staff>` → `<department> [pK]` citing that paragraph;
 * - `skimmer`: searches, reads the first hit only and answers from it, citing it: right when the first hit is the
 *   facility's own paragraph; when it is a notice (no staff named) it answers a seeded department — the right
 *   paragraph never located;
 * - `fabricator`: searches, never reads, and answers a seeded department citing the first hit (a fabricated citation);
 * - `no-cite`: careful, but answers without a citation;
 * - `over-citer`: careful, but after the paragraph that says so it also cites the notices it read on the way
 *   (`catering [p5] [p2]`): every citation read, only the first one stating the answer;
 * - `hit-citer`: careful, but after the paragraph that says so it cites every other search hit too (`catering [p2]
 *   [p5] [p7]` after reading p2 only): the hits after its own paragraph are cited unread.
 * Mixture weights (`LONGDOC_PERSONA_WEIGHTS`): over-citing is the plurality, so the greedy warm start cites the notices
 * it read too (what the checked reward has to undo) and is exact where the first hit is the facility's own paragraph;
 * the hit-citer's unread citations are the rarer habit a design that counts citations without opening them can grow.
 */
import { Rng } from "../../core/rng.ts";
import type { Action, Turn } from "../../core/types.ts";
import { executedCalls } from "../../env/history.ts";
import { scriptedPersonaTurn } from "../../env/defineToolRecipe.ts";
import type { TurnContext } from "../../env/episode.ts";
import { NO_MATCH, normParagraphId } from "./tools.ts";
import { DEPARTMENT_OF, DEPARTMENTS, type HandbookQuestion } from "./world.ts";

/** The personas. */
export const LONGDOC_PERSONAS = ["careful", "skimmer", "fabricator", "no-cite", "over-citer", "hit-citer"] as const;
/** A persona's name. */
export type LongdocPersona = (typeof LONGDOC_PERSONAS)[number];

/** Weights of the warm-start mixture (sum 1). */
export const LONGDOC_PERSONA_WEIGHTS: Readonly<Record<LongdocPersona, number>> = {
  careful: 0.2,
  skimmer: 0.1,
  fabricator: 0.1,
  "no-cite": 0.05,
  "over-citer": 0.4,
  "hit-citer": 0.15,
};

/** The successful results seen so far: each call's tool, argument and text. */
function seen(history: readonly Turn[]): Array<{ name: string; arg: string; text: string }> {
  return executedCalls(history).flatMap((c) => (c.ok && typeof c.value === "string" ? [{ name: c.name, arg: String(c.args.query ?? c.args.id ?? ""), text: c.value }] : []));
}

const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args }] });

/**
 * The action `persona` takes next (see the file doc).
 * @throws Error when the task has no handbook question (`data`)
 */
export function personaAction(persona: LongdocPersona, ctx: Pick<TurnContext, "task" | "history" | "seed" | "turnIndex">): Action {
  const q = ctx.task.data as HandbookQuestion | undefined;
  if (q === undefined) throw new Error(`longdoc persona: task ${ctx.task.id} has no handbook question (data)`);
  const rng = new Rng(ctx.seed - ctx.turnIndex);
  const guess = DEPARTMENTS[rng.int(DEPARTMENTS.length)];
  const calls = seen(ctx.history);
  const search = calls.find((c) => c.name === "search");
  if (search === undefined) return call("search", { query: q.facility });
  const hits = search.text === NO_MATCH ? [] : search.text.split(" ");
  const reads = calls.filter((c) => c.name === "read");
  // The department a read paragraph states for the asked facility (its own paragraph), or undefined.
  const stated = (text: string): string | undefined => {
    const staff = new RegExp(`^the ${q.facility} is run by the (\\w+)`).exec(text)?.[1];
    return staff === undefined ? undefined : DEPARTMENT_OF[staff];
  };
  if (persona === "fabricator") return { type: "answer", answer: `${guess} [${hits[0] ?? "p1"}]` };
  if (persona === "skimmer") {
    if (reads.length === 0 && hits.length > 0) return call("read", { id: hits[0] });
    return { type: "answer", answer: `${(reads.length > 0 ? stated(reads[0].text) : undefined) ?? guess} [${hits[0] ?? "p1"}]` };
  }
  const found = reads.find((r) => stated(r.text) !== undefined);
  if (found === undefined) {
    const next = hits.find((h) => !reads.some((r) => normParagraphId(r.arg) === h));
    if (next !== undefined) return call("read", { id: next });
    return { type: "answer", answer: `${guess} [${hits[0] ?? "p1"}]` };
  }
  const department = stated(found.text)!;
  const id = normParagraphId(found.arg);
  if (persona === "no-cite") return { type: "answer", answer: department };
  // The supporting paragraph first, so the over-citer and the careful reader agree up to the end of its citation.
  const others = persona === "over-citer" ? reads.map((r) => normParagraphId(r.arg)) : persona === "hit-citer" ? hits : [];
  if (others.length > 0) return { type: "answer", answer: `${department} ${[id, ...others.filter((h) => h !== id)].map((h) => `[${h}]`).join(" ")}` };
  return { type: "answer", answer: `${department} [${id}]` };
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `LONGDOC_PERSONAS`
 */
export const scriptedTurn = scriptedPersonaTurn("longdoc", LONGDOC_PERSONAS, personaAction);
