/**
 * The product-complaint env: world, tools, grader, decisions and detectors, personas and the recipe
 * (`complaintsRecipe`, `arl train --env complaints`). See `README.md` in this folder. Importing this module registers
 * the env's hacking detectors (`first_number`, `unretrieved_source`, `raw_count`) with `registerDetector`, so every
 * run's monitor watches them; their metrics exist only in steps with complaint episodes.
 */
import { registerDetector } from "../../reward/detectors.ts";
import { COMPLAINT_DETECTORS } from "./decisions.ts";

for (const d of COMPLAINT_DETECTORS) registerDetector(d);

export { complaintsRecipe, ComplaintOptions, COMPLAINT_DEFAULT_OPTIONS, COMPLAINT_INSTRUCTIONS, COMPLAINT_LAB_DESIGNS, COMPLAINT_LATENCY_MS } from "./env.ts";
export { complaintBreakdown, normalisedFor, firstNumberRate, unretrievedSourceRate, rawCountRate, COMPLAINT_BREAKDOWN_LABELS, COMPLAINT_DETECTORS } from "./decisions.ts";
export { gradeComplaint, parseAnswer, dataCalls, retrievedSources, PAY_MODES, SCORE_PARTS, type PayMode, type ParsedAnswer, type DataCall, type CallTurn } from "./grader.ts";
export { personaAction, scriptedTurn, answerLine, COMPLAINT_PERSONAS, COMPLAINT_PERSONA_WEIGHTS, COMPLAINT_HABIT_RATES, DROPPED_NAME, type ComplaintPersona } from "./personas.ts";
export { complaintTools, formatComplaintResult, toolErrorTexts, normName, normCode, resolveProduct, resolveYear, resolveCaliber, notOurs, ours, FIGURE_INPUT, COMPLAINT_TOOL_NAMES, type CountView, type SalesView } from "./tools.ts";
export {
  buildComplaintWorld,
  counterfactualComplaintWorld,
  complaintTasks,
  complaintUserMessage,
  resolveReports,
  truthOf,
  whenOf,
  isOwn,
  isCompetitor,
  THIS_YEAR,
  YEARS,
  ASKED_YEARS,
  CALIBERS,
  CALIBER_PHRASES,
  OWN_PRODUCTS,
  COMPETITOR_PRODUCTS,
  RELIABILITIES,
  SOURCES,
  CONFLICT_RATE,
  RELIABILITY_CONFLICT_SHARE,
  WRONG_FIRST,
  TRAIN_PHRASINGS,
  type Caliber,
  type Reliability,
  type Source,
  type OwnYear,
  type ReportEntry,
  type CompetitorFigure,
  type ComplaintWorld,
  type ComplaintQuestion,
  type Truth,
} from "./world.ts";
