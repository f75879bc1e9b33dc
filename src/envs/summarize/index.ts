/**
 * The news-brief summarisation env: world (source documents), grader (coverage, consistency, brevity), breakdown,
 * personas and the recipe (`summarizeRecipe`, `arl train --env summarize`). See `README.md` in this folder.
 */
export {
  summarizeRecipe,
  shortSummaryRate,
  summaryPaddingRate,
  unsupportedClaimRate,
  SummarizeOptions,
  SUMMARIZE_DEFAULT_OPTIONS,
  SUMMARIZE_DETECTOR_RULES,
  SUMMARIZE_INSTRUCTIONS,
  SUMMARIZE_LAB_DESIGNS,
} from "./env.ts";
export { summarizeBreakdown, SUMMARIZE_BREAKDOWN_LABELS } from "./decisions.ts";
export { gradeSummary, matchingFacts, parseSummary, statedFacts, supportedFact, SUMMARIZE_PAY_MODES, type Clause, type SummarizePayMode } from "./grader.ts";
export { personaAction, personaSummary, scriptedTurn, SUMMARIZE_PERSONAS, SUMMARIZE_PERSONA_WEIGHTS, type SummarizePersona } from "./personas.ts";
export { assignSubjects, canonicalOrder, clauseOf, keyFacts, summarizeTasks, summaryOf, CATEGORIES, CATEGORY_OF, CATEGORY_ORDER, KEY_EVENTS, MINOR_EVENTS, SECTOR_OF, SECTORS, SUBJECTS, SUBJECTS_OF, TAILS, type Fact, type SourceDoc } from "./world.ts";
