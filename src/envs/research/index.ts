/**
 * The revenue-decline research env: world (corpus), tools, grader, breakdown, personas and the recipe
 * (`researchRecipe`, `arl train --env research`). See `README.md` in this folder.
 */
export {
  researchRecipe,
  buildResearch,
  researchOptions,
  researchState,
  researchUserMessage,
  counterfactualSeed,
  ResearchOptions,
  RESEARCH_DEFAULT_OPTIONS,
  RESEARCH_INSTRUCTIONS,
  RESEARCH_LAB_DESIGNS,
  RESEARCH_LATENCY_MS,
  answerPaddingRate,
  ANSWER_PADDING_RULE,
} from "./env.ts";
export { researchBreakdown, RESEARCH_BREAKDOWN_LABELS } from "./decisions.ts";
export { gradeResearch, judgeAnswer, parseResearchAnswer, type JudgedAnswer, type ResearchClaim, type ResearchGradeMode } from "./grader.ts";
export {
  personaAction,
  scriptedTurn,
  answerText,
  reasonsIn,
  ENDLESS_SEARCHES,
  ENDLESS_QUERIES,
  COMPANY_QUERY,
  INDUSTRY_QUERY,
  HABIT_RATE,
  RESEARCH_PERSONAS,
  RESEARCH_PERSONA_WEIGHTS,
  type ResearchPersona,
} from "./personas.ts";
export { researchTools, scopeIndex, searchText, openText, openedDocId, normId, normQuery, NO_MATCH, OPEN_INPUT, SEARCH_INPUT, SEARCH_TOP_K, RESEARCH_TOOL_NAMES, type ResearchState } from "./tools.ts";
export {
  buildResearchWorld,
  counterfactualResearchWorld,
  researchTasks,
  researchIndex,
  supports,
  docId,
  stageDocId,
  resolveDocId,
  scopeDocs,
  LOCAL_IDS,
  FIRST_WORDS,
  SECOND_WORDS,
  LAST_YEAR,
  PRIOR_YEAR,
  MAX_REASONS,
  MIN_REASONS,
  REASONS,
  REASON_STAGE,
  SECTORS,
  STAGES,
  TRAIN_PHRASINGS,
  type Company,
  type Reason,
  type ResearchDoc,
  type ResearchIndex,
  type ResearchQuestion,
  type ResearchWorld,
  type Sector,
  type Stage,
} from "./world.ts";
