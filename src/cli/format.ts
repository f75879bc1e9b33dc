/** Console rendering: progress bars (cli-progress), the summary table (cli-table3), readable trajectories. */
import cliProgress from "cli-progress";
import Table from "cli-table3";
import type { ProgressBar, Reporter, SummaryRow } from "../train/experiment.ts";
import type { RecipeSummary } from "../train/recipeRun.ts";
import { LAB_TABLE_HEAD, labTableRows } from "../lab/report.ts";
import type { LabResult } from "../lab/types.ts";

/** A reporter that draws one progress bar per stage on stderr (nothing when stderr is not a terminal). */
export function consoleReporter(): Reporter {
  return {
    bar(label: string, total: number): ProgressBar {
      const bar = new cliProgress.SingleBar(
        {
          format: `${label.padEnd(18)} [{bar}] {value}/{total} {eta_formatted} {info}`,
          hideCursor: true,
          clearOnComplete: false,
          etaBuffer: 20,
        },
        cliProgress.Presets.shades_classic,
      );
      bar.start(total, 0, { info: "" });
      return {
        update(value, info) {
          const text = info ? Object.entries(info).map(([k, v]) => `${k} ${v}`).join("  ") : "";
          bar.update(value, { info: text });
        },
        stop() {
          bar.stop();
          if (!process.stderr.isTTY) console.error(`${label}: done (${total})`);
        },
      };
    },
    log(message: string) {
      console.error(message);
    },
  };
}

const pct = (x: number) => (100 * x).toFixed(1);
const f2 = (x: number) => x.toFixed(2);

/** The summary table: EM, searches per question and guess rate, all / known / unknown. */
export function summaryTable(rows: readonly SummaryRow[]): string {
  const table = new Table({
    // Colours only on a terminal, so piped output and files stay plain text.
    style: process.stdout.isTTY ? {} : { head: [], border: [] },
    head: ["policy", "EM %", "EM known", "EM unknown", "searches/q", "known", "unknown", "guess % known", "guess % unknown"],
  });
  for (const { policy, result } of rows) {
    table.push([
      policy,
      pct(result.all.em),
      pct(result.known.em),
      pct(result.unknown.em),
      f2(result.all.searches),
      f2(result.known.searches),
      f2(result.unknown.searches),
      pct(result.known.guessRate),
      pct(result.unknown.guessRate),
    ]);
  }
  return table.toString();
}

export { formatTrajectory } from "../rollout/format.ts";

/** The lab's final table on the console (the same rows as the report's table). */
export function labTable(lab: LabResult): string {
  const table = new Table({ style: process.stdout.isTTY ? {} : { head: [], border: [] }, head: [...LAB_TABLE_HEAD] });
  for (const row of labTableRows(lab)) table.push(row);
  return table.toString();
}

/**
 * The recipe summary table: per policy, task success, mean grade, tool calls per task, invalid actions per turn,
 * then the recipe's breakdown rates (each `rate % (n)`: n = episodes where the decision arose).
 */
export function recipeTable(summary: Pick<RecipeSummary, "rows" | "breakdownLabels">): string {
  // `success` and `calls` are the table's own columns already.
  const keys = Object.keys(summary.breakdownLabels).filter((k) => k !== "success" && k !== "calls" && summary.rows.some((r) => r.breakdown[k] !== undefined));
  const table = new Table({
    style: process.stdout.isTTY ? {} : { head: [], border: [] },
    head: ["policy", "success %", "grade", "calls/task", "invalid %", ...keys.map((k) => summary.breakdownLabels[k])],
  });
  for (const r of summary.rows) {
    table.push([
      r.policy,
      pct(r.success),
      f2(r.score),
      f2(r.calls),
      pct(r.invalidRate),
      ...keys.map((k) => {
        const c = r.breakdown[k];
        if (c === undefined) return "-";
        return k.startsWith("count/") || k === "calls" || k === "failed_calls" ? `${f2(c.rate)} (${c.n})` : `${pct(c.rate)} (${c.n})`;
      }),
    ]);
  }
  return table.toString();
}
