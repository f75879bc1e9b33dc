/**
 * What an `arl train --agent` run writes about its rollouts: `rollouts.jsonl` (one line per rollout) and
 * `samples/<name>.jsonl` (each rollout's calls and trained tokens, for `arl view`).
 */
import { join } from "node:path";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { Task } from "../core/types.ts";
import type { RolloutRecord } from "../gateway/types.ts";
import type { Reporter } from "../train/reporter.ts";
import type { RunDir } from "../train/runDir.ts";
import type { AgentRolloutRecord } from "./train.ts";

/**
 * One line per rollout in `rollouts.jsonl` (stage, step, id, task, status, reward, drop reason, calls, segments,
 * mismatches), and the step's drop reasons on the reporter: why a rollout was dropped is never only a count.
 */
export function logRollouts(run: RunDir, stage: string, step: number, records: readonly RolloutRecord[], reporter: Reporter): void {
  const reasons = new Map<string, number>();
  for (const r of records) {
    run.appendJsonl("rollouts.jsonl", { stage, step, id: r.id, task: r.meta.taskId, status: r.status, reward: r.reward?.value ?? null, dropReason: r.dropReason ?? null, calls: r.calls.length, segments: r.segments.length, mismatches: r.mismatches });
    if (r.dropReason) reasons.set(r.dropReason, (reasons.get(r.dropReason) ?? 0) + 1);
  }
  for (const [why, n] of reasons) reporter.log(`${stage} step ${step}: ${n} rollout(s) dropped: ${why}`);
}

/**
 * `samples/<name>.jsonl`: one line per rollout — task (with `tasks`, aligned with `records`: its question and gold
 * answers), status, reward (and parts), advantage, the agent's answer, each call (content, tool calls, finish reason,
 * invalid) and each segment as tokens (`[seq]` ids, their text, the loss mask and the sampler's logprobs in nats, the
 * first prompt's length in tokens, the indices of the calls it holds), so what was trained is visible token by token.
 * Written per RL step (`step-<n>`) and per held-out evaluation (`eval-warm` / `eval-before`, `eval-after`).
 */
export function writeAgentSamples(run: RunDir, name: string, records: readonly AgentRolloutRecord[], tokenizer: Tokenizer, tasks?: readonly Task[]): void {
  const lines = records.map((r, i) =>
    JSON.stringify({
      id: r.id,
      task: r.meta.taskId,
      ...(tasks?.[i] !== undefined ? { question: tasks[i].question, answers: tasks[i].answers } : {}),
      status: r.status,
      reward: r.reward ?? null,
      advantage: r.advantage ?? null,
      answer: r.answer ?? null,
      dropReason: r.dropReason ?? null,
      mismatches: r.mismatches,
      calls: r.calls.map((c) => ({ content: c.content, toolCalls: c.toolCalls, finishReason: c.finishReason, invalid: c.invalid })),
      segments: r.segments.map((s) => ({ tokens: s.tokens, text: s.tokens.map((t) => tokenizer.decode([t])), lossMask: s.lossMask, logprobs: s.logprobs, promptLength: s.promptLength, calls: s.calls })),
    }),
  );
  run.writeText(join("samples", `${name}.jsonl`), lines.join("\n") + "\n");
}
