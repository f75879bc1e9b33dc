/**
 * The search env as a recipe (`EnvRecipe`): Search-R1 QA over the built-in world of country facts, the default
 * experiment (`arl train`). Its hooks give the runner what this task needs beyond a tool env: demonstrations that
 * also teach the known facts and reading in counterfactual worlds (`./demos.ts`), replay of the known-fact answers
 * during RL (PPO-ptx), counterfactual training worlds whose unknown answers change, the Direct and RAG baseline rows
 * (`./baselines.ts`), and a breakdown by known vs unknown facts (EM, searches, guess rate).
 * Source: Search-R1 `search_r1/llm_agent/generation.py` (protocol), `verl/utils/reward_score/qa_em.py` (EM).
 */
import { z } from "zod";
import type { Trajectory } from "../../core/types.ts";
import { parseEnvOptions } from "../../env/options.ts";
import type { EnvRecipe, RecipeContext, RecipeInstance } from "../../env/recipe.ts";
import type { EnvFactory } from "../../env/types.ts";
import { BM25Index } from "../../retrieval/bm25.ts";
import { emCheck } from "../../reward/em.ts";
import { answeredWithoutSearch } from "../../reward/evidence.ts";
import { searchRetrievalWorlds } from "./agentWorlds.ts";
import { SEARCH_BASELINES } from "./baselines.ts";
import { SEARCH_LAB_DESIGNS } from "./labDesigns.ts";
import { SEARCH_PERSONAS, searchDemonstrations } from "./demos.ts";
import { searchEnvFactory } from "./env.ts";
import { PERSONAS, personaTurn } from "./scripted.ts";
import { buildWorld, counterfactualWorld, DEFAULT_WORLD_CONFIG, RELIABLE_SOURCE, UNRELIABLE_SOURCE, valuesOf, worldTexts, type CountryAttribute, type World } from "./world.ts";

/** `env.options` of the search recipe: the world's size and noise, and the passages a search returns. */
export const SearchOptions = z
  .object({
    numCountries: z.number().int().min(4).max(250).default(DEFAULT_WORLD_CONFIG.numCountries).describe("Countries in the built-in world."),
    knownFraction: z.number().min(0).max(1).default(DEFAULT_WORLD_CONFIG.knownFraction).describe("Share of countries whose facts the policy learns in warm start (its parametric knowledge)."),
    testFraction: z.number().gt(0).lt(1).default(DEFAULT_WORLD_CONFIG.testFraction).describe("Share of questions held out for evaluation."),
    noiseFraction: z.number().min(0).max(1).default(DEFAULT_WORLD_CONFIG.noiseFraction).describe("Share of unknown facts that also get an unreliable passage contradicting them (evidence conflicts; 0 = none)."),
    noiseReliability: z.number().min(0).max(1).default(DEFAULT_WORLD_CONFIG.noiseReliability).describe("Reliability recorded on the contradicting passages (their source shows as `forum`)."),
    topK: z.number().int().min(1).max(1000).default(3).describe("Passages returned per search (Search-R1 default 3)."),
  })
  .strict();

/** The search recipe's options after defaults. */
export type SearchOptions = z.infer<typeof SearchOptions>;

/** The text every search episode may show besides the world's facts (prompt words, corrective text). */
export const SEARCH_BOILERPLATE =
  "question : Doc ( Title : ) error tool search : My previous action is invalid . If I want to search , I should put the query between and . If I want to give the final answer , I should put the answer between and . Let me try again . country facts area unknown";

/** The search recipe's options from `env.options` (defaults filled in). @throws Error naming `env.options.<field>` */
export function searchOptions(options: Record<string, unknown>): SearchOptions {
  return parseEnvOptions(SearchOptions, options, {});
}

/** The world of a run: `run.seed` and the recipe's world options. */
export function searchWorld(seed: number, o: SearchOptions): World {
  const { topK: _k, ...world } = o;
  return buildWorld({ ...DEFAULT_WORLD_CONFIG, seed, ...world });
}

/** A breakdown cell pair `known/<name>` or `unknown/<name>` for a task that says whether its fact is known. */
function bySplit(traj: Trajectory, name: string, value: number): Record<string, number> {
  return traj.task.known === undefined ? {} : { [`${traj.task.known ? "known" : "unknown"}/${name}`]: value };
}

/** Builds the search recipe's instance. @throws Error naming `env.options.<field>` on a bad option */
function buildSearch(ctx: RecipeContext): RecipeInstance {
  const options = searchOptions(ctx.options);
  const world = searchWorld(ctx.seed, options);
  // RL's counterfactual worlds (k ≥ 1) permute the unknown facts, so memorising a training answer cannot pay.
  const worlds = new Map<number, World>([[0, world]]);
  const worldK = (k: number): World => {
    let w = worlds.get(k);
    if (w === undefined) worlds.set(k, (w = counterfactualWorld(world, ctx.seed * 1000 + 500 + k)));
    return w;
  };
  const indexes = new Map<World, BM25Index>();
  const indexOf = (w: World): BM25Index => {
    let i = indexes.get(w);
    if (i === undefined) indexes.set(w, (i = new BM25Index([...w.passages])));
    return i;
  };
  const settings = { topK: options.topK, maxTurns: ctx.maxTurns, tools: ctx.call };
  const envOf = (w: World, faults: boolean): EnvFactory => searchEnvFactory(indexOf(w), faults && ctx.faults !== undefined ? { ...settings, faults: ctx.faults } : settings);
  const em = (traj: Trajectory) => (traj.answer === null ? 0 : emCheck(traj.answer, traj.task.answers));
  return {
    train: world.train,
    test: world.test,
    makeEnv: (k, o = {}) => envOf(worldK(k), o.faults !== false),
    trainTasks: (k) => worldK(k).train,
    texts: () => [
      ...worldTexts(world),
      SEARCH_BOILERPLATE,
      // Source names appear only in noisy worlds (kept out otherwise so the default vocabulary is unchanged).
      ...(options.noiseFraction > 0 ? [`source ${RELIABLE_SOURCE} ${UNRELIABLE_SOURCE}`] : []),
    ],
    personas: { ...SEARCH_PERSONAS },
    baselinePersona: "careful",
    scriptedTurn: (persona, turn) => {
      const p = (PERSONAS as readonly string[]).includes(persona) ? (persona as (typeof PERSONAS)[number]) : "careful";
      return personaTurn(p, turn, (a) => valuesOf(world, a as CountryAttribute));
    },
    demonstrations: (demo) => searchDemonstrations(world, ctx.seed, (w) => envOf(w, false), demo),
    // PPO-ptx replays the known facts answered without search: the parametric knowledge RL must not erase.
    replay: (demos) => demos.filter((t) => t.task.known === true && t.searches === 0),
    baselines: SEARCH_BASELINES,
    corpus: () => world.passages,
    retrievalWorld: searchRetrievalWorlds(world, ctx.seed, worldK),
    breakdown: (traj: Trajectory) => {
      const guess = answeredWithoutSearch(traj) ? 1 : 0;
      const correct = em(traj);
      return {
        em: correct,
        "count/searches": traj.searches,
        ...bySplit(traj, "em", correct),
        ...bySplit(traj, "count/searches", traj.searches),
        ...bySplit(traj, "guess", guess),
      };
    },
    breakdownLabels: {
      em: "EM",
      "known/em": "EM known",
      "unknown/em": "EM unknown",
      "count/searches": "searches/q",
      "known/count/searches": "searches known",
      "unknown/count/searches": "searches unknown",
      "known/guess": "guess known",
      "unknown/guess": "guess unknown",
    },
    describe: () => `${world.countries.length} countries, ${world.passages.length} passages`,
  };
}

/** The search recipe's `--smoke` preset: a tiny world and model, 2 RL steps (seconds; what the tests run). */
export const SEARCH_SMOKE: Readonly<Record<string, string>> = {
  "env.options.numCountries": "12",
  "policy.dModel": "32",
  "policy.nLayers": "1",
  "policy.nHeads": "2",
  "policy.contextLength": "192",
  "sft.steps": "4",
  "sft.batchSize": "8",
  "sft.demosPerTask": "1",
  "rl.steps": "2",
  "rl.tasksPerStep": "4",
  "rl.groupSize": "4",
  "eval.maxTasks": "8",
  "run.checkpointEvery": "1",
};

/** The search recipe (see the file doc). */
export const searchRecipe: EnvRecipe = {
  name: "search",
  description: "Search-R1 QA over a generated world of country facts (BM25 retrieval); EM outcome",
  protocols: ["search-r1"],
  tools: ["search"],
  labDesigns: SEARCH_LAB_DESIGNS,
  labReport: "qa",
  defaults: {},
  smoke: SEARCH_SMOKE,
  build: buildSearch,
};
