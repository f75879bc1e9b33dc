/**
 * `defineToolRecipe`: an `EnvRecipe` over `toolEnv` from the parts that differ between envs — options schema, world,
 * counterfactual world, tasks, tools, instructions, grader, personas, breakdown, vocabulary texts — so an env does
 * not repeat the `build()` skeleton every tool env shares: parse `env.options` (errors name `env.options.<field>`), build
 * the real world from `env.options.worldSeed` or the run's seed, cache counterfactual world `k` under its own seed,
 * render the fixed system prompt from the tools' schemas, and make world `k`'s env factory with the run's turn budget,
 * tool-call settings and (unless the warm start asks them off) faults.
 * Modelled on verifiers' `load_environment` (a function from options to an env) and tinker-cookbook's
 * `EnvGroupBuilder`; see `./recipe.ts` for what a recipe is.
 */
import { z } from "zod";
import type { Action, Grade, Task, Trajectory } from "../core/types.ts";
import { getProtocol } from "../protocol/index.ts";
import type { Protocol, ProtocolName } from "../protocol/types.ts";
import type { TurnContext } from "./episode.ts";
import { counterfactualWorldSeed, parseEnvOptions } from "./options.ts";
import type { EnvRecipe, RecipeInstance, RecipeLabDesign } from "./recipe.ts";
import { toolJsonSchema, type Tool } from "./tool.ts";
import { toolEnv, type GradeInput, type ToolEnvSpec } from "./toolEnv.ts";
import type { EpisodeInfo } from "./types.ts";

/**
 * The `--smoke` config of a built-in tool env (`EnvRecipe.smoke`): a 32-wide one-layer model from scratch (also for an
 * env that defaults to a base: a smoke run checks the stages, not the base), 20 warm-start steps, 2 RL steps of 2 × 2
 * episodes, 4 held-out tasks — seconds on 2 cores, enough to run every stage once.
 */
export const TOOL_RECIPE_SMOKE: Readonly<Record<string, string>> = {
  "policy.init": "scratch",
  "policy.dModel": "32",
  "policy.nLayers": "1",
  "policy.nHeads": "2",
  "sft.steps": "20",
  "rl.steps": "2",
  "rl.tasksPerStep": "2",
  "rl.groupSize": "2",
  "eval.maxTasks": "4",
};

/**
 * The config defaults a one-turn env whose facts are all in the task's text starts from (`EnvRecipe.defaults`, under
 * its own): one turn, the `tool-env` reward, 16-token length buckets (the onnx trainer's default; set for the
 * jax-js one), one demonstration per training task in batches of 32, the real world only (it has no counterfactual
 * worlds), 30 RL steps of 16 tasks × 8 episodes, 120 held-out tasks evaluated.
 */
export const ONE_TURN_DEFAULTS: Readonly<Record<string, string>> = {
  "policy.jaxLengthBucket": "16",
  "reward.preset": "tool-env",
  "env.maxTurns": "1",
  "sft.batchSize": "32",
  "sft.demosPerTask": "1",
  "sft.counterfactualWorlds": "0",
  "rl.counterfactualWorlds": "0",
  "rl.steps": "30",
  "rl.tasksPerStep": "16",
  "rl.groupSize": "8",
  "eval.maxTasks": "120",
};

/**
 * A reward design of `arl lab --env NAME` that pays the env's own grade (the `tool-env` preset) under config
 * `overrides` (e.g. `{"env.options.pay": "brevity"}`) and reward-term `weights`, expected to fire the detectors
 * `expectedDetectors` — none for a fix: the lab's verdict is then "closed", or "fired anyway" when one fires.
 */
export function toolEnvDesign(description: string, overrides: Record<string, string>, expectedDetectors: readonly string[], weights: Record<string, number> = {}): RecipeLabDesign {
  return { description, preset: "tool-env", weights, overrides, expectedDetectors };
}

/**
 * A recipe's `env.options`: a strict zod object (every field optional), the defaults of the fields that have one, and
 * a message per field that replaces zod's (e.g. an enum's allowed values). See `parseEnvOptions`.
 */
export interface ToolRecipeOptions<Sch extends z.ZodObject, Def extends Partial<z.output<Sch>>> {
  schema: Sch;
  defaults: Def;
  messages?: Readonly<Record<string, string>>;
}

/** An inclusive integer range `[min, max]`. */
type IntRange = readonly [number, number];
const intIn = ([min, max]: IntRange) => z.number().int().min(min).max(max).optional();

/**
 * The `env.options` fields most tool recipes share, to spread into the recipe's strict zod object after its own:
 * `numTestTasks` (held-out tasks, an integer in `test`), `numTrainTasks` (training tasks, an integer in `train`; only
 * when `train` is given) and `worldSeed` (any integer: the real world's seed, default the run's), all optional.
 */
export function taskOptionFields(test: IntRange): { numTestTasks: ReturnType<typeof intIn>; worldSeed: z.ZodOptional<z.ZodNumber> };
export function taskOptionFields(test: IntRange, train: IntRange): { numTestTasks: ReturnType<typeof intIn>; numTrainTasks: ReturnType<typeof intIn>; worldSeed: z.ZodOptional<z.ZodNumber> };
export function taskOptionFields(test: IntRange, train?: IntRange) {
  return { numTestTasks: intIn(test), ...(train === undefined ? {} : { numTrainTasks: intIn(train) }), worldSeed: z.number().int().optional() };
}

/** Parsed `env.options`: the schema's fields, those with a default always set. */
export type ParsedOptions<T, Def> = Omit<T, keyof Def> & { [K in keyof Def & keyof T]-?: Exclude<T[K], undefined> };

/** Where counterfactual world `k` (k ≥ 1) is drawn: its seed (`counterfactualWorldSeed`), `k` and the run's seed. */
export interface CounterfactualAt {
  seed: number;
  k: number;
  runSeed: number;
}

/** What a recipe's `texts` and `describe` read: the built instance's parts. */
export interface ToolRecipeBuild<O, W, D> {
  protocol: Protocol;
  options: O;
  /** The real world (world 0). */
  world: W;
  /** World `k` (0 the real one; cached). @throws Error when `k` is not an integer ≥ 0 */
  worldAt(k: number): W;
  train: Task<D>[];
  test: Task<D>[];
  /** The tools of the first training task's episode in the real world (their names and schemas are every episode's). */
  tools: readonly Tool[];
  /** The fixed system prompt: the instructions and the tools' section, in the protocol's format. */
  system: string;
  /** The first training task's whole prompt, then every task's user message (train, then test). */
  promptTexts(): string[];
}

/**
 * The parts of a tool-env recipe. `O` the parsed options, `W` the world, `D` the task payload, `S` an episode's state.
 * - `options`: the `env.options` schema (absent: none allowed); `world(seed, options)`: the real world from
 *   `env.options.worldSeed` (when the schema has it and it is set) or the run's seed (absent: no world);
 *   `counterfactual(real, at)`: world `k ≥ 1`, with prices, times, answers… re-drawn (absent: every `k` is the real
 *   world, for envs whose facts are all in the task's text); `counterfactualSalt`: mixed into `at.seed` so two envs'
 *   worlds of one run differ;
 * - `tasks`: the train / test split; `instructions`, `user`, `reset`, `tools`, `grade`, `maxCallsPerTurn`,
 *   `latencyMs`, `formatResult`: the `toolEnv` spec of world `k` (`tools` and `grade` see that world; `reset` is
 *   synchronous here, since the first training task's state also gives the tools whose schemas the system prompt shows);
 * - `personas` (weights of the warm-start mixture), `baselinePersona` (default `careful`), `scriptedTurn`, `breakdown`,
 *   `breakdownLabels`, `texts`, `describe`: as `RecipeInstance`'s; `texts` and `describe` read the built parts;
 * - `name`, `description`, `protocols` (default hermes, react), `toolNames` (default none), `defaults`, `smoke`
 *   (default `TOOL_RECIPE_SMOKE`), `baseDefaults`, `labDesigns`: as `EnvRecipe`'s.
 */
export interface ToolRecipeSpec<O, W, D, S> {
  name: string;
  description: string;
  protocols?: readonly ProtocolName[];
  toolNames?: readonly string[];
  defaults: Record<string, string>;
  smoke?: Readonly<Record<string, string>>;
  baseDefaults?: Record<string, string>;
  labDesigns?: Readonly<Record<string, RecipeLabDesign>>;
  world?: (seed: number, options: O) => W;
  counterfactual?: (real: W, at: CounterfactualAt) => W;
  counterfactualSalt?: number;
  tasks: (from: { world: W; seed: number; options: O }) => { train: Task<D>[]; test: Task<D>[] };
  instructions: string;
  user?: (task: Task<D>) => string;
  reset?: (task: Task<D>, episode: EpisodeInfo) => S;
  tools?: (episode: { world: W; state: S; task: Task<D>; options: O }) => readonly Tool[];
  grade: (input: GradeInput<D, S>, env: { world: W; options: O }) => Grade;
  maxCallsPerTurn?: number;
  latencyMs?: Readonly<Record<string, number>>;
  formatResult?: (name: string, value: unknown) => string;
  personas: Readonly<Record<string, number>>;
  baselinePersona?: string;
  scriptedTurn: (persona: string, ctx: TurnContext, protocol: Protocol) => string;
  /** Per-episode breakdown for the summary table (default none: the table shows success, grade, calls). */
  breakdown?: (traj: Trajectory) => Record<string, number>;
  breakdownLabels?: Readonly<Record<string, string>>;
  /** Optional (see `RecipeInstance.texts`): only a from-scratch run's word tokenizer reads it. */
  texts?: (built: ToolRecipeBuild<O, W, D>) => string[];
  describe: (built: ToolRecipeBuild<O, W, D>) => string;
}

/**
 * An `EnvRecipe` of a tool env from its parts (see `ToolRecipeSpec`). `build(ctx)` throws `env.options.<field>: …`
 * on a bad option, and its `makeEnv(k)` an Error naming the recipe when `k` is not an integer ≥ 0.
 */
export function defineToolRecipe<W = undefined, D = unknown, S = undefined, Sch extends z.ZodObject = z.ZodObject<{}>, Def extends Partial<z.output<Sch>> = {}>(
  spec: ToolRecipeSpec<ParsedOptions<z.output<Sch>, Def>, W, D, S> & { options?: ToolRecipeOptions<Sch, Def> },
): EnvRecipe<D> {
  type O = ParsedOptions<z.output<Sch>, Def>;
  return {
    name: spec.name,
    description: spec.description,
    protocols: spec.protocols ?? ["hermes", "react"],
    tools: spec.toolNames ?? [],
    defaults: spec.defaults,
    smoke: { ...(spec.smoke ?? TOOL_RECIPE_SMOKE) },
    ...(spec.baseDefaults === undefined ? {} : { baseDefaults: spec.baseDefaults }),
    ...(spec.labDesigns === undefined ? {} : { labDesigns: spec.labDesigns }),
    build(ctx): RecipeInstance<D> {
      const o: ToolRecipeOptions<z.ZodObject, object> = spec.options ?? { schema: z.object({}).strict(), defaults: {} };
      const options = parseEnvOptions(o.schema, ctx.options, o.defaults, o.messages) as unknown as O;
      const protocol = getProtocol(ctx.protocol);
      const seed = (options as { worldSeed?: number }).worldSeed ?? ctx.seed;
      const world = spec.world === undefined ? (undefined as W) : spec.world(seed, options);
      // Counterfactual worlds are drawn once each, on first use (a run uses worlds 0 … rl.counterfactualWorlds).
      const worlds = new Map<number, W>();
      const worldAt = (k: number): W => {
        if (!Number.isInteger(k) || k < 0) throw new Error(`${spec.name}: world index must be an integer ≥ 0, got ${k}`);
        if (k === 0 || spec.counterfactual === undefined) return world;
        if (!worlds.has(k)) worlds.set(k, spec.counterfactual(world, { seed: counterfactualWorldSeed(ctx.seed, k, spec.counterfactualSalt ?? 0), k, runSeed: ctx.seed }));
        return worlds.get(k)!;
      };
      const { train, test } = spec.tasks({ world, seed, options });
      const user = spec.user ?? ((t: Task<D>) => t.question);
      const toolsOf = (w: W, state: S, task: Task<D>) => spec.tools?.({ world: w, state, task, options }) ?? [];
      const tools = toolsOf(world, spec.reset?.(train[0], {}) as S, train[0]);
      const system = protocol.system(tools.map(toolJsonSchema), spec.instructions);
      const built: ToolRecipeBuild<O, W, D> = {
        protocol, options, world, worldAt, train, test, tools, system,
        promptTexts: () => [protocol.prompt(system, user(train[0])), ...[...train, ...test].map(user)],
      };
      return {
        train,
        test,
        makeEnv(k, make = {}) {
          const w = worldAt(k);
          const faults = make.faults === false ? undefined : ctx.faults;
          const env: ToolEnvSpec<D, S> = {
            protocol,
            instructions: spec.instructions,
            ...(spec.user === undefined ? {} : { user: spec.user }),
            ...(spec.reset === undefined ? {} : { reset: spec.reset }),
            tools: (state, task) => toolsOf(w, state, task),
            grade: (input) => spec.grade(input, { world: w, options }),
            maxTurns: ctx.maxTurns,
            maxCallsPerTurn: spec.maxCallsPerTurn ?? 1,
            call: ctx.call,
            ...(faults === undefined ? {} : { faults }),
            ...(spec.latencyMs === undefined ? {} : { latencyMs: { ...spec.latencyMs } }),
            ...(spec.formatResult === undefined ? {} : { formatResult: spec.formatResult }),
          };
          return toolEnv<D, S>(env);
        },
        ...(spec.texts === undefined ? {} : { texts: () => spec.texts!(built) }),
        // The instructions + the protocol's tool section (the same in every episode) are one token of the embedded
        // word vocabulary; the text every episode shows is unchanged.
        fixedPrompts: () => [system],
        personas: { ...spec.personas },
        baselinePersona: spec.baselinePersona ?? "careful",
        scriptedTurn: (persona, turn) => spec.scriptedTurn(persona, turn, protocol),
        breakdown: spec.breakdown ?? (() => ({})),
        breakdownLabels: { ...(spec.breakdownLabels ?? {}) },
        describe: () => spec.describe(built),
      };
    },
  };
}

/**
 * A persona module's `scriptedTurn(persona, ctx, protocol)`: the protocol's format of `action(persona, ctx)`.
 * The returned function throws an Error `<env>: unknown persona "x"; allowed: <personas>` for a name not in `personas`.
 */
export function scriptedPersonaTurn<P extends string, C>(env: string, personas: readonly P[], action: (persona: P, ctx: C) => Action): (persona: string, ctx: C, protocol: Protocol) => string {
  return (persona, ctx, protocol) => {
    if (!(personas as readonly string[]).includes(persona)) throw new Error(`${env}: unknown persona "${persona}"; allowed: ${personas.join(", ")}`);
    return protocol.format(action(persona as P, ctx));
  };
}
