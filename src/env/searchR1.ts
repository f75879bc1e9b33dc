/**
 * The Search-R1 text protocol: the action parser and the exact strings the environment appends to the context.
 * Source: PeterGriffinJin/Search-R1 `search_r1/llm_agent/generation.py` (`postprocess_predictions`,
 * `execute_predictions`, `_passages2string`).
 */
import { searchAction, type Action, type Passage } from "../core/types.ts";

/**
 * Observation appended after an invalid action, verbatim from Search-R1 `execute_predictions` (note the leading
 * and trailing newline).
 */
export const INVALID_ACTION_OBSERVATION =
  "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. " +
  "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n";

/** Opening string of the information block (Search-R1 `execute_predictions`). */
export const INFORMATION_OPEN = "\n\n<information>";
/** Closing string of the information block (Search-R1 `execute_predictions`). */
export const INFORMATION_CLOSE = "</information>\n\n";

/**
 * Wraps retrieval output as Search-R1 does: `\n\n<information>{content.strip()}</information>\n\n`.
 * Source: `execute_predictions` (`f'\n\n<information>{search_results.pop(0).strip()}</information>\n\n'`).
 */
export function informationObservation(content: string): string {
  return `${INFORMATION_OPEN}${content.trim()}${INFORMATION_CLOSE}`;
}

/**
 * Formats retrieved passages as Search-R1 `_passages2string`: for each passage i (0-based),
 * `Doc {i+1}(Title: {title}) {text}\n`, concatenated. Empty input → `''`.
 * Difference: Search-R1 prints the raw first line of wiki-18 `contents`, which keeps the title's double quotes
 * (`Title: "Evan Morris"`); our `Passage.title` is unquoted by the corpus loader, so the quotes are not shown; a
 * passage with a `source` is shown as `Doc i(Title: {title} , source : {source}) {text}`.
 */
export function formatPassages(passages: readonly Passage[]): string {
  let out = "";
  passages.forEach((p, i) => {
    // Our addition: a passage with a `source` shows it, so the policy can weigh conflicting evidence.
    const source = p.source === undefined ? "" : ` , source : ${p.source}`;
    out += `Doc ${i + 1}(Title: ${p.title}${source}) ${p.text}\n`;
  });
  return out;
}

/** The two action tags of the protocol. */
type ActionTag = "search" | "answer";

/** One `<search>`, `</search>`, `<answer>` or `</answer>` occurrence, in text order. */
interface TagHit {
  tag: ActionTag;
  closing: boolean;
  /** Index of `<` in the (think-stripped) text. */
  start: number;
  /** Index just after `>`. */
  end: number;
}

const TAG_RE = /<(\/?)(search|answer)>/g;
/**
 * Replaces each complete `<think>…</think>` block (the first `</think>` after each `<think>`) with a space (or, with
 * `keepLength`, with as many spaces as the block has characters, so positions keep their meaning) — what
 * `text.replace(/<think>[\s\S]*?<\/think>/g, " ")` does, in linear time: the lazy regex is quadratic on a long run
 * of unclosed `<think>` tags (found by the fuzz: 0.2 s at 100 KB, growing with the square).
 * Complete think blocks are reasoning, not actions: tags inside them never count.
 */
export function stripThink(text: string, keepLength = false): string {
  let out = "";
  let from = 0;
  for (;;) {
    const open = text.indexOf("<think>", from);
    if (open < 0) break;
    const close = text.indexOf("</think>", open + 7);
    if (close < 0) break; // no complete block starts here or later
    out += text.slice(from, open) + (keepLength ? " ".repeat(close + 8 - open) : " ");
    from = close + 8;
  }
  return out + text.slice(from);
}

/** Trims and collapses runs of whitespace to one space. */
function squash(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

/**
 * Parses one policy turn into an action.
 *
 * Rule (Search-R1 `postprocess_predictions` takes the first regex match of `<(search|answer)>(.*?)</\1>`; this
 * parser is stricter where noted):
 * - complete `<think>…</think>` blocks are removed first (allowed and ignored, tags inside them do not count);
 * - the first opening `<search>`/`<answer>` tag (by position) starts the action; its contents run to the next
 *   action tag, which must be its own closing tag; the contents are trimmed with whitespace collapsed;
 * - anything after that closing tag (a second action, trailing text) is ignored, as in Search-R1;
 * - stray closing tags before the first opening tag are ignored, as in Search-R1.
 *
 * Invalid (`{type: "invalid", reason}`), stricter than Search-R1's leftmost-match regex:
 * no opening tag; an unclosed tag; another action tag nested inside the block (e.g.
 * `<search> <answer> x </answer> </search>`); a mismatched closing tag; an empty query or answer.
 * Tags are case-sensitive and must be written exactly (`<search>`, not `< search >`), as in Search-R1.
 * Never throws.
 */
export function parseSearchR1Action(text: string): Action {
  const body = stripThink(text);
  const hits: TagHit[] = [];
  for (const m of body.matchAll(TAG_RE)) {
    const start = m.index ?? 0;
    hits.push({ tag: m[2] as ActionTag, closing: m[1] === "/", start, end: start + m[0].length });
  }
  const openIdx = hits.findIndex((h) => !h.closing);
  if (openIdx < 0) {
    return {
      type: "invalid",
      reason: "no action: expected <search> query </search> or <answer> answer </answer>",
    };
  }
  const open = hits[openIdx];
  const next = hits[openIdx + 1];
  if (next === undefined) {
    return { type: "invalid", reason: `unclosed <${open.tag}>: no </${open.tag}> follows` };
  }
  if (!next.closing) {
    return { type: "invalid", reason: `nested action: <${next.tag}> inside <${open.tag}> (unclosed <${open.tag}>)` };
  }
  if (next.tag !== open.tag) {
    return { type: "invalid", reason: `mismatched tags: <${open.tag}> closed by </${next.tag}>` };
  }
  const content = squash(body.slice(open.end, next.start));
  if (open.tag === "search") {
    if (content === "") return { type: "invalid", reason: "empty query in <search></search>" };
    return searchAction(content);
  }
  if (content === "") return { type: "invalid", reason: "empty answer in <answer></answer>" };
  return { type: "answer", answer: content };
}
