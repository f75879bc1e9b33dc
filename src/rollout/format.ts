/** Trajectories as readable text (console, samples, lab reports). */
import { toolCallCounts, type Trajectory } from "../core/types.ts";

/**
 * A trajectory as readable text: the question, each turn's action and observation, the answer and reward.
 * @param options `toolCalls`: a tool env's view (`arl rollout --env`) — tool calls per tool instead of the search
 *   env's `searches`, and the `gold:` line only when the task has gold answers (a graded task has none). Off by
 *   default: lab reports keep the text their fingerprints were measured with (src/lab/fingerprint.ts).
 */
export function formatTrajectory(t: Trajectory, options: { toolCalls?: boolean } = {}): string {
  const lines = [`── ${t.task.id}${t.task.known === undefined ? "" : t.task.known ? " (known)" : " (unknown)"}`, `question: ${t.task.question}`];
  if (!options.toolCalls || t.task.answers.length > 0) lines.push(`gold:     ${t.task.answers.join(" | ")}`);
  t.turns.forEach((turn, i) => {
    lines.push(`turn ${i + 1}: ${turn.actionText.trim()}`);
    if (turn.observation.trim() !== "") lines.push(`  ${turn.observation.trim().replace(/\n/g, "\n  ")}`);
  });
  const calls = Object.entries(toolCallCounts(t)).filter(([, n]) => n > 0);
  const used = options.toolCalls ? `tool calls ${calls.length === 0 ? "none" : calls.map(([name, n]) => `${name} ${n}`).join(", ")}` : `searches ${t.searches}`;
  lines.push(`answer:   ${t.answer ?? "(none)"}   ${used}   invalid ${t.invalidActions}`);
  if (t.reward) {
    lines.push(
      `reward:   ${t.reward.total.toFixed(3)} = ` +
        t.reward.terms.map((x) => `${x.weight}×${x.name}(${x.value})`).join(" + "),
    );
  }
  return lines.join("\n");
}
