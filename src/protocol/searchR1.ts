/**
 * The Search-R1 protocol as a `Protocol`: `<search> query </search>` → `<information>…</information>` → … →
 * `<answer> answer </answer>`, with the exact parser and strings of `src/env/searchR1.ts` (which stays the single
 * source of them, byte-identical to today's search env). A search is the call `{name: "search", arguments: {query}}`.
 * Source: PeterGriffinJin/Search-R1 `search_r1/llm_agent/generation.py` (`postprocess_predictions`,
 * `execute_predictions`).
 */
import type { Action, ToolCallResult } from "../core/types.ts";
import {
  INFORMATION_CLOSE,
  INVALID_ACTION_OBSERVATION,
  informationObservation,
  parseSearchR1Action,
} from "../env/searchR1.ts";
import type { ToolJsonSchema } from "../env/tool.ts";
import { PROTOCOL_TAGS } from "../policy/tokenizer.ts";
import { unknownToolReason } from "./hermes.ts";
import type { ParseOptions, Protocol } from "./types.ts";

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
