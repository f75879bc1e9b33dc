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
 * Linear time: every tag is located once (`indexOf`), lookups are binary searches, no regex rescans the text, and
 * at most `MAX_TRANSCRIPT_TURNS` turns are read (a 1 M-character transcript of any tag soup parses in milliseconds;
 * the lazy block regex this replaced took ~15 s on a million characters of `<search>`).
 */
import { searchAction, searchQuery, type Action, type Passage, type Task, type Trajectory, type Turn } from "../core/types.ts";
import { INVALID_ACTION_OBSERVATION, parseSearchR1Action, stripThink } from "../env/searchR1.ts";

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
 * Most turns `trajectoryFromText` reads from one transcript. Search-R1 runs 2–5 turns and veRL multi-turn a few
 * more; past this bound the rest of the text is not read: it becomes one final invalid turn (`stopReason:
 * "length"`) and the trajectory is truncated, without an answer. Bounds the work (and the reward terms' work) of
 * one request whatever its tags.
 */
export const MAX_TRANSCRIPT_TURNS = 256;

type ActionTag = "search" | "answer" | "tool_call";
type ObsTag = "information" | "tool_response";
const ACTION_TAGS: readonly ActionTag[] = ["search", "answer", "tool_call"];
const OBS_TAGS: readonly ObsTag[] = ["information", "tool_response"];
/**
 * The env's corrective observation, trimmed. It quotes the action tags (`<search> and </search>`, `<answer> and
 * </answer>`), so it is looked for before the tags: read as text, it would be a search and an answer "and".
 */
const CORRECTIVE = INVALID_ACTION_OBSERVATION.trim();
const NO_ACTION_REASON = "no action: expected <search> query </search>, a search <tool_call> or <answer> answer </answer>";

/** Whitespace collapsed to one space and trimmed (as the env's action parser does to queries and answers). */
function squash(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}

/** True for the code units JS regex `\s` matches. */
function isSpace(c: number): boolean {
  if (c <= 32) return c === 32 || (c >= 9 && c <= 13);
  if (c < 0xa0) return false;
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/** Number of whitespace-separated words in `s.slice(from, to)` (one pass, no allocation). */
function wordsIn(s: string, from = 0, to = s.length): number {
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
function skipSpaces(text: string, i: number): number {
  SPACES.lastIndex = i;
  SPACES.exec(text);
  return SPACES.lastIndex;
}
const AFTER_OBSERVATION = /\s*(?:assistant[ \t]*\n)?/y;
/** Index just after an observation ending at `end`: trailing whitespace and a bare `assistant` role line. */
function afterObservation(text: string, end: number): number {
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
function envGap(text: string, from: number, open: number): boolean {
  ENV_GAP.lastIndex = from;
  ENV_GAP.exec(text);
  return ENV_GAP.lastIndex === open;
}
const ROLE_GAP = /\s*(?:user(?=\s)\s*)?/y;
/** Index after whitespace and a bare `user` role word (what separates a veRL tool call from its response). */
function skipRoleGap(text: string, i: number): number {
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

/** Passage headers: `Doc 1(Title: ` (Search-R1) or `Doc 1 (Title: ` (veRL), the number captured. */
const HEADER = /Doc (\d+) ?\(Title: /y;

/**
 * Passages listed in a retrieval observation, in rank order. Reads both `Doc 1(Title: t) text` (Search-R1
 * `_passages2string`, ours in src/env/searchR1.ts) and `Doc 1 (Title: "t")\ntext` (veRL `_passages2string`; a
 * `---` line separates the results of several queries). A veRL tool response is JSON `{"result": "…"}` and is
 * unwrapped first. Titles lose surrounding double quotes and a `, source : s` suffix (kept as `source`). Ids are
 * `title` until `resolve` maps a passage back to its corpus entry. Text without `Doc n` headers gives [].
 *
 * Headers are read as the formatters write them, so a passage that quotes one stays one passage: a header starts
 * the content or a line, and headers are numbered consecutively — `Doc 1`, then `Doc 2`, … (the numbering starts
 * again at `Doc 1` only on the line after a `---` separator line). A title runs to the first `)` followed by a space
 * or a newline on its line. `Doc 3(Title: x)` in the middle of a line, or out of sequence, is passage text.
 * Linear time. Never throws.
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
  // Accepted headers: [start of `Doc`, start of the passage text, raw title].
  const heads: [number, number, string][] = [];
  let expected = 1;
  let afterSeparator = false;
  for (let line = skipSpaces(body, 0); line < body.length; ) {
    const eol = body.indexOf("\n", line);
    const lineEnd = eol < 0 ? body.length : eol;
    HEADER.lastIndex = line;
    const m = HEADER.exec(body);
    const n = m ? m[1] : "";
    if (m && (n === String(expected) || (afterSeparator && n === "1"))) {
      const titleStart = HEADER.lastIndex;
      // The title ends at the first `)` followed by a space or a newline, on this line (searched in the line only).
      const rest = body.slice(titleStart, lineEnd);
      let close = rest.indexOf(")");
      while (close >= 0 && close + 1 < rest.length && rest[close + 1] !== " ") close = rest.indexOf(")", close + 1);
      if (close >= 0 && (close + 1 < rest.length || eol >= 0)) {
        heads.push([line, titleStart + close + 2, rest.slice(0, close)]);
        expected = Number(n) + 1;
      }
    }
    afterSeparator = body.slice(line, lineEnd).trim() === "---";
    if (eol < 0) break;
    line = eol + 1;
  }
  return heads.map(([, start, rawTitle], i) => {
    const end = i + 1 < heads.length ? heads[i + 1][0] : body.length;
    let title = rawTitle.trim();
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

/** Sorted start positions of the non-overlapping occurrences of one string, with binary-search lookups. */
class Hits {
  readonly at: number[] = [];
  constructor(text: string, needle: string) {
    for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + needle.length)) this.at.push(i);
  }

  /** Index in `at` of the first occurrence at or after `x` (`at.length` when none). */
  rank(x: number): number {
    let lo = 0;
    let hi = this.at.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.at[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The first occurrence at or after `x`, or -1. */
  next(x: number): number {
    const i = this.rank(x);
    return i < this.at.length ? this.at[i] : -1;
  }

  /** The last occurrence starting before `x`, or -1. */
  prev(x: number): number {
    const i = this.rank(x);
    return i > 0 ? this.at[i - 1] : -1;
  }
}

/** A tag occurrence. */
interface TagAt<T> {
  tag: T;
  at: number;
}

/** A search or tool-call block that an observation follows: where the env's next output begins. */
interface Boundary {
  /** Position of the block's opening tag. */
  open: number;
}

/** One observation block as read. */
interface ObsRead {
  /** End of the block: after its closing tag (or where an unclosed block stops). */
  end: number;
  /** The content the env certainly wrote (passages are read from it); null when that cannot be told. */
  certain: string | null;
  /** [from, to) of the text the reader cannot attribute to the env or the model, or null. */
  uncertain: [number, number] | null;
}

/** Every tag of a transcript located once, and the protocol's reading of them. */
class TagIndex {
  private readonly opens = new Map<string, Hits>();
  private readonly closes = new Map<string, Hits>();
  readonly corrective: Hits;
  private readonly boundaries: Boundary[] = [];

  constructor(readonly text: string) {
    for (const t of [...ACTION_TAGS, ...OBS_TAGS]) {
      this.opens.set(t, new Hits(text, `<${t}>`));
      this.closes.set(t, new Hits(text, `</${t}>`));
    }
    this.corrective = new Hits(text, CORRECTIVE);
    // A search or tool-call block (its nearest opening tag after the previous closing action tag) followed by an
    // observation: the env's next output starts after it, so no observation block reaches past its opening tag.
    for (const tag of ["search", "tool_call"] as const) {
      for (const p of this.close(tag).at) {
        if (this.observationAfter(p + tag.length + 3) === null) continue;
        const op = this.open(tag).prev(p);
        if (op >= 0 && op >= this.previousCloseEnd(p)) this.boundaries.push({ open: op });
      }
    }
    this.boundaries.sort((a, b) => a.open - b.open);
  }

  open(tag: ActionTag | ObsTag): Hits {
    return this.opens.get(tag) as Hits;
  }

  close(tag: ActionTag | ObsTag): Hits {
    return this.closes.get(tag) as Hits;
  }

  /** End of the last closing action tag that starts before `p` (0 when none). */
  previousCloseEnd(p: number): number {
    let end = 0;
    for (const t of ACTION_TAGS) {
      const q = this.close(t).prev(p);
      if (q >= 0) end = Math.max(end, q + t.length + 3);
    }
    return end;
  }

  /** The first closing action tag at or after `x`. */
  nextActionClose(x: number): TagAt<ActionTag> | null {
    let best: TagAt<ActionTag> | null = null;
    for (const tag of ACTION_TAGS) {
      const at = this.close(tag).next(x);
      if (at >= 0 && (best === null || at < best.at)) best = { tag, at };
    }
    return best;
  }

  /** The first observation opening tag at or after `x`. */
  nextObservationOpen(x: number): TagAt<ObsTag> | null {
    let best: TagAt<ObsTag> | null = null;
    for (const tag of OBS_TAGS) {
      const at = this.open(tag).next(x);
      if (at >= 0 && (best === null || at < best.at)) best = { tag, at };
    }
    return best;
  }

  /**
   * The observation that follows an action ending at `x`: the first observation opening tag after it, when no
   * closing action tag and no corrective observation comes first. Null when none does.
   */
  observationAfter(x: number): TagAt<ObsTag> | null {
    const o = this.nextObservationOpen(x);
    if (o === null) return null;
    const c = this.nextActionClose(x);
    if (c !== null && c.at < o.at) return null;
    const k = this.corrective.next(x);
    if (k >= 0 && k < o.at) return null;
    return o;
  }

  /** Opening tag of the first boundary at or after `x`, or -1. */
  nextBoundary(x: number): number {
    let lo = 0;
    let hi = this.boundaries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.boundaries[mid].open < x) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.boundaries.length ? this.boundaries[lo].open : -1;
  }

  /**
   * Reads the observation block whose opening tag is at `o` (the rules are `trajectoryFromText`'s): it ends at
   * the last closing tag of its kind before the next boundary (or the end of the text); a `<tool_response>` whose
   * body is one JSON value ends at the first closing tag after that value. Never throws.
   */
  readObservation(o: TagAt<ObsTag>): ObsRead {
    const text = this.text;
    const openEnd = o.at + o.tag.length + 2;
    const closeLen = o.tag.length + 3;
    const boundary = this.nextBoundary(openEnd);
    const limit = boundary < 0 ? text.length : boundary;
    const closes = this.close(o.tag);
    const first = closes.next(openEnd);
    if (first >= 0 && first < limit) {
      const last = closes.prev(limit);
      if (o.tag === "tool_response") {
        const close = jsonBodyClose(text, openEnd, last);
        if (close >= 0) return { end: close + closeLen, certain: text.slice(openEnd, close), uncertain: null };
      }
      return { end: last + closeLen, certain: text.slice(openEnd, first), uncertain: first === last ? null : [first + closeLen, last] };
    }
    // Unclosed (Search-R1 cuts an observation at `max_obs_length` tokens, its closing tag included): it runs to the
    // boundary or to the end of the text, an `<answer>` in it included (see `trajectoryFromText`).
    const end = boundary >= 0 ? boundary : text.length;
    return { end, certain: null, uncertain: [openEnd, end] };
  }

  /**
   * An observation block and the `<tool_response>` blocks that directly follow it (veRL puts the responses to
   * several calls of one turn in one user message).
   */
  readObservations(o: TagAt<ObsTag>): ObsRead[] {
    const reads = [this.readObservation(o)];
    if (o.tag !== "tool_response") return reads;
    for (;;) {
      const prev = reads[reads.length - 1];
      if (prev.certain === null) break;
      const g = skipRoleGap(this.text, prev.end);
      if (!this.text.startsWith("<tool_response>", g)) break;
      reads.push(this.readObservation({ tag: "tool_response", at: g }));
    }
    return reads;
  }
}

/**
 * Start of the `</tool_response>` that closes a JSON body: when the text after `from` is one JSON object or array
 * (then only whitespace) before a closing tag at or before `limit`, that tag; else -1. A closing tag quoted inside
 * a JSON string is skipped (veRL writes `json.dumps({"result": …})`, which leaves `<` and `/` as they are).
 * Linear in `limit - from`.
 */
function jsonBodyClose(text: string, from: number, limit: number): number {
  const start = skipSpaces(text, from);
  const first = text.charCodeAt(start);
  if (first !== 0x7b && first !== 0x5b) return -1; // { [
  let depth = 0;
  let inString = false;
  let escaped = false;
  let end = -1;
  for (let i = start; i < limit; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (escaped) escaped = false;
      else if (c === 0x5c) escaped = true;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) {
        end = i + 1;
        break;
      }
    }
  }
  if (end < 0) return -1;
  const close = skipSpaces(text, end);
  if (close > limit || !text.startsWith("</tool_response>", close)) return -1;
  try {
    JSON.parse(text.slice(start, end));
  } catch {
    return -1;
  }
  return close;
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
