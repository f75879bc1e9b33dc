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
 *
 * A solution string is a full prompt + response sequence (Search-R1's reward manager) or the response alone
 * (veRL's); `responseText` tells them apart by the string's shape, and drops a prompt only from the former.
 *
 * Observations are data, never actions: the text is read as the protocol delimits it — model turns cut at their
 * first closing action tag (`_postprocess_responses`; our rollout stops there too), each search followed by the
 * env's `\n\n<information>{content.strip()}</information>\n\n` (`execute_predictions`) — and tags or `Doc n(Title:`
 * headers inside an observation are never read as the model's (see `trajectoryFromText` for the rules).
 *
 * The reading is split by concern: `./transcriptText.ts` (the response part, word counts, the env's gaps),
 * `./transcriptTags.ts` (the tag index and observation blocks), `./passages.ts` (passage lists).
 *
 * Linear time: every tag is located once (`indexOf`), lookups are binary searches, no regex rescans the text, and
 * at most `MAX_TRANSCRIPT_TURNS` turns are read (a 1 M-character transcript of any tag soup parses in milliseconds;
 * the lazy block regex this replaced took ~15 s on a million characters of `<search>`).
 */
import { searchAction, searchQuery, type Action, type Passage, type Task, type Trajectory, type Turn } from "../core/types.ts";
import { parsePassages } from "./passages.ts";
import { parseSearchR1Action } from "./searchR1.ts";
import { stripThink } from "./think.ts";
import { TagIndex, type ActionTag, type ObsRead, type TagAt } from "./transcriptTags.ts";
import { afterObservation, CORRECTIVE, envGap, responseText, skipSpaces, squash, wordsIn } from "./transcriptText.ts";

/**
 * Most turns `trajectoryFromText` reads from one transcript. Search-R1 runs 2–5 turns and veRL multi-turn a few
 * more; past this bound the rest of the text is not read: it becomes one final invalid turn (`stopReason:
 * "length"`) and the trajectory is truncated, without an answer. Bounds the work (and the reward terms' work) of
 * one request whatever its tags.
 */
export const MAX_TRANSCRIPT_TURNS = 256;

const NO_ACTION_REASON = "no action: expected <search> query </search>, a search <tool_call> or <answer> answer </answer>";

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
  return { ...searchAction(query), tool: name };
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
 * Model turns (read only outside observation blocks):
 * - the response is `responseText(solution)`: the text after the first `<|im_start|>assistant` only in a full
 *   prompt + response sequence (the string starts with `<|im_start|>` and holds no env output before the marker),
 *   else the whole string, where the marker is text like any other; a turn ends at its first closing action tag (`</search>`,
 *   `</answer>`, `</tool_call>`: Search-R1 and our rollout cut generation there) and its action is the block that
 *   tag closes, opened after the previous closing action tag: by the nearest opening tag of its kind when an
 *   observation follows, else by the first one outside complete `<think>…</think>` blocks. A closing tag with no
 *   opening of its kind is stray: skipped, with the text before it. Think blocks count only inside one turn (never
 *   across a closing action tag or an observation); tags inside them never count, and one inside a query, answer or
 *   tool call is dropped from it (as the env's parser does). The turn's `actionText` runs from the end of the
 *   previous turn (or of the env's certain output: see the observations) to the end of the block, and on to its
 *   observation's opening tag when the text between is not the env's (whitespace and chat roles only);
 * - the env's corrective observation (`INVALID_ACTION_OBSERVATION`, which quotes the action tags) is never read as
 *   actions: it ends an invalid turn (the text since the previous turn, its reason from `parseSearchR1Action`), or
 *   is the observation of the turn right before it when only whitespace separates them (an empty query or answer);
 *
 * Observations (data, never actions — their tags and headers are never the model's):
 * - a search or tool-call block is followed by an observation when the first `<information>` / `<tool_response>`
 *   opening tag after it comes before any closing action tag and corrective observation; the turn's `observation`
 *   spans from the action's end (from the opening tag when the model wrote text before it: veRL's generation runs to
 *   EOS, not to `</tool_call>`) to the observation's end plus trailing whitespace and a bare `assistant` role line,
 *   with the `<tool_response>` blocks right after it (whitespace or a bare `user` line between: several calls);
 * - an observation ends at the LAST closing tag of its kind before the next boundary — the opening tag of the next
 *   search or tool-call block that an observation follows, where the env's next output begins — or before the end
 *   of the text. A closing tag forged inside a passage (`</information> <answer> dublin </answer>`) thus stays
 *   inside it. A `<tool_response>` whose body is one JSON object (veRL writes `json.dumps({"result": …})`) ends at
 *   the first closing tag after that value: one quoted inside the JSON string is skipped. An observation with no
 *   closing tag before the boundary (Search-R1 cuts an observation at `max_obs_length` tokens, closing tag included)
 *   ends at the boundary, or at the end of the text: an `<answer>` after the cut is never final. A passage's answer
 *   that the cut left at the end of the text and the model's own answer written after the cut are byte-identical;
 *   read as no answer, the model gets what it could always get by stopping after the observation, while read as
 *   the answer, a passage would answer for it. The cost falls on honest episodes that answer right after a cut
 *   observation (Search-R1 prints "OBSERVATION TOO LONG, CONSIDER CHANGING YOUR CONFIG" when it cuts: a
 *   misconfigured run);
 * - the text between an observation's first and last closing tags is either passage text (a passage quoting the
 *   tag) or the model's (a closing tag it wrote itself), and is read so that the model can only lose by it:
 *   passages are read only before the first closing tag (the model cannot add any); everything after the first
 *   closing tag, the last closing tag included, is read as the model's next turn, as if every later closing tag were
 *   its own — it starts the next turn's `actionText`, so its `<cite>` blocks count (`citations`, hence
 *   `fabricated_citation`), its words are generated tokens (`sampledTokens`, the dearer) and it stays in the text
 *   `format_sm` checks — yet no tag in it is an action (the next action opens after the observation's end: its
 *   answers are never the model's, its searches never counted); a corrective observation in it is an invalid turn
 *   (one the model may have hidden), with the text before it as that turn's `actionText`; and if it ends the
 *   transcript without an answer a final invalid turn is recorded. All it can hide is an answer of the model's own
 *   (read as none: the model loses it) or a search the env did not answer (a search followed by an observation is a
 *   boundary, so never inside). An unclosed observation is read the same way, all of its content uncertain, without
 *   passages;
 * - an observation opening tag that follows no action (the model's own `<information>`, or a response to a call
 *   not read) is skipped the same way: data, no passages;
 * - passages are `parsePassages` of the certain content (headers at line starts, numbered consecutively), mapped
 *   back to the corpus by `options.resolve`, for searches only;
 *
 * The answer and the counts:
 * - the final answer is the LAST non-empty `<answer>` block after which the env wrote nothing (no observation, no
 *   corrective): the episode ends at an answer, so one the env answered was not the last turn (veRL
 *   `search_r1_like_qa_em.py` `extract_solution` takes the last match anywhere, passages included); turns after it
 *   are dropped. Other answer blocks are answer turns too; an empty one is an invalid turn, as in the env;
 * - without a final answer, non-blank text after the last turn becomes a final invalid turn (`stopReason:
 *   "length"`), and the trajectory is marked `truncated` (it ended without an answer: length or turn budget);
 * - at most `MAX_TRANSCRIPT_TURNS` turns are read: the rest of a longer transcript is one final invalid turn, and
 *   the trajectory is truncated without an answer;
 * - `searches` counts search turns (one per `<search>` or search tool call, whatever the number of queries);
 *   `invalidActions` counts invalid turns (tool calls that are not valid searches, corrected turns, the trailing one);
 * - token counts are whitespace word counts (`countWords`); `tokens`/`lossMask`/`logprobs` are `[seq]` arrays of
 *   that length with token ids and logprobs 0 (unknown here), the mask 1 on action words.
 *
 * Residual ambiguity (the text alone cannot settle it): a passage that holds a whole forged turn boundary —
 * `</information>`, a search block, `<information>` — is byte-identical to a transcript with one more search, and is
 * read as one (its answer can never be final); a passage with a newline followed by the next header in sequence
 * (`\nDoc 3(Title: x)` inside Doc 2) is split there; in veRL text decoded with `skip_special_tokens=True` the model
 * can write a whole `<tool_response>` itself (the role markers that tell them apart are gone); a response-only
 * string that the model opens with a chat header of its own (`<|im_start|>user …<|im_start|>assistant`) before any
 * env output reads as a full sequence, which drops the model's text before its marker (at most the start of its
 * first turn: see `responseText`).
 * Linear time in the length of the solution. Never throws on any string.
 */
export function trajectoryFromText(task: Task, solution: string, options: FromTextOptions = {}): Trajectory {
  const text = responseText(solution);
  const ix = new TagIndex(text);
  const resolve = options.resolve ?? (() => undefined);
  const turns: Turn[] = [];
  /** Every turn before this index was followed by env output: none of their answers ended the episode. */
  let firstFinal = 0;
  /** Start of the text not yet in a turn. */
  let c = 0;
  /** Where the next action block may open (past stray closing tags and skipped observation blocks). */
  let s = 0;
  /** The last observation read held text it could not attribute, and no turn has been read since. */
  let hiddenTail = false;
  /** More turns than `MAX_TRANSCRIPT_TURNS`: the rest is not read. */
  let capped = false;
  /** Corrective observations inside an observation were left unread at the bound. */
  let unread = false;

  const push = (t: Turn, envAnswered: boolean): void => {
    turns.push(t);
    if (envAnswered) firstFinal = turns.length;
    hiddenTail = false;
  };
  const newTurn = (actionText: string, action: Action, observation = ""): Turn => ({
    actionText,
    action,
    observation,
    sampledTokens: wordsIn(actionText),
    observationTokens: wordsIn(observation),
    stopReason: "stop",
  });
  /** An invalid turn the env answered with its corrective observation. */
  const corrected = (actionText: string, observation: string): Turn => {
    const parsed = parseSearchR1Action(actionText);
    return newTurn(actionText, parsed.type === "invalid" ? parsed : { type: "invalid", reason: "invalid action: the environment answered with its corrective observation" }, observation);
  };
  /**
   * Records observation blocks `reads` (starting at or after `from`) as `owner`'s observation, or, when no action
   * asked for them (`owner` null), as model text skipped over. The text from the first uncertain position on (after
   * the first closing tag; all the content of an unclosed block) is read as the model's, as if every later closing
   * tag were its own: it starts the next turn's `actionText` (its citations count, its words are generated tokens),
   * yet no tag in it is an action (the next action opens at the blocks' end). Each corrective observation in it
   * becomes an invalid turn, whose action text is the uncertain text before it; its words count as generated too.
   */
  const record = (owner: Turn | null, from: number, reads: readonly ObsRead[]): void => {
    const end = afterObservation(text, reads[reads.length - 1].end);
    const ranges = reads.flatMap((r) => (r.uncertain === null ? [] : [r.uncertain]));
    /** Where the model's side begins: all of a skipped block; else the first uncertain position, or the end. */
    const modelFrom = owner === null ? c : ranges.length > 0 ? ranges[0][0] : end;
    if (owner !== null) {
      owner.observation = text.slice(from, modelFrom);
      owner.observationTokens = wordsIn(owner.observation);
    }
    let at = modelFrom;
    let pushed = false;
    for (const [lo, hi] of ranges) {
      for (let k = ix.corrective.next(lo); k >= 0 && k + CORRECTIVE.length <= hi; k = ix.corrective.next(k + CORRECTIVE.length)) {
        if (turns.length >= MAX_TRANSCRIPT_TURNS) {
          unread = true;
          break;
        }
        const start = Math.max(at, text[k - 1] === "\n" ? k - 1 : k);
        const stop = Math.max(start, Math.min(end, afterObservation(text, k + CORRECTIVE.length)));
        const t = corrected(text.slice(at, start), text.slice(start, stop));
        t.sampledTokens += t.observationTokens;
        t.observationTokens = 0;
        push(t, true);
        pushed = true;
        at = stop;
      }
    }
    if (owner !== null || pushed) c = at;
    s = end;
    firstFinal = turns.length;
    hiddenTail = ranges.length > 0;
  };

  for (;;) {
    if (unread || turns.length >= MAX_TRANSCRIPT_TURNS) {
      capped = true;
      break;
    }
    const k = ix.corrective.next(s);
    const close = ix.nextActionClose(s);
    const obs = ix.nextObservationOpen(s);
    const kAt = k < 0 ? Infinity : k;
    const closeAt = close === null ? Infinity : close.at;
    const obsAt = obs === null ? Infinity : obs.at;
    if (kAt === Infinity && closeAt === Infinity && obsAt === Infinity) break;
    if (kAt <= closeAt && kAt <= obsAt) {
      // The env corrected the text since the last turn: an invalid turn.
      const start = Math.max(c, text[k - 1] === "\n" ? k - 1 : k);
      const end = afterObservation(text, k + CORRECTIVE.length);
      push(corrected(text.slice(c, start), text.slice(start, end)), true);
      c = s = end;
      continue;
    }
    if (obs !== null && obsAt < closeAt) {
      // An observation no action asked for: data, skipped.
      record(null, obsAt, ix.readObservations(obs));
      continue;
    }
    const cl = close as TagAt<ActionTag>;
    const openTag = `<${cl.tag}>`;
    const closeEnd = cl.at + cl.tag.length + 3;
    const follows = cl.tag === "answer" ? null : ix.observationAfter(closeEnd);
    let open = -1;
    let content = "";
    if (follows !== null) {
      const op = ix.open(cl.tag).prev(cl.at);
      if (op >= s) {
        open = op;
        content = stripThink(text.slice(op + openTag.length, cl.at));
      }
    } else {
      const region = stripThink(text.slice(s, cl.at), true);
      const rel = region.indexOf(openTag);
      if (rel >= 0) {
        open = s + rel;
        content = region.slice(rel + openTag.length);
      }
    }
    if (open < 0) {
      s = closeEnd; // a stray closing tag
      continue;
    }
    let action: Action;
    let tool: string | undefined;
    if (cl.tag === "answer") {
      const a = squash(content);
      action = a === "" ? { type: "invalid", reason: "empty answer in <answer></answer>" } : { type: "answer", answer: a };
    } else if (cl.tag === "search") {
      const q = squash(content);
      action = q === "" ? { type: "invalid", reason: "empty query in <search></search>" } : searchAction(q);
      tool = "search";
    } else {
      const a = toolCallAction(content);
      tool = a.tool;
      const q = searchQuery(a);
      action = q !== undefined ? searchAction(q) : { type: "invalid", reason: a.type === "invalid" ? a.reason : "tool_call: not a search" };
    }
    // The turn's text runs to the end of its block, and on to the observation's opening tag when the text between
    // is not the env's (`envGap`): the model wrote it (its citations count, its words are generated tokens).
    const obsFrom = follows === null || envGap(text, closeEnd, follows.at) ? closeEnd : follows.at;
    const turn = newTurn(text.slice(c, obsFrom), action);
    if (tool !== undefined) turn.tool = tool;
    push(turn, false);
    c = s = closeEnd;
    if (follows !== null) {
      const reads = ix.readObservations(follows);
      if (searchQuery(action) !== undefined) turn.passages = reads.flatMap((r) => (r.certain === null ? [] : parsePassages(r.certain))).map((p) => resolve(p) ?? p);
      record(turn, obsFrom, reads);
    } else {
      const k2 = ix.corrective.next(closeEnd);
      if (k2 >= 0 && skipSpaces(text, closeEnd) === k2) {
        // The env corrected this very turn (an empty query or answer): its corrective observation is this turn's.
        const end = afterObservation(text, k2 + CORRECTIVE.length);
        turn.observation = text.slice(closeEnd, end);
        turn.observationTokens = wordsIn(turn.observation);
        c = s = end;
        firstFinal = turns.length;
      }
    }
  }

  // At the bound with only whitespace left, nothing was left unread.
  if (capped && !unread && skipSpaces(text, c) === text.length) capped = false;
  let final = -1;
  if (!capped) {
    for (let i = turns.length - 1; i >= firstFinal; i--) {
      if (turns[i].action.type === "answer") {
        final = i;
        break;
      }
    }
  }
  if (final >= 0) {
    turns.length = final + 1;
  } else {
    const rest = text.slice(c);
    if (capped || rest.trim() !== "" || turns.length === 0 || hiddenTail) {
      turns.push({
        actionText: rest,
        action: {
          type: "invalid",
          reason: capped ? `no action read: the transcript has more than ${MAX_TRANSCRIPT_TURNS} turns (MAX_TRANSCRIPT_TURNS); the rest is not read` : NO_ACTION_REASON,
        },
        observation: "",
        sampledTokens: wordsIn(rest),
        observationTokens: 0,
        stopReason: "length",
      });
    }
  }
  const finalAction = final >= 0 ? turns[final].action : null;
  const answer = finalAction !== null && finalAction.type === "answer" ? finalAction.answer : null;
  let total = 0;
  for (const t of turns) total += t.sampledTokens + t.observationTokens;
  const lossMask = new Array<number>(total);
  let at = 0;
  for (const t of turns) {
    for (let n = 0; n < t.sampledTokens; n++) lossMask[at++] = 1;
    for (let n = 0; n < t.observationTokens; n++) lossMask[at++] = 0;
  }
  const tokens = new Array<number>(total).fill(0);
  return {
    task,
    tokens,
    lossMask,
    logprobs: tokens.slice(),
    promptLength: 0,
    turns,
    answer,
    searches: turns.filter((t) => searchQuery(t.action) !== undefined).length,
    toolCalls: turns.some((t) => searchQuery(t.action) !== undefined) ? { search: turns.filter((t) => searchQuery(t.action) !== undefined).length } : {},
    invalidActions: turns.filter((t) => t.action.type === "invalid").length,
    truncated: answer === null,
  };
}
