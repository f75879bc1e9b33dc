/**
 * Success rates of the travel personas on the held-out split (hermes, world 0), with the env's transient failures
 * on (the default 0.15, as RL, evaluation and the warm-start demonstrations see them) and off: careful solves ~all,
 * each imperfect persona fails its own share, and the warm-start mixture lands near one half — mediocre to imitate,
 * with every decision left for RL to fix.
 */
import { describe, expect, it } from "vitest";
import type { Task } from "../src/core/types.ts";
import { TRAVEL_PERSONA_WEIGHTS, TRAVEL_PERSONAS, travelRecipe } from "../src/envs/travel/index.ts";
import { expectPersonaWeights, personaEpisodes, recipeTokenizer } from "./env-helpers.ts";

async function successRates(failureRate: number): Promise<Record<string, number>> {
  const inst = travelRecipe.build({ seed: 0, protocol: "hermes", options: { failureRate }, maxTurns: 8, call: {} });
  const tok = recipeTokenizer(inst, "hermes", false);
  const run = (persona: string, tasks: readonly Task[]) => personaEpisodes(inst, tok, persona, tasks, { limits: { contextLength: 4096, maxObservationTokens: 4096 }, seed: 7 });
  const out: Record<string, number> = {};
  for (const p of [...TRAVEL_PERSONAS, "mixture"]) {
    const trajs = await run(p, inst.test);
    out[p] = trajs.filter((t) => (t.grade?.score ?? 0) >= 1).length / trajs.length;
  }
  return out;
}

describe("travel persona success rates (test split)", () => {
  it("weights sum to 1 and name every persona", () => {
    expectPersonaWeights(TRAVEL_PERSONA_WEIGHTS, TRAVEL_PERSONAS);
  });

  it("without failures: careful solves all; the mixture about half", async () => {
    const r = await successRates(0);
    expect(r.careful).toBe(1);
    expect(r.fragile).toBe(1); // its habit shows only after a failure
    for (const p of ["forgetful", "hasty", "main-airport", "over-checker"]) expect(r[p]).toBeLessThan(0.9);
    expect(r.forgetful).toBeLessThan(0.35);
    expect(r["over-checker"]).toBeLessThan(0.3);
    expect(r.mixture).toBeGreaterThan(0.4);
    expect(r.mixture).toBeLessThan(0.6);
  });

  it("with the default failures (0.15): careful still solves most; fragile loses its share; the mixture about half", async () => {
    const r = await successRates(0.15);
    expect(r.careful).toBeGreaterThanOrEqual(0.95);
    expect(r.fragile).toBeLessThan(0.85);
    expect(r.mixture).toBeGreaterThan(0.4);
    expect(r.mixture).toBeLessThan(0.6);
  });
});
