/**
 * The protocol's format as a state machine: a port of Search-R1's `is_valid_sequence`
 * (PeterGriffinJin/Search-R1 `verl/utils/reward_score/qa_em_format.py`, the format-reward variant of `qa_em.py`),
 * used by the `format_sm` reward term.
 */
import type { Trajectory } from "../core/types.ts";

/** Options of `isValidSequence`. */
export interface SequenceOptions {
  /**
   * Require a `<think>…</think>` block before every action, as Search-R1 does. When false (our default: the tiny
   * policy writes no think blocks) a think block is optional before each action, and all other rules stay.
   */
  requireThink: boolean;
}

/** The verdict of `isValidSequence`: valid or not, and why (Search-R1's messages, verbatim). */
export interface SequenceVerdict {
  valid: boolean;
  /** `"Valid sequence format"`, or the first violation, e.g. `"Unexpected tag <answer> in state after_search"`. */
  reason: string;
}

/** States of the machine (Search-R1's names). */
type State =
  | "start"
  | "in_think"
  | "after_think"
  | "in_search"
  | "after_search"
  | "in_information"
  | "information"
  | "in_answer"
  | "end";

const TAGS = ["think", "search", "information", "answer"] as const;
/** Search-R1 `split_pattern`: the capture group keeps the tags in the split output, as Python `re.split` does. */
const SPLIT_RE = /(<\/?(?:think|search|information|answer)>)/;
const TAG_RE = /^<\/?(?:think|search|information|answer)>$/;
/** Python `str.strip()` whitespace (`str.isspace`), so "blank" means exactly what Search-R1's `part.strip()` means. */
const PY_BLANK = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/u;
const PY_SPACE = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/u;
/**
 * Python `str.strip()`: the text without leading and trailing `str.isspace` characters. A scan from each end, not a
 * `[ws]+$` regex, which retries at every position of a long inner run of whitespace (quadratic: 2.8 s at 80 000).
 */
function pyStrip(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && PY_SPACE.test(s[start])) start++;
  while (end > start && PY_SPACE.test(s[end - 1])) end--;
  return s.slice(start, end);
}

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/**
 * Checks that the assistant side of an episode follows the protocol
 * `(<think>…</think>)? <search>…</search> <information>…</information> … (<think>…</think>)? <answer>…</answer>`.
 *
 * Ported from Search-R1 `is_valid_sequence` (`verl/utils/reward_score/qa_em_format.py`), same order of checks and
 * same messages:
 * 1. each of `think`, `search`, `information`, `answer` has as many opening as closing tags
 *    (`"Mismatch in {tag} tags: {o} opening vs {c} closing tags"`);
 * 2. the text is split on those tags and walked through the states
 *    `start → in_think → after_think → in_search → after_search → in_information → information → … → in_answer → end`;
 *    an unexpected tag gives `"Unexpected tag {tag} in state {state}"`; non-blank text outside a block gives
 *    `"Unexpected content '{text}' between tags (state: {state})"`, or `"Unexpected content in state end"` after the
 *    answer; blank parts are skipped;
 * 3. the walk must end in `end` (`"Incomplete sequence, ended in state {state}"`).
 * So: an answer is last and nothing but whitespace follows it; `<information>` only right after a `</search>`;
 * a search's information block is required; blocks do not nest; a think block cannot follow a think block.
 *
 * Differences from Search-R1:
 * - no `<|im_start|>assistant` marker is looked for: `text` is already the assistant side (our policy has no chat
 *   template; Search-R1 returns `"Missing assistant marker"` without it);
 * - with `requireThink: false` (the default of `RewardOptions`), `<search>` and `<answer>` are also accepted in the
 *   states `start` and `information` (think optional). With `requireThink: true` the machine is Search-R1's exactly;
 * - "blank" uses Python's `str.strip()` whitespace, as Search-R1 (not JS `\s`).
 *
 * @param text the assistant side of an episode: each turn's action text followed by its observation
 *   (`trajectoryText`); observations are `\n\n<information>…</information>\n\n`
 * @returns `{valid, reason}`; never throws
 */
export function isValidSequence(text: string, options: SequenceOptions = { requireThink: false }): SequenceVerdict {
  for (const tag of TAGS) {
    const opening = count(text, `<${tag}>`);
    const closing = count(text, `</${tag}>`);
    if (opening !== closing) {
      return { valid: false, reason: `Mismatch in ${tag} tags: ${opening} opening vs ${closing} closing tags` };
    }
  }
  const thinkOptional = !options.requireThink;
  let state: State = "start";
  for (const part of text.split(SPLIT_RE)) {
    if (PY_BLANK.test(part)) continue;
    if (TAG_RE.test(part)) {
      const canAct = state === "after_think" || (thinkOptional && (state === "start" || state === "information"));
      if (part === "<think>" && (state === "start" || state === "information")) state = "in_think";
      else if (part === "</think>" && state === "in_think") state = "after_think";
      else if (part === "<search>" && canAct) state = "in_search";
      else if (part === "</search>" && state === "in_search") state = "after_search";
      else if (part === "<information>" && state === "after_search") state = "in_information";
      else if (part === "</information>" && state === "in_information") state = "information";
      else if (part === "<answer>" && canAct) state = "in_answer";
      else if (part === "</answer>" && state === "in_answer") state = "end";
      else return { valid: false, reason: `Unexpected tag ${part} in state ${state}` };
    } else if (state === "in_think" || state === "in_search" || state === "in_information" || state === "in_answer") {
      // content is allowed inside a block
    } else if (state === "start" || state === "after_think" || state === "after_search" || state === "information") {
      return { valid: false, reason: `Unexpected content '${pyStrip(part)}' between tags (state: ${state})` };
    } else {
      return { valid: false, reason: `Unexpected content in state ${state}` };
    }
  }
  if (state !== "end") return { valid: false, reason: `Incomplete sequence, ended in state ${state}` };
  return { valid: true, reason: "Valid sequence format" };
}

/**
 * The assistant side of a trajectory as text: for each turn, its action text followed by its observation
 * (the prompt is excluded). This is the text `isValidSequence` checks.
 */
export function trajectoryText(traj: Trajectory): string {
  return traj.turns.map((t) => t.actionText + t.observation).join("");
}
