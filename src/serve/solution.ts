/**
 * Rebuilds a `Trajectory` from the decoded text of a whole episode, so rewards can be computed outside our rollout
 * loop (veRL's `compute_score(data_source, solution_str, ground_truth, extra_info)` sees only text).
 *
 * Two transcript styles are read, in any mix:
 * - Search-R1 (PeterGriffinJin/Search-R1 `search_r1/llm_agent/generation.py`): `<search> q </search>` actions,
 *   `<information>Doc 1(Title: …) …</information>` observations, `<answer> a </answer>`;
 * - veRL multi-turn tool calling (volcengine/verl `verl/tools/search_tool.py`, hermes tool format):
 *   `<tool_call>{"name": "search", "arguments": {"query_list": [...]}}</tool_call>` actions and
 *   `<tool_response>{"result": "Doc 1 (Title: …)\n…"}</tool_response>` observations (veRL
 *   `search_r1_like_utils.py` `_passages2string`), with the chat roles `user` / `assistant` left as plain words by
 *   `decode(skip_special_tokens=True)`.
 */
import type { Action, Passage, Task, Trajectory, Turn } from "../core/types.ts";
import { INVALID_ACTION_OBSERVATION, parseSearchR1Action, stripThink } from "../env/searchR1.ts";

/** The marker before the response in Search-R1's full-sequence strings (`qa_em_format.py` `is_valid_sequence`). */
export const ASSISTANT_MARKER = "<|im_start|>assistant";

/** A tag block found in the text: its tag, inner content and [start, end) span. */
interface Block {
  /** `corrective`: the env's corrective observation after an invalid turn (`INVALID_ACTION_OBSERVATION`). */
  tag: "search" | "answer" | "tool_call" | "information" | "tool_response" | "corrective";
  content: string;
  start: number;
  end: number;
}

const BLOCK_RE = /<(search|answer|tool_call|information|tool_response)>([\s\S]*?)<\/\1>/g;
const ACTION_TAGS = new Set(["search", "answer", "tool_call"]);
/**
 * The env's corrective observation, trimmed. It quotes the action tags (`<search> and </search>`, `<answer> and
 * </answer>`), so it must be found before the blocks: read as text, it would be a search and an answer "and".
 */
const CORRECTIVE = INVALID_ACTION_OBSERVATION.trim();

/** Whitespace collapsed to one space and trimmed (as the env's action parser does to queries and answers). */
function squash(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

/** Number of whitespace-separated words: the token count used here (no tokenizer is known for veRL's model). */
export function countWords(s: string): number {
  return s.match(/\S+/g)?.length ?? 0;
}

/**
 * The response part of a solution string: the text after the first `<|im_start|>assistant` when present (Search-R1
 * passes prompt + response), else the whole string (veRL's reward managers decode only the response tokens).
 */
export function responseText(solution: string): string {
  const i = solution.indexOf(ASSISTANT_MARKER);
  return i < 0 ? solution : solution.slice(i + ASSISTANT_MARKER.length);
}

/**
 * Passages listed in a retrieval observation, in rank order. Reads both `Doc 1(Title: t) text` (Search-R1
 * `_passages2string`, ours in src/env/searchR1.ts) and `Doc 1 (Title: "t")\ntext` (veRL `_passages2string`; a
 * `---` line separates the results of several queries). A veRL tool response is JSON `{"result": "…"}` and is
 * unwrapped first. Titles lose surrounding double quotes and a `, source : s` suffix (kept as `source`). Ids are
 * `title` until `resolve` maps a passage back to its corpus entry. Text without `Doc n` headers gives [].
 */
export function parsePassages(observation: string): Passage[] {
  let body = observation;
  const trimmed = body.trim();
  if (trimmed.startsWith("{")) {
    try {
      const parsed = JSON.parse(trimmed) as unknown;
      if (parsed && typeof parsed === "object" && typeof (parsed as { result?: unknown }).result === "string") {
        body = (parsed as { result: string }).result;
      }
    } catch {
      // not JSON: read the text as it is
    }
  }
  const header = /Doc \d+ ?\(Title: ([^\n]*?)\)[ \n]/g;
  const heads = [...body.matchAll(header)];
  return heads.map((m, i) => {
    const start = (m.index ?? 0) + m[0].length;
    const end = i + 1 < heads.length ? heads[i + 1].index ?? body.length : body.length;
    let title = m[1].trim();
    let source: string | undefined;
    const src = / , source : (.*)$/.exec(title);
    if (src) {
      source = src[1].trim();
      title = title.slice(0, src.index).trim();
    }
    if (title.length >= 2 && title.startsWith('"') && title.endsWith('"')) title = title.slice(1, -1);
    const text = body.slice(start, end).replace(/\n-{3}\n?\s*$/, "").trim();
    const p: Passage = { id: title, title, text };
    if (source !== undefined) p.source = source;
    return p;
  });
}

/**
 * The action of a `<tool_call>` block: `{"name": "search", "arguments": {"query_list": [...]} | {"query": "…"}}`
 * (veRL's search tool schema, or ours) is a search whose query is the queries joined by `; `; anything else is an
 * invalid action naming what was wrong. Never throws.
 */
export function toolCallAction(content: string): Action & { tool?: string } {
  let call: unknown;
  try {
    call = JSON.parse(content.trim());
  } catch (e) {
    return { type: "invalid", reason: `tool_call is not JSON (${(e as Error).message})` };
  }
  if (!call || typeof call !== "object") return { type: "invalid", reason: "tool_call: expected a JSON object {name, arguments}" };
  const { name, arguments: args } = call as { name?: unknown; arguments?: unknown };
  if (typeof name !== "string") return { type: "invalid", reason: "tool_call: missing field \"name\"" };
  if (name !== "search") return { type: "invalid", reason: `tool_call: unknown tool "${name}" (allowed: search)`, tool: name };
  const a = (args && typeof args === "object" ? args : {}) as { query_list?: unknown; query?: unknown };
  const queries = Array.isArray(a.query_list) ? a.query_list.filter((q): q is string => typeof q === "string") : typeof a.query === "string" ? [a.query] : [];
  const query = squash(queries.join("; "));
  if (query === "") return { type: "invalid", reason: "tool_call search: arguments.query_list (or query) is missing or empty", tool: name };
  return { type: "search", query, tool: name };
}

/** Options of `trajectoryFromText`. */
export interface FromTextOptions {
  /**
   * Maps a parsed passage back to its corpus entry (to recover `id`, `fact`, `source`, `reliability`); return
   * undefined when unknown. Default: passages keep `id = title`.
   */
  resolve?: (p: Passage) => Passage | undefined;
}

/**
 * Builds a trajectory from a solution string (see the module doc for the formats read).
 *
 * Rules:
 * - the response is `responseText(solution)`; complete `<think>…</think>` blocks never count as actions, and one
 *   inside a query, answer or tool call is dropped from it (as the env's parser does);
 * - the env's corrective observation (`INVALID_ACTION_OBSERVATION`, which quotes the action tags) is never read as
 *   actions: it ends an invalid turn (the text since the previous turn, its reason from `parseSearchR1Action`), or is
 *   the observation of the turn right before it (an empty query or answer), and no block spans it;
 * - each `<search>`, `<tool_call>` or `<answer>` block ends a turn; the turn's `actionText` runs from the end of the
 *   previous turn to the end of the block; a search's observation is the next `<information>` / `<tool_response>`
 *   block before the next action (its `observation` spans from the action's end to that block's end, plus trailing
 *   whitespace and a bare `assistant` role line);
 * - turns stop at the LAST non-empty `<answer>` block, whose trimmed content is the answer (veRL
 *   `search_r1_like_qa_em.py` `extract_solution` takes the last match); earlier answer blocks are answer turns too;
 *   an empty one is an invalid turn, as in the env (whose episode goes on after it);
 * - without any answer, non-blank text after the last action becomes a final invalid turn, and the trajectory is
 *   marked `truncated` (it ended without an answer: length or turn budget);
 * - `searches` counts search turns (one per `<search>` or search tool call, whatever the number of queries);
 *   `invalidActions` counts tool calls that are not valid searches and the trailing invalid turn;
 * - token counts are whitespace word counts (`countWords`); `tokens`/`lossMask`/`logprobs` are `[seq]` arrays of
 *   that length with token ids and logprobs 0 (unknown here), the mask 1 on action words.
 * Never throws on any string.
 */
export function trajectoryFromText(task: Task, solution: string, options: FromTextOptions = {}): Trajectory {
  const text = responseText(solution);
  // Mask think blocks (same length, so indices stay valid) so tags inside them never count.
  const masked = stripThink(text, true);
  // Corrective observations split the text: no block spans one, and the tags they quote never count.
  const blocks: Block[] = [];
  for (let from = 0; ; ) {
    const at = masked.indexOf(CORRECTIVE, from);
    for (const m of masked.slice(from, at < 0 ? masked.length : at).matchAll(BLOCK_RE)) {
      const start = from + (m.index ?? 0);
      blocks.push({
        tag: m[1] as Block["tag"],
        // An action's content is read from the masked text: a think block inside a query or answer is reasoning,
        // as the env's parser treats it (`<answer> x <think>…</think> </answer>` answers "x"). Observations stay verbatim.
        content: (ACTION_TAGS.has(m[1]) ? masked : text).slice(start + m[1].length + 2, start + m[0].length - m[1].length - 3),
        start,
        end: start + m[0].length,
      });
    }
    if (at < 0) break;
    blocks.push({ tag: "corrective", content: "", start: at, end: at + CORRECTIVE.length });
    from = at + CORRECTIVE.length;
  }
  /** Index just after an observation ending at `end`: trailing whitespace and a bare `assistant` role line. */
  const afterObservation = (end: number): number => end + (/^\s*(?:assistant[ \t]*\n)?/.exec(text.slice(end))?.[0].length ?? 0);
  // An empty answer block is an invalid turn (the env corrects it and the episode goes on), never the final answer.
  const lastAnswer = blocks.map((b) => b.tag === "answer" && squash(b.content) !== "").lastIndexOf(true);
  const turns: Turn[] = [];
  let cursor = 0;
  let searches = 0;
  let invalid = 0;
  let answer: string | null = null;
  const resolve = options.resolve ?? (() => undefined);

  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    if (lastAnswer >= 0 && i > lastAnswer) break;
    if (b.tag === "corrective") {
      // An invalid turn the env corrected: the text since the last turn (its reason as the env's parser gives it).
      const start = Math.max(cursor, text[b.start - 1] === "\n" ? b.start - 1 : b.start);
      const end = afterObservation(b.end);
      const actionText = text.slice(cursor, start);
      const parsed = parseSearchR1Action(actionText);
      const observation = text.slice(start, end);
      invalid++;
      turns.push({
        actionText,
        action: parsed.type === "invalid" ? parsed : { type: "invalid", reason: "invalid action: the environment answered with its corrective observation" },
        observation,
        sampledTokens: countWords(actionText),
        observationTokens: countWords(observation),
        stopReason: "stop",
      });
      cursor = end;
      continue;
    }
    if (!ACTION_TAGS.has(b.tag)) continue;
    const isLastAnswer = i === lastAnswer;
    const actionText = text.slice(cursor, b.end);
    cursor = b.end;
    let action: Action;
    let tool: string | undefined;
    if (b.tag === "answer") {
      const a = squash(b.content);
      if (a !== "") answer = a;
      action = a === "" ? { type: "invalid", reason: "empty answer in <answer></answer>" } : { type: "answer", answer: a };
    } else if (b.tag === "search") {
      const q = squash(b.content);
      action = q === "" ? { type: "invalid", reason: "empty query in <search></search>" } : { type: "search", query: q };
      tool = "search";
    } else {
      const a = toolCallAction(b.content);
      tool = a.tool;
      action = a.type === "search" ? { type: "search", query: a.query } : { type: "invalid", reason: a.type === "invalid" ? a.reason : "tool_call: not a search" };
    }
    if (action.type === "search") searches++;
    if (action.type === "invalid") invalid++;
    let observation = "";
    let passages: Passage[] | undefined;
    const next = blocks[i + 1];
    if (b.tag !== "answer" && next !== undefined && (next.tag === "information" || next.tag === "tool_response")) {
      const end = afterObservation(next.end);
      observation = text.slice(b.end, end);
      cursor = end;
      if (action.type === "search") passages = parsePassages(next.content).map((p) => resolve(p) ?? p);
    } else if (next?.tag === "corrective" && text.slice(b.end, next.start).trim() === "") {
      // The env corrected this very turn (an empty query or answer): its corrective observation is this turn's.
      const end = afterObservation(next.end);
      observation = text.slice(b.end, end);
      cursor = end;
      i++;
    }
    const turn: Turn = {
      actionText,
      action,
      observation,
      sampledTokens: countWords(actionText),
      observationTokens: countWords(observation),
      stopReason: "stop",
    };
    if (passages !== undefined) turn.passages = passages;
    if (tool !== undefined) turn.tool = tool;
    turns.push(turn);
    if (isLastAnswer) break;
  }
  if (lastAnswer < 0) {
    const rest = text.slice(cursor);
    if (rest.trim() !== "" || turns.length === 0) {
      invalid++;
      turns.push({
        actionText: rest,
        action: { type: "invalid", reason: "no action: expected <search> query </search>, a search <tool_call> or <answer> answer </answer>" },
        observation: "",
        sampledTokens: countWords(rest),
        observationTokens: 0,
        stopReason: "length",
      });
    }
  }
  const tokens: number[] = [];
  const lossMask: number[] = [];
  for (const t of turns) {
    for (let k = 0; k < t.sampledTokens; k++) lossMask.push(1);
    for (let k = 0; k < t.observationTokens; k++) lossMask.push(0);
  }
  for (let k = 0; k < lossMask.length; k++) tokens.push(0);
  const finalAnswer = answer === null ? null : squash(answer);
  return {
    task,
    tokens,
    lossMask,
    logprobs: tokens.slice(),
    promptLength: 0,
    turns,
    answer: finalAnswer,
    searches,
    invalidActions: invalid,
    truncated: finalAnswer === null,
  };
}
