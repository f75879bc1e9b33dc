/**
 * The search recipe's warm-start demonstrations: scripted personas in the real world, one direct answer per known
 * fact (the policy's "parametric knowledge", as a pretrained LLM knows popular entities), and reading demonstrations
 * in counterfactual worlds whose unknown facts are permuted (so the policy learns to read evidence instead of
 * memorising answers).
 */
import type { Task, Trajectory } from "../../core/types.ts";
import type { EnvFactory } from "../../env/types.ts";
import type { DemoContext } from "../../env/recipe.ts";
import { ScriptedAgent } from "../../rollout/agent.ts";
import { rolloutGroups } from "../../rollout/rollout.ts";
import type { RolloutLimits } from "../../env/episode.ts";
import type { Tokenizer } from "../../core/tokenizer.ts";
import { personaTurn, pickPersona, readingTurn, type Persona, type ValuesOf } from "./scripted.ts";
import { counterfactualWorld, valuesOf, type CountryAttribute, type World } from "./world.ts";

/** The search env's warm-start persona mix (the default of `sft.personas` for search). */
export const SEARCH_PERSONAS = { careful: 0.2, overSearcher: 0.1, guesser: 0.55, poorQuery: 0.15 } as const;

/** Options of demonstration generation. */
export interface DemoOptions {
  /** Also write one reading demonstration per unknown training task (see `readingTurn`). */
  reading?: boolean;
  /** Demonstrations per training task, each with a persona drawn by weight. */
  demosPerTask: number;
  personas: Record<Persona, number>;
  seed: number;
}

/** One world's demonstration inputs: its training tasks, the known tasks of any split, its env and its values. */
export interface DemoWorld {
  trainTasks: readonly Task[];
  knownTasks: readonly Task[];
  makeEnv: EnvFactory;
  /** Every value an attribute takes in this world (the personas' plausible wrong guesses). */
  valuesOf: ValuesOf;
}

/**
 * Demonstrations: `demosPerTask` persona episodes per training task, plus one direct answer for every known task
 * of any split — the facts the policy "knows" (as a pretrained LLM knows popular entities).
 * @returns trajectories with loss mask 1 on the agents' tokens
 */
export async function makeDemonstrations(
  world: DemoWorld,
  ctx: Pick<DemoContext, "tokenizer" | "limits">,
  options: DemoOptions,): Promise<Trajectory[]> {
  const { trainTasks, knownTasks, makeEnv, valuesOf } = world;
  const { tokenizer, limits } = ctx;
  const mixture = new ScriptedAgent(tokenizer, (ctx) =>
    personaTurn(pickPersona(options.personas, ctx.seed - ctx.turnIndex), ctx, valuesOf),
  );
  const careful = new ScriptedAgent(tokenizer, (ctx) => personaTurn("careful", ctx, valuesOf));
  const demos = await rolloutGroups(trainTasks, { makeEnv, agent: mixture, tokenizer, limits }, {
    groupSize: options.demosPerTask,
    seed: options.seed,
  });
  const knowledge = await rolloutGroups(knownTasks, { makeEnv, agent: careful, tokenizer, limits }, {
    groupSize: 1,
    seed: options.seed + 1,
  });
  const out = [...demos, ...knowledge].flatMap((g) => g.trajectories);
  if (options.reading) {
    const reader = new ScriptedAgent(tokenizer, (ctx) => readingTurn(ctx, valuesOf));
    const unknown = trainTasks.filter((t) => t.known !== true);
    const reading = await rolloutGroups(unknown, { makeEnv, agent: reader, tokenizer, limits }, { groupSize: 1, seed: options.seed + 2 });
    out.push(...reading.flatMap((g) => g.trajectories));
  }
  return out;
}

/**
 * The warm-start demonstrations of the search recipe: the personas in the real world (`ctx.demosPerTask` per training
 * question) plus reading demonstrations in `ctx.counterfactualWorlds` copies whose unknown facts are permuted
 * (`counterfactualWorld`, seed `seed·1000 + k`), each world also answering every known fact once.
 * @param makeEnv the env factory of a world, without fault injection (demonstrations show a healthy tool)
 */
export async function searchDemonstrations(world: World, seed: number, makeEnv: (w: World, k: number) => EnvFactory, ctx: DemoContext): Promise<Trajectory[]> {
  const known = [...world.train, ...world.test].filter((t) => t.known === true);
  const demos: Trajectory[] = [];
  for (let k = 0; k <= ctx.counterfactualWorlds; k++) {
    // World 0 is the real one; the others permute the unknown facts (see counterfactualWorld).
    const w = k === 0 ? world : counterfactualWorld(world, seed * 1000 + k);
    demos.push(
      ...(await makeDemonstrations(
        // Popular countries are untouched by counterfactualWorld, so known tasks are the same in every world.
        { trainTasks: w.train, knownTasks: known, makeEnv: makeEnv(w, k), valuesOf: (a) => valuesOf(w, a as CountryAttribute) },
        ctx,
        {
          // Habits (personas) come from the real world only; counterfactual worlds teach reading the evidence.
          demosPerTask: k === 0 ? ctx.demosPerTask : 0,
          personas: ctx.personas as Record<Persona, number>,
          reading: k > 0, // real-world answers are left to search, not memorised from reading demonstrations
          seed: seed + 100 * k,
        },
      )),
    );
  }
  return demos;
}
