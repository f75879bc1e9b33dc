/**
 * `arl train --agent` runs as `arl view` shows them (read by src/view/sourceReader.ts): a samples line of
 * `writeAgentSamples` (src/train/agentExperiment.ts: calls and token segments instead of turns) as an episode, and an
 * evaluation's `rollouts.jsonl` lines (status and reward, no transcript) as episodes.
 */
import { fitTo, num, str } from "./fields.ts";
import type { ViewAgentInfo, ViewEpisode, ViewTokens, ViewTurn } from "./types.ts";

/** A line of `writeAgentSamples` (src/train/agentExperiment.ts): calls and segments instead of turns and tokens. */
export const isAgentLine = (r: Record<string, unknown>): boolean => Array.isArray(r.segments) && Array.isArray(r.calls);

/**
 * Token texts → one text and where each token starts in it. `spaced` (a WordPiece decoder, the embedded
 * `WordTokenizer`): single spaces between tokens, none next to a `\n` token and none before a `##` continuation (as
 * `WordTokenizer.decode`, src/policy/tokenizer.ts); otherwise the texts are concatenated (a byte-level BPE's
 * `decode([id])` keeps its spaces). Undefined `spaced`: guessed — spaced when no token text has a space at either end.
 * @returns `text`, and `starts[i]`/`ends[i]` the character range of token i (`[seq]`)
 */
export function joinTokenTexts(texts: readonly string[], spaced?: boolean): { text: string; starts: number[]; ends: number[] } {
  const sp = spaced ?? !texts.some((t) => /^\s+\S|\S\s+$/.test(t) || t === " ");
  let text = "";
  const starts: number[] = [];
  const ends: number[] = [];
  let prev: string | undefined;
  for (const raw of texts) {
    let t = raw;
    if (sp && t.startsWith("##")) t = t.slice(2);
    else if (sp && prev !== undefined && prev !== "" && t !== "" && !/^\s+$/.test(prev) && !/^\s+$/.test(t)) text += " ";
    starts.push(text.length);
    text += t;
    ends.push(text.length);
    if (t !== "") prev = t;
  }
  return { text, starts, ends };
}

/** ChatML blocks (`<|im_start|>role\n…<|im_end|>`, the Hermes / Qwen template the gateway renders) of a text. */
function chatBlocks(text: string): { role: string; content: string }[] {
  const out: { role: string; content: string }[] = [];
  for (const m of text.matchAll(/<\|im_start\|>[ \t]*([^\s<]*)[ \t]*\n?([\s\S]*?)(?:<\|im_end\|>|$)/g)) out.push({ role: m[1], content: m[2].trim() });
  return out;
}

/**
 * The `<tool_response> … </tool_response>` blocks of a text, in order: `[start, end)` of the whole block and its
 * content without surrounding whitespace — what `/<tool_response>\s*([\s\S]*?)\s*<\/tool_response>/g` matches, in one
 * pass. The regex took O(n²) on a transcript of unclosed opens (3.2 s on 300 KB) and worse on a whitespace run after
 * one (issue 29: a viewer read must not stall on what a model wrote); here each character is looked at a bounded
 * number of times. `String.prototype.trim` strips the same characters as `\s`.
 */
export function toolResponseBlocks(text: string): { start: number; end: number; content: string }[] {
  const OPEN = "<tool_response>";
  const CLOSE = "</tool_response>";
  const out: { start: number; end: number; content: string }[] = [];
  for (let from = 0; ; ) {
    const start = text.indexOf(OPEN, from);
    if (start < 0) break;
    const close = text.indexOf(CLOSE, start + OPEN.length);
    if (close < 0) break; // no later open can close either
    out.push({ start, end: close + CLOSE.length, content: text.slice(start + OPEN.length, close).trim() });
    from = close + CLOSE.length;
  }
  return out;
}

/** Where an `--agent` samples line stands in its file, and how its tokens read (`agentEpisode`). */
export interface AgentEpisodePlace {
  /** Line index in the samples file. */
  index: number;
  task: string;
  /** Group index (consecutive lines of one task) and the line's place in it. */
  group: number;
  member: number;
  /** The tokenizer's decoder joins tokens by spaces (WordPiece); undefined = not known. */
  spaced: boolean | undefined;
  /** Filled with the token texts the line carries (id → text). */
  vocab: Record<string, string>;
}

/**
 * One `--agent` rollout as an episode: the calls as turns (content, tool calls, and the tool results the next prompt
 * carried, read from the segment's loss-mask-0 tokens), every segment's tokens with the tool results located, the
 * trainer's advantage, the reward value (and its named parts). A segment's k-th run of loss-mask-1 tokens is a call's
 * completion; segments hold the calls in order, so run k of the rollout is call k (when the counts differ — a call
 * with an empty completion — the turns show no observations rather than wrong ones).
 */
export function agentEpisode(r: Record<string, unknown>, at: AgentEpisodePlace): ViewEpisode {
  const { index, task, group, member, spaced, vocab } = at;
  const calls = (r.calls as Record<string, unknown>[]).filter((c) => c !== null && typeof c === "object");
  const segments: ViewTokens[] = [];
  // per completion (run of mask-1 tokens), in order over all segments: the observation text after it in its segment
  const observations: string[] = [];
  let system = "";
  let question = "";
  for (const [k, raw] of (r.segments as Record<string, unknown>[]).entries()) {
    const ids = Array.isArray(raw?.tokens) ? (raw.tokens as unknown[]).map((x) => num(x) ?? -1) : [];
    const texts = Array.isArray(raw?.text) ? (raw.text as unknown[]).map((x) => str(x)) : [];
    const lossMask = fitTo(ids.length, Array.isArray(raw?.lossMask) ? (raw.lossMask as unknown[]).map((x) => (x === 1 ? 1 : 0)) : [], 0);
    const logprobs = fitTo(ids.length, Array.isArray(raw?.logprobs) ? (raw.logprobs as unknown[]).map((x) => num(x) ?? 0) : [], 0);
    ids.forEach((id, i) => {
      if (texts[i] !== undefined && vocab[id] === undefined) vocab[id] = texts[i];
    });
    const first = lossMask.indexOf(1);
    const promptLength = first < 0 ? ids.length : first;
    const joined = joinTokenTexts(texts.length === ids.length ? texts : ids.map((id) => vocab[id] ?? ""), spaced);
    const span = (a: number, b: number): string => (a >= b ? "" : joined.text.slice(joined.starts[a], joined.ends[b - 1]));
    const toolResults: [number, number][] = [];
    // Blocks come in text order and token offsets only grow, so one pointer walks the tokens once over all blocks
    // (a scan of every token per block was O(blocks × tokens)).
    let t0 = 0;
    for (const { start: a, end: b } of toolResponseBlocks(joined.text)) {
      while (t0 < ids.length && joined.ends[t0] <= a) t0++;
      let lo = -1;
      let hi = -1;
      for (let i = t0; i < ids.length && joined.starts[i] < b; i++) {
        if (joined.ends[i] > a && lossMask[i] === 0) {
          if (lo < 0) lo = i;
          hi = i + 1;
        }
      }
      if (lo >= 0) toolResults.push([lo, hi]);
    }
    if (k === 0) {
      const blocks = chatBlocks(span(0, promptLength));
      const users = blocks.filter((b) => b.role === "user");
      question = users.at(-1)?.content ?? "";
      system = blocks[0] !== undefined && blocks[0].role !== "user" ? blocks[0].content : blocks.length === 0 ? span(0, promptLength).trim() : "";
    }
    // completions and the observation after each
    for (let i = promptLength; i < ids.length; ) {
      if (lossMask[i] !== 1) {
        i++;
        continue;
      }
      let j = i;
      while (j < ids.length && lossMask[j] === 1) j++;
      let e = j;
      while (e < ids.length && lossMask[e] !== 1) e++;
      observations.push(span(j, e));
      i = e;
    }
    segments.push({ ids, lossMask, logprobs, promptLength, ...(toolResults.length > 0 ? { toolResults } : {}) });
  }
  const paired = observations.length === calls.length;
  const turns: ViewTurn[] = calls.map((c, k) => {
    const observation = paired ? observations[k].trim() : "";
    const results = toolResponseBlocks(observation).map((m) => m.content);
    const toolCalls = Array.isArray(c.toolCalls)
      ? (c.toolCalls as Record<string, unknown>[]).map((t) => ({ name: str(t?.name, "?"), arguments: typeof t?.arguments === "string" ? t.arguments : JSON.stringify(t?.arguments ?? {}) }))
      : [];
    return {
      action: str(c.content),
      observation,
      toolCalls,
      ...(results.length > 0 ? { toolResults: results } : {}),
      ...(typeof c.finishReason === "string" ? { finishReason: c.finishReason } : {}),
      invalid: c.invalid === true,
    };
  });
  const rew = r.reward as { value?: unknown; parts?: unknown } | null | undefined;
  const value = num(rew?.value);
  const parts: Record<string, number> = {};
  if (rew?.parts !== null && typeof rew?.parts === "object") for (const [k, v] of Object.entries(rew.parts as Record<string, unknown>)) if (num(v) !== undefined) parts[k] = num(v)!;
  const status = str(r.status, "?");
  const answer = typeof r.answer === "string" ? r.answer : null;
  const toolCalls: Record<string, number> = {};
  for (const t of turns) for (const c of t.toolCalls ?? []) toolCalls[c.name] = (toolCalls[c.name] ?? 0) + 1;
  const advantage = num(r.advantage);
  const info: ViewAgentInfo = { status, dropReason: typeof r.dropReason === "string" ? r.dropReason : null, mismatches: num(r.mismatches) ?? 0, system, parts };
  // Evaluation lines carry the task's question and gold answers (writeAgentSamples with tasks); RL lines do not.
  const gold = Array.isArray(r.answers) ? r.answers.filter((x): x is string => typeof x === "string") : [];
  return {
    index,
    task,
    kind: task.includes(":") ? task.slice(0, task.indexOf(":")) : "?",
    question: typeof r.question === "string" && r.question !== "" ? r.question : question,
    gold,
    member,
    group,
    turns,
    answer,
    reward: value !== undefined ? { total: value, terms: [] } : null,
    outcome: status !== "rewarded" || answer === null || answer.trim() === "" ? "no-answer" : value !== undefined && value >= 1 - 1e-9 ? "success" : "fail",
    toolCalls,
    advantage: advantage ?? null,
    advantageSource: advantage !== undefined ? "file" : "none",
    advantageNote: advantage !== undefined ? "from the trainer (the samples line's advantage)" : status !== "rewarded" ? `dropped (${info.dropReason ?? "no reward"}): not trained` : "the trainer wrote no advantage",
    ...(segments.length > 0 ? { tokens: segments[0], segments } : {}),
    agent: info,
  };
}

/**
 * An `--agent` run's evaluation rollouts (`rollouts.jsonl` lines of one `eval-…` stage) as episodes: task, status,
 * reward (EM of the answer, graded by the trainer) — the file keeps no transcript. Outcome: dropped = `no-answer`,
 * reward 1 = `success`, else `fail`.
 */
export function rolloutEvalEpisodes(rows: Record<string, unknown>[], stage: string): ViewEpisode[] {
  return rows
    .filter((r) => r.stage === stage)
    .map((r, index): ViewEpisode => {
      const task = str(r.task, `#${index}`);
      const status = str(r.status, "?");
      const value = num(r.reward);
      return {
        index,
        task,
        kind: task.includes(":") ? task.slice(0, task.indexOf(":")) : "?",
        question: "",
        gold: [],
        member: 0,
        group: index,
        turns: [],
        answer: null,
        reward: value !== undefined ? { total: value, terms: [] } : null,
        outcome: status !== "rewarded" ? "no-answer" : value !== undefined && value >= 1 - 1e-9 ? "success" : "fail",
        toolCalls: {},
        advantage: null,
        advantageSource: "none",
        advantageNote: "evaluation rollouts are not trained: no advantage",
        agent: { status, dropReason: typeof r.dropReason === "string" ? r.dropReason : null, mismatches: num(r.mismatches) ?? 0, system: "", parts: {}, calls: num(r.calls) ?? 0 },
      };
    });
}
