/**
 * The order-note extraction env: world (notes), grader (field-level F1, JSON edge cases), breakdown, personas and the
 * recipe (`extractRecipe`, `arl train --env extract`). See `README.md` in this folder.
 */
export {
  extractRecipe,
  hallucinatedFieldRate,
  ExtractOptions,
  EXTRACT_DEFAULT_OPTIONS,
  EXTRACT_INSTRUCTIONS,
  EXTRACT_LAB_DESIGNS,
  HALLUCINATED_FIELD_RULE,
} from "./env.ts";
export { extractBreakdown, EXTRACT_BREAKDOWN_LABELS } from "./decisions.ts";
export { gradeExtract, judgeRecord, parseRecord, EXTRACT_PAY_MODES, HALLUCINATION_PENALTY, type ExtractPayMode, type JudgedRecord, type ParsedRecord } from "./grader.ts";
export { personaAction, personaAnswer, scriptedTurn, EXTRACT_PERSONAS, EXTRACT_PERSONA_WEIGHTS, type ExtractPersona } from "./personas.ts";
export {
  buildExtractWorld,
  extractTasks,
  recordJson,
  fieldValues,
  valueOfCue,
  CUE_POOL,
  CUES_PER_VALUE,
  FIELD_PHRASES,
  FIELDS,
  NUMBER_WORDS,
  type ExtractWorld,
  type Field,
  type TextField,
  type OrderNote,
  type OrderRecord,
} from "./world.ts";
