/**
 * The travel assistant env as a recipe (`EnvRecipe`): book the cheapest flight of a request and a hotel near its
 * arrival airport, with the tools of `./tools.ts` over the world of `./world.ts`, graded by `./grader.ts`, measured
 * decision by decision by `./decisions.ts`, warm-started from the scripted personas of `./personas.ts`.
 * Built with `toolEnv` (`src/env/toolEnv.ts`) in the `hermes` (default) or `react` protocol.
 */
import { counterfactualWorldSeed, parseEnvOptions } from "../../env/options.ts";
import { z } from "zod";
import type { Action, Task, ToolCallResult } from "../../core/types.ts";
import type { EnvRecipe, RecipeContext, RecipeInstance } from "../../env/recipe.ts";
import { toolJsonSchema, type Tool } from "../../env/tool.ts";
import { toolEnv } from "../../env/toolEnv.ts";
import { getProtocol } from "../../protocol/index.ts";
import type { Protocol } from "../../protocol/types.ts";
import { travelBreakdown, TRAVEL_BREAKDOWN_LABELS } from "./decisions.ts";
import { gradeTravel } from "./grader.ts";
import { confirmation, GIVE_UP_ANSWER, scriptedTurn, TRAVEL_PERSONA_WEIGHTS } from "./personas.ts";
import {
  flightView,
  formatTravelResult,
  hotelView,
  TRANSIENT_ERRORS,
  TRAVEL_TOOL_NAMES,
  travelTools,
  type TravelState,
} from "./tools.ts";
import {
  buildTravelWorld,
  counterfactualTravelWorld,
  flightsOn,
  NEAR_KM,
  travelTasks,
  travelUserMessage,
  type TravelRequest,
  type TravelWorld,
} from "./world.ts";

/**
 * `env.options` of the travel recipe (all optional):
 * - `failureRate`: share of tool calls that fail transiently (429 / timeout / 503), in [0, 1]; default 0.15. These
 *   failures are the env's own (its API is flaky) and stay on in every world, warm-start demonstrations included, so
 *   recovery is demonstrated; `makeEnv(k, {faults: false})` turns off only the config's generic fault injection;
 * - `numTestTasks`: held-out tasks (integer in [2, 362]); default 60;
 * - `worldSeed`: seed of the real world (integer); default the run's seed.
 */
export const TravelOptions = z
  .object({
    failureRate: z.number().min(0).max(1).optional(),
    numTestTasks: z.number().int().min(2).max(362).optional(),
    worldSeed: z.number().int().optional(),
  })
  .strict();

/** Defaults of `TravelOptions`. */
export const TRAVEL_DEFAULT_OPTIONS = { failureRate: 0.15, numTestTasks: 60 } as const;

/** Simulated latency of one call per tool (ms), recorded on the step for cost rewards; never slept. */
export const TRAVEL_LATENCY_MS: Readonly<Record<string, number>> = { get_airports: 80, search_flights: 450, search_hotels: 350, book: 600 };

/** The system prompt's text before the protocol's tool section. */
export const TRAVEL_INSTRUCTIONS =
  "book the cheapest flight and a hotel near its arrival airport , rated as asked ( well-rated : 4 ) , late yes after a +1 arrival . retry failed calls .";

/** Seed of counterfactual world `k` of a run (k ≥ 1). */
export function counterfactualSeed(runSeed: number, k: number): number {
  return counterfactualWorldSeed(runSeed, k, 17);
}

/**
 * Reads `ctx.options`. @throws Error `env.options.<field>: <message>` (every bad field, `; `-joined); unknown fields
 *   are named with the allowed ones
 */
export function travelOptions(options: Record<string, unknown>): { failureRate: number; numTestTasks: number; worldSeed?: number } {
  return parseEnvOptions(TravelOptions, options, TRAVEL_DEFAULT_OPTIONS);
}

/** Every text the env shows or the personas write for `world`'s entities (tool results, errors, answers). */
function worldTexts(world: TravelWorld, protocol: Protocol): string[] {
  const out: string[] = [];
  for (const c of world.cities) {
    out.push(formatTravelResult("get_airports", { city: c.name, airports: c.airports }));
    for (const d of world.cities) {
      if (d.name === c.name) continue;
      for (const date of [world.today, world.tomorrow]) out.push(formatTravelResult("search_flights", flightsOn(world, c.name, d.name, date).map(flightView)));
    }
    for (const a of c.airports) {
      for (let r = 1; r <= 5; r++) {
        const hotels = world.hotels.filter((h) => h.city === c.name && h.km[a] <= NEAR_KM && h.rating >= r).sort((x, y) => x.km[a] - y.km[a]);
        out.push(formatTravelResult("search_hotels", hotels.slice(0, 4).map((h) => hotelView(h, a))));
      }
    }
  }
  world.flights.forEach((f, i) => {
    const h = world.hotels[i % world.hotels.length];
    out.push(formatTravelResult("book", { status: "confirmed", flight: f.id, hotel: h.id }), confirmation(f.id, h.id));
  });
  const errors = [
    ...TRANSIENT_ERRORS,
    'unknown city "x"',
    'unknown airport "x"',
    "airport pkx is not in shanghai",
    'unknown flight id "x"',
    'unknown hotel id "x"',
    'date must be yyyy-mm-dd, got "x"',
    "from and to are the same city",
  ];
  const results: ToolCallResult[] = TRAVEL_TOOL_NAMES.flatMap((name) =>
    errors.map((e) => ({ name, ok: false, content: `error: tool ${name}: ${e}`, errorKind: "error" as const })),
  );
  out.push(...results.map((r) => protocol.observation([r]).text));
  out.push(
    protocol.invalidObservation("tool call: malformed JSON in the arguments"),
    `error: tool search_hotels: invalid input: min_rating: Invalid input: expected string, received number`,
    'error: tool search_hotels: min_rating must be a number from 1 to 5, got "x"',
    `error: unknown tool x`,
    GIVE_UP_ANSWER,
  );
  return out;
}

/** The formatted sample actions of a task (each tool call and answer shape the personas write). */
function actionTexts(task: Task<TravelRequest>, world: TravelWorld, protocol: Protocol): string[] {
  const d = task.data!;
  const f = flightsOn(world, d.origin, d.destination, d.date)[0];
  const h = world.hotels.find((x) => x.city === d.destination)!;
  const actions: Action[] = [
    { type: "tool_call", calls: [{ name: "search_flights", arguments: { from: d.origin, to: d.destination, date: d.date } }] },
    { type: "tool_call", calls: [{ name: "get_airports", arguments: { city: d.destination } }] },
    { type: "tool_call", calls: [{ name: "search_hotels", arguments: { city: d.destination, near: d.destinationAirports[0], min_rating: String(d.minRating) } }] },
    { type: "tool_call", calls: [{ name: "book", arguments: { flight_id: f.id, hotel_id: h.id } }] },
    { type: "answer", answer: confirmation(f.id, h.id) },
  ];
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
  '<tool_call>\n{"name": "book"}\n</tool_call>',
  '<tool_call>\n{"name": "book", "arguments": "x"}\n</tool_call>',
  '<tool_call>\n{"name": "book", "arguments": []}\n</tool_call>',
  '<tool_call>\n{"name": "book", "arguments": {}}\n</tool_call> x',
  '<tool_call>\n{"name": "book", "arguments": {}}\n</tool_call> x <tool_call>\n{"name": "book", "arguments": {}}\n</tool_call>',
  '<tool_call>\n{"name": "book", "arguments": {}}\n</tool_call><tool_call>\n{"name": "book", "arguments": {}}\n</tool_call>',
  '<tool_call>\n{"name": "book", "arguments": {"flight_id": mu 5}}\n</tool_call>',
  '<tool_call>\n{"name": "book" "arguments": {}}\n</tool_call>',
  "<tool_call>\n{name}\n</tool_call>",
  '<tool_call>\n{"a": 1,}\n</tool_call>',
  '<tool_call>\n{"a": "b\n</tool_call>',
  '<tool_call>\n{"a": 0 1}\n</tool_call>',
  "<tool_call>\n{\n</tool_call>",
  "Action: book",
  "Action Input: {}",
  "Action: book\nAction Input: x",
  'Action: book\nAction Input: {"a"',
  'Action: book\nAction Input: {"a": 1,}',
  "Action: book\nAction Input: {} tail",
  "Action: a\nAction: b\nAction Input: {}",
  "Action:\nAction Input: {}",
  "Action Input: {}\nAction: book",
  "Action: x\nAction Input: {}",
  "Action: book\nAction Input: {}\nAction Input: {}",
  "Final Answer:",
  "Action: x\nFinal Answer: y",
  "Action Input: {}\nFinal Answer: y",
];

/** Generic tool-call failures of `callTool` and `withFaults` (timeouts, caps, injected faults), as error texts. */
const GENERIC_ERRORS: readonly string[] = [
  "timed out after 10000 ms",
  "no free slot within 10000 ms (maxConcurrency 4)",
  "episode deadline reached",
  "invalid output: not JSON-serialisable (undefined)",
  "invalid output: binary data (a NUL or unpaired surrogate)",
  "output of 10000000 chars exceeds the cap of 100000 chars",
  "injected fault: fail (retryable), attempt 0",
  "injected fault: fail, attempt 1",
  "injected fault: hang (aborted)",
  "(after 2 attempts)",
];

/**
 * The texts of every failure the env can show besides its tools' own errors: the protocol's invalid observations
 * (the reasons of `MALFORMED_TURNS`), schema errors of each tool (missing arguments, a number for a string) and
 * generic call failures.
 */
function failureTexts(protocol: Protocol, tools: readonly Tool[]): string[] {
  const schemas = tools.map(toolJsonSchema);
  const out: string[] = [];
  for (const text of MALFORMED_TURNS) {
    const a = protocol.parse(text, { tools: schemas, maxCallsPerTurn: 1 });
    if (a.type === "invalid") out.push(protocol.invalidObservation(a.reason));
  }
  for (const t of tools) {
    for (const bad of [{}, Object.fromEntries(Object.keys(schemas.find((x) => x.name === t.name)!.parameters.properties as object).map((k) => [k, 4]))]) {
      const r = t.inputSchema.safeParse(bad);
      if (!r.success) out.push(`error: tool ${t.name}: invalid input: ${r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
    }
    out.push(...GENERIC_ERRORS.map((e) => `error: tool ${t.name}: ${e}`));
  }
  return out;
}

/** Builds the travel recipe's instance (see `travelRecipe`). @throws Error naming `env.options.<field>` on a bad option */
export function buildTravel(ctx: RecipeContext): RecipeInstance<TravelRequest> {
  const opts = travelOptions(ctx.options);
  const protocol = getProtocol(ctx.protocol);
  const world = buildTravelWorld(opts.worldSeed ?? ctx.seed);
  const { train, test } = travelTasks(world, opts.numTestTasks);
  const worlds = new Map<number, TravelWorld>([[0, world]]);
  const worldK = (k: number): TravelWorld => {
    if (!Number.isInteger(k) || k < 0) throw new Error(`travel: world index must be an integer ≥ 0, got ${k}`);
    let w = worlds.get(k);
    if (w === undefined) worlds.set(k, (w = counterfactualTravelWorld(world, counterfactualSeed(ctx.seed, k))));
    return w;
  };
  const sampleTools = travelTools(world, { bookings: [] });
  const schemas = sampleTools.map(toolJsonSchema);
  const system = protocol.system(schemas, TRAVEL_INSTRUCTIONS);
  return {
    train,
    test,
    makeEnv(k, options = {}) {
      const w = worldK(k);
      const faults = options.faults === false ? undefined : ctx.faults;
      return toolEnv<TravelRequest, TravelState>({
        protocol,
        instructions: TRAVEL_INSTRUCTIONS,
        user: travelUserMessage,
        reset: () => ({ bookings: [] }),
        tools: (state) => travelTools(w, state, { failureRate: opts.failureRate }),
        grade: (input) => gradeTravel(w, input),
        maxTurns: ctx.maxTurns,
        maxCallsPerTurn: 1,
        call: ctx.call,
        ...(faults === undefined ? {} : { faults }),
        latencyMs: { ...TRAVEL_LATENCY_MS },
        formatResult: formatTravelResult,
      });
    },
    texts: () => [
      // The system prompt is the same for every task: one whole prompt, then every task's user message.
      protocol.prompt(system, travelUserMessage(train[0])),
      ...[...train, ...test].map(travelUserMessage),
      ...[...train, ...test].flatMap((t) => actionTexts(t, world, protocol)),
      ...worldTexts(world, protocol),
      ...worldTexts(worldK(1), protocol),
      ...failureTexts(protocol, sampleTools),
    ],
    // The instructions + the protocol's tool section (≈ 450 word tokens, the same in every episode) are one token
    // of the embedded word vocabulary; the text every episode shows is unchanged.
    fixedPrompts: () => [system],
    personas: { ...TRAVEL_PERSONA_WEIGHTS },
    baselinePersona: "careful",
    scriptedTurn: (persona, turn) => scriptedTurn(persona, turn, protocol),
    breakdown: travelBreakdown,
    breakdownLabels: { ...TRAVEL_BREAKDOWN_LABELS },
    describe: () =>
      `${world.cities.length} cities (${world.cities.filter((c) => c.airports.length === 2).length} with two airports), ` +
      `${world.flights.length} flights, ${world.hotels.length} hotels; tools ${TRAVEL_TOOL_NAMES.join(", ")}; ` +
      `failure rate ${opts.failureRate}`,
  };
}

/**
 * The travel recipe: `arl train --env travel`. Defaults sized from the token measurements of the README (hermes, the
 * fixed system prompt as one token): context window 768 (every demonstration measured, max 655), micro-batches of
 * 1536 tokens in length buckets of 128 (the embedded wasm heap's estimate ≈ 3 GiB), 8 turns, observations ≤ 128
 * tokens, turns ≤ 64 tokens, the `tool-env` reward preset; the training budget fits `arl train --env travel` in
 * ≈ 20 minutes on 2 cores (README).
 */
export const travelRecipe: EnvRecipe<TravelRequest> = {
  name: "travel",
  description: "Travel assistant: book the cheapest flight and a hotel near its arrival airport (4 tools, flaky API); graded booking",
  protocols: ["hermes", "react"],
  tools: TRAVEL_TOOL_NAMES,
  defaults: {
    "policy.contextLength": "768",
    "policy.microBatchTokens": "1536",
    "policy.lengthBucket": "128",
    "reward.preset": "tool-env",
    "env.maxTurns": "8",
    "env.maxObservationTokens": "128",
    "rl.maxTokensPerTurn": "64",
    "sft.steps": "700",
    "sft.batchSize": "16",
    "rl.steps": "40",
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
  build: buildTravel,
};
