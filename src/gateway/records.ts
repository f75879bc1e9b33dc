/**
 * Calls → segments: the exact merge of a rollout's chat-completion calls into multi-turn token sequences
 * (`GatewaySegment`, src/gateway/types.ts). A call whose prompt starts with a segment's whole token sequence (the
 * segment's last call's prompt + completion, and everything before) extends it: the tokens between are the
 * observation (tool results, a new user turn, the next assistant header), loss mask 0; the completion follows with
 * loss mask 1 and its sampled logprobs. Any other call starts a new segment and counts a mismatch (the agent rewrote
 * or dropped history, or a template re-rendered an earlier turn differently) — nothing is re-tokenised to force a
 * match, which is how veRL / ART / prime-rl lost exactness (veRL #6719, ART #726, prime-rl #1334).
 *
 * A call may extend any earlier segment, not only the latest one: an agent that interleaves two conversations in one
 * rollout (a planner and an executor) gives two exact segments and one mismatch (the second conversation's start),
 * not one segment per call. Where several segments match, the longest wins.
 */
import type { GatewayCall, GatewaySegment } from "./types.ts";

/** True when `prefix` is a prefix of `xs` (token for token). */
export function isPrefix(prefix: readonly number[], xs: readonly number[]): boolean {
  if (prefix.length > xs.length) return false;
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== xs[i]) return false;
  return true;
}

/**
 * Merges calls (in `index` order) into segments.
 * @param calls `[calls]`, each with `promptTokens` `[prompt]`, `completionTokens` and `logprobs` `[completion]`
 * @returns the segments (arrays `[seq]`) and the number of calls after the first that started a new segment
 * @throws Error when a call's `logprobs` and `completionTokens` differ in length (a recording bug)
 */
export function mergeCalls(calls: readonly GatewayCall[]): { segments: GatewaySegment[]; mismatches: number } {
  const segments: GatewaySegment[] = [];
  let mismatches = 0;
  for (const call of calls) {
    if (call.logprobs.length !== call.completionTokens.length) {
      throw new Error(`mergeCalls: call ${call.index} has ${call.logprobs.length} logprobs for ${call.completionTokens.length} completion tokens`);
    }
    let best: GatewaySegment | undefined;
    for (const s of segments) {
      if ((best === undefined || s.tokens.length > best.tokens.length) && isPrefix(s.tokens, call.promptTokens)) best = s;
    }
    if (best === undefined) {
      if (segments.length > 0) mismatches++;
      const p = call.promptTokens.length;
      segments.push({
        tokens: [...call.promptTokens, ...call.completionTokens],
        lossMask: [...new Array<number>(p).fill(0), ...call.completionTokens.map(() => 1)],
        logprobs: [...new Array<number>(p).fill(0), ...call.logprobs],
        promptLength: p,
        calls: [call.index],
      });
      continue;
    }
    const observation = call.promptTokens.slice(best.tokens.length);
    for (const t of observation) {
      best.tokens.push(t);
      best.lossMask.push(0);
      best.logprobs.push(0);
    }
    call.completionTokens.forEach((t, i) => {
      best.tokens.push(t);
      best.lossMask.push(1);
      best.logprobs.push(call.logprobs[i]);
    });
    best.calls.push(call.index);
  }
  return { segments, mismatches };
}
