/**
 * Turn generators: what writes the policy side of an episode. A sampling policy (the model being trained), a
 * policy with forced text (baselines such as Direct and RAG), or a scripted agent (warm-start demonstrations)
 * all produce one turn's tokens from the context; the rollout engine does the rest.
 */
import type { StopReason, Task, Turn } from "../core/types.ts";
import type { SamplingClient } from "../policy/types.ts";
import type { Tokenizer } from "../policy/tokenizer.ts";

/** Everything a turn generator may look at. */
export interface TurnContext {
  task: Task;
  /** 0-based index of the turn being generated. */
  turnIndex: number;
  /** Completed turns so far (with their observations and passages). */
  history: readonly Turn[];
  /** Seed for this turn's sampling randomness. */
  seed: number;
  /** Tokens the turn may still add before the context window is full (tokens). */
  budget: number;
}

/** One generated turn. Arrays are `[turnTokens]`. */
export interface GeneratedTurn {
  tokens: number[];
  /** 1 where the token is trained on (sampled by the policy, or a demonstration token), 0 for forced tokens. */
  lossMask: number[];
  /** Sampler logprobs (nats) on sampled tokens, 0 elsewhere. */
  logprobs: number[];
  stopReason: StopReason;
}

/** Produces the policy's tokens for one turn. */
export interface TurnGenerator {
  generate(context: number[], ctx: TurnContext): Promise<GeneratedTurn>;
}

/**
 * Text forced into a turn: `complete: true` replaces the whole turn (nothing sampled); otherwise the text is a
 * prefix and the policy continues after it. Forced tokens get loss mask 0.
 */
export interface ForcedText {
  text: string;
  complete: boolean;
}

/** Options of a sampling policy. */
export interface PolicyAgentOptions {
  temperature: number;
  /** Maximum sampled tokens per turn (tokens). */
  maxTokensPerTurn: number;
  /** Token ids that end a turn (e.g. `</search>`, `</answer>`). */
  stop: number[];
  /** Strings that end a turn where a tag is several tokens (real BPE tokenizers; see `protocolStops`). */
  stopStrings?: string[];
  /** Optional forced text per turn (baselines); `undefined` = sample freely. */
  forced?: (ctx: TurnContext) => ForcedText | undefined;
}

/** The model under training (or evaluation), sampling through any `SamplingClient`. */
export class PolicyAgent implements TurnGenerator {
  constructor(
    private readonly sampler: SamplingClient,
    private readonly tokenizer: Tokenizer,
    private readonly options: PolicyAgentOptions,
  ) {}

  async generate(context: number[], ctx: TurnContext): Promise<GeneratedTurn> {
    const forced = this.options.forced?.(ctx);
    const forcedTokens = forced ? this.tokenizer.encode(forced.text).slice(0, ctx.budget) : [];
    const zeros = () => forcedTokens.map(() => 0);
    if (forced?.complete || forcedTokens.length >= ctx.budget) {
      const stopReason: StopReason = forcedTokens.length >= ctx.budget && !forced?.complete ? "context" : "stop";
      return { tokens: forcedTokens, lossMask: zeros(), logprobs: zeros(), stopReason };
    }
    const maxTokens = Math.min(this.options.maxTokensPerTurn, ctx.budget - forcedTokens.length);
    let [sample] = await this.sampler.sample(context.concat(forcedTokens), {
      n: 1,
      maxTokens,
      temperature: this.options.temperature,
      stop: this.options.stop,
      stopStrings: this.options.stopStrings,
      seed: ctx.seed,
    });
    // A server that ignored the stop strings (some Tinker servers take stop ids only) sampled past them: cut there.
    const cut = this.options.stopStrings?.length && sample.stopReason !== "stop" ? firstStop(this.tokenizer, sample.tokens, this.options.stopStrings) : -1;
    if (cut >= 0) sample = { tokens: sample.tokens.slice(0, cut + 1), logprobs: sample.logprobs.slice(0, cut + 1), stopReason: "stop" };
    let stopReason = sample.stopReason;
    if (stopReason === "length" && maxTokens < this.options.maxTokensPerTurn) stopReason = "context";
    return {
      tokens: forcedTokens.concat(sample.tokens),
      lossMask: zeros().concat(sample.tokens.map(() => 1)),
      logprobs: zeros().concat(sample.logprobs),
      stopReason,
    };
  }
}

/** Index of the first token after which the decoded text contains one of `stops`, or -1 (vLLM's stop-string rule: the
 * sequence is cut after the token that completes the string). `tokens` `[new]`. */
export function firstStop(tokenizer: Tokenizer, tokens: readonly number[], stops: readonly string[]): number {
  const whole = tokenizer.decode(tokens);
  if (!stops.some((x) => whole.includes(x))) return -1; // the common case: one decode, no prefix scan
  for (let i = 0; i < tokens.length; i++) {
    const text = tokenizer.decode(tokens.slice(0, i + 1));
    if (stops.some((x) => text.includes(x))) return i;
  }
  return -1;
}

/**
 * The stop conditions of a Search-R1 turn (`</search>`, `</answer>`) for a tokenizer: tags that are one token become
 * stop ids; tags that are several tokens (Qwen's BPE) become stop strings, with every tag then given as a string,
 * since Tinker's `SamplingParams.stop` takes strings or ids, not both. End-of-turn ids (`eosTokenIds`, e.g.
 * `<|im_end|>`) are stop ids too.
 * @returns `stop` token ids and `stopStrings` (empty when every tag is a single token)
 */
export function protocolStops(
  tokenizer: Tokenizer & { singleTokenId?: (s: string) => number | undefined; eosTokenIds?: readonly number[] },
  tags: readonly string[] = ["</search>", "</answer>"],
): { stop: number[]; stopStrings: string[] } {
  const single = (t: string): number | undefined => {
    if (tokenizer.singleTokenId) return tokenizer.singleTokenId(t);
    try {
      return tokenizer.id(t);
    } catch {
      return undefined;
    }
  };
  const ids = tags.map(single);
  const eos = [...(tokenizer.eosTokenIds ?? [])];
  if (ids.every((id) => id !== undefined)) return { stop: [...(ids as number[]), ...eos], stopStrings: [] };
  return { stop: eos, stopStrings: [...tags] };
}

/**
 * A scripted turn: its text, and whether it is trained on (a forced turn is context only, loss mask 0).
 * `untrainedPrefix`: the first N tokens are context only even in a trained turn (e.g. the `<search>` tag whose
 * choice is a habit the demonstration should not teach).
 */
export type ScriptedTurn = string | { text: string; trained: boolean; untrainedPrefix?: number };

/**
 * A scripted agent writes turns as text (warm-start demonstrations). Its tokens are trained on with cross entropy
 * (loss mask 1) unless the script marks a turn untrained; logprobs are 0 since nothing was sampled.
 */
export class ScriptedAgent implements TurnGenerator {
  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly script: (ctx: TurnContext) => ScriptedTurn,
  ) {}

  async generate(_context: number[], ctx: TurnContext): Promise<GeneratedTurn> {
    const turn = this.script(ctx);
    const { text, trained, untrainedPrefix = 0 } = typeof turn === "string" ? { text: turn, trained: true } : turn;
    const tokens = this.tokenizer.encode(text).slice(0, ctx.budget);
    return {
      tokens,
      lossMask: tokens.map((_, i) => (trained && i >= untrainedPrefix ? 1 : 0)),
      logprobs: tokens.map(() => 0),
      stopReason: tokens.length === ctx.budget ? "context" : "stop",
    };
  }
}
