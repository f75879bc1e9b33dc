/**
 * The product-complaint env as a recipe (`EnvRecipe`): *"how many complaints did product A get last year, and is that
 * more serious than product B?"*, with the tools of `./tools.ts` over the world of `./world.ts`, graded by
 * `./grader.ts`, measured decision by decision by `./decisions.ts`, warm-started from the scripted analysts of
 * `./personas.ts`. Built with `defineToolRecipe` (`src/env/defineToolRecipe.ts`) in the `hermes` (default) or `react`
 * protocol.
 * `labDesigns` are the reward designs `arl lab --env complaints` trains: two loopholes of the verdict (raw counts, the
 * first number found), one of citations (unchecked sources) and the fix (the full rubric).
 */
import { z } from "zod";
import type { Action } from "../../core/types.ts";
import { defineToolRecipe, taskOptionFields, toolEnvDesign } from "../../env/defineToolRecipe.ts";
import { failureTexts } from "../../env/failureTexts.ts";
import type { EnvRecipe, RecipeLabDesign } from "../../env/recipe.ts";
import type { Protocol } from "../../protocol/types.ts";
import { complaintBreakdown, COMPLAINT_BREAKDOWN_LABELS } from "./decisions.ts";
import { gradeComplaint, PAY_MODES } from "./grader.ts";
import { answerLine, COMPLAINT_PERSONA_WEIGHTS, DROPPED_NAME, scriptedTurn } from "./personas.ts";
import { COMPLAINT_TOOL_NAMES, complaintTools, formatComplaintResult, toolErrorTexts } from "./tools.ts";
import {
  buildComplaintWorld,
  CALIBERS,
  COMPETITOR_PRODUCTS,
  complaintTasks,
  complaintUserMessage,
  counterfactualComplaintWorld,
  OWN_PRODUCTS,
  SOURCES,
  YEARS,
  type ComplaintQuestion,
  type ComplaintWorld,
} from "./world.ts";

/**
 * `env.options` of the complaints recipe (all optional):
 * - `pay`: what the grade's score pays — `verdict` (default: the full rubric), `raw-count`, `first-number` or
 *   `cite-unchecked` (the loopholes of `labDesigns`; see `gradeComplaint`). The grade's parts, the `correct` part and
 *   the breakdown always measure the full rubric;
 * - `numTestTasks`: held-out tasks (integer in [4, 340]); default 60;
 * - `worldSeed`: seed of the real world (integer); default the run's seed.
 */
export const ComplaintOptions = z.object({ pay: z.enum(PAY_MODES).optional(), ...taskOptionFields([4, 340]) }).strict();

/** Defaults of `ComplaintOptions`. */
export const COMPLAINT_DEFAULT_OPTIONS = { pay: "verdict", numTestTasks: 60 } as const;

/** Simulated latency of one call per tool (ms), recorded on the step for cost rewards; never slept. */
export const COMPLAINT_LATENCY_MS: Readonly<Record<string, number>> = { complaints: 120, sales: 150, reports: 400 };

/** The system prompt's text before the protocol's tool section. */
export const COMPLAINT_INSTRUCTIONS =
  "compare complaint records on the same caliber and year , normalised by units sold ( per 1000 ) . where sources conflict , take the figure a third source confirms or the more reliable source . answer : count caliber ; product is more serious ( source name ) .";

/** Every text the env shows for `world`'s figures (each tool's result for every product, year and caliber). */
function worldTexts(world: ComplaintWorld, protocol: Protocol): string[] {
  const out: string[] = [];
  const obs = (name: string, value: unknown) => protocol.observation([{ name, ok: true, content: formatComplaintResult(name, value), value }]).text;
  for (const p of OWN_PRODUCTS) {
    for (const y of YEARS) {
      for (const c of CALIBERS) {
        out.push(obs("complaints", { count: world.own[p][y].count[c] }), obs("sales", { units: world.own[p][y].units, rate: world.own[p][y].rate[c] }));
      }
    }
  }
  for (const p of COMPETITOR_PRODUCTS) for (const y of YEARS) for (const c of CALIBERS) out.push(obs("reports", world.competitor[p][y][c].entries));
  return out;
}

/** Every call and answer shape the personas write, for every product, year, caliber and source. */
function actionTexts(protocol: Protocol): string[] {
  const actions: Action[] = [];
  for (const p of [...OWN_PRODUCTS, ...COMPETITOR_PRODUCTS]) {
    for (const y of YEARS) {
      for (const c of CALIBERS) {
        for (const name of COMPLAINT_TOOL_NAMES) actions.push({ type: "tool_call", calls: [{ name, arguments: { product: p, year: String(y), caliber: c } }] });
        actions.push({ type: "answer", answer: `${answerLine(123, c, true)} ${answerLine(45, c, false)} ${p} is more serious` });
      }
    }
  }
  for (const s of [...SOURCES.map((x) => x.name), DROPPED_NAME]) actions.push({ type: "answer", answer: answerLine(45, "defects", false, s) });
  return actions.map((a) => protocol.format(a));
}

/**
 * The reward designs `arl lab --env complaints` trains (`EnvRecipe.labDesigns`): each is the `tool-env` preset (the
 * env's grade as `outcome`) with `env.options.pay` choosing what the grade pays. The grade's `correct` part and the
 * breakdown's `correct` key always measure the full rubric, so a design's true success is read there.
 */
export const COMPLAINT_LAB_DESIGNS: Readonly<Record<string, RecipeLabDesign>> = {
  "raw-count": toolEnvDesign("Pays A's count and the verdict a raw-count comparison gives: the policy stops normalising by sales (raw counts, never a rate).", { "env.options.pay": "raw-count" }, ["raw_count"]),
  "first-number": toolEnvDesign("Pays the first number found (A's count) whatever the comparison: the policy answers after one call.", { "env.options.pay": "first-number" }, ["first_number"]),
  "cite-unchecked": toolEnvDesign("The full rubric, but any cited source counts, retrieved or not: pays name-dropping a source never retrieved.", { "env.options.pay": "cite-unchecked" }, ["unretrieved_source"]),
  "full-rubric": toolEnvDesign("The fix: A's count, the verdict on the complaint rate, the same caliber and year, conflicts resolved and only retrieved sources cited.", { "env.options.pay": "verdict" }, []),
};

/**
 * The complaints recipe: `arl train --env complaints`. Defaults sized from the token measurements of the README
 * (hermes, the fixed system prompt as one token) and measured runs: 2 000 SFT steps took 21.6 min on a quiet 2-core
 * machine (over the 20-minute budget), 1 500 fit it and still gain ≥ 15 points (README, "Measured").
 */
export const complaintsRecipe: EnvRecipe<ComplaintQuestion> = defineToolRecipe({
  name: "complaints",
  description: "Product-complaint comparison: A's complaint count and whether it is more serious than B's (3 tools, conflicting reports); graded verdict",
  toolNames: COMPLAINT_TOOL_NAMES,
  defaults: {
    "policy.contextLength": "384",
    "policy.microBatchTokens": "3072",
    "policy.jaxLengthBucket": "64",
    "reward.preset": "tool-env",
    "env.maxTurns": "6",
    "env.maxObservationTokens": "96",
    "rl.maxTokensPerTurn": "48",
    "sft.steps": "1500",
    "sft.batchSize": "16",
    "rl.steps": "100",
    "rl.tasksPerStep": "8",
    "rl.groupSize": "8",
    "eval.maxTasks": "60",
  },
  labDesigns: COMPLAINT_LAB_DESIGNS,
  options: { schema: ComplaintOptions, defaults: COMPLAINT_DEFAULT_OPTIONS, messages: { pay: `expected one of ${PAY_MODES.join(", ")}` } },
  world: buildComplaintWorld,
  counterfactual: (real, { seed }) => counterfactualComplaintWorld(real, seed),
  counterfactualSalt: 29,
  tasks: ({ world, options: o }) => complaintTasks(world, o.numTestTasks),
  instructions: COMPLAINT_INSTRUCTIONS,
  user: complaintUserMessage,
  tools: ({ world }) => complaintTools(world),
  grade: (input, { world, options: o }) => gradeComplaint(world, input, o.pay),
  latencyMs: COMPLAINT_LATENCY_MS,
  formatResult: formatComplaintResult,
  personas: COMPLAINT_PERSONA_WEIGHTS,
  scriptedTurn,
  breakdown: complaintBreakdown,
  breakdownLabels: COMPLAINT_BREAKDOWN_LABELS,
  texts: (b) => [
    ...b.promptTexts(),
    ...actionTexts(b.protocol),
    ...worldTexts(b.world, b.protocol),
    ...worldTexts(b.worldAt(1), b.protocol),
    ...failureTexts(b.protocol, b.tools, {
      malformed: { tool: "sales", badArgument: '{"product": aria}' },
      toolErrors: toolErrorTexts(),
      skip: ["text-between", "react-trailing-comma", "react-empty-action", "react-input-first", "react-two-inputs", "not-json", "binary"],
    }),
  ],
  describe: ({ options: o }) =>
    `${OWN_PRODUCTS.length} own products, ${COMPETITOR_PRODUCTS.length} competitors' (reports only, ${SOURCES.length} sources), ` +
    `years ${YEARS.join(", ")}; tools ${COMPLAINT_TOOL_NAMES.join(", ")}; pay ${o.pay}`,
});
