import { describe, expect, it } from "vitest";
import type { Action, Task, ToolCallResult } from "../src/core/types.ts";
import { callTool, isRetryable, type Tool } from "../src/env/tool.ts";
import type { GradeInput, ToolEnvTurn } from "../src/env/toolEnv.ts";
import {
  allRoutes, buildTravelWorld, cheapestFlight, CITIES, counterfactualTravelWorld, flightsOn, gradeTravel, HOTELS_PER_AIRPORT, LATE_SHARE,
  landsAfterMidnight, NEAR_KM, normCode, normName, TRAIN_PHRASINGS, transientFailure, TRANSIENT_ERRORS, travelTasks, travelTools, travelUserMessage,
  worldIndex, type FlightView, type HotelView, type TravelRequest, type TravelState, type TravelWorld,
} from "../src/envs/travel/index.ts";

const world = buildTravelWorld(0);
const { train, test } = travelTasks(world);

/** The tools over `w` with a fresh state, by name. */
function toolsOf(w: TravelWorld, failureRate = 0): { state: TravelState; t: Record<string, Tool> } {
  const state: TravelState = { bookings: [] };
  return { state, t: Object.fromEntries(travelTools(w, state, { failureRate }).map((x) => [x.name, x])) };
}

/** Runs a tool as the env does (schema check, errors as values). */
async function run(t: Tool, args: Record<string, unknown>, callKey?: string) {
  return callTool(t, args, callKey === undefined ? {} : { callKey });
}

describe("travel world", () => {
  it("is deterministic: the same seed gives a deep-equal world, another seed a different one", () => {
    expect(buildTravelWorld(7)).toEqual(buildTravelWorld(7));
    const a = buildTravelWorld(7);
    const b = buildTravelWorld(8);
    expect(a.flights.map((f) => f.id)).not.toEqual(b.flights.map((f) => f.id));
    expect(a.flights.map((f) => f.price)).not.toEqual(b.flights.map((f) => f.price));
    expect(() => buildTravelWorld(1.5)).toThrow(/seed must be an integer/);
  });

  it("has 14 cities, 7 with two airports, flights on every route for today and tomorrow", () => {
    expect(world.cities).toHaveLength(14);
    expect(world.cities.filter((c) => c.airports.length === 2)).toHaveLength(7);
    expect(world.cities.find((c) => c.name === "shanghai")?.airports).toEqual(["pvg", "sha"]);
    for (const [a, b] of allRoutes()) {
      for (const date of [world.today, world.tomorrow]) {
        const fs = flightsOn(world, a, b, date);
        expect(fs).toHaveLength(3);
        expect(new Set(fs.map((f) => f.price)).size).toBe(3); // a unique cheapest
        const ix = worldIndex(world);
        for (const f of fs) {
          expect(ix.city.get(a)!.airports).toContain(f.from);
          expect(ix.city.get(b)!.airports).toContain(f.to);
          expect(f.dep).toBeLessThan(1440); // departs on its date
          expect(f.arr).toBeGreaterThan(f.dep);
        }
      }
    }
    expect(new Set(world.flights.map((f) => f.id)).size).toBe(world.flights.length);
    expect(new Set(world.hotels.map((h) => h.id)).size).toBe(world.hotels.length);
  });

  it("a counterfactual keeps names and ids and re-draws the values, deterministically", () => {
    const cf = counterfactualTravelWorld(world, 11);
    expect(cf).toEqual(counterfactualTravelWorld(world, 11));
    expect(cf.cities).toEqual(world.cities);
    expect(cf.flights.map((f) => [f.id, f.fromCity, f.toCity, f.date])).toEqual(world.flights.map((f) => [f.id, f.fromCity, f.toCity, f.date]));
    const key = (h: { id: string; name: string; city: string; airport: string }) => `${h.id}|${h.name}|${h.city}|${h.airport}`;
    expect(cf.hotels.map(key).sort()).toEqual(world.hotels.map(key).sort());
    const byId = new Map(world.flights.map((f) => [f.id, f]));
    const changed = (k: "price" | "arr" | "to") => cf.flights.filter((f) => f[k] !== byId.get(f.id)![k]).length / cf.flights.length;
    expect(changed("price")).toBeGreaterThan(0.8);
    expect(changed("arr")).toBeGreaterThan(0.8);
    expect(changed("to")).toBeGreaterThan(0.1); // arrival airports re-drawn (two-airport destinations)
    const hotelById = new Map(world.hotels.map((h) => [h.id, h]));
    expect(cf.hotels.filter((h) => h.rating !== hotelById.get(h.id)!.rating).length).toBeGreaterThan(40);
    expect(cf.hotels.filter((h) => h.late !== hotelById.get(h.id)!.late).length).toBeGreaterThan(5);
    // Which flight is the cheapest changes for many route-dates.
    let moved = 0;
    for (const [a, b] of allRoutes()) if (cheapestFlight(cf, a, b, cf.tomorrow)!.id !== cheapestFlight(world, a, b, world.tomorrow)!.id) moved++;
    expect(moved).toBeGreaterThan(60);
    expect(counterfactualTravelWorld(world, 12)).not.toEqual(cf);
  });

  it("keeps its guarantees in the real world and in counterfactual ones", () => {
    for (const w of [world, counterfactualTravelWorld(world, 1), counterfactualTravelWorld(world, 2), buildTravelWorld(5)]) {
      const routes = allRoutes();
      const late = routes.flatMap(([a, b]) => [w.today, w.tomorrow].map((d) => landsAfterMidnight(cheapestFlight(w, a, b, d)!)));
      expect(late.filter(Boolean).length).toBe(Math.round(LATE_SHARE * routes.length * 2));
      for (const c of w.cities) {
        for (const a of c.airports) {
          const near = w.hotels.filter((h) => h.city === c.name && h.km[a] <= NEAR_KM).sort((x, y) => x.km[a] - y.km[a]);
          expect(near).toHaveLength(HOTELS_PER_AIRPORT);
          // A well-rated hotel taking late arrivals, never only the nearest.
          expect(near.slice(1).some((h) => h.rating >= 4 && h.late)).toBe(true);
          for (const h of near) for (const other of c.airports.filter((o) => o !== a)) expect(h.km[other]).toBeGreaterThan(2 * NEAR_KM);
          for (const h of near) expect(h.rating >= 3 && h.rating <= 4.9).toBe(true);
        }
      }
    }
  });
});

describe("travel tasks", () => {
  it("splits 304 train / 60 test tasks on disjoint routes, with the held-out phrasing only in test", () => {
    expect(train).toHaveLength(304);
    expect(test).toHaveLength(60);
    const route = (t: Task<TravelRequest>) => `${t.data!.origin}>${t.data!.destination}`;
    const trainRoutes = new Set(train.map(route));
    for (const t of test) expect(trainRoutes.has(route(t))).toBe(false);
    expect(new Set([...train, ...test].map((t) => t.id)).size).toBe(364);
    expect(train.every((t) => Number(t.meta!.phrasing) < TRAIN_PHRASINGS)).toBe(true);
    expect(test.filter((t) => Number(t.meta!.phrasing) === TRAIN_PHRASINGS).length).toBe(20);
    expect(travelTasks(world)).toEqual(travelTasks(world));
    expect(travelTasks(world, 10).test).toHaveLength(10);
    expect(() => travelTasks(world, 1)).toThrow(/numTestTasks must be an integer in \[2, 362\]/);
  });

  it("every decision arises in a good share of tasks, in every world", () => {
    for (const w of [world, counterfactualTravelWorld(world, 3), counterfactualTravelWorld(world, 4)]) {
      for (const tasks of [train, test]) {
        const late = tasks.filter((t) => landsAfterMidnight(cheapestFlight(w, t.data!.origin, t.data!.destination, t.data!.date)!)).length / tasks.length;
        expect(late).toBeGreaterThan(0.22);
        expect(late).toBeLessThan(0.48);
        const two = tasks.filter((t) => t.data!.twoAirports).length / tasks.length;
        expect(two).toBeCloseTo(0.5, 5);
        // The cheapest flight lands at the destination's second airport in a good share of two-airport tasks.
        const twoTasks = tasks.filter((t) => t.data!.twoAirports);
        const second = twoTasks.filter((t) => cheapestFlight(w, t.data!.origin, t.data!.destination, t.data!.date)!.to === t.data!.destinationAirports[1]);
        expect(second.length / twoTasks.length).toBeGreaterThan(0.3);
        expect(second.length / twoTasks.length).toBeLessThan(0.7);
      }
    }
    // The flags in task data are world 0's.
    for (const t of [...train, ...test]) {
      expect(t.data!.lateArrival).toBe(landsAfterMidnight(cheapestFlight(world, t.data!.origin, t.data!.destination, t.data!.date)!));
    }
    expect(new Set(train.map((t) => t.data!.minRating))).toEqual(new Set([3, 4]));
    expect(new Set(train.map((t) => t.data!.when))).toEqual(new Set(["today", "tomorrow"]));
  });

  it("the user message carries the dates; the question the request", () => {
    const t = train.find((x) => x.data!.when === "tomorrow" && x.data!.origin === "shanghai" && x.data!.destination === "beijing") ?? train[0];
    const msg = travelUserMessage(t);
    expect(msg.startsWith("today is 2026-12-01 , tomorrow is 2026-12-02 .\n")).toBe(true);
    expect(msg).toContain(t.data!.origin);
    expect(msg).toContain(t.data!.destination);
    expect(t.answers).toEqual([]);
    expect(t.data!.date).toBe(t.data!.when === "today" ? "2026-12-01" : "2026-12-02");
  });
});

describe("travel tools", () => {
  it("normalise word-tokenizer-spaced arguments", () => {
    expect(normName(" new  york ")).toBe("new york");
    expect(normName("New-York")).toBe("new york");
    expect(normCode("2 0 2 6 - 1 2 - 0 2")).toBe("2026-12-02");
    expect(normCode(" MU 5 1 0 1 ")).toBe("mu5101");
  });

  it("search_flights: cheapest first, arrival airport and +1 shown, spaced args accepted", async () => {
    const { t } = toolsOf(world);
    const r = await run(t.search_flights, { from: " shanghai ", to: " beijing ", date: "2 0 2 6 - 1 2 - 0 2" });
    expect(r.ok).toBe(true);
    const fs = (r as { value: FlightView[] }).value;
    expect(fs).toHaveLength(3);
    expect(fs.map((f) => f.price)).toEqual([...fs.map((f) => f.price)].sort((a, b) => a - b));
    expect(fs[0].id).toBe(cheapestFlight(world, "shanghai", "beijing", "2026-12-02")!.id);
    for (const f of fs) {
      expect(f.dep).toMatch(/^(pvg|sha)$/);
      expect(f.arr).toMatch(/^(pek|pkx) \d\d:\d\d( \+1)?$/);
      expect(f.arr.endsWith("+1")).toBe(landsAfterMidnight(worldIndex(world).flight.get(f.id)!));
    }
    // Airport codes and odd spacing resolve to the city.
    const byCode = await run(t.search_flights, { from: "pvg", to: " new   york ", date: "2026-12-01" });
    expect(byCode.ok && (byCode.value as FlightView[]).length).toBe(3);
    // A date with no flights: empty, not an error.
    const none = await run(t.search_flights, { from: "shanghai", to: "beijing", date: "2026-12-09" });
    expect(none).toEqual({ ok: true, value: [] });
  });

  it("search_flights errors: unknown city, same city, malformed date, wrong argument types", async () => {
    const { t } = toolsOf(world);
    const e1 = await run(t.search_flights, { from: "atlantis", to: "beijing", date: "2026-12-02" });
    expect(e1).toMatchObject({ ok: false, kind: "error", error: 'tool search_flights: unknown city "atlantis"' });
    const e2 = await run(t.search_flights, { from: "paris", to: " paris ", date: "2026-12-02" });
    expect(e2).toMatchObject({ ok: false, error: "tool search_flights: from and to are the same city" });
    const e3 = await run(t.search_flights, { from: "paris", to: "tokyo", date: "tomorrow" });
    expect(e3).toMatchObject({ ok: false, error: 'tool search_flights: date must be yyyy-mm-dd, got "tomorrow"' });
    const e4 = await run(t.search_flights, { from: "paris", to: "tokyo" });
    expect(e4).toMatchObject({ ok: false, kind: "invalid_input" });
  });

  it("search_hotels: near the airport, rated ≥ min, nearest first; empty when too narrow; errors", async () => {
    const { t } = toolsOf(world);
    const r = await run(t.search_hotels, { city: " beijing ", near: " p k x ", min_rating: " 4 " });
    expect(r.ok).toBe(true);
    const hs = (r as { value: HotelView[] }).value;
    expect(hs.length).toBeGreaterThan(0);
    expect(hs.map((h) => h.km)).toEqual([...hs.map((h) => h.km)].sort((a, b) => a - b));
    for (const h of hs) {
      expect(h.km).toBeLessThanOrEqual(NEAR_KM);
      expect(h.rating).toBeGreaterThanOrEqual(4);
      expect(["yes", "no"]).toContain(h.late);
      expect(worldIndex(world).hotel.get(h.id)!.airport).toBe("pkx");
    }
    const all = await run(t.search_hotels, { city: "beijing", near: "pkx", min_rating: "1" });
    expect((all as { value: HotelView[] }).value).toHaveLength(HOTELS_PER_AIRPORT);
    const half = await run(t.search_hotels, { city: "beijing", near: "pkx", min_rating: "4 . 5" });
    expect((half as { value: HotelView[] }).value.every((h) => h.rating >= 4.5)).toBe(true);
    expect(await run(t.search_hotels, { city: "beijing", near: "pkx", min_rating: "5" })).toEqual({ ok: true, value: [] });
    expect(await run(t.search_hotels, { city: "beijing", near: "pvg", min_rating: "4" })).toMatchObject({ ok: false, error: "tool search_hotels: airport pvg is not in beijing" });
    expect(await run(t.search_hotels, { city: "beijing", near: "xyz", min_rating: "4" })).toMatchObject({ ok: false, error: 'tool search_hotels: unknown airport "xyz"' });
    expect(await run(t.search_hotels, { city: "beijing", near: "pek", min_rating: "good" })).toMatchObject({
      ok: false,
      error: 'tool search_hotels: min_rating must be a number from 1 to 5, got "good"',
    });
    expect(await run(t.search_hotels, { city: "beijing", near: "pek", min_rating: 4 })).toMatchObject({ ok: false, kind: "invalid_input" });
  });

  it("get_airports and book: records bookings (a second replaces the first), rejects unknown ids", async () => {
    const { t, state } = toolsOf(world);
    expect(await run(t.get_airports, { city: " tokyo " })).toEqual({ ok: true, value: { city: "tokyo", airports: ["hnd", "nrt"] } });
    expect(await run(t.get_airports, { city: "gotham" })).toMatchObject({ ok: false, error: 'tool get_airports: unknown city "gotham"' });
    const f = world.flights[5];
    const h = world.hotels[3];
    const spaced = (id: string) => id.split("").join(" ");
    expect(await run(t.book, { flight_id: spaced(f.id), hotel_id: ` ${spaced(h.id)} ` })).toEqual({ ok: true, value: { status: "confirmed", flight: f.id, hotel: h.id } });
    expect(state.bookings).toEqual([{ flight: f.id, hotel: h.id }]);
    expect(await run(t.book, { flight_id: "zz0000", hotel_id: h.id })).toMatchObject({ ok: false, error: 'tool book: unknown flight id "zz0000"' });
    expect(await run(t.book, { flight_id: f.id, hotel_id: "h0" })).toMatchObject({ ok: false, error: 'tool book: unknown hotel id "h0"' });
    await run(t.book, { flight_id: world.flights[6].id, hotel_id: h.id });
    expect(state.bookings.at(-1)).toEqual({ flight: world.flights[6].id, hotel: h.id });
  });

  it("transient failures: seeded by (world seed, call key, attempt), retryable, about the configured share", async () => {
    const { t } = toolsOf(world, 1);
    const r = await run(t.get_airports, { city: "tokyo" }, "k#1:0.0");
    expect(r.ok).toBe(false);
    expect(TRANSIENT_ERRORS.map((e) => `tool get_airports: ${e}`)).toContain((r as { error: string }).error);
    // No call key: never fails this way.
    expect((await run(t.get_airports, { city: "tokyo" })).ok).toBe(true);
    // The thrown error is retryable (the env's call.retries may retry it).
    let thrown: unknown;
    try {
      await t.get_airports.execute({ city: "tokyo" }, { signal: new AbortController().signal, attempt: 0, callKey: "x" });
    } catch (e) {
      thrown = e;
    }
    expect(isRetryable(thrown)).toBe(true);
    // Share and determinism.
    const keys = Array.from({ length: 2000 }, (_, i) => `travel:train:${i % 50}#${i}:${i % 7}.0`);
    const fails = keys.filter((k) => transientFailure(world.seed, 0.15, { callKey: k, attempt: 0 }) !== null).length / keys.length;
    expect(fails).toBeGreaterThan(0.12);
    expect(fails).toBeLessThan(0.18);
    for (const k of keys.slice(0, 50)) {
      expect(transientFailure(world.seed, 0.15, { callKey: k, attempt: 0 })).toBe(transientFailure(world.seed, 0.15, { callKey: k, attempt: 0 }));
    }
    const retried = keys.filter((k) => transientFailure(world.seed, 0.15, { callKey: k, attempt: 0 }) !== null);
    expect(retried.filter((k) => transientFailure(world.seed, 0.15, { callKey: k, attempt: 1 }) === null).length).toBeGreaterThan(retried.length * 0.7);
    expect(() => travelTools(world, { bookings: [] }, { failureRate: 1.5 })).toThrow(/failureRate must be in \[0, 1\]/);
  });
});

describe("gradeTravel", () => {
  const ix = worldIndex(world);
  /** A grade input for `task` whose state holds `bookings`, with one turn per listed call (each succeeding). */
  function input(task: Task<TravelRequest>, bookings: TravelState["bookings"], calls: string[] = ["search_flights", "search_hotels", "book"]): GradeInput<TravelRequest, TravelState> {
    const turns: ToolEnvTurn[] = calls.map((name) => {
      const action: Action = { type: "tool_call", calls: [{ name, arguments: {} }] };
      const results: ToolCallResult[] = [{ name, ok: true, content: "{}", value: {} }];
      return { action, results };
    });
    turns.push({ action: { type: "answer", answer: "done" }, results: [] });
    return { task, state: { bookings }, turns, answer: "done", truncated: false };
  }
  // A late, two-airport task whose cheapest flight lands at the destination's second airport.
  const task = [...train, ...test].find((t) => {
    const c = cheapestFlight(world, t.data!.origin, t.data!.destination, t.data!.date)!;
    return t.data!.lateArrival && t.data!.twoAirports && c.to === t.data!.destinationAirports[1] && t.data!.minRating === 4;
  })!;
  const req = task.data!;
  const cheapest = cheapestFlight(world, req.origin, req.destination, req.date)!;
  const near = (airport: string, pred: (h: (typeof world.hotels)[number]) => boolean) =>
    world.hotels.find((h) => h.city === req.destination && h.km[airport] <= NEAR_KM && pred(h));
  const good = near(cheapest.to, (h) => h.rating >= 4 && h.late)!;

  it("a correct, stopped booking scores 1 with every part 1", () => {
    expect(task).toBeDefined();
    const g = gradeTravel(world, input(task, [{ flight: cheapest.id, hotel: good.id }]));
    expect(g.score).toBe(1);
    expect(g.parts).toMatchObject({ booked: 1, right_flight: 1, right_airport: 1, rating_ok: 1, checkin_ok: 1, stopped: 1, late_arrival: 1, two_airports: 1, booked_late: 1, hotel_late: 1, near_arrival: 1 });
    expect(g.explanation).toMatch(/^booked .*cheapest flight/);
  });

  it("nothing booked scores 0", () => {
    const g = gradeTravel(world, input(task, [], ["search_flights"]));
    expect(g.score).toBe(0);
    expect(g.parts.booked).toBe(0);
    expect(g.explanation).toBe("nothing booked");
  });

  it("(i) a flight that is not the cheapest loses right_flight", () => {
    const other = flightsOn(world, req.origin, req.destination, req.date)[1];
    const hotel = near(other.to, (h) => h.rating >= 4 && h.late)!;
    const g = gradeTravel(world, input(task, [{ flight: other.id, hotel: hotel.id }]));
    expect(g.parts.right_flight).toBe(0);
    expect(g.parts.right_airport).toBe(1);
    expect(g.score).toBeCloseTo(0.5, 10);
    // A flight on the reversed route: wrong flight and no hotel near where it lands in the destination.
    const back = cheapestFlight(world, req.destination, req.origin, req.date)!;
    const g2 = gradeTravel(world, input(task, [{ flight: back.id, hotel: good.id }]));
    expect(g2.parts.right_flight).toBe(0);
    expect(g2.parts.right_airport).toBe(0);
  });

  it("(ii) a late arrival with a hotel that refuses late check-in loses checkin_ok", () => {
    const noLate = near(cheapest.to, (h) => h.rating >= 4 && !h.late);
    const hotel = noLate ?? world.hotels.find((h) => h.city === req.destination && h.km[cheapest.to] <= NEAR_KM && !h.late)!;
    const g = gradeTravel(world, input(task, [{ flight: cheapest.id, hotel: hotel.id }]));
    expect(g.parts.checkin_ok).toBe(0);
    expect(g.parts.hotel_late).toBe(0);
    expect(g.score).toBeLessThan(1);
    // The same hotel is fine for a flight that lands before midnight.
    const early = world.flights.find((f) => f.toCity === req.destination && f.to === cheapest.to && !landsAfterMidnight(f))!;
    const other = { ...task, data: { ...req, origin: early.fromCity, date: early.date } };
    expect(gradeTravel(world, input(other, [{ flight: early.id, hotel: hotel.id }])).parts.checkin_ok).toBe(1);
  });

  it("(iii) a hotel near the destination's other airport loses right_airport", () => {
    const otherAirport = req.destinationAirports.find((a) => a !== cheapest.to)!;
    const hotel = near(otherAirport, (h) => h.rating >= 4 && h.late)!;
    const g = gradeTravel(world, input(task, [{ flight: cheapest.id, hotel: hotel.id }]));
    expect(g.parts.right_airport).toBe(0);
    expect(g.parts.near_arrival).toBe(0);
    expect(g.score).toBeCloseTo(0.5 + 2 / 6, 10);
  });

  it("a hotel rated below the request's minimum loses rating_ok", () => {
    const cases = [...train, ...test].flatMap((t) => {
      const c = cheapestFlight(world, t.data!.origin, t.data!.destination, t.data!.date)!;
      const low = world.hotels.find((h) => h.city === t.data!.destination && h.km[c.to] <= NEAR_KM && h.rating < t.data!.minRating && (h.late || !landsAfterMidnight(c)));
      return low === undefined ? [] : [{ t, c, low }];
    });
    expect(cases.length).toBeGreaterThan(20);
    for (const { t, c, low } of cases.slice(0, 10)) {
      const g = gradeTravel(world, input(t, [{ flight: c.id, hotel: low.id }]));
      expect(g.parts).toMatchObject({ rating_ok: 0, right_flight: 1, right_airport: 1, checkin_ok: 1 });
      expect(g.score).toBeCloseTo(0.5 + 2 / 6, 10);
    }
  });

  it("(v) a call after the successful booking loses stopped: score × 0.9", () => {
    const g = gradeTravel(world, input(task, [{ flight: cheapest.id, hotel: good.id }], ["search_flights", "search_hotels", "book", "search_flights"]));
    expect(g.parts.stopped).toBe(0);
    expect(g.score).toBeCloseTo(0.9, 10);
    // A second book replaces the first and is a needless call.
    const wrong = flightsOn(world, req.origin, req.destination, req.date)[2];
    const g2 = gradeTravel(world, input(task, [{ flight: wrong.id, hotel: good.id }, { flight: cheapest.id, hotel: good.id }], ["search_flights", "search_hotels", "book", "book"]));
    expect(g2.parts.right_flight).toBe(1);
    expect(g2.parts.stopped).toBe(0);
    expect(g2.score).toBeCloseTo(0.9, 10);
  });

  it("grades in the episode's own world (a counterfactual's cheapest flight)", () => {
    const cf = counterfactualTravelWorld(world, 9);
    const c = cheapestFlight(cf, req.origin, req.destination, req.date)!;
    const h = cf.hotels.find((x) => x.city === req.destination && x.km[c.to] <= NEAR_KM && x.rating >= 4 && x.late)!;
    const g = gradeTravel(cf, input(task, [{ flight: c.id, hotel: h.id }]));
    expect(g.score).toBe(1);
    expect(g.parts.late_arrival).toBe(landsAfterMidnight(c) ? 1 : 0);
    expect(ix.flight.has(c.id)).toBe(true);
    expect(() => gradeTravel(world, { ...input(task, []), task: { ...task, data: undefined } })).toThrow(/has no travel request/);
  });
});

describe("cities", () => {
  it("airport codes are unique three-letter words", () => {
    const codes = CITIES.flatMap((c) => c.airports);
    expect(new Set(codes).size).toBe(codes.length);
    for (const c of codes) expect(c).toMatch(/^[a-z]{3}$/);
  });
});
