/**
 * Helpers of the env tests (`test/env-*.test.ts`): a recipe instance's word tokenizer as the trainer builds it, the
 * warm start's persona draw, scripted persona episodes and their success rate, and the vocabulary check every
 * episode of a recipe must pass.
 */
import { expect } from "vitest";
import { Rng } from "../src/core/rng.ts";
import type { Task, Trajectory } from "../src/core/types.ts";
import type { RolloutLimits } from "../src/env/episode.ts";
import type { EnvRecipe, RecipeInstance } from "../src/env/recipe.ts";
import { getRecipe } from "../src/envs/index.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { getProtocol } from "../src/protocol/index.ts";
import type { ProtocolName } from "../src/protocol/types.ts";
import { ScriptedAgent } from "../src/rollout/agent.ts";
import { rolloutGroups } from "../src/rollout/rollout.ts";

/**
 * The word tokenizer of `inst`'s texts with `protocol`'s special tokens and, unless `fixedPrompts` is false, the
 * instance's fixed system prompts kept whole (as the trainer's setup builds it).
 */
export function recipeTokenizer(inst: RecipeInstance, protocol: ProtocolName, fixedPrompts = true): WordTokenizer {
  return WordTokenizer.fromTexts(inst.texts!(), [...getProtocol(protocol).specialTokens, ...(fixedPrompts ? (inst.fixedPrompts?.() ?? []) : [])]);
}

/** The warm start's draw of the mixture (src/train/warmStart.ts): the persona of an episode from its seed. */
export function personaPicker(personas: Readonly<Record<string, number>>): (seed: number) => string {
  const names = Object.keys(personas).sort();
  const total = names.reduce((a, n) => a + personas[n], 0);
  return (s) => {
    let u = new Rng(s ^ 0x2545f491).next() * total;
    for (const n of names) if ((u -= personas[n]) < 0) return n;
    return names[names.length - 1];
  };
}

/** How `personaEpisodes` runs: the world, the token budgets, the rollout seed and the mixture's episodes per task. */
export interface PersonaRunOptions {
  limits: RolloutLimits;
  seed: number;
  /** World `k` of the instance (default 0, the real world). */
  world?: number;
  /** Episodes per task of the `mixture` persona (default 4; a named persona runs one). */
  mixtureGroup?: number;
}

/** Expects the warm-start mixture `weights` to name each of `personas` once and to sum to 1. */
export function expectPersonaWeights(weights: Readonly<Record<string, number>>, personas: readonly string[]): void {
  expect(Object.keys(weights).sort()).toEqual([...personas].sort());
  expect(Object.values(weights).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 10);
}

/**
 * The episodes of scripted `persona` on `tasks` in `inst` (`mixture`: each turn's persona drawn as the warm start
 * draws it), every group's trajectories in task order.
 */
export async function personaEpisodes(inst: RecipeInstance, tok: WordTokenizer, persona: string, tasks: readonly Task[], options: PersonaRunOptions): Promise<Trajectory[]> {
  const pick = personaPicker(inst.personas);
  const agent = new ScriptedAgent(tok, (c) => inst.scriptedTurn(persona === "mixture" ? pick(c.seed - c.turnIndex) : persona, c));
  const groupSize = persona === "mixture" ? (options.mixtureGroup ?? 4) : 1;
  const groups = await rolloutGroups(tasks, { makeEnv: inst.makeEnv(options.world ?? 0), agent, tokenizer: tok, limits: options.limits }, { groupSize, seed: options.seed });
  return groups.flatMap((g) => g.trajectories);
}

/**
 * `personaEpisodes` over `inst` (built for `protocol`, default hermes; its tokenizer as the trainer builds it) as a
 * function of the persona and the tasks, each episode checked by `expectInVocabulary` (shorter than `maxTokens` when
 * given).
 */
export function personaRunner(inst: RecipeInstance, options: PersonaRunOptions & { protocol?: ProtocolName; maxTokens?: number }): (persona: string, tasks: readonly Task[]) => Promise<Trajectory[]> {
  const tok = recipeTokenizer(inst, options.protocol ?? "hermes");
  return async (persona, tasks) => {
    const trajs = await personaEpisodes(inst, tok, persona, tasks, options);
    expectInVocabulary(trajs, tok, options.maxTokens);
    return trajs;
  };
}

/**
 * Expects `recipe` to be the registry's entry of its name, its build (for `maxTurns`, hermes, seed 0) to refuse each
 * of `refused`'s options with its message, and its lab designs to be `designs`, in order.
 */
export function expectRegisteredRecipe(recipe: EnvRecipe, check: { maxTurns: number; refused: ReadonlyArray<[Record<string, unknown>, RegExp]>; designs: readonly string[] }): void {
  expect(getRecipe(recipe.name)).toBe(recipe);
  for (const [options, message] of check.refused) expect(() => recipe.build({ seed: 0, protocol: "hermes", options, maxTurns: check.maxTurns, call: {} })).toThrow(message);
  expect(Object.keys(recipe.labDesigns ?? {})).toEqual(check.designs);
}

/** Share of `trajs` graded a full success (score ≥ 1). */
export function successRate(trajs: readonly Trajectory[]): number {
  return trajs.filter((t) => (t.grade?.score ?? 0) >= 1).length / trajs.length;
}

/** Expects every episode's tokens free of `[UNK]` (the recipe's texts cover it) and, given `maxTokens`, fewer. */
export function expectInVocabulary(trajs: readonly Trajectory[], tok: WordTokenizer, maxTokens?: number): void {
  const unk = tok.id("[UNK]");
  for (const t of trajs) {
    expect(t.tokens.includes(unk), tok.decode(t.tokens)).toBe(false);
    if (maxTokens !== undefined) expect(t.tokens.length).toBeLessThan(maxTokens);
  }
}
