/**
 * Scripted complaint analysts whose episodes are the warm-start demonstrations. `careful` is always right; each other
 * persona is `careful` with ONE habit real analysts show, drawn once per episode (from the episode's seed, so the
 * choice holds across its turns) at its own rate:
 * - `raw-counter`: compares raw counts — `complaints` for B too (a competitor's B: the error, then `reports`), and the
 *   verdict by counts, never normalised by sales;
 * - `first-number`: stops at the first number — answers with A's count and a coin-flip verdict after one call;
 * - `caliber-mixer`: looks B up in the other caliber (contacts for defects or back) and compares the rates;
 * - `credulous`: trusts the first source a report lists, however unreliable (it matters where sources conflict);
 * - `name-dropper`: cites "consumer watch" whatever it retrieved (a source never retrieved, unless it was listed).
 * Careful: `complaints(a, year, caliber)` → `sales(a, year, caliber)` → `sales(b, …)` (own b) or `reports(b, …)`
 * (a competitor's b; the figure `resolveReports` takes) → `<count> <caliber> ; more serious` when A's rate is the
 * higher (else `less serious`), plus ` ( source <name> )` for a competitor's b. After an error it reads the error (a competitor's product
 * → `reports`). Personas act only on what they saw: the question (`ctx.task.data`) and earlier tool results.
 *
 * The mixture's most common habit is the raw-count comparison (55 % of the demonstrations): after A's count, about
 * half the demonstrations ask `complaints` for B and four in ten ask `sales` for A, so the warm start's greedy policy
 * compares raw counts while a sampled one normalises about four times in ten — RL has the normalisation (and the
 * caliber, the conflicts and the citations) to fix.
 */
import { Rng } from "../../core/rng.ts";
import type { Action, ToolCall } from "../../core/types.ts";
import { scriptedPersonaTurn } from "../../env/defineToolRecipe.ts";
import type { TurnContext } from "../../env/episode.ts";
import { dataCalls, type DataCall } from "./grader.ts";
import type { CountView, SalesView } from "./tools.ts";
import { resolveReports, type Caliber, type ComplaintQuestion, type ReportEntry } from "./world.ts";

/** The personas. */
export const COMPLAINT_PERSONAS = ["careful", "raw-counter", "first-number", "caliber-mixer", "credulous", "name-dropper"] as const;
/** A persona's name. */
export type ComplaintPersona = (typeof COMPLAINT_PERSONAS)[number];

/** Weights of the warm-start mixture (sum 1); success rates in the README and `test/env-complaints.test.ts`. */
export const COMPLAINT_PERSONA_WEIGHTS: Readonly<Record<ComplaintPersona, number>> = {
  careful: 0.2,
  "raw-counter": 0.55,
  "first-number": 0.08,
  "caliber-mixer": 0.07,
  credulous: 0.06,
  "name-dropper": 0.04,
};

/** Per-episode rate of each persona's habit. */
export const COMPLAINT_HABIT_RATES: Readonly<Record<Exclude<ComplaintPersona, "careful">, number>> = {
  "raw-counter": 0.95,
  "first-number": 0.9,
  "caliber-mixer": 0.9,
  credulous: 1,
  "name-dropper": 0.9,
};

/** The source the name-dropper cites. */
export const DROPPED_NAME = "consumer watch";

/**
 * The answer line: `<count> <caliber> ; more serious` (A is more serious than B: the question's "yes") or `… ; less
 * serious`, and ` ( source <name> )` when one is cited — e.g. `84 defects ; less serious ( source consumer watch )`.
 */
export function answerLine(count: number, caliber: string, moreSerious: boolean, source?: string): string {
  return `${count} ${caliber} ; ${moreSerious ? "more" : "less"} serious${source === undefined ? "" : ` ( source ${source} )`}`;
}

const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args } satisfies ToolCall] });
const answer = (text: string): Action => ({ type: "answer", answer: text });
const other = (c: Caliber): Caliber => (c === "defects" ? "contacts" : "defects");

/** The last successful call of `name` about `product`, or undefined. */
function lastOk(calls: readonly DataCall[], name: string, product: string): DataCall | undefined {
  for (let i = calls.length - 1; i >= 0; i--) if (calls[i].ok && calls[i].name === name && calls[i].product === product) return calls[i];
  return undefined;
}

/**
 * The action `persona` takes next (see the file doc), from the question and the tool results seen so far.
 * @throws Error when the task has no complaint question (`data`)
 */
export function personaAction(persona: ComplaintPersona, ctx: Pick<TurnContext, "task" | "history" | "seed" | "turnIndex">): Action {
  const q = ctx.task.data as ComplaintQuestion | undefined;
  if (q === undefined) throw new Error(`complaints persona: task ${ctx.task.id} has no complaint question (data)`);
  // One generator per episode: the seed of turn i is the episode's seed + i.
  const rng = new Rng(ctx.seed - ctx.turnIndex);
  const habit = persona !== "careful" && rng.next() < COMPLAINT_HABIT_RATES[persona];
  const coin = rng.next() < 0.5;
  const calls = dataCalls(ctx.history);
  const y = String(q.year);
  const args = (product: string, caliber: Caliber = q.caliber) => ({ product, year: y, caliber });

  const countCall = lastOk(calls, "complaints", q.a);
  if (countCall === undefined) return call("complaints", args(q.a));
  const countA = (countCall.value as CountView).count;
  if (habit && persona === "first-number") return answer(answerLine(countA, q.caliber, coin));

  // B's figure from a report: the careful pick, or the first listed for the credulous.
  const fromReports = (c: DataCall): ReportEntry | undefined => {
    const entries = c.value as ReportEntry[];
    return habit && persona === "credulous" ? entries[0] : resolveReports(entries);
  };
  const cite = (e: ReportEntry | undefined): string | undefined => (habit && persona === "name-dropper" ? DROPPED_NAME : e?.source);
  const reportsB = lastOk(calls, "reports", q.b);

  if (habit && persona === "raw-counter") {
    const countB = lastOk(calls, "complaints", q.b);
    if (countB !== undefined) {
      const b = (countB.value as CountView).count;
      return answer(answerLine(countA, q.caliber, countA >= b));
    }
    if (reportsB !== undefined) {
      const e = fromReports(reportsB)!;
      return answer(answerLine(countA, q.caliber, countA >= e.complaints, cite(e)));
    }
    // A competitor's product is not in the complaints database: after that error, its reports.
    const failed = q.competitor && calls.some((c) => !c.ok && c.name === "complaints" && c.product === q.b);
    return call(failed ? "reports" : "complaints", args(q.b));
  }

  const salesA = lastOk(calls, "sales", q.a);
  if (salesA === undefined) return call("sales", args(q.a));
  const rateA = (salesA.value as SalesView).rate;
  const calB = habit && persona === "caliber-mixer" ? other(q.caliber) : q.caliber;
  if (!q.competitor) {
    const salesB = lastOk(calls, "sales", q.b);
    if (salesB === undefined) return call("sales", args(q.b, calB));
    const rateB = (salesB.value as SalesView).rate;
    return answer(answerLine(countA, q.caliber, rateA >= rateB, habit && persona === "name-dropper" ? DROPPED_NAME : undefined));
  }
  if (reportsB === undefined) return call("reports", args(q.b, calB));
  const e = fromReports(reportsB)!;
  return answer(answerLine(countA, q.caliber, rateA >= e.rate, cite(e)));
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `COMPLAINT_PERSONAS`
 */
export const scriptedTurn = scriptedPersonaTurn("complaints", COMPLAINT_PERSONAS, personaAction);
