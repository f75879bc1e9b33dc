/**
 * What a recipe's personas, breakdowns and detectors read from an episode's turns: every tool call it made, paired
 * with its result.
 */
import type { Turn } from "../core/types.ts";

/** One executed call: the turn it was made in, the tool, its arguments and its result (`ok`, the kept `value`). */
export interface ExecutedCall {
  turn: number;
  name: string;
  args: Record<string, unknown>;
  ok: boolean;
  value: unknown;
}

/**
 * Every executed call of `turns`, in order: each tool-call turn's calls paired with its results (a turn without
 * results is skipped).
 */
export function executedCalls(turns: readonly Turn[]): ExecutedCall[] {
  const out: ExecutedCall[] = [];
  turns.forEach((t, turn) => {
    if (t.action.type !== "tool_call" || t.toolResults === undefined) return;
    const calls = t.action.calls;
    t.toolResults.forEach((r, i) => out.push({ turn, name: r.name, args: calls[i]?.arguments ?? {}, ok: r.ok, value: r.value }));
  });
  return out;
}
