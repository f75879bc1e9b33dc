/**
 * The search env as a recipe (`EnvRecipe`): Search-R1 QA over the built-in world of country facts — the first
 * recipe. `arl train` (no `--env`, or `--env search`) runs its own experiment (`runExperiment`: Direct / RAG /
 * warm start / RL, EM by known vs unknown facts); this recipe is what `arl envs`, `arl rollout --env search` and
 * library users see: its tasks, worlds, personas and breakdown, built from the public pieces of this folder.
 * Source: Search-R1 `search_r1/llm_agent/generation.py` (protocol), `verl/utils/reward_score/qa_em.py` (EM).
 */
import { z } from "zod";
import type { Trajectory } from "../../core/types.ts";
import { parseEnvOptions } from "../../env/options.ts";
import type { EnvRecipe, RecipeContext, RecipeInstance } from "../../env/recipe.ts";
import { BM25Index } from "../../retrieval/bm25.ts";
import { emCheck } from "../../reward/em.ts";
import { searchEnvFactory } from "./env.ts";
import { PERSONAS, personaTurn } from "./scripted.ts";
import { buildWorld, counterfactualWorld, DEFAULT_WORLD_CONFIG, valuesOf, worldTexts, type CountryAttribute, type World } from "./world.ts";

/** `env.options` of the search recipe: the world's size (the experiment reads `env.world` instead). */
const SearchOptions = z
  .object({
    numCountries: z.number().int().min(2).max(250).optional(),
    testFraction: z.number().min(0).max(1).optional(),
  })
  .strict();

/** The text every search episode may show besides the world's facts (prompt words, corrective text). */
export const SEARCH_BOILERPLATE =
  "question : Doc ( Title : ) error tool search : My previous action is invalid . If I want to search , I should put the query between and . If I want to give the final answer , I should put the answer between and . Let me try again . country facts area unknown";

/** Builds the search recipe's instance. @throws Error naming `env.options.<field>` on a bad option */
function buildSearch(ctx: RecipeContext): RecipeInstance {
  // The shared parser: unknown options are named with the nearest allowed ones, as every recipe's are.
  const options = parseEnvOptions(SearchOptions, ctx.options, {});
  const world = buildWorld({ ...DEFAULT_WORLD_CONFIG, seed: ctx.seed, ...options });
  const worlds = new Map<number, World>([[0, world]]);
  const worldK = (k: number): World => {
    let w = worlds.get(k);
    if (w === undefined) worlds.set(k, (w = counterfactualWorld(world, ctx.seed * 1000 + 500 + k)));
    return w;
  };
  const w0 = () => world;
  const settings = { maxTurns: ctx.maxTurns, tools: ctx.call };
  return {
    train: world.train,
    test: world.test,
    makeEnv: (k, options = {}) => {
      const w = worldK(k);
      const faults = options.faults === false ? undefined : ctx.faults;
      return searchEnvFactory(new BM25Index([...w.passages]), faults === undefined ? settings : { ...settings, faults });
    },
    texts: () => [...worldTexts(world), SEARCH_BOILERPLATE],
    personas: { careful: 0.2, overSearcher: 0.1, guesser: 0.55, poorQuery: 0.15 }, // the config's sft.personas defaults
    baselinePersona: "careful",
    scriptedTurn: (persona, turn) => {
      const p = (PERSONAS as readonly string[]).includes(persona) ? (persona as (typeof PERSONAS)[number]) : "careful";
      return personaTurn(p, turn, (a) => valuesOf(w0(), a as CountryAttribute));
    },
    breakdown: (traj: Trajectory) => ({
      em: traj.answer === null ? 0 : emCheck(traj.answer, traj.task.answers),
      searches: traj.searches,
      ...(traj.task.known === undefined ? {} : { [traj.task.known ? "known/em" : "unknown/em"]: traj.answer === null ? 0 : emCheck(traj.answer, traj.task.answers) }),
    }),
    breakdownLabels: { em: "EM", searches: "searches", "known/em": "EM, known facts", "unknown/em": "EM, unknown facts" },
    describe: () => `${world.countries.length} countries, ${world.passages.length} passages`,
  };
}

/** The search recipe (see the file doc). */
export const searchRecipe: EnvRecipe = {
  name: "search",
  description: "Search-R1 QA over a generated world of country facts (BM25 retrieval); EM outcome",
  protocols: ["search-r1"],
  tools: ["search"],
  defaults: {},
  smoke: {},
  build: buildSearch,
};
