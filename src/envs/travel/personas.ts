/**
 * Scripted travel agents whose episodes are the warm-start demonstrations. `careful` is always right; each other
 * persona is `careful` with ONE habit real agents show, drawn once per episode (from the episode's seed, so the
 * choice holds across its turns) at its own rate:
 * - `forgetful` (decision i): searches flights on the wrong date (today for tomorrow or back) or with origin and
 *   destination swapped;
 * - `hasty` (ii): takes the nearest hotel even when the flight lands after midnight (`+1`) and it says `"late":"no"`;
 * - `main-airport` (iii): asks `get_airports` and searches hotels near the city's first airport, not the arrival one;
 * - `fragile` (iv): after a failed call (an error, an empty result) gives up ("sorry, …") or claims a booking it
 *   never made;
 * - `over-checker` (v): makes one needless call (a second flight search) after booking, then answers.
 * Personas act only on what they saw: the request (`ctx.task.data`) and the values of earlier tool results
 * (`ctx.history[k].toolResults`). Protocol-independent: `personaAction` gives the action, `scriptedTurn` its text.
 */
import { Rng } from "../../core/rng.ts";
import type { Action, ToolCall } from "../../core/types.ts";
import { executedCalls, type ExecutedCall } from "../../env/history.ts";
import { scriptedPersonaTurn } from "../../env/defineToolRecipe.ts";
import type { TurnContext } from "../../env/episode.ts";
import { callFailed } from "./decisions.ts";
import type { AirportsView, BookingView, FlightView, HotelView } from "./tools.ts";
import type { TravelRequest } from "./world.ts";

/** The personas. */
export const TRAVEL_PERSONAS = ["careful", "forgetful", "hasty", "main-airport", "fragile", "over-checker"] as const;
/** A persona's name. */
export type TravelPersona = (typeof TRAVEL_PERSONAS)[number];

/**
 * Weights of the warm-start mixture (sum 1). With the rates below, the mixture succeeds on about half the tasks
 * without faults (measured in `test/env-travel-personas.test.ts` and the README), so imitating it is mediocre and RL
 * has each decision to fix.
 */
export const TRAVEL_PERSONA_WEIGHTS: Readonly<Record<TravelPersona, number>> = {
  careful: 0.05,
  forgetful: 0.3,
  hasty: 0.2,
  "main-airport": 0.2,
  fragile: 0.1,
  "over-checker": 0.15,
};

/** Per-episode rate of each persona's habit. */
export const HABIT_RATES: Readonly<Record<Exclude<TravelPersona, "careful">, number>> = {
  forgetful: 0.85,
  hasty: 0.85,
  "main-airport": 0.9,
  fragile: 0.8,
  "over-checker": 0.9,
};

/** The one-line confirmation an agent answers with after booking. */
export function confirmation(flight: string, hotel: string): string {
  return `booked flight ${flight} and hotel ${hotel} .`;
}

/** What a fragile agent says when it gives up. */
export const GIVE_UP_ANSWER = "sorry , i could not complete the booking right now .";

/** What one episode of a persona will do (its habit drawn). */
interface Plan {
  from: string;
  to: string;
  date: string;
  hotelCity: string;
  minRating: number;
  ignoreLate: boolean;
  mainAirport: boolean;
  giveUp: "sorry" | "claim" | null;
  extraCall: boolean;
}

/** The episode's plan: the careful plan, with the persona's habit when its draw says so. */
function plan(persona: TravelPersona, req: TravelRequest, rng: Rng): Plan {
  const p: Plan = {
    from: req.origin,
    to: req.destination,
    date: req.date,
    hotelCity: req.destination,
    minRating: req.minRating,
    ignoreLate: false,
    mainAirport: false,
    giveUp: null,
    extraCall: false,
  };
  const u = rng.next();
  const v = rng.next();
  if (persona === "careful" || u >= HABIT_RATES[persona]) return p;
  switch (persona) {
    case "forgetful":
      if (v < 0.6) p.date = req.date === req.today ? req.tomorrow : req.today;
      else [p.from, p.to, p.hotelCity] = [req.destination, req.origin, req.origin];
      break;
    case "hasty":
      p.ignoreLate = true;
      break;
    case "main-airport":
      p.mainAirport = true;
      break;
    case "fragile":
      p.giveUp = v < 0.6 ? "sorry" : "claim";
      break;
    case "over-checker":
      p.extraCall = true;
      break;
  }
  return p;
}

const call = (name: string, args: Record<string, unknown>): Action => ({ type: "tool_call", calls: [{ name, arguments: args } satisfies ToolCall] });
const answer = (text: string): Action => ({ type: "answer", answer: text });

/** The last successful, non-empty result of tool `name` at or after index `from`, or undefined. */
function lastGood(calls: readonly ExecutedCall[], name: string, from = 0): { i: number; c: ExecutedCall } | undefined {
  for (let i = calls.length - 1; i >= from; i--) {
    const c = calls[i];
    if (c.name === name && !callFailed(c)) return { i, c };
  }
  return undefined;
}

/**
 * The action `persona` takes next (see the file doc), from the request and the tool results seen so far.
 * Careful: `search_flights(origin, destination, date)` → the first (cheapest) flight → `search_hotels(destination,
 * its arrival airport, min_rating)` → the first hotel, or when the flight lands after midnight the first with
 * `late: yes` → `book` → the one-line confirmation. After an error it repeats the same call; after an empty hotel
 * list it lowers `min_rating` by one.
 * @throws Error when the task has no travel request (`data`)
 */
export function personaAction(persona: TravelPersona, ctx: Pick<TurnContext, "task" | "history" | "seed" | "turnIndex">): Action {
  const req = ctx.task.data as TravelRequest | undefined;
  if (req === undefined) throw new Error(`travel persona: task ${ctx.task.id} has no travel request (data)`);
  // One generator per episode: the seed of turn i is the episode's seed + i.
  const rng = new Rng(ctx.seed - ctx.turnIndex);
  const p = plan(persona, req, rng);
  const calls = executedCalls(ctx.history);

  const firstBook = calls.findIndex((c) => c.name === "book" && c.ok);
  if (firstBook >= 0) {
    if (p.extraCall && calls.length === firstBook + 1) return call("search_flights", { from: p.from, to: p.to, date: p.date });
    const b = calls[firstBook].value as BookingView;
    return answer(confirmation(b.flight, b.hotel));
  }
  const last = calls.at(-1);
  if (last !== undefined && callFailed(last)) {
    if (p.giveUp === "sorry") return answer(GIVE_UP_ANSWER);
    if (p.giveUp === "claim") {
      const f = lastGood(calls, "search_flights")?.c.value as FlightView[] | undefined;
      return answer(confirmation(f?.[0]?.id ?? `mu${1000 + rng.int(9000)}`, `h${100 + rng.int(900)}`));
    }
    if (last.ok && last.name === "search_hotels") {
      const r = Number(typeof last.args.min_rating === "string" ? last.args.min_rating.replace(/\s+/g, "") : NaN);
      return call("search_hotels", { ...last.args, min_rating: String(Math.max(1, (Number.isFinite(r) ? r : p.minRating) - 1)) });
    }
    return call(last.name, last.args);
  }
  const flights = lastGood(calls, "search_flights");
  if (flights === undefined) return call("search_flights", { from: p.from, to: p.to, date: p.date });
  const flight = (flights.c.value as FlightView[])[0];
  const lateArrival = flight.arr.endsWith("+1");
  let airport = flight.arr.split(" ")[0];
  if (p.mainAirport) {
    const ap = lastGood(calls, "get_airports");
    if (ap === undefined) return call("get_airports", { city: p.hotelCity });
    airport = (ap.c.value as AirportsView).airports[0];
  }
  const hotels = lastGood(calls, "search_hotels", flights.i);
  if (hotels === undefined) return call("search_hotels", { city: p.hotelCity, near: airport, min_rating: String(p.minRating) });
  const list = hotels.c.value as HotelView[];
  const hotel = (lateArrival && !p.ignoreLate ? list.find((h) => h.late === "yes") : undefined) ?? list[0];
  return call("book", { flight_id: flight.id, hotel_id: hotel.id });
}

/**
 * The text `persona` writes for the turn `ctx`, in `protocol`'s format.
 * @throws Error naming the allowed personas when `persona` is not one of `TRAVEL_PERSONAS`
 */
export const scriptedTurn = scriptedPersonaTurn("travel", TRAVEL_PERSONAS, personaAction);
