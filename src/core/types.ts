/**
 * The vocabulary of agentic-rl: tasks, actions, observations, turns, trajectories, rewards and the training
 * datum. Everything else in the system speaks in these types; this file imports nothing.
 *
 * Shape notation: `[seq]` = one entry per token of a trajectory; `[group]` = one entry per trajectory of a group.
 * Units: token counts are tokens, logprobs are natural-log probabilities (nats), times are milliseconds.
 * Modelled on tinker-cookbook `tinker_cookbook/rl/types.py` (Env, StepResult, Trajectory, TrajectoryGroup) and the
 * Tinker training API's `Datum` (model_input, loss_fn_inputs: target_tokens, weights, logprobs, advantages).
 */

/**
 * A task given to an environment: the request the policy sees, and whatever the env needs to run and grade it
 * (`data`, typed by the env: a booking request, a question's facts…). QA tasks use `question` + `answers`; a
 * tool-env task may leave `answers` empty and grade with its own grader (see `ToolEnvSpec.grade`).
 * Source: tinker-cookbook `tinker_cookbook/rl/types.py` (an `EnvGroupBuilder` carries whatever its envs need).
 */
export interface Task<D = unknown> {
  /** Stable id, unique within its dataset (e.g. `world:single:capital:France`, `travel:train:17`). */
  id: string;
  /** The user's request (a question, a booking request) shown to the policy. */
  question: string;
  /**
   * Gold answers; a prediction that matches any one after normalisation is correct (Search-R1 EM). Empty when the
   * env grades the episode itself (`Trajectory.grade`).
   */
  answers: string[];
  /** The env's own payload for this task (never shown to the policy unless the env renders it). */
  data?: D;
  /** Question family, e.g. `single-hop`, `bridge`, `comparison`, `nq`, `bamboogle`. */
  kind: string;
  /**
   * Whether the policy is expected to know the answer without search (its "parametric knowledge").
   * `undefined` when the dataset does not know (real data).
   */
  known?: boolean;
  /** Ids of the passages that hold the facts the question needs (empty when unknown). */
  evidenceIds?: string[];
  /** Structured facts behind the question (e.g. `{ attribute: "capital", entity: "france" }`), for scripted agents
   * and analysis; never shown to the policy. */
  meta?: Record<string, string>;
  /**
   * `high` marks a high-risk task (finance, medical, insurance): a definite answer not supported by retrieved
   * evidence is penalised by the `unsupported_answer` reward term. Default `normal`.
   */
  risk?: "high" | "normal";
  /** Names of tools this task forbids (e.g. `["search"]`); each call is penalised by the `forbidden_tool` term. */
  forbiddenTools?: string[];
}

/** A chat-style message (used for readable printing and, later, chat templates). */
export interface Message {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
}

/**
 * One call of a tool as the policy wrote it: the tool's `name` and its JSON `arguments` object. Source: the
 * OpenAI / Hermes function-call shape (`{"name": …, "arguments": {…}}`, Qwen2.5 chat template `<tool_call>`).
 */
export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * The action a policy's turn expresses, as its protocol parsed it (`src/protocol`): one or more tool calls, a final
 * answer, or invalid (malformed text, with the reason). Search-R1's `<search> q </search>` is the call
 * `{name: "search", arguments: {query: q}}`.
 */
export type Action =
  | { type: "tool_call"; calls: ToolCall[] }
  | { type: "answer"; answer: string }
  | { type: "invalid"; reason: string };

/** The query of a Search-R1 search action (the first call of the `search` tool), or undefined. */
export function searchQuery(action: Action): string | undefined {
  if (action.type !== "tool_call") return undefined;
  const call = action.calls.find((c) => c.name === "search");
  return call !== undefined && typeof call.arguments.query === "string" ? call.arguments.query : undefined;
}

/** The Search-R1 search action `<search> query </search>`: a call of the `search` tool. */
export function searchAction(query: string): Action {
  return { type: "tool_call", calls: [{ name: "search", arguments: { query } }] };
}

/** Calls per tool name of a trajectory: `traj.toolCalls`, or counted from its turns' actions when absent. */
export function toolCallCounts(traj: Pick<Trajectory, "toolCalls" | "turns">): Record<string, number> {
  if (traj.toolCalls !== undefined) return traj.toolCalls;
  const out: Record<string, number> = {};
  for (const turn of traj.turns) {
    if (turn.action.type === "tool_call") for (const c of turn.action.calls) out[c.name] = (out[c.name] ?? 0) + 1;
  }
  return out;
}

/** Total tool calls of a trajectory, over every tool. */
export function totalToolCalls(traj: Pick<Trajectory, "toolCalls" | "turns">): number {
  return Object.values(toolCallCounts(traj)).reduce((a, b) => a + b, 0);
}

/** The outcome of one tool call, as the env observed it. `content` is what the policy was shown (JSON or text). */
export interface ToolCallResult {
  name: string;
  ok: boolean;
  /** The result as shown to the policy (JSON text of the value, or the error text). */
  content: string;
  /** Why the call failed, when `ok` is false. */
  errorKind?: ToolErrorKind | "unknown_tool";
  /** The value the tool returned (absent on error), for graders and scripted agents. */
  value?: unknown;
}

/**
 * An env's grade of a whole episode: `score` in [0, 1] and its named parts (each in [0, 1], e.g. `right_flight`,
 * `valid_hotel`), plus free-form numeric diagnostics. The `outcome` reward term reads `score`.
 */
export interface Grade {
  score: number;
  parts: Record<string, number>;
  /** One line saying why (shown in samples). */
  explanation?: string;
}

/** A passage returned by retrieval. `score` is the BM25 score (higher is better). */
export interface Passage {
  id: string;
  title: string;
  text: string;
  score?: number;
  /**
   * Key of the fact the passage states (e.g. `country:fra:capital`). Two retrieved passages with the same `fact`
   * and different text disagree: an evidence conflict (see the world's `noiseFraction`).
   */
  fact?: string;
  /** Where the passage comes from (e.g. `encyclopedia`, `forum`); shown to the policy when set. */
  source?: string;
  /** How often this source is right, in [0, 1] (1 = always); the policy sees only `source`. */
  reliability?: number;
}

/** What the environment returns for one action. */
export interface StepResult {
  /** Text appended to the context after the action (e.g. `\n<information>…</information>\n`); empty when done. */
  observation: string;
  /**
   * Text that ends `observation` (e.g. `</information>\n\n`), kept whole when the rollout caps the observation to
   * its token budget; when even it does not fit, the episode ends truncated. Absent: a capped observation keeps its
   * head only.
   */
  observationClose?: string;
  /** Optional per-step reward from the environment (final rewards are computed by the reward stage). */
  reward?: number;
  /** True when the episode ended (answer given, or turn budget exhausted). */
  done: boolean;
  /** Diagnostics of this step. */
  info: StepInfo;
}

/** Diagnostics of one environment step. */
export interface StepInfo {
  action: Action;
  /** Passages retrieved by a search action, in rank order. */
  passages?: Passage[];
  /** Set when the episode ended because the turn budget ran out. */
  truncated?: boolean;
  /** Error text when a tool failed; the failure became an observation instead of a crash. */
  error?: string;
  /** Every call of the action and its result, in call order (tool envs; the search env sets one). */
  toolResults?: ToolCallResult[];
  /** The env's grade of the episode, set on the step that ends it (tool envs with a grader). */
  grade?: Grade;
  /** Name of the tool the action called (e.g. `search`); absent when it called none. */
  tool?: string;
  /** Simulated latency of that tool call (ms), from the env's deterministic latency model. */
  latencyMs?: number;
  /**
   * Set when the action's tool call failed (the failure became an error observation and the episode went on): why
   * it failed. Counted by the `tool_error` reward term. Sources of the failure modes: verl #3070, verl PR #1948.
   */
  toolError?: ToolErrorKind;
}

/**
 * Why a tool call failed: `invalid_input` (arguments rejected by the tool's schema), `error` (the tool threw),
 * `timeout` (no result within the per-attempt limit, or no free concurrency slot in time), `invalid_output` (a
 * value that is not JSON-serialisable, binary, or fails the tool's output schema), `oversize` (output longer than
 * the character cap), `deadline` (the episode's deadline came first), `config` (bad call options).
 */
export type ToolErrorKind = "invalid_input" | "error" | "timeout" | "invalid_output" | "oversize" | "deadline" | "config";

/** One policy turn and the environment's reply. */
export interface Turn {
  /** The policy's generated text for this turn (decoded from its sampled tokens, forced prefix included). */
  actionText: string;
  action: Action;
  /** Observation text appended after this turn ('' for the last turn). */
  observation: string;
  passages?: Passage[];
  /** Number of policy-sampled tokens in this turn (tokens). */
  sampledTokens: number;
  /** Number of observation tokens appended after this turn, after the cap (tokens). */
  observationTokens: number;
  /** Why sampling stopped: a stop token, the token budget, or the context window. */
  stopReason: StopReason;
  /** Name of the (first) tool this turn called (`search`), absent when the turn called none. */
  tool?: string;
  /** Every tool call of this turn and what it returned (tool envs). */
  toolResults?: ToolCallResult[];
  /** Simulated latency of this turn's tool call (ms, from the env's latency model); absent without a call. */
  toolLatencyMs?: number;
  /** Why this turn's tool call failed (it observed an error instead); absent when it succeeded or called none. */
  toolError?: ToolErrorKind;
}

/**
 * The tokens of one generated turn as the generator returned them (forced and sampled alike), kept apart from the
 * trajectory's token books so the trainer can check that it trains on exactly what was sampled (TRL #5144).
 */
export interface SampledSpan {
  /** Index in `Trajectory.tokens` of the turn's first token. */
  start: number;
  /** The turn's token ids, a copy taken when the generator returned them. */
  tokens: number[];
}

/** Why a sample ended. */
export type StopReason = "stop" | "length" | "context";

/** One term of a reward and its share of the total. */
export interface RewardTerm {
  /** Term name, e.g. `em`, `format`, `search_cost`. */
  name: string;
  /** Raw value of the term (before weighting). */
  value: number;
  /** Weight applied; contribution = value × weight. */
  weight: number;
  /** One-line explanation (why this value). */
  explanation: string;
  /**
   * Set when the term could not be computed (e.g. the LLM judge failed after its retries): the value is then 0
   * and the error is kept here, so a failed term is recorded on the trajectory, never silently dropped.
   */
  error?: string;
}

/** The reward of a trajectory with every term kept, so a total is never a mystery. */
export interface RewardBreakdown {
  total: number;
  terms: RewardTerm[];
  /** Cost of computing this reward outside the policy (e.g. LLM-judge spend, in the judge's price unit); 0 if none. */
  cost?: number;
  /** Per-turn step rewards `[turn]` the advantage stage used (`rl.turnRewards`, src/algo/turns.ts); absent when none. */
  turnRewards?: number[];
  /**
   * Mean advantage of each turn's policy tokens `[turn]`, set by the advantage stage (`rlStep`): what the update
   * credited each turn (equal across turns for outcome estimators such as grpo).
   */
  turnAdvantages?: number[];
}

/**
 * A whole episode as tokens, plus its readable turns.
 * Invariants (checked by `assertTrajectory`): `tokens`, `lossMask` and `logprobs` have equal length `[seq]`;
 * `lossMask[i] = 1` exactly on policy-sampled tokens (never on prompt, forced or observation tokens);
 * `logprobs[i]` is the sampler's logprob of `tokens[i]` where `lossMask[i] = 1`, else 0.
 */
export interface Trajectory {
  task: Task;
  /** Token ids of prompt + all turns + observations, `[seq]`. */
  tokens: number[];
  /** 1 on policy-sampled tokens, 0 elsewhere, `[seq]`. */
  lossMask: number[];
  /** Sampler logprobs (nats) on sampled tokens, 0 elsewhere, `[seq]`. */
  logprobs: number[];
  /** Number of prompt tokens (tokens). */
  promptLength: number;
  turns: Turn[];
  /** The final answer text, or null when the episode ended without one. */
  answer: string | null;
  /** Calls of the `search` tool (`toolCalls.search ?? 0`), kept for the Search-R1 metrics. */
  searches: number;
  /**
   * Tool calls made, per tool name (a turn with two calls counts two). Set by the rollout; a hand-built trajectory
   * may omit it, and `toolCallCounts` then counts the turns' actions.
   */
  toolCalls?: Record<string, number>;
  /** The env's grade of the episode (tool envs with a grader); absent otherwise. */
  grade?: Grade;
  /** Number of invalid actions (malformed turns). */
  invalidActions: number;
  /** True when the episode ended by the turn budget rather than an answer. */
  truncated: boolean;
  /** Set (with `truncated`) when the episode was stopped by its wall-clock deadline (`env.episodeDeadlineMs`). */
  endedBy?: "deadline";
  /** Member index of the episode within its group (set by `rolloutGroups`); names the trajectory in errors. */
  member?: number;
  /** Every turn's tokens as generated, for the token-integrity check (`assertTrajectory`); set by the rollout. */
  sampled?: SampledSpan[];
  /** Filled by the reward stage. */
  reward?: RewardBreakdown;
}

/** Trajectories sampled for the same task: the unit GRPO normalises over. `[group]`. */
export interface TrajectoryGroup {
  task: Task;
  trajectories: Trajectory[];
}

/**
 * The training datum, mirroring the Tinker API (`Datum`: `model_input` + `loss_fn_inputs`). All arrays `[seq-1]`:
 * position `i` predicts `targetTokens[i] = tokens[i+1]` from `modelInput[0..i]`.
 */
export interface Datum {
  /** Input token ids (`tokens[0..n-2]`). */
  modelInput: number[];
  /** Target token ids (`tokens[1..n-1]`). */
  targetTokens: number[];
  /** Loss weights: the loss mask shifted by one (1 = this target token is trained on). */
  weights: number[];
  /** Sampler logprobs of the targets (nats); 0 where weight is 0. Unused by `cross_entropy`. */
  logprobs?: number[];
  /** Per-token advantages; 0 where weight is 0. Unused by `cross_entropy`. */
  advantages?: number[];
  /** Reference-policy logprobs of the targets (nats), for the k3 KL term; optional. */
  refLogprobs?: number[];
}

/** A flat map of scalar metrics, e.g. `{ "reward/mean": 0.4 }`. */
export type Metrics = Record<string, number>;
