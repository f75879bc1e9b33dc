/**
 * Success rates of the travel personas on the held-out split (hermes, world 0), with the env's transient failures
 * on (the default 0.15, as RL, evaluation and the warm-start demonstrations see them) and off: careful solves ~all,
 * each imperfect persona fails its own share, and the warm-start mixture lands near one half — mediocre to imitate,
 * with every decision left for RL to fix.
 */
import { describe, expect, it } from "vitest";
import { Rng } from "../src/core/rng.ts";
import type { Task, Trajectory } from "../src/core/types.ts";
import { getProtocol } from "../src/protocol/index.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { ScriptedAgent } from "../src/rollout/agent.ts";
import { rolloutGroups } from "../src/rollout/rollout.ts";
import { TRAVEL_PERSONA_WEIGHTS, TRAVEL_PERSONAS, travelRecipe } from "../src/envs/travel/index.ts";

async function successRates(failureRate: number): Promise<Record<string, number>> {
  const inst = travelRecipe.build({ seed: 0, protocol: "hermes", options: { failureRate }, maxTurns: 8, call: {} });
  const tok = WordTokenizer.fromTexts(inst.texts(), getProtocol("hermes").specialTokens);
  const names = Object.keys(inst.personas).sort();
  const total = names.reduce((a, n) => a + inst.personas[n], 0);
  const pick = (s: number) => {
    let u = new Rng(s ^ 0x2545f491).next() * total;
    for (const n of names) if ((u -= inst.personas[n]) < 0) return n;
    return names[names.length - 1];
  };
  const run = async (persona: string, tasks: readonly Task[]): Promise<Trajectory[]> => {
    const agent = new ScriptedAgent(tok, (c) => inst.scriptedTurn(persona === "mixture" ? pick(c.seed - c.turnIndex) : persona, c));
    const groups = await rolloutGroups(tasks, inst.makeEnv(0), agent, tok, { contextLength: 4096, maxObservationTokens: 4096 }, { groupSize: persona === "mixture" ? 4 : 1, seed: 7 });
    return groups.flatMap((g) => g.trajectories);
  };
  const out: Record<string, number> = {};
  for (const p of [...TRAVEL_PERSONAS, "mixture"]) {
    const trajs = await run(p, inst.test);
    out[p] = trajs.filter((t) => (t.grade?.score ?? 0) >= 1).length / trajs.length;
  }
  return out;
}

describe("travel persona success rates (test split)", () => {
  it("weights sum to 1 and name every persona", () => {
    expect(Object.keys(TRAVEL_PERSONA_WEIGHTS).sort()).toEqual([...TRAVEL_PERSONAS].sort());
    expect(Object.values(TRAVEL_PERSONA_WEIGHTS).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 10);
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
