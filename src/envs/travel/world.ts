/**
 * The travel world: a seeded, generated set of cities and their airports, flights between every pair of cities on
 * the world's two dates (today and tomorrow), and hotels near every airport — plus the booking requests (tasks)
 * asked about it. Counterfactual copies keep every name and id and re-draw the values (airports a flight uses, its
 * times and price, hotel distances, ratings, prices and late check-in rules), so a tiny policy cannot memorise which
 * flight is the cheapest or which hotel takes late arrivals: it has to read the tool results.
 *
 * Every text is lowercase ASCII (city names, three-letter airport codes, ids like `mu5101` and `h204`), so the
 * embedded word tokenizer covers it exactly. Times are minutes after midnight of the flight's date; an arrival of
 * 1440 or more lands after midnight (shown `+1`). Distances are whole kilometres, ratings 3.0–4.9 (one
 * decimal), prices whole US dollars.
 *
 * Guarantees, in every world (the real one and each counterfactual): on each route and date the cheapest flight is
 * unique; exactly `round(LATE_SHARE × routes × dates)` route-dates have a cheapest flight that lands after midnight;
 * every airport has `HOTELS_PER_AIRPORT` hotels within `NEAR_KM` of it (and, in a two-airport city, more than
 * `2 × NEAR_KM` from the other airport), at least one of them rated ≥ 4.0 and accepting late arrivals that is not the
 * nearest; at a seeded `TRAP_SHARE` of airports the nearest is rated ≥ 4.0 and refuses late arrivals — so a careful
 * agent always finds a valid hotel and an agent that ignores the late check-in rule often does not.
 */
import { Rng } from "../../core/rng.ts";
import type { Task } from "../../core/types.ts";
import { worldStream } from "../../env/world.ts";

/** A city and its airports' codes; the first airport is the one `get_airports` lists first (the "main" one). */
export interface City {
  name: string;
  airports: string[];
}

/**
 * A flight: `id` (airline code + 4 digits, e.g. `mu5101`, unique in the world), the departure and arrival airports
 * and cities, the `date` it departs (`yyyy-mm-dd`), departure and arrival times (minutes after midnight of `date`;
 * `arr ≥ 1440` lands after midnight), `price` (US dollars) and `seats` left (1–9).
 */
export interface Flight {
  id: string;
  from: string;
  to: string;
  fromCity: string;
  toCity: string;
  date: string;
  dep: number;
  arr: number;
  price: number;
  seats: number;
}

/**
 * A hotel: `id` (`h` + 3 digits, unique), `name`, the `city`, the airport it is near (`airport`), its distance to
 * every airport of its city (`km`, kilometres), `rating` (3.0–4.9), `price` per night (US dollars) and `late`:
 * whether it accepts arrivals after midnight.
 */
export interface Hotel {
  id: string;
  name: string;
  city: string;
  airport: string;
  km: Record<string, number>;
  rating: number;
  price: number;
  late: boolean;
}

/**
 * A built world: its `seed`, the two dates (`today`, `tomorrow`, `yyyy-mm-dd`), cities, flights (grouped by route
 * and date in generation order) and hotels. Plain data: equal seeds give deep-equal worlds.
 */
export interface TravelWorld {
  seed: number;
  today: string;
  tomorrow: string;
  cities: City[];
  flights: Flight[];
  hotels: Hotel[];
}

/**
 * The structured booking request behind a task (`Task.data`), never shown to the policy as such:
 * origin and destination city names, the travel `date` (`yyyy-mm-dd`) and how the request said it (`when`), the
 * minimum hotel rating asked for (`minRating`, 3 or 4), the world's two dates (`today`, `tomorrow`), the airports of
 * both cities (structural: the same in every world), and two flags computed in the real world (world 0):
 * `lateArrival` (its cheapest flight on the route and date lands after midnight) and `twoAirports` (the destination
 * has two airports). A counterfactual world's own flags are in the episode's grade parts (`late_arrival`,
 * `two_airports`), which the breakdown reads first.
 */
export interface TravelRequest {
  origin: string;
  destination: string;
  date: string;
  when: "today" | "tomorrow";
  minRating: number;
  today: string;
  tomorrow: string;
  originAirports: string[];
  destinationAirports: string[];
  lateArrival: boolean;
  twoAirports: boolean;
}

/** The world's today (fixed, yyyy-mm-dd). */
export const TODAY = "2026-12-01";
/** The world's tomorrow (yyyy-mm-dd). */
export const TOMORROW = "2026-12-02";

/** Share of route-dates whose cheapest flight lands after midnight, in every world. */
export const LATE_SHARE = 0.35;
/** A hotel within this many kilometres of an airport is near it (`search_hotels` lists only those). */
export const NEAR_KM = 10;
/** Share of hotels that accept late arrivals before the guarantee's repair (so the nearest often does not). */
export const LATE_HOTEL_SHARE = 0.25;
/** Share of airports whose nearest hotel is rated ≥ 4.0 but refuses late arrivals (the late check-in trap). */
export const TRAP_SHARE = 0.75;
/** Hotels near each airport. */
export const HOTELS_PER_AIRPORT = 3;
/** Flights per route and date. */
export const FLIGHTS_PER_ROUTE_DATE = 3;

/** The cities: seven with two airports, seven with one. */
export const CITIES: readonly City[] = [
  { name: "shanghai", airports: ["pvg", "sha"] },
  { name: "beijing", airports: ["pek", "pkx"] },
  { name: "tokyo", airports: ["hnd", "nrt"] },
  { name: "london", airports: ["lhr", "lgw"] },
  { name: "new york", airports: ["jfk", "lga"] },
  { name: "paris", airports: ["cdg", "ory"] },
  { name: "seoul", airports: ["icn", "gmp"] },
  { name: "hong kong", airports: ["hkg"] },
  { name: "singapore", airports: ["sin"] },
  { name: "sydney", airports: ["syd"] },
  { name: "dubai", airports: ["dxb"] },
  { name: "bangkok", airports: ["bkk"] },
  { name: "berlin", airports: ["ber"] },
  { name: "madrid", airports: ["mad"] },
];

const AIRLINES = ["mu", "ca", "cz", "jl", "nh", "ba", "aa", "dl", "ua", "af", "ke", "oz", "cx", "sq", "qf", "ek", "tg", "lh", "ib"];
const HOTEL_FIRST = ["aurora", "harbor", "skyline", "garden", "royal", "metro", "lotus", "cedar", "summit", "river", "palm", "maple", "pearl", "orchid"];
const HOTEL_LAST = ["inn", "hotel", "suites", "lodge", "plaza", "stay"];

/** A uniform integer in [lo, hi] in steps of `step`. */
function between(rng: Rng, lo: number, hi: number, step = 1): number {
  return lo + step * rng.int(Math.floor((hi - lo) / step) + 1);
}

/** Distinct values drawn from [lo, hi] in steps of `step`, ascending. */
function distinctSorted(rng: Rng, n: number, lo: number, hi: number, step: number): number[] {
  const out = new Set<number>();
  while (out.size < n) out.add(between(rng, lo, hi, step));
  return [...out].sort((a, b) => a - b);
}

/** Every ordered pair of distinct cities, in city order. */
export function allRoutes(cities: readonly City[] = CITIES): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const a of cities) for (const b of cities) if (a.name !== b.name) out.push([a.name, b.name]);
  return out;
}

/** The id skeleton of a world: flight ids per route-date, hotel ids, names and home airports (kept by counterfactuals). */
interface Skeleton {
  flightIds: string[][]; // [routeDate][slot]
  hotels: Array<{ id: string; name: string; city: string; airport: string }>;
}

function skeleton(seed: number): Skeleton {
  const rng = worldStream(seed, "ids");
  const used = new Set<string>();
  const routeDates = allRoutes().length * 2;
  const flightIds: string[][] = [];
  for (let r = 0; r < routeDates; r++) {
    const ids: string[] = [];
    while (ids.length < FLIGHTS_PER_ROUTE_DATE) {
      const id = `${rng.pick(AIRLINES)}${between(rng, 1000, 9999)}`;
      if (used.has(id)) continue;
      used.add(id);
      ids.push(id);
    }
    flightIds.push(ids);
  }
  const hotelNums = rng.shuffle(Array.from({ length: 900 }, (_, i) => 100 + i));
  const names = rng.shuffle(HOTEL_FIRST.flatMap((a) => HOTEL_LAST.map((b) => `${a} ${b}`)));
  const hotels: Skeleton["hotels"] = [];
  for (const c of CITIES) {
    for (const airport of c.airports) {
      for (let k = 0; k < HOTELS_PER_AIRPORT; k++) {
        const i = hotels.length;
        hotels.push({ id: `h${hotelNums[i]}`, name: names[i % names.length], city: c.name, airport });
      }
    }
  }
  return { flightIds, hotels };
}

/**
 * The flights of one route-date (`from` → `to` on `date`) from their ids; `late`: whether the cheapest lands after
 * midnight.
 */
function drawFlights(rng: Rng, ids: readonly string[], route: { from: City; to: City; date: string; late: boolean }): Flight[] {
  const { from, to, date, late } = route;
  const prices = distinctSorted(rng, ids.length, 180, 1490, 10);
  // Which slot is the cheapest is drawn, so the id order says nothing about the price order.
  const order = rng.shuffle(ids.map((_, i) => i));
  return ids.map((id, slot) => {
    const rank = order[slot];
    const isLate = rank === 0 ? late : rng.next() < 0.25;
    let dep: number;
    let arr: number;
    if (isLate) {
      arr = between(rng, 1445, 1615, 5); // 00:05–02:55 the next day
      const dur = between(rng, Math.max(90, arr - 1435), 240, 5); // departs by 23:55 of `date`
      dep = arr - dur;
    } else {
      dep = between(rng, 360, 1080, 5); // 06:00–18:00
      arr = dep + between(rng, 90, 300, 5);
    }
    return {
      id,
      from: rng.pick(from.airports),
      to: rng.pick(to.airports),
      fromCity: from.name,
      toCity: to.name,
      date,
      dep,
      arr,
      price: prices[rank],
      seats: between(rng, 1, 9),
    };
  });
}

/** The hotels of one airport from their skeleton, drawn with the guarantees of the file doc. */
function drawHotels(rng: Rng, slots: Skeleton["hotels"], city: City): Hotel[] {
  const near = distinctSorted(rng, slots.length, 1, 9, 1); // whole kilometres, distinct
  const hotels = slots.map((s, i) => {
    const km: Record<string, number> = {};
    for (const a of city.airports) km[a] = a === s.airport ? near[i] : between(rng, 21, 45);
    return {
      id: s.id,
      name: s.name,
      city: s.city,
      airport: s.airport,
      km,
      rating: between(rng, 30, 49) / 10,
      price: between(rng, 60, 320, 5),
      late: rng.next() < LATE_HOTEL_SHARE,
    };
  });
  // The tempting trap: often the nearest hotel is well rated but turns late arrivals away.
  if (rng.next() < TRAP_SHARE) {
    hotels[0].rating = between(rng, 40, 49) / 10;
    hotels[0].late = false;
  }
  // At least one hotel rated ≥ 4.0 that accepts late arrivals, and not only the nearest one.
  const ok = (h: Hotel) => h.rating >= 4 && h.late;
  if (!hotels.slice(1).some(ok)) {
    const h = hotels[1 + rng.int(hotels.length - 1)];
    h.rating = between(rng, 40, 49) / 10;
    h.late = true;
  }
  // Hotels are kept in a seeded order: the list order says nothing about distance.
  return rng.shuffle(hotels);
}

/** Draws every value of a world over a skeleton. */
function drawWorld(seed: number, sk: Skeleton, purpose: string): TravelWorld {
  const rng = worldStream(seed, `${purpose}:values`);
  const routes = allRoutes();
  const dates = [TODAY, TOMORROW];
  const n = routes.length * dates.length;
  const lateSet = new Set(worldStream(seed, `${purpose}:late`).shuffle(Array.from({ length: n }, (_, i) => i)).slice(0, Math.round(LATE_SHARE * n)));
  const byName = new Map(CITIES.map((c) => [c.name, c]));
  const flights: Flight[] = [];
  routes.forEach(([a, b], r) => {
    dates.forEach((date, d) => {
      const i = r * dates.length + d;
      flights.push(...drawFlights(rng, sk.flightIds[i], { from: byName.get(a)!, to: byName.get(b)!, date, late: lateSet.has(i) }));
    });
  });
  const hotels: Hotel[] = [];
  for (const c of CITIES) {
    for (const a of c.airports) hotels.push(...drawHotels(rng, sk.hotels.filter((h) => h.airport === a), c));
  }
  return { seed, today: TODAY, tomorrow: TOMORROW, cities: CITIES.map((c) => ({ name: c.name, airports: [...c.airports] })), flights, hotels };
}

/**
 * Builds the real world of `seed`. Deterministic: equal seeds give deep-equal worlds.
 * @throws Error when `seed` is not an integer
 */
export function buildTravelWorld(seed: number): TravelWorld {
  if (!Number.isInteger(seed)) throw new Error(`buildTravelWorld: seed must be an integer, got ${seed}`);
  return drawWorld(seed, skeleton(seed), "real");
}

/**
 * A counterfactual copy of `world`: the same cities, airports, flight ids (on the same routes and dates), hotel ids,
 * names and home airports; every value re-drawn from `seed` (a flight's airports, times, price and seats; a hotel's
 * distances, rating, price and late rule), with the guarantees of the file doc. Deterministic in (world, seed).
 * @throws Error when `seed` is not an integer
 */
export function counterfactualTravelWorld(world: TravelWorld, seed: number): TravelWorld {
  if (!Number.isInteger(seed)) throw new Error(`counterfactualTravelWorld: seed must be an integer, got ${seed}`);
  const per = FLIGHTS_PER_ROUTE_DATE;
  const flightIds: string[][] = [];
  for (let i = 0; i < world.flights.length; i += per) flightIds.push(world.flights.slice(i, i + per).map((f) => f.id));
  // The skeleton's hotel order (by airport, then slot) is recovered from the world's ids.
  const hotels = CITIES.flatMap((c) => c.airports.flatMap((a) => world.hotels.filter((h) => h.airport === a).sort((x, y) => (x.id < y.id ? -1 : 1))));
  const sk: Skeleton = { flightIds, hotels: hotels.map((h) => ({ id: h.id, name: h.name, city: h.city, airport: h.airport })) };
  return { ...drawWorld(seed, sk, `counterfactual:${world.seed}`), seed };
}

/** Lookup tables of a world: cities by name, airport code → city, flights and hotels by id, flights by `from|to|date`. */
export interface WorldIndex {
  city: Map<string, City>;
  airportCity: Map<string, string>;
  flight: Map<string, Flight>;
  hotel: Map<string, Hotel>;
  routeDate: Map<string, Flight[]>;
}

const indexes = new WeakMap<TravelWorld, WorldIndex>();

/** The world's lookup tables (cached per world object; the world must not be mutated after its first lookup). */
export function worldIndex(world: TravelWorld): WorldIndex {
  let ix = indexes.get(world);
  if (ix !== undefined) return ix;
  const routeDate = new Map<string, Flight[]>();
  for (const f of world.flights) {
    const k = `${f.fromCity}|${f.toCity}|${f.date}`;
    routeDate.set(k, [...(routeDate.get(k) ?? []), f]);
  }
  ix = {
    city: new Map(world.cities.map((c) => [c.name, c])),
    airportCity: new Map(world.cities.flatMap((c) => c.airports.map((a) => [a, c.name] as [string, string]))),
    flight: new Map(world.flights.map((f) => [f.id, f])),
    hotel: new Map(world.hotels.map((h) => [h.id, h])),
    routeDate,
  };
  indexes.set(world, ix);
  return ix;
}

/** The flights from city `from` to city `to` departing on `date`, cheapest first (empty when none). */
export function flightsOn(world: TravelWorld, from: string, to: string, date: string): Flight[] {
  return [...(worldIndex(world).routeDate.get(`${from}|${to}|${date}`) ?? [])].sort((a, b) => a.price - b.price);
}

/** The cheapest flight from `from` to `to` on `date`, or undefined when there is none. */
export function cheapestFlight(world: TravelWorld, from: string, to: string, date: string): Flight | undefined {
  return flightsOn(world, from, to, date)[0];
}

/** True when the flight lands after midnight of its departure date. */
export function landsAfterMidnight(f: Pick<Flight, "arr">): boolean {
  return f.arr >= 1440;
}

/** `hh:mm` of minutes after midnight (modulo a day). */
export function clock(minutes: number): string {
  const m = ((minutes % 1440) + 1440) % 1440;
  return `${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
}

/** The request phrasings; the last is held out (test tasks only). `{r}` is the minimum rating (3 or 4). */
const PHRASINGS: ReadonlyArray<{ text: (o: string, d: string, when: string, r: number) => string; rating?: number }> = [
  { text: (o, d, w) => `book ${w}'s cheapest flight from ${o} to ${d} and find a well-rated hotel near the airport`, rating: 4 },
  { text: (o, d, w, r) => `i need the cheapest flight from ${o} to ${d} ${w} , plus a hotel close to the airport rated ${r} or more` },
  { text: (o, d, w, r) => `find me the cheapest ${o} to ${d} flight for ${w} and a hotel near the arrival airport with a rating of at least ${r}` },
  { text: (o, d, w, r) => `please book the lowest fare from ${o} to ${d} for ${w} and a hotel near the airport , rating ${r} or higher` },
  { text: (o, d, w, r) => `cheapest flight ${o} to ${d} ${w} please , and a hotel by the airport rated ${r} or above` },
  { text: (o, d, w, r) => `fly me from ${o} to ${d} ${w} as cheaply as possible and reserve a hotel near where i land , rated at least ${r}` },
];

/** Number of phrasings used by training tasks (the rest are held out for the test split). */
export const TRAIN_PHRASINGS = PHRASINGS.length - 1;

/**
 * The tasks of a world, split into train and test. One task per route and date (today, tomorrow): 14 × 13 × 2 = 364.
 * The test split holds `ceil(numTestTasks / 2)` routes (both dates), never seen in training — half of them (rounded
 * down) to a two-airport destination — cut to `numTestTasks` tasks; a third of the test tasks use the held-out
 * phrasing. Each task: id `travel:<split>:<n>`, kind `travel`, `answers: []`, `data` a `TravelRequest` whose flags
 * are computed in `world` (the real world). `minRating` is 4 for the "well-rated" phrasing, else 4 or 3 (seeded).
 * @throws Error when `numTestTasks` is not an integer in [2, 2 × routes − 2]
 */
export function travelTasks(world: TravelWorld, numTestTasks = 60): { train: Task<TravelRequest>[]; test: Task<TravelRequest>[] } {
  const routes = allRoutes(world.cities);
  if (!Number.isInteger(numTestTasks) || numTestTasks < 2 || numTestTasks > 2 * routes.length - 2) {
    throw new Error(`numTestTasks must be an integer in [2, ${2 * routes.length - 2}], got ${numTestTasks}`);
  }
  const ix = worldIndex(world);
  const rng = worldStream(world.seed, "tasks");
  const nTestRoutes = Math.ceil(numTestTasks / 2);
  const two = (r: [string, string]) => ix.city.get(r[1])!.airports.length === 2;
  const shuffled = rng.shuffle(routes.map((_, i) => i));
  const twoIdx = shuffled.filter((i) => two(routes[i]));
  const oneIdx = shuffled.filter((i) => !two(routes[i]));
  const nTwo = Math.floor(nTestRoutes / 2);
  const testRoutes = new Set([...twoIdx.slice(0, nTwo), ...oneIdx.slice(0, nTestRoutes - nTwo)]);
  const make = (split: "train" | "test", r: number, when: "today" | "tomorrow", n: number): Task<TravelRequest> => {
    const [origin, destination] = routes[r];
    const p = split === "test" && n % 3 === 2 ? PHRASINGS.length - 1 : rng.int(TRAIN_PHRASINGS);
    const phrasing = PHRASINGS[p];
    const minRating = phrasing.rating ?? (rng.next() < 0.6 ? 4 : 3);
    const date = when === "today" ? world.today : world.tomorrow;
    const cheapest = cheapestFlight(world, origin, destination, date)!;
    return {
      id: `travel:${split}:${n}`,
      question: phrasing.text(origin, destination, when, minRating),
      answers: [],
      kind: "travel",
      data: {
        origin,
        destination,
        date,
        when,
        minRating,
        today: world.today,
        tomorrow: world.tomorrow,
        originAirports: [...ix.city.get(origin)!.airports],
        destinationAirports: [...ix.city.get(destination)!.airports],
        lateArrival: landsAfterMidnight(cheapest),
        twoAirports: ix.city.get(destination)!.airports.length === 2,
      },
      meta: { origin, destination, date, phrasing: String(p) },
    };
  };
  const train: Task<TravelRequest>[] = [];
  const test: Task<TravelRequest>[] = [];
  routes.forEach((_, r) => {
    for (const when of ["tomorrow", "today"] as const) {
      if (testRoutes.has(r)) {
        if (test.length < numTestTasks) test.push(make("test", r, when, test.length));
      } else train.push(make("train", r, when, train.length));
    }
  });
  return { train, test };
}

/** The first user message of a task: the date context line, then the request. */
export function travelUserMessage(task: Task<TravelRequest>): string {
  const d = task.data;
  const ctx = d === undefined ? "" : `today is ${d.today} , tomorrow is ${d.tomorrow} .\n`;
  return `${ctx}${task.question}`;
}
