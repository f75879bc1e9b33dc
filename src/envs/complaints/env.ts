/**
 * The product-complaint env as a recipe (`EnvRecipe`): *"how many complaints did product A get last year, and is that
 * more serious than product B?"*, with the tools of `./tools.ts` over the world of `./world.ts`, graded by
 * `./grader.ts`, measured decision by decision by `./decisions.ts`, warm-started from the scripted analysts of
 * `./personas.ts`. Built with `toolEnv` (`src/env/toolEnv.ts`) in the `hermes` (default) or `react` protocol.
 * `labDesigns` are the reward designs `arl lab --env complaints` trains: two loopholes of the verdict (raw counts, the
 * first number found), one of citations (unchecked sources) and the fix (the full rubric).
 */
import { counterfactualWorldSeed, parseEnvOptions } from "../../env/options.ts";
import { z } from "zod";
import type { Action, Task, ToolCallResult } from "../../core/types.ts";
import type { EnvRecipe, RecipeContext, RecipeInstance, RecipeLabDesign } from "../../env/recipe.ts";
import { toolJsonSchema, type Tool } from "../../env/tool.ts";
import { toolEnv } from "../../env/toolEnv.ts";
import { getProtocol } from "../../protocol/index.ts";
import type { Protocol } from "../../protocol/types.ts";
import { complaintBreakdown, COMPLAINT_BREAKDOWN_LABELS } from "./decisions.ts";
import { gradeComplaint, PAY_MODES, type PayMode } from "./grader.ts";
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
export const ComplaintOptions = z
  .object({
    pay: z.enum(PAY_MODES).optional(),
    numTestTasks: z.number().int().min(4).max(340).optional(),
    worldSeed: z.number().int().optional(),
  })
  .strict();

/** Defaults of `ComplaintOptions`. */
export const COMPLAINT_DEFAULT_OPTIONS = { pay: "verdict", numTestTasks: 60 } as const;

/** Simulated latency of one call per tool (ms), recorded on the step for cost rewards; never slept. */
export const COMPLAINT_LATENCY_MS: Readonly<Record<string, number>> = { complaints: 120, sales: 150, reports: 400 };

/** The system prompt's text before the protocol's tool section. */
export const COMPLAINT_INSTRUCTIONS =
  "compare complaint records on the same caliber and year , normalised by units sold ( per 1000 ) . where sources conflict , take the figure a third source confirms or the more reliable source . answer : count caliber ; product is more serious ( source name ) .";

/** Seed of counterfactual world `k` of a run (k ≥ 1). */
export function counterfactualSeed(runSeed: number, k: number): number {
  return counterfactualWorldSeed(runSeed, k, 29);
}

/**
 * Reads `ctx.options`. @throws Error `env.options.<field>: <message>` (every bad field, `; `-joined); unknown fields
 *   are named with the allowed ones
 */
export function complaintOptions(options: Record<string, unknown>): { pay: PayMode; numTestTasks: number; worldSeed?: number } {
  return parseEnvOptions(ComplaintOptions, options, COMPLAINT_DEFAULT_OPTIONS, { pay: `expected one of ${PAY_MODES.join(", ")}` });
}

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

/** Malformed turns (hermes- and react-shaped) whose parse reasons the invalid observations show. */
const MALFORMED_TURNS: readonly string[] = [
  "",
  "hello",
  "<tool_call>",
  "</tool_call>",
  "<think> x",
  "<tool_call> <tool_call> </tool_call>",
  "<tool_call>\n[1]\n</tool_call>",
  '<tool_call>\n{"name": ""}\n</tool_call>',
  '<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>',
  '<tool_call>\n{"name": "sales"}\n</tool_call>',
  '<tool_call>\n{"name": "sales", "arguments": "x"}\n</tool_call>',
  '<tool_call>\n{"name": "sales", "arguments": []}\n</tool_call>',
  '<tool_call>\n{"name": "sales", "arguments": {}}\n</tool_call> x',
  '<tool_call>\n{"name": "sales", "arguments": {}}\n</tool_call><tool_call>\n{"name": "sales", "arguments": {}}\n</tool_call>',
  '<tool_call>\n{"name": "sales", "arguments": {"product": aria}}\n</tool_call>',
  '<tool_call>\n{"name": "sales" "arguments": {}}\n</tool_call>',
  "<tool_call>\n{name}\n</tool_call>",
  '<tool_call>\n{"a": 1,}\n</tool_call>',
  '<tool_call>\n{"a": "b\n</tool_call>',
  "<tool_call>\n{\n</tool_call>",
  "Action: sales",
  "Action Input: {}",
  "Action: sales\nAction Input: x",
  'Action: sales\nAction Input: {"a"',
  "Action: sales\nAction Input: {} tail",
  "Action: a\nAction: b\nAction Input: {}",
  "Action: x\nAction Input: {}",
  "Final Answer:",
  "Action: x\nFinal Answer: y",
];

/** Generic tool-call failures of `callTool` and `withFaults` (timeouts, caps, injected faults), as error texts. */
const GENERIC_ERRORS: readonly string[] = [
  "timed out after 10000 ms",
  "no free slot within 10000 ms (maxConcurrency 4)",
  "episode deadline reached",
  "output of 10000000 chars exceeds the cap of 100000 chars",
  "injected fault: fail (retryable), attempt 0",
  "injected fault: hang (aborted)",
  "(after 2 attempts)",
];

/** The texts of every failure the env can show: invalid observations, schema errors, tool errors, generic failures. */
function failureTexts(protocol: Protocol, tools: readonly Tool[]): string[] {
  const schemas = tools.map(toolJsonSchema);
  const out: string[] = [];
  for (const text of MALFORMED_TURNS) {
    const a = protocol.parse(text, { tools: schemas, maxCallsPerTurn: 1 });
    if (a.type === "invalid") out.push(protocol.invalidObservation(a.reason));
  }
  const errors: ToolCallResult[] = [];
  for (const t of tools) {
    for (const bad of [{}, { product: 4, year: 4, caliber: 4 }]) {
      const r = t.inputSchema.safeParse(bad);
      if (!r.success) errors.push({ name: t.name, ok: false, content: `error: tool ${t.name}: invalid input: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`, errorKind: "invalid_input" });
    }
    for (const e of [...toolErrorTexts(), ...GENERIC_ERRORS]) errors.push({ name: t.name, ok: false, content: `error: tool ${t.name}: ${e}`, errorKind: "error" });
  }
  out.push(...errors.map((r) => protocol.observation([r]).text), "error: unknown tool x");
  return out;
}

/** Builds the complaints recipe's instance (see `complaintsRecipe`). @throws Error naming `env.options.<field>` on a bad option */
export function buildComplaints(ctx: RecipeContext): RecipeInstance<ComplaintQuestion> {
  const opts = complaintOptions(ctx.options);
  const protocol = getProtocol(ctx.protocol);
  const world = buildComplaintWorld(opts.worldSeed ?? ctx.seed);
  const { train, test } = complaintTasks(world, opts.numTestTasks);
  const worlds = new Map<number, ComplaintWorld>([[0, world]]);
  const worldK = (k: number): ComplaintWorld => {
    if (!Number.isInteger(k) || k < 0) throw new Error(`complaints: world index must be an integer ≥ 0, got ${k}`);
    let w = worlds.get(k);
    if (w === undefined) worlds.set(k, (w = counterfactualComplaintWorld(world, counterfactualSeed(ctx.seed, k))));
    return w;
  };
  const sampleTools = complaintTools(world);
  const system = protocol.system(sampleTools.map(toolJsonSchema), COMPLAINT_INSTRUCTIONS);
  return {
    train,
    test,
    makeEnv(k, options = {}) {
      const w = worldK(k);
      const tools = complaintTools(w);
      const faults = options.faults === false ? undefined : ctx.faults;
      return toolEnv<ComplaintQuestion, undefined>({
        protocol,
        instructions: COMPLAINT_INSTRUCTIONS,
        user: complaintUserMessage,
        tools,
        grade: (input) => gradeComplaint(w, input, opts.pay),
        maxTurns: ctx.maxTurns,
        maxCallsPerTurn: 1,
        call: ctx.call,
        ...(faults === undefined ? {} : { faults }),
        latencyMs: { ...COMPLAINT_LATENCY_MS },
        formatResult: formatComplaintResult,
      });
    },
    texts: () => [
      protocol.prompt(system, complaintUserMessage(train[0])),
      ...[...train, ...test].map(complaintUserMessage),
      ...actionTexts(protocol),
      ...worldTexts(world, protocol),
      ...worldTexts(worldK(1), protocol),
      ...failureTexts(protocol, sampleTools),
    ],
    fixedPrompts: () => [system],
    personas: { ...COMPLAINT_PERSONA_WEIGHTS },
    baselinePersona: "careful",
    scriptedTurn: (persona, turn) => scriptedTurn(persona, turn, protocol),
    breakdown: complaintBreakdown,
    breakdownLabels: { ...COMPLAINT_BREAKDOWN_LABELS },
    describe: () =>
      `${OWN_PRODUCTS.length} own products, ${COMPETITOR_PRODUCTS.length} competitors' (reports only, ${SOURCES.length} sources), ` +
      `years ${YEARS.join(", ")}; tools ${COMPLAINT_TOOL_NAMES.join(", ")}; pay ${opts.pay}`,
  };
}

/**
 * The reward designs `arl lab --env complaints` trains (`EnvRecipe.labDesigns`): each is the `tool-env` preset (the
 * env's grade as `outcome`) with `env.options.pay` choosing what the grade pays. The grade's `correct` part and the
 * breakdown's `correct` key always measure the full rubric, so a design's true success is read there.
 */
export const COMPLAINT_LAB_DESIGNS: Readonly<Record<string, RecipeLabDesign>> = {
  "raw-count": {
    description: "Pays A's count and the verdict a raw-count comparison gives: the policy stops normalising by sales (raw counts, never a rate).",
    preset: "tool-env",
    weights: {},
    overrides: { "env.options.pay": "raw-count" },
    expectedDetectors: ["raw_count"],
  },
  "first-number": {
    description: "Pays the first number found (A's count) whatever the comparison: the policy answers after one call.",
    preset: "tool-env",
    weights: {},
    overrides: { "env.options.pay": "first-number" },
    expectedDetectors: ["first_number"],
  },
  "cite-unchecked": {
    description: "The full rubric, but any cited source counts, retrieved or not: pays name-dropping a source never retrieved.",
    preset: "tool-env",
    weights: {},
    overrides: { "env.options.pay": "cite-unchecked" },
    expectedDetectors: ["unretrieved_source"],
  },
  "full-rubric": {
    description: "The fix: A's count, the verdict on the complaint rate, the same caliber and year, conflicts resolved and only retrieved sources cited.",
    preset: "tool-env",
    weights: {},
    overrides: { "env.options.pay": "verdict" },
    expectedDetectors: [],
  },
};

/**
 * The complaints recipe: `arl train --env complaints`. Defaults sized from the token measurements of the README
 * (hermes, the fixed system prompt as one token) and measured runs: 2 000 SFT steps took 21.6 min on a quiet 2-core
 * machine (over the 20-minute budget), 1 500 fit it and still gain ≥ 15 points (README, "Measured").
 */
export const complaintsRecipe: EnvRecipe<ComplaintQuestion> = {
  name: "complaints",
  description: "Product-complaint comparison: A's complaint count and whether it is more serious than B's (3 tools, conflicting reports); graded verdict",
  protocols: ["hermes", "react"],
  tools: COMPLAINT_TOOL_NAMES,
  defaults: {
    "policy.contextLength": "384",
    "policy.microBatchTokens": "3072",
    "policy.lengthBucket": "64",
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
  smoke: {
    "policy.dModel": "32",
    "policy.nLayers": "1",
    "policy.nHeads": "2",
    "sft.steps": "20",
    "rl.steps": "2",
    "rl.tasksPerStep": "2",
    "rl.groupSize": "2",
    "eval.maxTasks": "4",
  },
  labDesigns: COMPLAINT_LAB_DESIGNS,
  build: buildComplaints,
};
