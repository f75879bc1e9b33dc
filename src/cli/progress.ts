/**
 * Progress as plain lines, for when stderr is not a terminal (CI, `| tee`, nohup): a bar cannot be drawn there, and a
 * 15-minute warm start once printed nothing at all (issue 29). One line per stage every `intervalMs` of wall time —
 * stage, step/total, the stage's latest figures, elapsed — and one when it ends. Lines go to stderr only: nothing of
 * this reaches `metrics.jsonl`, which stays free of wall-clock values.
 */

/** Wall time between two progress lines of a stage when there is no terminal (ms). */
export const PROGRESS_INTERVAL_MS = 30_000;

/** Where lines go and how time is read (tests pass a fake clock). */
export interface ProgressLineOptions {
  /** Minimum ms between two lines of one stage (default `PROGRESS_INTERVAL_MS`). */
  intervalMs?: number;
  /** Clock in ms (default `performance.now`). */
  now?: () => number;
  /** Receives each line, without a newline (default: stderr). */
  write?: (line: string) => void;
}

/** `95000` ms → `1m35s`; under a minute `12s`. */
export function formatElapsed(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h}h${String(m).padStart(2, "0")}m` : m > 0 ? `${m}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}

/** One stage's progress as lines: `update` records and prints when a line is due, `tick` prints when one is due. */
export class ProgressLines {
  readonly intervalMs: number;
  private readonly now: () => number;
  private readonly write: (line: string) => void;
  private readonly start: number;
  private lastLine: number;
  private value = 0;
  private info = "";

  /**
   * @param label the stage (`SFT`, `RL (GRPO)`, `eval agent`)
   * @param total the stage's steps or episodes
   */
  constructor(
    readonly label: string,
    readonly total: number,
    options: ProgressLineOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? PROGRESS_INTERVAL_MS;
    this.now = options.now ?? (() => performance.now());
    this.write = options.write ?? ((line) => process.stderr.write(`${line}\n`));
    this.start = this.now();
    this.lastLine = this.start;
  }

  /** Records the stage's position (`value` of `total`) and figures; prints a line when the interval has passed. */
  update(value: number, info?: Record<string, string | number>): void {
    this.value = value;
    if (info !== undefined) this.info = Object.entries(info).map(([k, v]) => `${k} ${v}`).join("  ");
    this.tick();
  }

  /** Prints the latest position when `intervalMs` has passed since the last line (called by a timer, so a stage whose steps are slow still shows it is alive). */
  tick(): void {
    const t = this.now();
    if (t - this.lastLine < this.intervalMs) return;
    this.lastLine = t;
    this.write(this.line(t));
  }

  /** The stage's line now: `SFT: 120/300 (40%)  loss 1.23  elapsed 2m10s`. */
  line(t = this.now()): string {
    const pct = this.total > 0 ? ` (${Math.floor((100 * this.value) / this.total)}%)` : "";
    return `${this.label}: ${this.value}/${this.total}${pct}${this.info === "" ? "" : `  ${this.info}`}  elapsed ${formatElapsed(t - this.start)}`;
  }

  /** The stage's last line: `SFT: done (300) in 4m02s`. */
  done(): void {
    this.write(`${this.label}: done (${this.total}) in ${formatElapsed(this.now() - this.start)}`);
  }
}
