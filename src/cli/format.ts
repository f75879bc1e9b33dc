/** Console rendering: progress bars (cli-progress), the summary table (cli-table3), readable trajectories. */
import cliProgress from "cli-progress";
import Table from "cli-table3";
import type { ProgressBar, Reporter, SummaryRow } from "../train/experiment.ts";
import type { RecipeSummary } from "../train/recipeRun.ts";
import { LAB_TABLE_HEAD, labTableRows } from "../lab/report.ts";
import type { LabResult } from "../lab/types.ts";
import { ProgressLines, type ProgressLineOptions } from "./progress.ts";

/**
 * The CLI's reporter, on stderr: one progress bar per stage on a terminal; otherwise (CI, `| tee`, nohup) plain
 * progress lines every 30 s of a stage (`ProgressLines`) and one when it ends.
 * @param options `tty` overrides `process.stderr.isTTY`; the rest go to `ProgressLines` (tests pass a fake clock)
 */
export function consoleReporter(options: ProgressLineOptions & { tty?: boolean } = {}): Reporter {
  const tty = options.tty ?? process.stderr.isTTY === true;
  const write = options.write ?? ((line: string) => console.error(line));
  return {
    bar(label: string, total: number): ProgressBar {
      if (!tty) {
        const lines = new ProgressLines(label, total, { ...options, write });
        // A timer too, so a stage whose steps each take longer than the interval still prints (unref: never keeps the process alive).
        const timer = setInterval(() => lines.tick(), Math.min(lines.intervalMs, 5000));
        timer.unref();
        return {
          update: (value, info) => lines.update(value, info),
          stop() {
            clearInterval(timer);
            lines.done();
          },
        };
      }
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
        },
      };
    },
    log(message: string) {
      write(message);
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
