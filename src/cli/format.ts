/** Console rendering: progress bars (cli-progress), the summary table (cli-table3), readable trajectories. */
import cliProgress from "cli-progress";
import Table from "cli-table3";
import type { DetectorFiring } from "../reward/detectors.ts";
import type { ExperimentConfig } from "../train/config.ts";
import type { ProgressBar, Reporter } from "../train/reporter.ts";
import type { EvalRow } from "../train/eval.ts";
import type { ExperimentSummary } from "../train/summary.ts";
import { qaCells } from "../lab/reportTables.ts";
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

/** The QA table of `arl eval`: EM, searches per question and guess rate, all / known / unknown facts. */
export function summaryTable(rows: readonly EvalRow[]): string {
  const table = new Table({
    // Colours only on a terminal, so piped output and files stay plain text.
    style: process.stdout.isTTY ? {} : { head: [], border: [] },
    head: ["policy", "EM %", "EM known", "EM unknown", "searches/q", "known", "unknown", "guess % known", "guess % unknown"],
  });
  for (const { policy, result } of rows) table.push([policy, ...qaCells(result)]);
  return table.toString();
}

export { formatTrajectory } from "../rollout/format.ts";

/**
 * The summary table: per policy, task success and mean grade (when the env grades its episodes), tool calls per task,
 * invalid actions per turn, then the recipe's breakdown (each `rate % (n)`: n = episodes where the key arose; counts,
 * `count/…` keys, as a mean).
 */
export function recipeTable(summary: Pick<ExperimentSummary, "rows" | "breakdownLabels" | "graded">): string {
  // `success` and `calls` are the table's own columns already.
  const keys = Object.keys(summary.breakdownLabels).filter((k) => k !== "success" && k !== "calls" && summary.rows.some((r) => r.breakdown[k] !== undefined));
  // An env whose episodes carry no grade (the search env scores EM through its breakdown) has no success column; an
  // env that grades keeps it even when every score is 0 (a grader that never pays must show, not vanish).
  const graded = summary.graded;
  const table = new Table({
    style: process.stdout.isTTY ? {} : { head: [], border: [] },
    head: ["policy", ...(graded ? ["success %", "grade"] : []), "calls/task", "invalid %", ...keys.map((k) => summary.breakdownLabels[k])],
  });
  for (const r of summary.rows) {
    table.push([
      r.policy,
      ...(graded ? [pct(r.success), f2(r.score)] : []),
      f2(r.calls),
      pct(r.invalidRate),
      ...keys.map((k) => {
        const c = r.breakdown[k];
        if (c === undefined) return "-";
        return k.startsWith("count/") || k.includes("/count/") || k === "calls" || k === "failed_calls" ? `${f2(c.rate)} (${c.n})` : `${pct(c.rate)} (${c.n})`;
      }),
    ]);
  }
  return table.toString();
}

/** The detectors' line after a run: off, not evaluated (too few RL steps), quiet, or what fired. */
export function detectorLine(config: Pick<ExperimentConfig, "detectors" | "rl">, firing: readonly DetectorFiring[]): string {
  const d = config.detectors;
  const needed = d.baselineSteps + d.window;
  if (!d.enabled) return "reward-hacking detectors: off (detectors.enabled false)";
  if (config.rl.steps < needed) return `reward-hacking detectors: not evaluated (they need ≥ ${needed} RL steps: detectors.baselineSteps + detectors.window; this run had ${config.rl.steps})`;
  return firing.length === 0 ? "reward-hacking detectors: quiet" : `reward-hacking detectors firing:\n  ${firing.map((f) => f.message).join("\n  ")}`;
}
