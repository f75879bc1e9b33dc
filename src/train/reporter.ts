/**
 * How an experiment reports progress: bars and log lines. The CLI draws bars (src/cli/progress.ts); tests and library
 * users pass `silentReporter` (the default of `train()`).
 */

/** A progress bar handle. */
export interface ProgressBar {
  update(value: number, info?: Record<string, string | number>): void;
  stop(): void;
}

/** How the experiment reports progress (the CLI draws bars; tests pass `silentReporter`). */
export interface Reporter {
  bar(label: string, total: number): ProgressBar;
  log(message: string): void;
}

/** A reporter that prints nothing. */
export const silentReporter: Reporter = {
  bar: () => ({ update: () => {}, stop: () => {} }),
  log: () => {},
};
