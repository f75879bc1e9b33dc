/**
 * The search recipe's worlds as an agent outside this process sees them (`RecipeInstance.retrievalWorld`, for
 * `arl train --agent`): each world's training questions, the passages its retrieval serves, its texts and its
 * personas' turns. The counterfactual worlds are the recipe's own: the warm start's are seeded `seed·1000 + k` (as
 * `searchDemonstrations` draws them), RL's are `makeEnv(k)`'s (seed `seed·1000 + 500 + k`), so a `--agent` run trains
 * in the same worlds as `arl train`.
 */
import type { RetrievalWorld } from "../../env/recipe.ts";
import { PERSONAS, personaTurn, type Persona } from "./scripted.ts";
import { counterfactualWorld, valuesOf, worldTexts, type CountryAttribute, type World } from "./world.ts";

/** One world as `RetrievalWorld`: its persona turns guess from this world's own values. */
function asRetrievalWorld(world: World): RetrievalWorld {
  return {
    train: world.train,
    retrievalTasks: world.train.filter((t) => t.known === false),
    passages: world.passages,
    texts: () => worldTexts(world),
    scriptedTurn: (persona, ctx) => {
      if (!(PERSONAS as readonly string[]).includes(persona)) throw new Error(`search env: unknown persona ${JSON.stringify(persona)}; allowed: ${PERSONAS.join(", ")}`);
      return personaTurn(persona as Persona, ctx, (a) => valuesOf(world, a as CountryAttribute));
    },
  };
}

/**
 * The search recipe's `retrievalWorld` hook.
 * @param world the run's real world
 * @param seed `run.seed`
 * @param rlWorld the recipe's world `k` of `makeEnv(k)` (cached there, so RL's worlds are built once)
 * @returns `(use, k)` → world `k` (0 = `world`); throws for a `k` that is not a non-negative integer
 */
export function searchRetrievalWorlds(world: World, seed: number, rlWorld: (k: number) => World): (use: "demo" | "rl", k: number) => RetrievalWorld {
  const cache = new Map<string, RetrievalWorld>();
  return (use, k) => {
    if (!Number.isInteger(k) || k < 0) throw new Error(`search env: retrievalWorld: k must be an integer ≥ 0, got ${k}`);
    const key = k === 0 ? "real" : `${use}:${k}`;
    let out = cache.get(key);
    if (out === undefined) {
      const w = k === 0 ? world : use === "rl" ? rlWorld(k) : counterfactualWorld(world, seed * 1000 + k);
      cache.set(key, (out = asRetrievalWorld(w)));
    }
    return out;
  };
}
