/**
 * Scripted readers whose episodes are the warm-start demonstrations. Each sees only the question (the facility) and
 * the tool results so far:
 * - `careful`: `search(<facility>)` → reads the hits in order until a paragraph says `the <facility> is run by X` →
 *   `X [pK]` citing that paragraph;
 * - `skimmer`: searches, reads the first hit only and answers the person it names, citing it (wrong when the first hit
 *   is a passing mention: the right paragraph never located);
 * - `fabricator`: searches, never reads, and answers a seeded person citing the first hit (a fabricated citation);
 * - `no-cite`: careful, but answers without a citation.
 * Mixture weights (`LONGDOC_PERSONA_WEIGHTS`).
 */
import { Rng } from "../../core/rng.ts";
import type { Action, Turn } from "../../core/types.ts";
import type { Protocol } from "../../protocol/types.ts";
import type { TurnContext } from "../../rollout/agent.ts";
import { NO_MATCH } from "./tools.ts";
import { PEOPLE, type HandbookQuestion } from "./world.ts";

/** The personas. */
export const LONGDOC_PERSONAS = ["careful", "skimmer", "fabricator", "no-cite"] as const;
/** A persona's name. */
export type LongdocPersona = (typeof LONGDOC_PERSONAS)[number];

/** Weights of the warm-start mixture (sum 1). */
export const LONGDOC_PERSONA_WEIGHTS: Readonly<Record<LongdocPersona, number>> = { careful: 0.3, skimmer: 0.3, fabricator: 0.25, "no-cite": 0.15 };

/** The successful results seen so far: each call's tool, argument and text. */
function seen(history: readonly Turn[]): Array<{ name: string; arg: string; text: string }> {
  const out: Array<{ name: string; arg: string; text: string }> = [];
  for (const t of history) {
    if (t.action.type !== "tool_call" || t.toolResults === undefined) continue;
    t.toolResults.forEach((r, i) => {
      const args = t.action.type === "tool_call" ? t.action.calls[i]?.arguments ?? {} : {};
      if (r.ok && typeof r.value === "string") out.push({ name: r.name, arg: String(args.query ?? args.id ?? ""), text: r.value });
    });
  }
  return out;
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
  const calls = seen(ctx.history);
  const search = calls.find((c) => c.name === "search");
  if (search === undefined) return call("search", { query: q.facility });
  const hits = search.text === NO_MATCH ? [] : search.text.split(" ");
  const reads = calls.filter((c) => c.name === "read");
  const runner = (text: string): string | undefined => new RegExp(`^the ${q.facility} is run by (\\w+)`).exec(text)?.[1];
  const firstPerson = (text: string): string => /is run by (\w+)/.exec(text)?.[1] ?? PEOPLE[0];
  if (persona === "fabricator") return { type: "answer", answer: `${PEOPLE[rng.int(PEOPLE.length)]} [${hits[0] ?? "p1"}]` };
  if (persona === "skimmer") {
    if (reads.length === 0 && hits.length > 0) return call("read", { id: hits[0] });
    return { type: "answer", answer: `${reads.length > 0 ? firstPerson(reads[0].text) : PEOPLE[0]} [${hits[0] ?? "p1"}]` };
  }
  const found = reads.find((r) => runner(r.text) !== undefined);
  if (found === undefined) {
    const next = hits.find((h) => !reads.some((r) => r.arg.replace(/\s+/g, "") === h));
    if (next !== undefined) return call("read", { id: next });
    return { type: "answer", answer: `${PEOPLE[0]} [${hits[0] ?? "p1"}]` };
  }
  const person = runner(found.text)!;
  return { type: "answer", answer: persona === "no-cite" ? person : `${person} [${found.arg.replace(/\s+/g, "")}]` };
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `LONGDOC_PERSONAS`
 */
export function scriptedTurn(persona: string, ctx: Pick<TurnContext, "task" | "history" | "seed" | "turnIndex">, protocol: Protocol): string {
  if (!(LONGDOC_PERSONAS as readonly string[]).includes(persona)) throw new Error(`longdoc: unknown persona "${persona}"; allowed: ${LONGDOC_PERSONAS.join(", ")}`);
  return protocol.format(personaAction(persona as LongdocPersona, ctx));
}
