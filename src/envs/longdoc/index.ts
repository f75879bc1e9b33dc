/**
 * The long-document QA env: world (handbooks), tools (search, read), grader (right and supported, every citation checked), breakdown,
 * personas and the recipe (`longdocRecipe`, `arl train --env longdoc`). See `README.md` in this folder.
 */
export { longdocRecipe, unreadCitationRate, LongdocOptions, LONGDOC_DEFAULT_OPTIONS, LONGDOC_INSTRUCTIONS, LONGDOC_LAB_DESIGNS, UNREAD_CITATION_RULE } from "./env.ts";
export { longdocBreakdown, LONGDOC_BREAKDOWN_LABELS } from "./decisions.ts";
export { gradeLongdoc, parseCitedAnswer, LONGDOC_PAY_MODES, type LongdocPayMode } from "./grader.ts";
export { personaAction, scriptedTurn, LONGDOC_PERSONAS, LONGDOC_PERSONA_WEIGHTS, type LongdocPersona } from "./personas.ts";
export { longdocTools, normParagraphId, searchText, LONGDOC_TOOL_NAMES, NO_MATCH, type LongdocState } from "./tools.ts";
export {
  longdocTasks,
  namingParagraphs,
  questionText,
  DAYS,
  DEPARTMENT_OF,
  DEPARTMENTS,
  FACILITIES,
  FACILITY_PARAGRAPHS,
  NOTICES,
  PARAGRAPHS,
  STAFF,
  STAFF_OF,
  type Department,
  type HandbookQuestion,
  type Paragraph,
} from "./world.ts";
