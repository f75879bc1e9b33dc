/**
 * The support-ticket classification env: world (tickets), grader, breakdown, personas and the recipe
 * (`classifyRecipe`, `arl train --env classify`). See `README.md` in this folder.
 */
export {
  classifyRecipe,
  confidenceWordRate,
  multiLabelRate,
  ClassifyOptions,
  CLASSIFY_DEFAULT_OPTIONS,
  CLASSIFY_DETECTOR_RULES,
  CLASSIFY_INSTRUCTIONS,
  CLASSIFY_LAB_DESIGNS,
} from "./env.ts";
export { classifyBreakdown, CLASSIFY_BREAKDOWN_LABELS } from "./decisions.ts";
export { gradeClassify, parseLabels, CLASSIFY_PAY_MODES, CONFIDENCE_WORDS, HEDGE_WORDS, type ClassifyPayMode, type ParsedLabels } from "./grader.ts";
export { personaAction, scriptedTurn, firstCueLabel, CLASSIFY_PERSONAS, CLASSIFY_PERSONA_WEIGHTS, type ClassifyPersona } from "./personas.ts";
export {
  buildClassifyWorld,
  classifyTasks,
  labelOfCue,
  ticketText,
  CLOSINGS,
  CUE_POOL,
  CUES_PER_LABEL,
  FINE_PHRASES,
  LABELS,
  OPENINGS,
  PROBLEM_PHRASES,
  type ClassifyWorld,
  type Label,
  type Ticket,
} from "./world.ts";
