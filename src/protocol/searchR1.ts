/**
 * The Search-R1 text protocol, whole: the action parser, the exact strings the environment appends to the context,
 * the protocol's tags, and the `Protocol` over them — `<search> query </search>` → `<information>…</information>` →
 * … → `<answer> answer </answer>`. A search is the call `{name: "search", arguments: {query}}`.
 * Source: PeterGriffinJin/Search-R1 `search_r1/llm_agent/generation.py` (`postprocess_predictions`,
 * `execute_predictions`, `_passages2string`).
 */
import { searchAction, type Action, type Passage, type ToolCallResult } from "../core/types.ts";
import { unknownToolReason } from "./hermes.ts";
import { stripThink } from "./think.ts";
import type { ParseOptions, Protocol, ToolJsonSchema } from "./types.ts";

/** The Search-R1 protocol tags, each a single token. */
export const PROTOCOL_TAGS = [
  "<think>",
  "</think>",
  "<search>",
  "</search>",
  "<information>",
  "</information>",
  "<answer>",
  "</answer>",
] as const;

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

/** What `parseSearchR1Action` returns: an `Action`, or (before its migration) the legacy `{type: "search", query}`. */
type RawSearchR1Action = Action | { type: "search"; query: string };

/** The text of one result inside `<information>`: its content, prefixed `error: ` when the call failed (once). */
function resultText(r: ToolCallResult): string {
  if (r.ok) return r.content;
  return r.content.startsWith("error: ") ? r.content : `error: ${r.content}`;
}

/**
 * The Search-R1 protocol:
 * - `system(tools, instructions)`: `instructions` unchanged (the search env's own prompt text; tools are implied);
 * - `prompt(system, user)`: `system + user` (the search env's prompt is `prompt("", "question : X\n")` =
 *   `question : X\n`, as `searchPrompt`);
 * - `parse(text, options)`: `parseSearchR1Action` (first action tag wins; later text ignored, as in Search-R1), a
 *   search as the call `search({query})`; invalid `unknown tool search; …` when `options.tools` has no `search`.
 *   Search-R1 writes one call per turn, so `maxCallsPerTurn` never binds;
 * - `observation(results)`: `informationObservation(content)` = `\n\n<information>{content.trim()}</information>\n\n`,
 *   `close` = `INFORMATION_CLOSE`; a failed call shows `error: {content}` (not doubled when the content already
 *   starts with `error: `, as tool-env results do); several results are joined by `\n` in one block;
 * - `invalidObservation()`: Search-R1's `INVALID_ACTION_OBSERVATION` (the reason is not shown, as in Search-R1);
 * - `format`: a search → `<search> {query} </search>`, an answer → `<answer> {answer} </answer>` (as the scripted
 *   search personas write them), an invalid action → its reason without action tags (parses as invalid). `parse`
 *   collapses whitespace, so a query/answer with runs of whitespace comes back collapsed;
 * - `stops`: `</search>`, `</answer>`; `specialTokens`: the eight `PROTOCOL_TAGS` of the word tokenizer.
 *
 * `format` throws (an Error naming the action) for a tool_call that is not exactly one `search` with a string
 * `query`: Search-R1 cannot write it, and the action comes from code (a scripted agent), not from a model.
 */
export const searchR1Protocol: Protocol = {
  name: "search-r1",
  system(_tools: readonly ToolJsonSchema[], instructions: string): string {
    return instructions;
  },
  prompt(system: string, user: string): string {
    return system + user;
  },
  parse(turnText: string, options: ParseOptions): Action {
    const raw = parseSearchR1Action(turnText) as RawSearchR1Action;
    const action: Action = raw.type === "search" ? { type: "tool_call", calls: [{ name: "search", arguments: { query: raw.query } }] } : raw;
    if (action.type === "tool_call") {
      for (const c of action.calls) {
        if (!options.tools.some((t) => t.name === c.name)) return { type: "invalid", reason: unknownToolReason(c.name, options.tools) };
      }
    }
    return action;
  },
  observation(results: readonly ToolCallResult[]): { text: string; close: string } {
    const content = results.length === 0 ? "error: no tool results" : results.map(resultText).join("\n");
    return { text: informationObservation(content), close: INFORMATION_CLOSE };
  },
  invalidObservation(_reason: string): string {
    return INVALID_ACTION_OBSERVATION;
  },
  format(action: Action): string {
    switch (action.type) {
      case "tool_call": {
        const c = action.calls[0];
        if (action.calls.length !== 1 || c.name !== "search" || typeof c.arguments.query !== "string") {
          throw new Error(`searchR1Protocol.format: Search-R1 writes one search({query}) per turn, got ${JSON.stringify(action.calls)}`);
        }
        return `<search> ${c.arguments.query} </search>`;
      }
      case "answer":
        return `<answer> ${action.answer} </answer>`;
      case "invalid": {
        let text = action.reason;
        for (let prev = ""; prev !== text; ) [prev, text] = [text, text.replace(/<\/?(search|answer)>/g, "")];
        return text;
      }
    }
  },
  stops: ["</search>", "</answer>"],
  specialTokens: [...PROTOCOL_TAGS],
};
