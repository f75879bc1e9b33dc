/**
 * The travel recipe end to end: episodes of the scripted personas through `toolEnv` and the rollout (real word
 * tokenizer, so tool arguments arrive spaced as the embedded policy's would), the decisions each persona breaks,
 * fault recovery, breakdown keys, hermes demonstrations parsing back, the vocabulary and the token budgets.
 */
import { describe, expect, it } from "vitest";
import type { Action, Task, Trajectory, Turn } from "../src/core/types.ts";
import type { RecipeContext, RecipeInstance } from "../src/env/recipe.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { getProtocol } from "../src/protocol/index.ts";
import { renderTools } from "../src/env/tool.ts";
import type { ProtocolName } from "../src/protocol/types.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import { ScriptedAgent } from "../src/rollout/agent.ts";
import { episodeSeed, rolloutGroups } from "../src/rollout/rollout.ts";
import {
  buildTravelWorld, confirmation, GIVE_UP_ANSWER, normCode, normName, personaAction, scriptedTurn, TRAVEL_INSTRUCTIONS, TRAVEL_PERSONAS,
  travelBreakdown, travelRecipe, travelTools, type TravelRequest,
} from "../src/envs/travel/index.ts";
import { personaEpisodes, recipeTokenizer, successRate as success } from "./env-helpers.ts";

const ctx = (over: Partial<RecipeContext> = {}): RecipeContext => ({ seed: 0, protocol: "hermes", options: {}, maxTurns: 8, call: {}, ...over });

/** A recipe instance, its tokenizer and a runner of persona episodes. */
function setup(protocol: ProtocolName = "hermes", options: Record<string, unknown> = {}) {
  const inst = travelRecipe.build(ctx({ protocol, options }));
  const tok = recipeTokenizer(inst, protocol); // as the trainer's setup builds it
  const limits = { contextLength: 4096, maxObservationTokens: 4096 };
  // The mixture draws each turn's persona as the trainer's warm start does; one episode per task.
  const episodes = (persona: string, tasks: readonly Task[], world = 0, seed = 7) => personaEpisodes(inst, tok, persona, tasks, { limits, seed, world, mixtureGroup: 1 });
  return { inst, tok, episodes };
}

const rate = (trajs: readonly Trajectory[], key: string) => {
  const v = trajs.map((t) => travelBreakdown(t)[key]).filter((x) => x !== undefined);
  return { rate: v.reduce((a, b) => a + b, 0) / Math.max(1, v.length), n: v.length };
};

describe("travel recipe", () => {
  it("declares its name, protocols, tools, defaults and smoke run", () => {
    expect(travelRecipe.name).toBe("travel");
    expect(travelRecipe.protocols).toEqual(["hermes", "react"]);
    expect(travelRecipe.tools).toEqual(["get_airports", "search_flights", "search_hotels", "book"]);
    for (const k of ["policy.contextLength", "env.maxTurns", "env.maxObservationTokens", "rl.maxTokensPerTurn", "sft.steps", "rl.steps"]) {
      expect(Number(travelRecipe.defaults[k])).toBeGreaterThan(0);
    }
    expect(travelRecipe.smoke["rl.steps"]).toBe("2");
  });

  it("checks its options, naming env.options.<field>", () => {
    expect(() => travelRecipe.build(ctx({ options: { failureRate: 2 } }))).toThrow(/env\.options\.failureRate/);
    expect(() => travelRecipe.build(ctx({ options: { numTestTasks: 1 } }))).toThrow(/env\.options\.numTestTasks/);
    expect(() => travelRecipe.build(ctx({ options: { failurerate: 0.1 } }))).toThrow(/env\.options\.failurerate: unknown option \(did you mean failureRate\?\); allowed: failureRate, numTestTasks, worldSeed/);
    const inst = travelRecipe.build(ctx({ options: { numTestTasks: 20, failureRate: 0 } }));
    expect(inst.test).toHaveLength(20);
    expect(inst.describe()).toMatch(/14 cities \(7 with two airports\), 1092 flights, 63 hotels/);
    expect(() => travelRecipe.build(ctx({ protocol: "nope" as ProtocolName }))).toThrow(/unknown protocol/);
  });

  it("the same context builds the same tasks and texts; the world follows the seed or worldSeed", () => {
    const a = travelRecipe.build(ctx());
    const b = travelRecipe.build(ctx());
    expect(a.train).toEqual(b.train);
    expect(a.texts!()).toEqual(b.texts!());
    const c = travelRecipe.build(ctx({ seed: 1 }));
    expect(c.train.map((t) => t.data!.lateArrival)).not.toEqual(a.train.map((t) => t.data!.lateArrival));
    const d = travelRecipe.build(ctx({ seed: 1, options: { worldSeed: 0 } }));
    expect(d.train).toEqual(a.train);
  });
});

describe("travel episodes (hermes, real word tokenizer)", () => {
  const { inst, tok, episodes } = setup("hermes", { failureRate: 0 });
  const flaky = setup("hermes");

  it("careful books correctly on every held-out task without failures, in the real and counterfactual worlds", async () => {
    for (const world of [0, 1, 2]) {
      const trajs = await episodes("careful", inst.test, world);
      expect(success(trajs)).toBe(1);
      for (const t of trajs) {
        expect(t.grade!.parts).toMatchObject({ booked: 1, right_flight: 1, right_airport: 1, rating_ok: 1, checkin_ok: 1, stopped: 1 });
        expect(t.answer).toMatch(/^booked flight [a-z]{2} (\d ){4}and hotel h (\d ){3}\.$/);
        expect(t.invalidActions).toBe(0);
        expect(t.tokens.filter((x) => x === tok.id("[UNK]"))).toHaveLength(0);
      }
    }
  });

  it("careful recovers from transient failures (retries the same call) and still books", async () => {
    const trajs = await flaky.episodes("careful", flaky.inst.test);
    expect(success(trajs)).toBeGreaterThanOrEqual(0.95);
    const failed = trajs.filter((t) => travelBreakdown(t).failed_calls > 0);
    expect(failed.length).toBeGreaterThan(10);
    for (const t of failed) {
      const i = t.turns.findIndex((u) => u.toolResults?.some((r) => !r.ok));
      expect(t.turns[i].toolResults![0].content).toMatch(/^error: tool \w+: (rate limited \(429\): retry later|upstream timeout|service unavailable \(503\))$/);
      // The next turn repeats the same call.
      expect(t.turns[i + 1].action).toEqual(t.turns[i].action);
    }
    expect(rate(trajs, "decision/iv_recovery").rate).toBeGreaterThanOrEqual(0.95);
  });

  it("fragile gives up (or claims a booking it never made) after a failure: nothing booked, score 0, iv = 0", async () => {
    const trajs = await flaky.episodes("fragile", flaky.inst.test);
    const gaveUp = trajs.filter((t) => t.grade!.parts.booked === 0);
    expect(gaveUp.length).toBeGreaterThan(5);
    for (const t of gaveUp) {
      expect(t.grade!.score).toBe(0);
      expect(travelBreakdown(t)["decision/iv_recovery"]).toBe(0);
      expect(travelBreakdown(t)["decision/v_stop"]).toBeUndefined(); // no booking: the decision did not arise
      expect(t.answer === tok.decode(tok.encode(GIVE_UP_ANSWER)) || /^booked flight/.test(t.answer ?? "")).toBe(true);
    }
    expect(gaveUp.some((t) => /^booked flight/.test(t.answer ?? ""))).toBe(true); // a claimed booking
    // Without failures fragile is careful.
    expect(success(await episodes("fragile", inst.test))).toBe(1);
  });

  it("each imperfect persona breaks its own decision and keeps the others", async () => {
    const by: Record<string, Trajectory[]> = {};
    for (const p of TRAVEL_PERSONAS) by[p] = await episodes(p, inst.test);
    const keys = ["decision/i_context", "decision/ii_late_checkin", "decision/iii_arrival_airport", "decision/v_stop"];
    const own: Record<string, string> = { forgetful: keys[0], hasty: keys[1], "main-airport": keys[2], "over-checker": keys[3] };
    for (const k of keys) expect(rate(by.careful, k).rate).toBe(1);
    for (const [p, key] of Object.entries(own)) {
      expect(rate(by[p], key).rate).toBeLessThan(0.7);
      for (const other of keys.filter((k) => k !== key && !(p === "forgetful" && k !== keys[0]))) expect(rate(by[p], other).rate).toBe(1);
      expect(success(by[p])).toBeLessThan(success(by.careful));
    }
    // main-airport asks get_airports; the others never need it.
    expect(by["main-airport"].some((t) => t.toolCalls?.get_airports)).toBe(true);
    expect(by.careful.every((t) => !t.toolCalls?.get_airports)).toBe(true);
  });

  it("breakdown keys are present only where the decision arises", async () => {
    const trajs = [...(await episodes("mixture", inst.test)), ...(await flaky.episodes("mixture", flaky.inst.test))];
    for (const t of trajs) {
      const b = travelBreakdown(t);
      const d = t.task.data as TravelRequest;
      const p = t.grade!.parts;
      expect("decision/i_context" in b).toBe(t.turns.some((u) => u.toolResults?.some((r) => r.name === "search_flights")));
      expect("decision/ii_late_checkin" in b).toBe(p.late_arrival === 1 && p.booked === 1 && p.booked_late === 1);
      expect("decision/iii_arrival_airport" in b).toBe(d.twoAirports && p.booked === 1);
      expect("decision/iv_recovery" in b).toBe(b.failed_calls > 0);
      expect("decision/v_stop" in b).toBe(p.booked === 1);
      expect(b.success).toBe(t.grade!.score >= 1 ? 1 : 0);
      expect(b.calls).toBe(Object.values(t.toolCalls ?? {}).reduce((a, x) => a + x, 0));
      for (const v of Object.entries(b).filter(([k]) => k.startsWith("decision/")).map(([, v]) => v)) expect([0, 1]).toContain(v);
    }
    expect(Object.keys(inst.breakdownLabels)).toEqual([
      "decision/i_context",
      "decision/ii_late_checkin",
      "decision/iii_arrival_airport",
      "decision/iv_recovery",
      "decision/v_stop",
      "success",
      "calls",
      "failed_calls",
    ]);
  });

  it("a counterfactual world's flags come from the grade, not the task's world-0 data", async () => {
    const trajs = await episodes("careful", inst.test, 3);
    const differs = trajs.filter((t) => (t.grade!.parts.late_arrival === 1) !== (t.task.data as TravelRequest).lateArrival);
    expect(differs.length).toBeGreaterThan(5);
    for (const t of differs) {
      expect("decision/ii_late_checkin" in travelBreakdown(t)).toBe(t.grade!.parts.late_arrival === 1);
    }
  });

  it("the breakdown spots a booking of ids never observed (iv) and a wrong search (i)", () => {
    const task = inst.test[0];
    const d = task.data as TravelRequest;
    const turn = (action: Action, results: Turn["toolResults"]): Turn => ({
      actionText: "",
      action,
      observation: "",
      sampledTokens: 0,
      observationTokens: 0,
      stopReason: "stop",
      ...(results === undefined ? {} : { toolResults: results }),
    });
    const flights: Action = { type: "tool_call", calls: [{ name: "search_flights", arguments: { from: ` ${d.destination} `, to: d.origin, date: d.date } }] };
    const book: Action = { type: "tool_call", calls: [{ name: "book", arguments: { flight_id: "mu 1 2 3 4", hotel_id: "h 1 0 0" } }] };
    const traj = {
      task,
      turns: [
        turn(flights, [{ name: "search_flights", ok: false, content: "error: tool search_flights: upstream timeout" }]),
        turn(book, [{ name: "book", ok: true, content: "{}", value: { status: "confirmed", flight: "mu1234", hotel: "h100" } }]),
        turn({ type: "answer", answer: "done" }, undefined),
      ],
      grade: { score: 1, parts: { booked: 1, right_flight: 1, right_airport: 1, rating_ok: 1, checkin_ok: 1, stopped: 1, late_arrival: 0, two_airports: 0 } },
    };
    const b = travelBreakdown(traj);
    expect(b["decision/i_context"]).toBe(0); // swapped origin and destination
    expect(b["decision/iv_recovery"]).toBe(0); // booked ids it never saw
    expect(b.failed_calls).toBe(1);
    expect(b.calls).toBe(2);
  });
});

describe("hermes demonstrations", () => {
  const { inst, tok } = setup("hermes", { failureRate: 0 });
  const world = buildTravelWorld(0);
  const schemas = renderTools(travelTools(world, { bookings: [] }));
  /** An action with its arguments normalised as the tools read them, and an answer's spacing collapsed. */
  const norm = (a: Action): unknown =>
    a.type === "tool_call"
      ? a.calls.map((c) => ({
          name: c.name,
          args: Object.fromEntries(Object.entries(c.arguments).map(([k, v]) => [k, typeof v === "string" ? (["from", "to", "city"].includes(k) ? normName(v) : normCode(v)) : v])),
        }))
      : a.type === "answer"
        ? normCode(a.answer)
        : a;

  it("scripted turns, through the word tokenizer, parse back to the intended actions", async () => {
    const flaky = setup("hermes", { failureRate: 0.15 });
    const tasks = flaky.inst.test.slice(0, 30);
    let checked = 0;
    for (const persona of TRAVEL_PERSONAS) {
      const trajs = await flaky.episodes(persona, tasks, 0, 3);
      trajs.forEach((t, i) => {
        const seed = episodeSeed(3, i, 0);
        for (const [k, turn] of t.turns.entries()) {
          const intended = personaAction(persona, { task: t.task, history: t.turns.slice(0, k), seed: seed + k, turnIndex: k });
          // The env parsed the decoded (spaced) text; parsing it again gives the same action.
          expect(hermesProtocol.parse(turn.actionText, { tools: schemas, maxCallsPerTurn: 1 })).toEqual(turn.action);
          expect(norm(turn.action)).toEqual(norm(intended));
          checked++;
        }
      });
    }
    expect(checked).toBeGreaterThan(600);
  });

  it("every action shape round-trips: normalised arguments equal the intended ones", () => {
    for (const task of inst.test) {
      const d = task.data as TravelRequest;
      const f = world.flights.find((x) => x.fromCity === d.origin && x.toCity === d.destination && x.date === d.date)!;
      const actions: Action[] = [
        { type: "tool_call", calls: [{ name: "search_flights", arguments: { from: d.origin, to: d.destination, date: d.date } }] },
        { type: "tool_call", calls: [{ name: "get_airports", arguments: { city: d.destination } }] },
        { type: "tool_call", calls: [{ name: "search_hotels", arguments: { city: d.destination, near: d.destinationAirports.at(-1)!, min_rating: String(d.minRating) } }] },
        { type: "tool_call", calls: [{ name: "book", arguments: { flight_id: f.id, hotel_id: world.hotels[0].id } }] },
        { type: "answer", answer: confirmation(f.id, world.hotels[0].id) },
        { type: "answer", answer: GIVE_UP_ANSWER },
      ];
      for (const a of actions) {
        const text = tok.decode(tok.encode(hermesProtocol.format(a)));
        const back = hermesProtocol.parse(text, { tools: schemas, maxCallsPerTurn: 1 });
        expect(norm(back)).toEqual(norm(a));
      }
    }
  });

  it("scriptedTurn is the protocol's format of the persona's action; an unknown persona is named", () => {
    const task = inst.train[0];
    const c = { task, history: [], seed: 5, turnIndex: 0, budget: 100 };
    expect(inst.scriptedTurn("careful", c)).toBe(hermesProtocol.format(personaAction("careful", c)));
    expect(scriptedTurn("careful", c, getProtocol("react"))).toBe(getProtocol("react").format(personaAction("careful", c)));
    expect(() => inst.scriptedTurn("reckless", c)).toThrow(/unknown persona "reckless"; allowed: careful, forgetful/);
    expect(personaAction("careful", c)).toEqual({
      type: "tool_call",
      calls: [{ name: "search_flights", arguments: { from: task.data!.origin, to: task.data!.destination, date: task.data!.date } }],
    });
  });
});

describe("travel token budgets and vocabulary", () => {
  /** Measures a protocol: prompt, careful episodes (with and without failures), observations, scripted turns. */
  async function measure(protocol: ProtocolName) {
    const clean = setup(protocol, { failureRate: 0 });
    const flaky = setup(protocol);
    const c = await clean.episodes("careful", clean.inst.test);
    const f = [...(await flaky.episodes("careful", flaky.inst.test)), ...(await flaky.episodes("mixture", flaky.inst.train.slice(0, 120)))];
    const all = [...c, ...f];
    return {
      vocab: clean.tok.vocabSize,
      prompt: Math.max(...c.map((t) => t.promptLength)),
      carefulMean: c.reduce((a, t) => a + t.tokens.length, 0) / c.length,
      carefulMax: Math.max(...c.map((t) => t.tokens.length)),
      flakyOver: (cap: number) => f.filter((t) => t.tokens.length > cap).length / f.length,
      obsMax: Math.max(...all.flatMap((t) => t.turns.map((u) => u.observationTokens))),
      turnMax: Math.max(...all.flatMap((t) => t.turns.map((u) => u.sampledTokens))),
      inst: clean.inst,
      tok: clean.tok,
    };
  }

  it("hermes and react episodes fit the recipe's defaults; the vocabulary is small and covers everything", async () => {
    const d = travelRecipe.defaults;
    for (const p of ["hermes", "react"] as const) {
      const m = await measure(p);
      expect(m.vocab).toBeLessThan(400);
      // The fixed system prompt is one token (RecipeInstance.fixedPrompts): the prompt is that token and the request.
      expect(m.prompt).toBeLessThan(100);
      expect(m.carefulMean).toBeLessThan(500);
      expect(m.carefulMax).toBeLessThan(Number(d["policy.contextLength"]));
      // With failures a few long episodes (several failures in a row) outgrow the window and end truncated: ≤ 3 %.
      expect(m.flakyOver(Number(d["policy.contextLength"]))).toBeLessThanOrEqual(0.03);
      expect(m.obsMax).toBeLessThanOrEqual(Number(d["env.maxObservationTokens"]));
      expect(m.turnMax).toBeLessThanOrEqual(Number(d["rl.maxTokensPerTurn"]));
      // The instructions and every entity's text are in the vocabulary.
      const unk = m.tok.id("[UNK]");
      // The system prompt (instructions + tool section) is one token, the same text the env renders.
      const [system] = m.inst.fixedPrompts!();
      expect(system).toContain(TRAVEL_INSTRUCTIONS);
      expect(m.tok.encode(system)).toHaveLength(1);
      expect(m.tok.decode(m.tok.encode(system))).toBe(system);
      expect(m.inst.texts!().some((x) => m.tok.encode(x).includes(unk))).toBe(false);
    }
  });

  it("makeEnv(k, {faults: false}) turns off the config's fault injection only", async () => {
    const inst: RecipeInstance = travelRecipe.build(ctx({ options: { failureRate: 0 }, faults: { rate: 1, kinds: ["fail"], retryableShare: 1 } }));
    const tok = WordTokenizer.fromTexts(inst.texts!(), hermesProtocol.specialTokens);
    const run = async (faults: boolean) => {
      const agent = new ScriptedAgent(tok, (c) => inst.scriptedTurn("careful", c));
      const g = await rolloutGroups(inst.test.slice(0, 5), { makeEnv: inst.makeEnv(0, { faults }), agent, tokenizer: tok, limits: { contextLength: 4096, maxObservationTokens: 4096 } }, { groupSize: 1, seed: 1 });
      return g.map((x) => x.trajectories[0]);
    };
    expect((await run(true)).every((t) => t.grade!.parts.booked === 0)).toBe(true); // every call faults
    expect(success(await run(false))).toBe(1);
  });
});
