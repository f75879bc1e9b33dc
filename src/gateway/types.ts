/**
 * The gateway's records: what an OpenAI-compatible agent's calls were, token for token, as sampled — the boundary
 * between `src/gateway/` (serving the calls) and the trainer (turning rollouts into datums). Vocabulary as in
 * `src/core/types.ts`: a rollout is one episode of one task by the user's agent; each chat-completion call is a turn.
 */
import type { ToolCall } from "../core/types.ts";

/** One `/v1/chat/completions` call of a rollout, exactly as sampled (never re-tokenised). */
export interface GatewayCall {
  /** 0, 1, … in arrival order within the rollout. */
  index: number;
  /** The prompt as rendered and encoded for the policy, `[prompt]` token ids. */
  promptTokens: number[];
  /** The sampled completion, `[completion]` token ids (stop token included when one ended it). */
  completionTokens: number[];
  /** Sampler logprobs of `completionTokens`, `[completion]` nats. */
  logprobs: number[];
  /** `stop` (a stop token or string), `length` (max_tokens or context), `tool_calls` (the completion called tools). */
  finishReason: "stop" | "length" | "tool_calls";
  /** The completion's text content, as returned to the agent (tool-call markup removed). */
  content: string;
  /** The tool calls parsed from the completion, as returned (`arguments` as JSON text). */
  toolCalls: ToolCall[];
  /** Whether the completion was malformed for the protocol (e.g. invalid tool-call JSON): a penalised invalid action. */
  invalid: boolean;
  /** Wall time of the call (ms). */
  ms: number;
}

/**
 * A run of calls merged into one multi-turn token sequence: call k+1's prompt extended call k's prompt + completion
 * token for token, so the sequence is `prompt₀ completion₀ observation₁ completion₁ …` with the loss mask on the
 * completions only. Arrays `[seq]`.
 */
export interface GatewaySegment {
  tokens: number[];
  /** 1 on sampled completion tokens, 0 on prompt / observation tokens. */
  lossMask: number[];
  /** Sampler logprobs on sampled tokens (nats), 0 elsewhere. */
  logprobs: number[];
  /** Tokens of the first prompt (tokens). */
  promptLength: number;
  /** The indices of the calls it holds. */
  calls: number[];
}

/** The reward a rollout reports (`POST /rollout/<id>/reward`) or the trainer's grader gives. */
export interface GatewayReward {
  /** The scalar the advantage is computed from. */
  value: number;
  /** Optional named parts (logged as `reward/<name>`). */
  parts?: Record<string, number>;
}

/** A finished rollout: its calls, their merged segments, and its reward — or why it was dropped. */
export interface RolloutRecord {
  id: string;
  /** Caller's metadata given when the rollout was opened (e.g. the task id). */
  meta: Record<string, unknown>;
  calls: GatewayCall[];
  /** Calls merged where their tokens extend each other; a new segment where they do not. */
  segments: GatewaySegment[];
  /** Calls whose prompt did not extend the previous prompt + completion (history rewritten, messages dropped, a
   * template re-rendered earlier turns differently): counted, kept as separate segments, never re-tokenised. */
  mismatches: number;
  status: "rewarded" | "dropped";
  reward?: GatewayReward;
  /** Why a dropped rollout was dropped (no reward within its deadline, agent crashed, …). */
  dropReason?: string;
}
