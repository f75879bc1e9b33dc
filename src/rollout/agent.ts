/**
 * Turn generators: what writes the policy side of an episode. A sampling policy (the model being trained), a
 * policy with forced text (baselines such as Direct and RAG), or a scripted agent (warm-start demonstrations)
 * all produce one turn's tokens from the context; the rollout engine does the rest.
 */
import type { SamplingClient } from "../core/sampling.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { StopReason } from "../core/types.ts";
import type { ForcedText, TurnContext } from "../env/episode.ts";

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

/** Options of a sampling policy. */
export interface PolicyAgentOptions {
  temperature: number;
  /** Maximum sampled tokens per turn (tokens). */
  maxTokensPerTurn: number;
  /** Token ids that end a turn (e.g. `</search>`, `</answer>`); the turn is cut after the first (see `generate`). */
  stop: number[];
  /**
   * Strings that end a turn where a tag is several tokens (real BPE tokenizers; see `protocolStops`); the turn is cut
   * after the token that completes the first (see `generate`).
   */
  stopStrings?: string[];
  /** Optional forced text per turn (baselines); `undefined` = sample freely. */
  forced?: (ctx: TurnContext) => ForcedText | undefined;
}

/**
 * The model under training (or evaluation), sampling through any `SamplingClient`.
 * `generate` cuts every sample after its first stop (`stopCut`: a `stop` id or a `stopStrings` string, whichever comes
 * first; the completing token kept) whatever the sampler reports, so a sampler or server that ran past the stop (e.g.
 * `<search> q </search> <answer> a </answer>` in one sample) leaves only the first action in the turn — tokens,
 * logprobs and loss mask cut together — as Search-R1 `search_r1/llm_agent/generation.py` `_postprocess_responses`
 * does. A cut sample's stop reason is `stop`. Forced text is not searched for stops. A sample longer than the
 * turn's `maxTokens` (a server that ignored it) is first cut to it (stop reason `length`, or `context` at the
 * context's end).
 */
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
    // Cut at the first stop whatever the sampler reports: a server that ignored the stop strings (some Tinker servers
    // take stop ids only) or ran past a stop (speculative decoding, a buggy engine) must not put a second action in
    // the trajectory with loss mask 1 while the env acts on the first.
    // A sampler that returned more than maxTokens (a server ignoring max_tokens) is cut to it: a turn never
    // outgrows its budget, so the episode never outgrows the context window.
    if (sample.tokens.length > maxTokens) sample = { tokens: sample.tokens.slice(0, maxTokens), logprobs: sample.logprobs.slice(0, maxTokens), stopReason: "length" };
    const cut = stopCut(this.tokenizer, sample.tokens, this.options.stop, this.options.stopStrings ?? []);
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

/**
 * Index of the first token after which the decoded text contains one of `stops`, or -1 (vLLM's stop-string rule: the
 * sequence is cut after the token that completes the string). `tokens` `[new]`.
 * Cost: one decode when no stop occurs (the common case); otherwise a binary search over prefixes (O(log n) decodes),
 * which relies on the decoded text of a prefix being a prefix of the decoded text (true of byte-level BPE up to a
 * trailing partial character, and of the word tokenizer).
 * @throws Error from `tokenizer.decode` (an id outside the vocabulary)
 */
export function firstStop(tokenizer: Pick<Tokenizer, "decode">, tokens: readonly number[], stops: readonly string[]): number {
  if (stops.length === 0 || tokens.length === 0) return -1;
  const hit = (n: number) => {
    const text = tokenizer.decode(tokens.slice(0, n));
    return stops.some((x) => text.includes(x));
  };
  if (!hit(tokens.length)) return -1; // the common case: one decode, no prefix scan
  let lo = 0; // the first `lo` tokens hold no stop
  let hi = tokens.length; // the first `hi` tokens hold one
  while (hi - lo > 1) {
    const mid = (lo + hi) >>> 1;
    if (hit(mid)) hi = mid;
    else lo = mid;
  }
  return hi - 1;
}

/**
 * Where a sample ends at its first stop: the index of the first token that is one of `stopIds`, or that completes
 * one of `stopStrings` in the decoded text, whichever comes first (vLLM's rule: the token that completes the stop is
 * kept); -1 when the sample holds no stop. `tokens` `[new]`, the sampled tokens only.
 * Cost: an O(n) id scan, then one decode of the tokens before that id, and a prefix search only when a string occurs.
 * This is the cut Search-R1 makes on decoded responses (`search_r1/llm_agent/generation.py`
 * `_postprocess_responses`: each response is cut after its first `</search>` or `</answer>`), made on tokens so the
 * tokens, logprobs and loss mask are cut together.
 * @throws Error from `tokenizer.decode` (an id outside the vocabulary)
 */
export function stopCut(
  tokenizer: Pick<Tokenizer, "decode">,
  tokens: readonly number[],
  stopIds: readonly number[],
  stopStrings: readonly string[],
): number {
  let idCut = -1;
  if (stopIds.length > 0) {
    const ids = new Set(stopIds);
    idCut = tokens.findIndex((t) => ids.has(t));
  }
  const before = idCut >= 0 ? tokens.slice(0, idCut) : tokens; // a string completed before the stop id
  const strCut = firstStop(tokenizer, before, stopStrings);
  return strCut >= 0 ? strCut : idCut;
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
