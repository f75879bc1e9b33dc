/** Trajectories as readable text (console, samples, lab reports). */
import type { Trajectory } from "../core/types.ts";

/** A trajectory as readable text: the question, each turn's action and observation, the answer and reward. */
export function formatTrajectory(t: Trajectory): string {
  const lines = [
    `── ${t.task.id}${t.task.known === undefined ? "" : t.task.known ? " (known)" : " (unknown)"}`,
    `question: ${t.task.question}`,
    `gold:     ${t.task.answers.join(" | ")}`,
  ];
  t.turns.forEach((turn, i) => {
    lines.push(`turn ${i + 1}: ${turn.actionText.trim()}`);
    if (turn.observation.trim() !== "") lines.push(`  ${turn.observation.trim().replace(/\n/g, "\n  ")}`);
  });
  lines.push(`answer:   ${t.answer ?? "(none)"}   searches ${t.searches}   invalid ${t.invalidActions}`);
  if (t.reward) {
    lines.push(
      `reward:   ${t.reward.total.toFixed(3)} = ` +
        t.reward.terms.map((x) => `${x.weight}×${x.name}(${x.value})`).join(" + "),
    );
  }
  return lines.join("\n");
}
