/**
 * The travel grader: how well an episode's booking fulfils its request, in the episode's own world.
 *
 * Parts (each 0 or 1):
 * - `booked`: a booking stands at the end (the last successful `book`);
 * - `right_flight`: the booked flight is the cheapest on the request's route and date;
 * - `right_airport`: the booked hotel is in the destination city, within `NEAR_KM` of the booked flight's ARRIVAL
 *   airport (and the flight lands in the destination city);
 * - `rating_ok`: the hotel's rating is at least the request's minimum;
 * - `checkin_ok`: when the booked flight lands after midnight, the hotel accepts late arrivals (1 otherwise);
 * - `stopped`: no tool call followed the first successful booking (a second `book` counts as a needless call).
 * Context parts (flags of the episode's world, not scores; read by `travelBreakdown`): `late_arrival` (the
 * request's cheapest flight lands after midnight), `two_airports` (the destination has two airports), `booked_late`
 * (the booked flight lands after midnight), `hotel_late` (the booked hotel accepts late arrivals) and `near_arrival`
 * (the booked hotel is within `NEAR_KM` of the booked flight's arrival airport, whatever the city) — the last three
 * 0 when nothing is booked.
 *
 * Score: 0 when nothing is booked; else `(0.5 × right_flight + (right_airport + rating_ok + checkin_ok) / 6) ×
 * (stopped ? 1 : 0.9)` — 1 exactly when the five correctness parts are 1 and the agent stopped; 0.9 for a correct
 * booking followed by a needless call; partial credit per mistake otherwise.
 */
import type { Grade } from "../../core/types.ts";
import type { GradeInput } from "../../env/toolEnv.ts";
import type { TravelState } from "./tools.ts";
import { cheapestFlight, landsAfterMidnight, NEAR_KM, worldIndex, type TravelRequest, type TravelWorld } from "./world.ts";

/** The scoring parts (each 0/1), in order. */
export const SCORE_PARTS = ["booked", "right_flight", "right_airport", "rating_ok", "checkin_ok", "stopped"] as const;

/** Index of the first turn whose call to `book` succeeded, or -1. */
export function firstBookingTurn(turns: GradeInput<TravelRequest, TravelState>["turns"]): number {
  return turns.findIndex((t) => t.action.type === "tool_call" && t.results.some((r) => r.name === "book" && r.ok));
}

/**
 * Grades an episode (see the file doc).
 * @throws Error when the task has no `data` (not a travel task)
 */
export function gradeTravel(world: TravelWorld, input: GradeInput<TravelRequest, TravelState>): Grade {
  const req = input.task.data;
  if (req === undefined) throw new Error(`gradeTravel: task ${input.task.id} has no travel request (data)`);
  const ix = worldIndex(world);
  const cheapest = cheapestFlight(world, req.origin, req.destination, req.date);
  const context = {
    late_arrival: cheapest !== undefined && landsAfterMidnight(cheapest) ? 1 : 0,
    two_airports: (ix.city.get(req.destination)?.airports.length ?? 0) === 2 ? 1 : 0,
  };
  const booking = input.state.bookings.at(-1);
  const flight = booking === undefined ? undefined : ix.flight.get(booking.flight);
  const hotel = booking === undefined ? undefined : ix.hotel.get(booking.hotel);
  if (booking === undefined || flight === undefined || hotel === undefined) {
    const parts = { booked: 0, right_flight: 0, right_airport: 0, rating_ok: 0, checkin_ok: 0, stopped: 0, ...context, booked_late: 0, hotel_late: 0, near_arrival: 0 };
    return { score: 0, parts, explanation: input.answer === null ? "nothing booked (no answer)" : "nothing booked" };
  }
  const first = firstBookingTurn(input.turns);
  const after = first < 0 ? [] : input.turns.slice(first + 1).filter((t) => t.action.type === "tool_call");
  const rightFlight = cheapest !== undefined && flight.id === cheapest.id ? 1 : 0;
  const near = hotel.km[flight.to];
  const nearArrival = near !== undefined && near <= NEAR_KM ? 1 : 0;
  const rightAirport = flight.toCity === req.destination && hotel.city === req.destination && nearArrival === 1 ? 1 : 0;
  const ratingOk = hotel.rating >= req.minRating ? 1 : 0;
  const late = landsAfterMidnight(flight);
  const checkinOk = !late || hotel.late ? 1 : 0;
  const stopped = after.length === 0 ? 1 : 0;
  const score = (0.5 * rightFlight + (rightAirport + ratingOk + checkinOk) / 6) * (stopped === 1 ? 1 : 0.9);
  const why: string[] = [
    rightFlight ? "cheapest flight" : `not the cheapest flight (${cheapest?.id ?? "none"})`,
    rightAirport ? `hotel near ${flight.to}` : `hotel not near the arrival airport ${flight.to}`,
    ratingOk ? `rating ${hotel.rating} ≥ ${req.minRating}` : `rating ${hotel.rating} < ${req.minRating}`,
    late ? (hotel.late ? "late check-in ok" : "lands after midnight, no late check-in") : "lands before midnight",
    stopped ? "stopped" : `${after.length} call(s) after booking`,
  ];
  return {
    score,
    parts: { booked: 1, right_flight: rightFlight, right_airport: rightAirport, rating_ok: ratingOk, checkin_ok: checkinOk, stopped,
      ...context,
      booked_late: late ? 1 : 0,
      hotel_late: hotel.late ? 1 : 0,
      near_arrival: nearArrival,
    },
    explanation: `booked ${flight.id} + ${hotel.id}: ${why.join(", ")}`,
  };
}
