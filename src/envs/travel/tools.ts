/**
 * The travel tools, bound to one world and one episode's booking state: `get_airports`, `search_flights`,
 * `search_hotels` and `book`. Arguments arrive as the embedded word tokenizer decodes them (lower-cased, tokens
 * joined by single spaces: `" new york "`, `"2 0 2 6 - 1 2 - 0 2"`, `"mu 5 1 0 1"`), so every tool normalises inside
 * `execute`: names are lower-cased with whitespace collapsed, codes / ids / dates lose all whitespace. Schemas stay
 * plain zod objects (rendered to JSON Schema in the prompt).
 *
 * Results are compact objects with short keys, exactly what the policy sees (as JSON): flights cheapest first, each
 * `{"id":"mu5101","dep":"pvg","arr":"pkx 00:40 +1","price":820}` (`+1`: lands after midnight); hotels nearest
 * first, each `{"id":"h204","km":3,"rating":4.3,"late":"no"}` (`late`: accepts arrivals after
 * midnight).
 *
 * Transient failures: a seeded share (`failureRate`) of calls throw a `RetryableToolError` (`rate limited (429):
 * retry later`, `upstream timeout`, `service unavailable (503)`), drawn from (world seed, `ctx.callKey`,
 * `ctx.attempt`) — the same call of the same episode fails the same way every time, and a retry (a new turn, so a new
 * call key; or a new attempt) draws afresh. Calls without a call key never fail this way (a caller that cannot name
 * its calls could never get past a failing one).
 */
import { z } from "zod";
import { hash32 } from "../../env/faults.ts";
import { RetryableToolError, tool, type Tool, type ToolCallContext } from "../../env/tool.ts";
import { clock, flightsOn, HOTELS_PER_AIRPORT, landsAfterMidnight, NEAR_KM, worldIndex, type Flight, type Hotel, type TravelWorld } from "./world.ts";

/**
 * A flight as `search_flights` shows it: `dep` the departure airport, `arr` `<airport> hh:mm` (the arrival airport
 * and time), ending ` +1` when it lands after midnight. The departure time decides nothing and is not shown (tokens).
 */
export interface FlightView {
  id: string;
  dep: string;
  arr: string;
  price: number;
}

/** A hotel as `search_hotels` shows it: distance `km` to the queried airport, `late` `yes`/`no`. */
export interface HotelView {
  id: string;
  km: number;
  rating: number;
  late: "yes" | "no";
}

/** What `get_airports` returns. */
export interface AirportsView {
  city: string;
  airports: string[];
}

/** What `book` returns. */
export interface BookingView {
  status: "confirmed";
  flight: string;
  hotel: string;
}

/** One booking recorded by `book`: the flight and hotel ids (normalised). */
export interface Booking {
  flight: string;
  hotel: string;
}

/** An episode's booking state: every successful `book` in call order; the last one is the booking that stands. */
export interface TravelState {
  bookings: Booking[];
}

/** The transient error texts (thrown as `RetryableToolError`). */
export const TRANSIENT_ERRORS = ["rate limited (429): retry later", "upstream timeout", "service unavailable (503)"] as const;

/** Options of `travelTools`: `failureRate` in [0, 1] (share of calls that fail transiently; default 0). */
export interface TravelToolOptions {
  failureRate?: number;
}

/** A name as a tool reads it: lower-case, `-`/`_` as spaces, whitespace collapsed and trimmed (`" new  york "` → `new york`). */
export function normName(s: string): string {
  return s.toLowerCase().replace(/[-_]/g, " ").replace(/\s+/g, " ").trim();
}

/** A code, id or date as a tool reads it: lower-case, every whitespace removed (`"mu 5 1 0 1"` → `mu5101`). */
export function normCode(s: string): string {
  return s.toLowerCase().replace(/\s+/g, "");
}


/**
 * The transient error a call meets, or null: drawn from (world seed, call key, attempt). Null when the rate is 0 or
 * the call has no key.
 */
export function transientFailure(worldSeed: number, rate: number, ctx: Pick<ToolCallContext, "callKey" | "attempt">): string | null {
  if (!(rate > 0) || ctx.callKey === undefined) return null;
  const key = `${worldSeed}|${ctx.callKey}|${ctx.attempt}`;
  if (hash32(`travel-fail|${key}`) / 2 ** 32 >= rate) return null;
  return TRANSIENT_ERRORS[hash32(`travel-kind|${key}`) % TRANSIENT_ERRORS.length];
}

/** The view of a flight. */
export function flightView(f: Flight): FlightView {
  return { id: f.id, dep: f.from, arr: `${f.to} ${clock(f.arr)}${landsAfterMidnight(f) ? " +1" : ""}`, price: f.price };
}

/** The view of a hotel, with its distance to airport `near`. */
export function hotelView(h: Hotel, near: string): HotelView {
  return { id: h.id, km: h.km[near], rating: h.rating, late: h.late ? "yes" : "no" };
}

/** Resolves a city argument: a city name, or an airport code (its city). @throws Error `unknown city "x"` */
function resolveCity(world: TravelWorld, raw: string): string {
  const ix = worldIndex(world);
  const name = normName(raw);
  if (ix.city.has(name)) return name;
  const byCode = ix.airportCity.get(normCode(raw));
  if (byCode !== undefined) return byCode;
  throw new Error(`unknown city "${name}"`);
}

/** Reads a `min_rating` argument (`"4"`, `" 4 "`, `"4 . 5"`). @throws Error `min_rating must be a number from 1 to 5, got "x"` */
export function parseMinRating(raw: string): number {
  const t = normCode(raw);
  const r = /^\d+(\.\d+)?$/.test(t) ? Number(t) : NaN;
  if (!(r >= 1 && r <= 5)) throw new Error(`min_rating must be a number from 1 to 5, got "${t}"`);
  return r;
}

/** Checks a date argument. @throws Error `date must be yyyy-mm-dd, got "x"` */
function resolveDate(raw: string): string {
  const d = normCode(raw);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(d)) throw new Error(`date must be yyyy-mm-dd, got "${d}"`);
  return d;
}

// Schemas of the tools' arguments: plain objects of strings (rendered to JSON Schema in the prompt; every bound such
// as a minimum length or a number range would cost prompt tokens, so values are checked in `execute`). `min_rating`
// is a string (`"4"`): a number the word tokenizer splits into digits is not JSON (`4 . 5`), a string is.

/** Arguments of `get_airports`. */
export const GET_AIRPORTS_INPUT = z.object({ city: z.string() });
/** Arguments of `search_flights`. */
export const SEARCH_FLIGHTS_INPUT = z.object({ from: z.string(), to: z.string(), date: z.string() });
/** Arguments of `search_hotels`. */
export const SEARCH_HOTELS_INPUT = z.object({ city: z.string(), near: z.string(), min_rating: z.string() });
/** Arguments of `book`. */
export const BOOK_INPUT = z.object({ flight_id: z.string(), hotel_id: z.string() });

/** Tool names, in prompt order. */
export const TRAVEL_TOOL_NAMES = ["get_airports", "search_flights", "search_hotels", "book"] as const;

/**
 * The four tools over `world`, recording bookings in `state`.
 * - `get_airports({city})` → `AirportsView`; @throws `unknown city "x"`;
 * - `search_flights({from, to, date})` (city names or airport codes; `yyyy-mm-dd`) → `FlightView[]`, cheapest first,
 *   empty when no flight flies that route on that date; @throws `unknown city`, `date must be yyyy-mm-dd`,
 *   `from and to are the same city`;
 * - `search_hotels({city, near, min_rating})` (`near` an airport code of the city; `min_rating` a number 1–5 as a
 *   string) →
 *   `HotelView[]`: the hotels within `NEAR_KM` km of `near` rated ≥ `min_rating`, nearest first (at most
 *   `HOTELS_PER_AIRPORT`), empty when none qualifies (e.g. `min_rating` 5); @throws `unknown city`,
 *   `unknown airport "x"`, `airport x is not in <city>`,
 *   `min_rating must be a number from 1 to 5`;
 * - `book({flight_id, hotel_id})` → `BookingView`, appending the booking to `state.bookings` (a later booking
 *   replaces it); @throws `unknown flight id "x"`, `unknown hotel id "x"`.
 * Every tool first meets its transient failure, if any (see the file doc).
 * @throws Error when `failureRate` is not in [0, 1]
 */
export function travelTools(world: TravelWorld, state: TravelState, options: TravelToolOptions = {}): Tool[] {
  const rate = options.failureRate ?? 0;
  if (!(rate >= 0 && rate <= 1)) throw new Error(`travelTools: failureRate must be in [0, 1], got ${rate}`);
  const ix = worldIndex(world);
  const fail = (ctx: ToolCallContext) => {
    const msg = transientFailure(world.seed, rate, ctx);
    if (msg !== null) throw new RetryableToolError(msg);
  };
  const getAirports = tool({
    name: "get_airports",
    description: "Airports of a city.",
    inputSchema: GET_AIRPORTS_INPUT,
    execute: ({ city }, ctx): AirportsView => {
      fail(ctx);
      const name = resolveCity(world, city);
      return { city: name, airports: [...ix.city.get(name)!.airports] };
    },
  });
  const searchFlights = tool({
    name: "search_flights",
    description: "Flights on a date (yyyy-mm-dd), cheapest first.",
    inputSchema: SEARCH_FLIGHTS_INPUT,
    execute: ({ from, to, date }, ctx): FlightView[] => {
      fail(ctx);
      const a = resolveCity(world, from);
      const b = resolveCity(world, to);
      const d = resolveDate(date);
      if (a === b) throw new Error("from and to are the same city");
      return flightsOn(world, a, b, d).map(flightView);
    },
  });
  const searchHotels = tool({
    name: "search_hotels",
    description: "Hotels near an airport, nearest first.",
    inputSchema: SEARCH_HOTELS_INPUT,
    execute: ({ city, near, min_rating }, ctx): HotelView[] => {
      fail(ctx);
      const name = resolveCity(world, city);
      const minRating = parseMinRating(min_rating);
      const code = normCode(near);
      const home = ix.airportCity.get(code);
      if (home === undefined) throw new Error(`unknown airport "${code}"`);
      if (home !== name) throw new Error(`airport ${code} is not in ${name}`);
      return world.hotels
        .filter((h) => h.city === name && h.km[code] <= NEAR_KM && h.rating >= minRating)
        .sort((x, y) => x.km[code] - y.km[code])
        .slice(0, HOTELS_PER_AIRPORT)
        .map((h) => hotelView(h, code));
    },
  });
  const book = tool({
    name: "book",
    description: "Book a flight and a hotel.",
    inputSchema: BOOK_INPUT,
    execute: ({ flight_id, hotel_id }, ctx): BookingView => {
      fail(ctx);
      const flight = normCode(flight_id);
      const hotel = normCode(hotel_id);
      if (!ix.flight.has(flight)) throw new Error(`unknown flight id "${flight}"`);
      if (!ix.hotel.has(hotel)) throw new Error(`unknown hotel id "${hotel}"`);
      state.bookings.push({ flight, hotel });
      return { status: "confirmed", flight, hotel };
    },
  });
  return [getAirports, searchFlights, searchHotels, book] as Tool[];
}

/** The text a successful call shows: its value as compact JSON (`{"id":"mu5101",…}`). */
export function formatTravelResult(_name: string, value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
