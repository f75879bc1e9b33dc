/**
 * The rollout engine: runs whole episodes (policy turn ↔ env step) concurrently and keeps the token books — every
 * token of prompt, turns and observations in one sequence, with a loss mask that is 1 only on tokens the policy
 * sampled. Observations are tokenised once and appended as ids (never re-tokenised), so the tokens trained on are
 * exactly the tokens sampled. Source: Search-R1 `search_r1/llm_agent/generation.py` (run_llm_loop: generate until
 * `</search>` or `</answer>`, execute, append `<information>`, mask it from the loss).
 *
 * Reliability: an episode that throws (a sampler error, a broken env) is caught and reported as dropped with its
 * reason — never silently lost (AReaL PR #892); an episode past its wall-clock deadline ends truncated (verl #2445);
 * tool failures are the env's (error observations, see `callTool`); every turn's generated tokens are kept
 * (`Trajectory.sampled`) for the token-integrity check (TRL #5144).
 */
import { searchQuery, type Grade, type SampledSpan, type Task, type Trajectory, type TrajectoryGroup, type Turn } from "../core/types.ts";
import { describeValue } from "../core/values.ts";
import { loopTurnDue, withLoopTurns } from "../core/yieldToLoop.ts";
import type { RolloutLimits } from "../env/episode.ts";
import type { EnvFactory } from "../env/types.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { ScriptedAgent, type TurnGenerator } from "./agent.ts";
import { LaneGate } from "./lanes.ts";

/** Seeds are derived, not drawn, so a trajectory depends only on (seed, task, member) — not on scheduling. */
export function episodeSeed(seed: number, taskIndex: number, member: number): number {
  let h = (seed ^ 0x5bd1e995) >>> 0;
  for (const v of [taskIndex, member]) {
    h = Math.imul(h ^ v, 0x9e3779b1) >>> 0;
    h ^= h >>> 15;
  }
  return h & 0x7fffffff;
}

/** The text that closes an observation (`StepResult.observationClose`) and the tokenizer that decodes its tokens. */
export interface ObservationClose {
  text: string;
  tokenizer: Pick<Tokenizer, "decode" | "encode">;
}

/**
 * Cuts an observation `[tokens]` (the whole observation, tokenised once) to at most `cap` tokens (an integer ≥ 0).
 * An observation of at most `cap` tokens comes back as it is. A longer one keeps, with a `close`, the shortest token
 * suffix whose decoded text contains all of `close.text`, as written or as `decode(encode(close.text))` gives it back
 * (however many tokens that is: `</information>\n\n` is 3
 * word tokens, and 4 or 5 tokens of the project's BPE fixture, whose first may also hold the text before `</`) after
 * as many of its head tokens as fit; without one (or when the decoded observation
 * does not contain `close.text`) just its first `cap` tokens. Tokens are never re-tokenised: head and suffix are
 * slices of `tokens`.
 * @returns the kept tokens `[≤ cap]`, or null when the closing suffix alone is longer than `cap` tokens (the caller
 *   appends no observation: see `runEpisode`)
 * @throws Error from `close.tokenizer.decode` (an id outside the vocabulary)
 * Found by a new-user pass (2026-12-07): before the decoded form was looked for, a hermes observation cut by the word
 * tokenizer lost its whole `</tool_response><|im_end|>…<|im_start|>assistant` closing, which decodes with spaces.
 */
export function capObservation(tokens: readonly number[], cap: number, close?: ObservationClose): number[] | null {
  if (tokens.length <= cap) return tokens.slice();
  const head = (n: number) => tokens.slice(0, Math.max(0, n));
  if (close === undefined || close.text === "") return head(cap);
  // A word-level tokenizer decodes with its own spacing (`<|im_start|> assistant`), so the closing text is looked for
  // as written and as the tokenizer decodes it; a byte-level BPE gives both the same.
  const decodedClose = close.tokenizer.decode(close.tokenizer.encode(close.text));
  const has = (from: number) => {
    const text = close.tokenizer.decode(tokens.slice(from));
    return text.includes(close.text) || text.includes(decodedClose);
  };
  if (!has(0)) return head(cap);
  for (let k = 1; k <= cap; k++) {
    if (has(tokens.length - k)) return head(cap - k).concat(tokens.slice(tokens.length - k));
  }
  return null;
}

/**
 * Characters of an observation tokenised per token of its cap, and at least `OBSERVATION_TEXT_FLOOR` — no real token
 * spans more, so the kept tokens are the same as if the whole text had been tokenised. The floor keeps every
 * observation of today's envs (≤ `maxOutputChars`, 100 000, plus framing) whole, so their runs are unchanged.
 */
export const OBSERVATION_CHARS_PER_TOKEN = 1024;
/** Observations at most this long (UTF-16 code units) are always tokenised whole. */
export const OBSERVATION_TEXT_FLOOR = 1 << 20;

/**
 * The text of an observation worth tokenising for a cap of `cap` tokens: the text itself when short, else its head
 * (`max(cap × OBSERVATION_CHARS_PER_TOKEN, OBSERVATION_TEXT_FLOOR)` characters) and its tail (`closeText` and 1 024
 * characters before it, so `capObservation` still finds the closing suffix). An env not built on `toolEnv` can return
 * a 50 MB observation; tokenising it whole to keep 96 tokens cost seconds and gigabytes (issue 29, part 2's kind).
 * A cut never splits a surrogate pair. `floor` (characters) is `OBSERVATION_TEXT_FLOOR` except in tests.
 */
export function observationTextToTokenize(text: string, cap: number, closeText = "", floor = OBSERVATION_TEXT_FLOOR): string {
  const headChars = Math.max(cap * OBSERVATION_CHARS_PER_TOKEN, floor);
  const tailChars = closeText.length + 1024;
  if (text.length <= headChars + tailChars) return text;
  let h = headChars;
  if (isHighSurrogate(text.charCodeAt(h - 1))) h--;
  let t = text.length - tailChars;
  if (isHighSurrogate(text.charCodeAt(t - 1))) t--;
  return text.slice(0, h) + text.slice(t);
}

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;

/** Texts remembered per tokenizer and kind (entries; a kind's map is emptied when full). */
const ENCODE_MEMO_SIZE = 4096;
/** Longer texts are encoded every time: they are rarely repeated, and 4 096 of them must not stay alive (UTF-16 units). */
const ENCODE_MEMO_MAX_CHARS = 8192;
/** What was encoded: a prompt (`promptTokens`, plain or already rendered) or an observation (`encode`). */
type EncodeKind = "prompt" | "rendered" | "observation";
const encodeMemo = new WeakMap<Tokenizer, Map<EncodeKind, Map<string, readonly number[]>>>();

/**
 * `encode(text)` of an episode's prompt or an observation, remembered per tokenizer and kind: a group's episodes share
 * their prompt, make the same tool calls and get the same observations, and tokenising was the largest part of the
 * engine's own time per turn (observations 38 of 69 µs in bench/rollout.ts, 2026-12-07). Tokenizers are pure
 * functions of the text (`Tokenizer.encode`). Returns a fresh array.
 */
function memoEncode(tokenizer: Tokenizer, kind: EncodeKind, text: string, encode: (text: string) => number[]): number[] {
  if (text.length > ENCODE_MEMO_MAX_CHARS) return encode(text);
  let kinds = encodeMemo.get(tokenizer);
  if (kinds === undefined) encodeMemo.set(tokenizer, (kinds = new Map()));
  let memo = kinds.get(kind);
  if (memo === undefined) kinds.set(kind, (memo = new Map()));
  let ids = memo.get(text);
  if (ids === undefined) {
    ids = encode(text);
    if (memo.size >= ENCODE_MEMO_SIZE) memo.clear();
    memo.set(text, ids);
  }
  return ids.slice();
}

/** Why an episode was dropped instead of reaching the update. */
export type DropReason = "prompt_too_long" | "env_reset_error" | "env_step_error" | "generator_error" | "episode_error" | "group_incomplete";

/** An error of one episode, with the stage that threw (its drop reason). */
export class EpisodeError extends Error {
  constructor(
    readonly reason: DropReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "EpisodeError";
  }
}

/** Runs `f`; an exception becomes an `EpisodeError` with `reason` (an EpisodeError passes through). */
async function stage<T>(reason: DropReason, where: string, f: () => Promise<T> | T): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof EpisodeError) throw e;
    throw new EpisodeError(reason, `${where}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/**
 * Options of one episode.
 * - `deadlineMs`: wall-clock limit of the episode (ms; 0 or absent = none). Past it the episode ends truncated with
 *   `endedBy: "deadline"` at the end of the current turn; tool calls are bounded by it too (the env gets
 *   `deadlineAt`). A generator that never returns is not bounded (its client has its own timeouts);
 * - `member`: the episode's index in its group (recorded on the trajectory and given to the env).
 */
export interface EpisodeOptions {
  deadlineMs?: number;
  member?: number;
}

/**
 * What runs an episode: `makeEnv` (a fresh env per episode), `agent` (the turn generator writing the policy side),
 * `tokenizer` (tokenises the prompt and observations, decodes the turns) and `limits` (the token budgets).
 */
export interface EpisodeSetup {
  makeEnv: EnvFactory;
  agent: TurnGenerator;
  tokenizer: Tokenizer;
  limits: RolloutLimits;
}

/**
 * Runs one episode to its end (answer, turn budget, full context, or deadline). The context is full too when an
 * observation's closing text (`StepResult.observationClose`) does not fit the room left: the episode then ends
 * truncated with no observation appended (see `capObservation`).
 * @returns the trajectory, its invariants satisfied (see `Trajectory`)
 * @throws EpisodeError (with its drop reason) only when the generator, the tokenizer or the env itself throws (tool
 *   failures become observations inside the env), or the prompt does not fit the context
 */
export async function runEpisode(task: Task, setup: EpisodeSetup, seed: number, options: EpisodeOptions = {}): Promise<Trajectory> {
  const { makeEnv, agent, tokenizer, limits } = setup;
  const deadlineMs = options.deadlineMs ?? 0;
  if (!(typeof deadlineMs === "number" && deadlineMs >= 0)) throw new EpisodeError("episode_error", `rollout: deadlineMs must be ≥ 0 ms (0 = none), got ${describeValue(deadlineMs)}`);
  const deadlineAt = deadlineMs > 0 ? performance.now() + deadlineMs : undefined;
  const pastDeadline = () => deadlineAt !== undefined && performance.now() >= deadlineAt;
  const env = await stage("env_reset_error", `rollout: env of task ${task.id}`, () => makeEnv());
  const episode = { seed, ...(options.member === undefined ? {} : { member: options.member }), ...(deadlineAt === undefined ? {} : { deadlineAt }) };
  const promptText = await stage("env_reset_error", `rollout: env.reset of task ${task.id}`, () => env.reset(task, episode));
  const tokens = await stage("episode_error", `rollout: tokenizer on task ${task.id}`, () => memoEncode(tokenizer, env.renderedPrompt === true ? "rendered" : "prompt", promptText, (t) => tokenizer.promptTokens(t, { rendered: env.renderedPrompt === true })));
  if (tokens.length >= limits.contextLength) {
    throw new EpisodeError(
      "prompt_too_long",
      `rollout: prompt of task ${task.id} is ${tokens.length} tokens, not below the context length ${limits.contextLength}`,
    );
  }
  const lossMask = tokens.map(() => 0);
  const logprobs = tokens.map(() => 0);
  const promptLength = tokens.length;
  const turns: Turn[] = [];
  let answer: string | null = null;
  let searches = 0;
  const toolCalls: Record<string, number> = {};
  let grade: Grade | undefined;
  let invalidActions = 0;
  let truncated = false;
  let endedBy: "deadline" | undefined;
  const sampled: SampledSpan[] = [];

  for (let turnIndex = 0; ; turnIndex++) {
    // Synchronous agents and tools never let the event loop turn: Ctrl-C would wait for the whole batch.
    const loopTurn = loopTurnDue();
    if (loopTurn !== undefined) await loopTurn;
    const budget = limits.contextLength - tokens.length;
    const gen = await stage("generator_error", `rollout: generator on task ${task.id} turn ${turnIndex}`, () =>
      agent.generate(tokens.slice(), { task, turnIndex, history: turns, seed: seed + turnIndex, budget }),
    );
    if (gen.lossMask.length !== gen.tokens.length || gen.logprobs.length !== gen.tokens.length) {
      throw new EpisodeError(
        "generator_error",
        `rollout: generator on task ${task.id} turn ${turnIndex} returned ${gen.tokens.length} tokens, ${gen.lossMask.length} mask entries, ${gen.logprobs.length} logprobs`,
      );
    }
    sampled.push({ start: tokens.length, tokens: gen.tokens.slice() });
    tokens.push(...gen.tokens);
    lossMask.push(...gen.lossMask);
    logprobs.push(...gen.logprobs);
    const actionText = await stage("episode_error", `rollout: tokenizer on task ${task.id}`, () => tokenizer.decode(gen.tokens));
    const result = await stage("env_step_error", `rollout: env.step of task ${task.id} turn ${turnIndex}`, () => env.step(actionText));
    const action = result.info.action;
    if (action.type === "tool_call") {
      for (const c of action.calls) toolCalls[c.name] = (toolCalls[c.name] ?? 0) + 1;
      if (searchQuery(action) !== undefined) searches++;
    }
    if (action.type === "invalid") invalidActions++;
    if (action.type === "answer") answer = action.answer;

    let obsTokens: number[] = [];
    const room = limits.contextLength - tokens.length;
    // A tool call the env cut at the deadline counts too (timers may fire a fraction of a ms before the clock reads it).
    const late = !result.done && (pastDeadline() || (deadlineAt !== undefined && result.info.toolError === "deadline"));
    // The observation's closing text does not fit: end here rather than append a broken closing tag.
    let noRoom = false;
    if (!result.done && !late && room > 0) {
      const close = result.observationClose === undefined ? undefined : { text: result.observationClose, tokenizer };
      const capped = await stage("episode_error", `rollout: tokenizer on task ${task.id}`, () =>
        capObservation(
          memoEncode(tokenizer, "observation", observationTextToTokenize(result.observation, Math.min(limits.maxObservationTokens, room), close?.text), (t) => tokenizer.encode(t)),
          Math.min(limits.maxObservationTokens, room),
          close,
        ),
      );
      if (capped === null) noRoom = true;
      else obsTokens = capped;
      tokens.push(...obsTokens);
      lossMask.push(...obsTokens.map(() => 0));
      logprobs.push(...obsTokens.map(() => 0));
    }
    turns.push({
      actionText,
      action,
      observation: result.done ? "" : tokenizer.decode(obsTokens),
      passages: result.info.passages,
      sampledTokens: gen.lossMask.reduce((a, b) => a + b, 0),
      observationTokens: obsTokens.length,
      stopReason: gen.stopReason,
      ...(result.info.tool === undefined ? {} : { tool: result.info.tool, toolLatencyMs: result.info.latencyMs ?? 0 }),
      ...(result.info.toolError === undefined ? {} : { toolError: result.info.toolError }),
      ...(result.info.toolResults === undefined ? {} : { toolResults: result.info.toolResults }),
    });
    if (result.info.grade !== undefined) grade = result.info.grade;
    if (result.done) {
      truncated = result.info.truncated === true;
      break;
    }
    if (late) {
      truncated = true;
      endedBy = "deadline";
      break;
    }
    if (noRoom || limits.contextLength - tokens.length <= 1) {
      truncated = true;
      break;
    }
  }
  const traj: Trajectory = { task, tokens, lossMask, logprobs, promptLength, turns, answer, searches, toolCalls, invalidActions, truncated };
  if (grade !== undefined) traj.grade = grade;
  if (endedBy !== undefined) traj.endedBy = endedBy;
  if (options.member !== undefined) traj.member = options.member;
  traj.sampled = sampled;
  return traj;
}

/** Options of `rolloutGroups` / `rolloutBatch`. */
export interface GroupRolloutOptions {
  /** Episodes per task (GRPO's G). */
  groupSize: number;
  /** Base seed of this batch; each episode's seed is derived from it (see `episodeSeed`). */
  seed: number;
  /** Most episodes in flight at once; more wait. */
  concurrency?: number;
  /** Called after each finished episode (progress bars). */
  onEpisode?: (traj: Trajectory) => void;
  /** Wall-clock limit of each episode (ms; 0 or absent = none; see `EpisodeOptions.deadlineMs`). */
  episodeDeadlineMs?: number;
  /**
   * `rolloutBatch` only: a group left with fewer finished members than this is dropped whole (its members counted
   * with reason `group_incomplete`); default 1. GRPO needs 2 (one member has no group to be relative to).
   */
  minGroupSize?: number;
  /**
   * Sampling lanes (integer ≥ 0; 0 or absent = off, the sampler batches whatever arrives together). With `K ≥ 1`
   * the batch's episodes are split into K lanes by index (job `i` → lane `i % K`, jobs in (task, member) order) and
   * each sampling batch is one turn of every live episode of one lane, rounds one at a time (see `LaneGate`): batch
   * composition no longer depends on tool timing, and with K ≥ 2 one lane decodes while the others wait on their
   * tools. Needs every episode running at once (`concurrency` ≥ tasks × groupSize).
   */
  lanes?: number;
}

/** An episode that did not reach the caller: which one, why, and the error text. */
export interface DroppedEpisode {
  taskId: string;
  /** Index of the task in the batch. */
  taskIndex: number;
  member: number;
  reason: DropReason;
  error: string;
}

/** Result of `rolloutBatch`: the groups that go on (members in member order) and every episode that does not. */
export interface RolloutBatch {
  groups: TrajectoryGroup[];
  dropped: DroppedEpisode[];
}

/**
 * Runs `groupSize` episodes for each task, all concurrently (the embedded sampler batches concurrent calls), and
 * accounts for every one: it is in `groups` or in `dropped` with its reason — an episode that throws does not
 * abort the batch nor vanish (AReaL PR #892). Groups with fewer than `minGroupSize` finished members are dropped
 * whole (`group_incomplete`); a group that lost some members keeps the rest. Never throws for an episode's error.
 * `groups.reduce(n + trajectories) + dropped.length = tasks × groupSize`.
 * @returns groups in task order (tasks whose group was dropped are absent), members in member order — independent
 *   of completion order; `dropped` in (task, member) order
 * @throws Error (before any episode runs) when `lanes` is not an integer ≥ 0, or is on with `concurrency` below the
 *   number of episodes
 */
export async function rolloutBatch(tasks: readonly Task[], setup: EpisodeSetup, options: GroupRolloutOptions): Promise<RolloutBatch> {
  const { agent } = setup;
  const jobs: Array<{ t: number; m: number }> = [];
  tasks.forEach((_, t) => {
    for (let m = 0; m < options.groupSize; m++) jobs.push({ t, m });
  });
  const results: Array<Trajectory | DroppedEpisode> = new Array(jobs.length);
  const limit = Math.max(1, options.concurrency ?? 512);
  const lanes = options.lanes ?? 0;
  if (!Number.isInteger(lanes) || lanes < 0) throw new Error(`rollout: lanes must be an integer ≥ 0 (0 = off), got ${describeValue(lanes)}`);
  if (lanes > 0 && limit < jobs.length) {
    throw new Error(`rollout: lanes need every episode running at once, but concurrency ${limit} < ${jobs.length} episodes`);
  }
  const gate = lanes > 0 ? new LaneGate(agent, lanes, jobs.length) : null;
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const j = next++;
      const { t, m } = jobs[j];
      try {
        const traj = await runEpisode(tasks[t], gate ? { ...setup, agent: gate.generator(j) } : setup, episodeSeed(options.seed, t, m), {
          deadlineMs: options.episodeDeadlineMs,
          member: m,
        }).finally(() => gate?.leave(j)); // its lane stops waiting for it before anything else runs
        results[j] = traj;
        options.onEpisode?.(traj);
      } catch (e) {
        const reason: DropReason = e instanceof EpisodeError ? e.reason : "episode_error";
        results[j] = { taskId: tasks[t].id, taskIndex: t, member: m, reason, error: e instanceof Error ? e.message : String(e) };
      }
    }
  };
  const workers = () => Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  // A scripted agent batches nothing, so its episodes may let the event loop turn (Ctrl-C during the warm start).
  await (agent instanceof ScriptedAgent ? withLoopTurns(workers) : workers());
  const minGroupSize = options.minGroupSize ?? 1;
  const groups: TrajectoryGroup[] = [];
  const dropped: DroppedEpisode[] = [];
  tasks.forEach((task, t) => {
    const members = results.slice(t * options.groupSize, (t + 1) * options.groupSize);
    const done = members.filter((r): r is Trajectory => "tokens" in r);
    for (const r of members) if (!("tokens" in r)) dropped.push(r);
    if (done.length > 0 && done.length < minGroupSize) {
      for (const traj of done) {
        dropped.push({
          taskId: task.id,
          taskIndex: t,
          member: traj.member ?? -1,
          reason: "group_incomplete",
          error: `group of task ${task.id} has ${done.length} of ${options.groupSize} members, fewer than ${minGroupSize}`,
        });
      }
    } else if (done.length > 0) {
      groups.push({ task, trajectories: done });
    }
  });
  dropped.sort((a, b) => a.taskIndex - b.taskIndex || a.member - b.member);
  return { groups, dropped };
}

/**
 * Runs `groupSize` episodes for each task (as `rolloutBatch`) and returns every one of them.
 * @returns one group per task, in task order; members in member order — independent of completion order
 * @throws Error after all episodes have finished, when any episode failed — naming each (task id, member, reason,
 *   error); callers that must keep going use `rolloutBatch`
 */
export async function rolloutGroups(tasks: readonly Task[], setup: EpisodeSetup, options: GroupRolloutOptions): Promise<TrajectoryGroup[]> {
  const { groups, dropped } = await rolloutBatch(tasks, setup, { ...options, minGroupSize: 1 });
  if (dropped.length > 0) {
    const list = dropped.map((d) => `${d.taskId}#${d.member} (${d.reason}): ${d.error}`);
    throw new Error(`rollout: ${dropped.length} of ${tasks.length * options.groupSize} episodes failed: ${list.slice(0, 5).join("; ")}${list.length > 5 ? "; …" : ""}`);
  }
  return groups;
}

/**
 * Reliability metrics of a batch: `dropped` (episodes that did not reach the update), `dropped/<reason>` (per
 * reason, only reasons that occurred) and `tool_errors` (failed tool calls per finished episode, mean).
 */
export function rolloutMetrics(batch: RolloutBatch): Record<string, number> {
  const trajs = batch.groups.flatMap((g) => g.trajectories);
  const errors = trajs.reduce((a, t) => a + t.turns.filter((turn) => turn.toolError !== undefined).length, 0);
  const out: Record<string, number> = { dropped: batch.dropped.length, tool_errors: trajs.length === 0 ? 0 : errors / trajs.length };
  for (const d of batch.dropped) out[`dropped/${d.reason}`] = (out[`dropped/${d.reason}`] ?? 0) + 1;
  return out;
}
