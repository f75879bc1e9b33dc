/**
 * The plain-text side of a Search-R1 / veRL transcript (see `./transcript.ts`): where the response starts in a
 * prompt + response string (`responseText`), whitespace word counts (the token count of a transcript, whose
 * tokenizer is unknown), and the gaps the env and the chat roles leave between an action and its observation.
 * Linear time; sticky regexes read at one position, never rescanning the text.
 */
import { INVALID_ACTION_OBSERVATION } from "./searchR1.ts";

/**
 * The marker before the response in Search-R1's full-sequence strings (`qa_em_format.py` `is_valid_sequence`
 * looks for it; Search-R1's `RewardManager` decodes `prompt + response` without skipping special tokens, so with
 * Qwen's chat template the string is `<|im_start|>system …<|im_end|>\n<|im_start|>user …<|im_end|>\n` then this
 * marker, then the response). It marks the prompt's end only in such a full sequence (`responseText`): anywhere
 * else it is text like any other.
 */
export const ASSISTANT_MARKER = "<|im_start|>assistant";
/** How a chat-template message starts: a full prompt + response sequence begins with one (`responseText`). */
const CHAT_START = "<|im_start|>";

/**
 * The env's corrective observation, trimmed. It quotes the action tags (`<search> and </search>`, `<answer> and
 * </answer>`), so it is looked for before the tags: read as text, it would be a search and an answer "and".
 */
export const CORRECTIVE = INVALID_ACTION_OBSERVATION.trim();

/** Whitespace collapsed to one space and trimmed (as the env's action parser does to queries and answers). */
export function squash(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

/** True for the code units JS regex `\s` matches. */
function isSpace(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13);
  if (c < 0xa0) return false;
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/** Number of whitespace-separated words in `s.slice(from, to)` (one pass, no allocation). */
export function wordsIn(s: string, from = 0, to = s.length): number {
  let n = 0;
  let inWord = false;
  for (let i = Math.max(0, from); i < to; i++) {
    const space = isSpace(s.charCodeAt(i));
    if (!space && !inWord) n++;
    inWord = !space;
  }
  return n;
}

/** Number of whitespace-separated words: the token count used here (no tokenizer is known for veRL's model). */
export function countWords(s: string): number {
  return wordsIn(s);
}

const SPACES = /\s*/y;
/** Index of the first non-whitespace character at or after `i`. */
export function skipSpaces(text: string, i: number): number {
  SPACES.lastIndex = i;
  SPACES.exec(text);
  return SPACES.lastIndex;
}
const AFTER_OBSERVATION = /\s*(?:assistant[ \t]*\n)?/y;
/** Index just after an observation ending at `end`: trailing whitespace and a bare `assistant` role line. */
export function afterObservation(text: string, end: number): number {
  AFTER_OBSERVATION.lastIndex = end;
  AFTER_OBSERVATION.exec(text);
  return AFTER_OBSERVATION.lastIndex;
}
const ENV_GAP = /\s*(?:<\|im_end\|>\s*)?(?:<\|im_start\|>)?(?:user(?=\s))?\s*/y;
/**
 * True when the text between an action's end and its observation's opening tag at `open` is the env's: whitespace
 * (Search-R1 appends `\n\n<information>`) and the chat roles before a tool response (`\nuser\n`, or
 * `<|im_end|>\n<|im_start|>user\n` when special tokens are kept). Anything else there is the model's text.
 */
export function envGap(text: string, from: number, open: number): boolean {
  ENV_GAP.lastIndex = from;
  ENV_GAP.exec(text);
  return ENV_GAP.lastIndex === open;
}
const ROLE_GAP = /\s*(?:user(?=\s)\s*)?/y;
/** Index after whitespace and a bare `user` role word (what separates a veRL tool call from its response). */
export function skipRoleGap(text: string, i: number): number {
  ROLE_GAP.lastIndex = i;
  ROLE_GAP.exec(text);
  return ROLE_GAP.lastIndex;
}

/**
 * True when `prompt` (the text before a string's first `ASSISTANT_MARKER`) holds env output, which a real prompt
 * never does: a `</search>` followed (only whitespace between) by `<information>` (Search-R1's env appends
 * `\n\n<information>…</information>\n\n` right after the `</search>` that cut the generation; Search-R1's prompt
 * "<search> query </search> and it will return … between <information> and </information>" does not match), a
 * `<tool_response>` after a `</tool_call>` (veRL's tool responses; Qwen's tool system prompt quotes only
 * `<tool_call>`), or the env's corrective observation. Linear time.
 */
function hasEnvOutput(prompt: string): boolean {
  if (SEARCH_THEN_INFORMATION.test(prompt) || prompt.includes(CORRECTIVE)) return true;
  const call = prompt.indexOf("</tool_call>");
  return call >= 0 && prompt.includes("<tool_response>", call);
}
const SEARCH_THEN_INFORMATION = /<\/search>\s*<information>/;

/**
 * The response part of a solution string. The shape of the string says which kind it is:
 * - a full prompt + response sequence — Search-R1's `RewardManager` (`verl/trainer/main_ppo.py`) decodes
 *   `cat(valid_prompt_ids, valid_response_ids)` without skipping special tokens, so with Qwen's chat template the
 *   string begins with `<|im_start|>system` or `<|im_start|>user` — is a string that begins (after whitespace) with
 *   `<|im_start|>`, holds `ASSISTANT_MARKER`, and holds no env output before it (`hasEnvOutput`: the prompt is the
 *   data set's, the env has not spoken yet). Its response is the text after the FIRST `ASSISTANT_MARKER` (the
 *   template's generation prompt);
 * - anything else is a response-only string (veRL's reward managers decode only the response tokens,
 *   `skip_special_tokens=True`), and all of it is the response. `ASSISTANT_MARKER` in it is plain text: inside an
 *   observation it is data (a passage quoting a chat log), in the model's own turn it is the model's text (it costs
 *   words and breaks the format, never erases what came before).
 * A model can open a response-only string with a chat header of its own; the env-output rule then leaves it at most
 * its first turn's text before its marker to drop (generation stops at the first closing action tag, and the env
 * speaks next), never a search, an observation, a corrected turn or what follows them.
 */
export function responseText(solution: string): string {
  if (!solution.startsWith(CHAT_START, skipSpaces(solution, 0))) return solution;
  const i = solution.indexOf(ASSISTANT_MARKER);
  if (i < 0) return solution;
  if (hasEnvOutput(solution.slice(0, i))) return solution;
  return solution.slice(i + ASSISTANT_MARKER.length);
}
