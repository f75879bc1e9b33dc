/**
 * The travel assistant env: world, tools, grader, decisions, personas and the recipe (`travelRecipe`,
 * `arl train --env travel`). See `README.md` in this folder.
 */
export { travelRecipe, TravelOptions, TRAVEL_DEFAULT_OPTIONS, TRAVEL_INSTRUCTIONS, TRAVEL_LATENCY_MS } from "./env.ts";
export { travelBreakdown, callFailed, TRAVEL_BREAKDOWN_LABELS } from "./decisions.ts";
export { gradeTravel, firstBookingTurn, SCORE_PARTS } from "./grader.ts";
export { personaAction, scriptedTurn, confirmation, GIVE_UP_ANSWER, HABIT_RATES, TRAVEL_PERSONAS, TRAVEL_PERSONA_WEIGHTS, type TravelPersona } from "./personas.ts";
export {
  travelTools,
  formatTravelResult,
  flightView,
  hotelView,
  normCode,
  normName,
  transientFailure,
  TRANSIENT_ERRORS,
  TRAVEL_TOOL_NAMES,
  type AirportsView,
  type Booking,
  type BookingView,
  type FlightView,
  type HotelView,
  type TravelState,
  type TravelToolOptions,
} from "./tools.ts";
export {
  buildTravelWorld,
  counterfactualTravelWorld,
  travelTasks,
  travelUserMessage,
  flightsOn,
  cheapestFlight,
  landsAfterMidnight,
  clock,
  allRoutes,
  worldIndex,
  CITIES,
  TODAY,
  TOMORROW,
  LATE_SHARE,
  NEAR_KM,
  HOTELS_PER_AIRPORT,
  FLIGHTS_PER_ROUTE_DATE,
  TRAIN_PHRASINGS,
  type City,
  type Flight,
  type Hotel,
  type TravelRequest,
  type TravelWorld,
} from "./world.ts";
