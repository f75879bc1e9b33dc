/**
 * The travel decisions, each measured on its own from a trajectory alone (its turns' actions and tool results, the
 * grade the env copied onto it, and the task's request) — so it works in any world: the world's own flags come from
 * the grade's context parts (`late_arrival`, `two_airports`, `hotel_late`), the task's (world 0) flags are the
 * fallback when the grade lacks them.
 *
 * Keys, each present only where its decision arises in the episode (a rate is averaged over the episodes that have
 * it):
 * - `decision/i_context`: ≥ 1 executed `search_flights` call → 1 when every one used the request's origin,
 *   destination (city name or one of its airport codes) and date;
 * - `decision/ii_late_checkin`: the request's cheapest flight lands after midnight and a booking was made whose
 *   flight lands after midnight too (the agent saw the `+1` of the flight it took) → 1 when the booked hotel accepts
 *   late arrivals;
 * - `decision/iii_arrival_airport`: the destination has two airports and a hotel was booked → 1 when the hotel is
 *   within `NEAR_KM` of the booked flight's arrival airport (`near_arrival`: measured on its own, so a flight to the
 *   wrong city with a hotel near where it lands still counts here and fails decision i instead);
 * - `decision/iv_recovery`: ≥ 1 failed call (an error, or an empty search result) → 1 when a call followed the first
 *   failure and the episode ended with a correct booking (the five correctness parts) of ids it had seen in a tool
 *   result; 0 when it gave up, answered without booking, or booked ids never observed;
 * - `decision/v_stop`: a booking succeeded → 1 when no call followed the first successful booking (`stopped`);
 * - `success` (score = 1), `calls` (executed tool calls), `failed_calls` (errors and empty search results).
 */
import type { Trajectory } from "../../core/types.ts";
import { executedCalls } from "../../env/history.ts";
import { normCode, normName } from "./tools.ts";
import type { TravelRequest } from "./world.ts";

/** The breakdown keys and their labels, in table order. */
export const TRAVEL_BREAKDOWN_LABELS: Readonly<Record<string, string>> = {
  "decision/i_context": "(i) search the requested route and date",
  "decision/ii_late_checkin": "(ii) late check-in after a +1 arrival",
  "decision/iii_arrival_airport": "(iii) hotel near the arrival airport",
  "decision/iv_recovery": "(iv) recover from a failed call",
  "decision/v_stop": "(v) stop after booking",
  success: "success (score 1)",
  calls: "tool calls per episode",
  failed_calls: "failed calls per episode",
};

/** True when a call failed: an error, or a search that returned nothing. */
export function callFailed(c: { name: string; ok: boolean; value?: unknown }): boolean {
  if (!c.ok) return true;
  return (c.name === "search_flights" || c.name === "search_hotels") && Array.isArray(c.value) && c.value.length === 0;
}

/** Every string anywhere in a value (ids seen in tool results). */
function strings(v: unknown, out: Set<string>): Set<string> {
  if (typeof v === "string") out.add(normCode(v));
  else if (Array.isArray(v)) v.forEach((x) => strings(x, out));
  else if (v !== null && typeof v === "object") Object.values(v).forEach((x) => strings(x, out));
  return out;
}

/** A string argument, or '' when absent or not a string. */
const arg = (args: Record<string, unknown>, k: string) => (typeof args[k] === "string" ? (args[k] as string) : "");

/**
 * The decisions of one episode (see the file doc). Reads `traj.task.data` (a `TravelRequest`), `traj.turns` and
 * `traj.grade`; a trajectory without a grade counts as score 0 and nothing booked.
 */
export function travelBreakdown(traj: Pick<Trajectory, "task" | "turns" | "grade">): Record<string, number> {
  const req = traj.task.data as TravelRequest | undefined;
  const parts = traj.grade?.parts ?? {};
  const calls = executedCalls(traj.turns);
  const out: Record<string, number> = {};
  const booked = parts.booked === 1;

  if (req !== undefined) {
    const flights = calls.filter((c) => c.name === "search_flights");
    if (flights.length > 0) {
      const cityOk = (raw: string, city: string, airports: readonly string[]) => normName(raw) === city || airports.includes(normCode(raw));
      out["decision/i_context"] = flights.every(
        (c) =>
          cityOk(arg(c.args, "from"), req.origin, req.originAirports) &&
          cityOk(arg(c.args, "to"), req.destination, req.destinationAirports) &&
          normCode(arg(c.args, "date")) === req.date,
      )
        ? 1
        : 0;
    }
    const late = (parts.late_arrival ?? (req.lateArrival ? 1 : 0)) === 1;
    // Grades without `booked_late` (older parts) fall back to "booked the late cheapest flight" = right_flight.
    const bookedLate = (parts.booked_late ?? parts.right_flight) === 1;
    if (late && booked && bookedLate) out["decision/ii_late_checkin"] = parts.hotel_late === 1 ? 1 : 0;
    const two = (parts.two_airports ?? (req.twoAirports ? 1 : 0)) === 1;
    if (two && booked) out["decision/iii_arrival_airport"] = (parts.near_arrival ?? parts.right_airport) === 1 ? 1 : 0;
  }

  const firstFail = calls.findIndex(callFailed);
  if (firstFail >= 0) {
    const correct = booked && ["right_flight", "right_airport", "rating_ok", "checkin_ok"].every((k) => parts[k] === 1);
    const retried = calls.length > firstFail + 1;
    // The booking that stands is the last successful book; its ids must have been observed before it.
    let seen = false;
    const lastBook = calls.map((c, i) => ({ c, i })).filter(({ c }) => c.name === "book" && c.ok).at(-1);
    if (lastBook !== undefined) {
      const observed = new Set<string>();
      for (const c of calls.slice(0, lastBook.i)) if (c.ok) strings(c.value, observed);
      seen = observed.has(normCode(arg(lastBook.c.args, "flight_id"))) && observed.has(normCode(arg(lastBook.c.args, "hotel_id")));
    }
    out["decision/iv_recovery"] = correct && retried && seen ? 1 : 0;
  }
  if (booked) out["decision/v_stop"] = parts.stopped === 1 ? 1 : 0;

  out.success = (traj.grade?.score ?? 0) >= 1 - 1e-9 ? 1 : 0;
  out.calls = calls.length;
  out.failed_calls = calls.filter(callFailed).length;
  return out;
}
