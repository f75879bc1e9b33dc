/**
 * Scripted, deliberately imperfect search agents whose episodes are the warm-start (SFT) demonstrations. Each
 * persona is a habit real LLM agents show: searching only when needed, searching always, guessing instead of
 * searching, writing a vague query first. They act only on what they can see (the question, their knowledge of
 * known facts, the passages actually retrieved), so every demonstration is honest: an answer is correct only
 * when the fact was known or its evidence was retrieved.
 */
import { Rng } from "../../core/rng.ts";
import { searchQuery, type Passage, type Task } from "../../core/types.ts";
import type { ScriptedTurn } from "../../rollout/agent.ts";
import type { TurnContext } from "../../env/episode.ts";

/** The personas and what they do. */
export const PERSONAS = ["careful", "overSearcher", "guesser", "poorQuery"] as const;
export type Persona = (typeof PERSONAS)[number];

/** Lists every value an attribute takes in the world (for plausible wrong guesses). */
export type ValuesOf = (attribute: string) => readonly string[];

const search = (q: string) => `<search> ${q} </search>`;
const answer = (a: string) => `<answer> ${a} </answer>`;

/** The query a competent agent writes for the i-th hop of a task (`undefined` when no hop is left). */
export function goodQuery(task: Task, hop: number): string | undefined {
  const m = task.meta ?? {};
  switch (task.kind) {
    case "single-hop":
      return hop === 0 ? `${m.entity} ${m.attribute}` : undefined;
    case "bridge":
      return hop === 0 ? `${m.bridgeAttribute} ${m.bridgeValue}` : hop === 1 ? `${m.entity} ${m.attribute}` : undefined;
    case "comparison":
      return hop === 0 ? `${m.entity} area` : hop === 1 ? `${m.entity2} area` : undefined;
    default:
      return hop === 0 ? task.question : undefined;
  }
}

/** True when the passages an agent has seen hold every evidence passage of the task. */
export function evidenceSeen(task: Task, seen: readonly Passage[]): boolean {
  const ids = new Set(seen.map((p) => p.id));
  return (task.evidenceIds ?? []).length > 0 && (task.evidenceIds ?? []).every((id) => ids.has(id));
}

/** A wrong but plausible answer (for comparisons, a coin flip between the two, which may be right). */
export function guessAnswer(task: Task, rng: Rng, valuesOf: ValuesOf): string {
  const m = task.meta ?? {};
  if (task.kind === "comparison") return rng.next() < 0.5 ? m.entity : m.entity2;
  const gold = new Set(task.answers);
  const pool = valuesOf(m.attribute ?? "").filter((v) => !gold.has(v));
  return pool.length > 0 ? rng.pick(pool) : "unknown";
}

/**
 * The text of a persona's next turn.
 * Every persona answers a known fact correctly from memory; they differ in when they search and how well.
 * The bridge's second hop is only written when the first hop's passage was retrieved (the agent read the country's
 * name there).
 */
export function personaTurn(persona: Persona, ctx: TurnContext, valuesOf: ValuesOf): string {
  const { task, history } = ctx;
  // One generator per episode (the seed of turn i is base + i), so a persona's coin flips stay consistent.
  const rng = new Rng(ctx.seed - ctx.turnIndex);
  const vague = rng.next() < 0.5;
  const recovers = rng.next() < 0.5;
  const seen = history.flatMap((t) => t.passages ?? []);
  const searchesDone = history.filter((t) => searchQuery(t.action) !== undefined).length;
  const gold = task.answers[0];
  const known = task.known === true;
  const guess = () => answer(guessAnswer(task, rng, valuesOf));

  const searchThenAnswer = (hopOffset: number): string => {
    const hop = searchesDone - hopOffset;
    const seenUseful = evidenceSeen(task, seen);
    if (seenUseful) return answer(gold);
    // The bridge's first hop names the country; without it the second query cannot be written.
    if (task.kind === "bridge" && hop === 1 && !seen.some((p) => p.id === task.evidenceIds?.[0])) return guess();
    const q = goodQuery(task, hop);
    return q === undefined ? guess() : search(q);
  };

  switch (persona) {
    case "guesser":
      return known ? answer(gold) : guess();
    case "careful":
      return known ? answer(gold) : searchThenAnswer(0);
    case "overSearcher":
      if (known && searchesDone > 0) return answer(gold);
      return searchThenAnswer(0);
    case "poorQuery": {
      if (searchesDone === 0) {
        const m = task.meta ?? {};
        // A vague query: only the attribute word, or the attribute with a wrong-sized scope.
        return search(vague ? `${m.attribute ?? "country"}` : `country ${m.attribute ?? ""} facts`.trim());
      }
      if (known) return answer(gold);
      if (searchesDone === 1 && !recovers) return guess();
      return searchThenAnswer(1);
    }
  }
}

/**
 * A reading demonstration: the first turn is a good query whose `<search>` tag is context only (not trained), then
 * the careful agent continues (a bridge's second hop, then the answer read from the evidence). It teaches writing
 * a query and reading the retrieved passages without teaching the habit of searching, which stays the personas'.
 */
export function readingTurn(ctx: TurnContext, valuesOf: ValuesOf): ScriptedTurn {
  if (ctx.turnIndex === 0) return { text: search(goodQuery(ctx.task, 0) ?? ctx.task.question), trained: true, untrainedPrefix: 1 };
  return personaTurn("overSearcher", ctx, valuesOf);
}

/**
 * Picks a persona for an episode by weight, from the episode's seed.
 * @throws Error when all weights are 0
 */
export function pickPersona(weights: Record<Persona, number>, seed: number): Persona {
  const total = PERSONAS.reduce((a, p) => a + weights[p], 0);
  if (!(total > 0)) throw new Error(`sft.personas: at least one weight must be > 0 (got ${JSON.stringify(weights)})`);
  let x = new Rng(seed ^ 0x2545f491).next() * total;
  for (const p of PERSONAS) {
    x -= weights[p];
    if (x < 0) return p;
  }
  return PERSONAS[PERSONAS.length - 1];
}
