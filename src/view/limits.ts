/**
 * How much of a run folder `arl view` reads, keeps and sends (src/view/sourceReader.ts). Every file it reads is bounded, so
 * one damaged or hostile file (a 45 MB metrics line of 2.5 M keys, a 1 GB summary) costs the viewer a bounded amount
 * of memory and each answer a bounded size; what is left out is counted and shown on the page
 * (`SourceInfo.damagedLines`, `SourceInfo.cutLines`). The defaults are far above what `arl train` writes (a metrics
 * line is ~1 KB with ~50 keys; a samples line is at most a few MB of token books).
 */
import { jsonTextDeeperThan } from "../core/values.ts";

/** The viewer's limits (bytes, characters or counts, as named). */
export interface ViewLimits {
  /** `metrics.jsonl`, `detectors.jsonl`, `rollouts.jsonl`: bytes of one line; a longer line is skipped as damaged. */
  maxLineBytes: number;
  /**
   * `metrics.jsonl`, `detectors.jsonl`, `rollouts.jsonl`: bytes read of one file per request (~1 s of parsing); a
   * longer file (or a long append) is read over several polls, the page's `version` changing as it goes.
   */
  maxReadBytes: number;
  /** As `maxReadBytes`, in lines (a file of many short lines). */
  maxReadLines: number;
  /** `samples/*.jsonl`: bytes of one line (an episode with its token books); a longer line is skipped as damaged. */
  maxSampleLineBytes: number;
  /** `samples/*.jsonl`: bytes read of one file; the rest is not read (`SamplesPayload.unreadBytes`). */
  maxSampleFileBytes: number;
  /** `metrics.jsonl`: numeric keys kept of one line (its first ones; the line counts in `cutLines`). */
  maxKeysPerLine: number;
  /** `metrics.jsonl`: distinct metric keys; later new keys are dropped (their lines count in `cutLines`). */
  maxMetricKeys: number;
  /** Characters of a metric key or stage name; a longer key is dropped, a longer stage reads `?`. */
  maxKeyLength: number;
  /** Distinct stages of `metrics.jsonl` (and evaluation stages of `rollouts.jsonl`); lines of later new ones read `?` (or are dropped). */
  maxStages: number;
  /** `metrics.jsonl`: lines kept; later lines are dropped (counted in `cutLines`). */
  maxRows: number;
  /** `metrics.jsonl`: numeric values kept over all lines; lines past it are dropped (counted in `cutLines`). */
  maxValues: number;
  /**
   * `/api/metrics`: lines × metric keys sent at most (~20 bytes a value); past it every stage's lines are thinned
   * evenly, its last line kept (50 keys: 5 000 points a curve; TensorBoard keeps 1 000 per scalar series).
   */
  maxCells: number;
  /** `detectors.jsonl`: firings kept. */
  maxFirings: number;
  /** `rollouts.jsonl`: evaluation lines kept. */
  maxEvalRows: number;
  /** Characters kept of a text field shown in lists (a firing's message, a task id, a design's description). */
  maxTextChars: number;
  /** `summary.json`, `agent-summary.json`, `eval-warm.json`, `lab.json`: bytes; a larger file is not read (counted as damaged). */
  maxJsonFileBytes: number;
  /** `config.yaml`: bytes; a larger one is not read (counted as damaged; no detector replay, no advantage recompute). */
  maxConfigBytes: number;
  /** A checkpoint's `tokenizer.json`: bytes (a 150 k-token BPE vocabulary is ~11 MB); a larger one is not read (token ids shown). */
  maxTokenizerBytes: number;
}

const MiB = 1 << 20;

/** The limits `arl view` runs with. */
export const DEFAULT_VIEW_LIMITS: Readonly<ViewLimits> = Object.freeze({
  maxLineBytes: 1 * MiB,
  maxReadBytes: 32 * MiB,
  maxReadLines: 200_000,
  maxSampleLineBytes: 32 * MiB,
  maxSampleFileBytes: 128 * MiB,
  maxKeysPerLine: 256,
  maxMetricKeys: 512,
  maxKeyLength: 100,
  maxStages: 8,
  maxRows: 1_000_000,
  maxValues: 16_000_000,
  maxCells: 250_000,
  maxFirings: 10_000,
  maxEvalRows: 100_000,
  maxTextChars: 2_000,
  maxJsonFileBytes: 16 * MiB,
  maxConfigBytes: 1 * MiB,
  maxTokenizerBytes: 128 * MiB,
});

/**
 * A string to keep: at most `max` characters (cut with `…`), copied so it does not hold on to the parsed line it came
 * from (V8 may keep a parsed string as a slice of its whole source line).
 */
export function ownText(s: string, max: number): string {
  return Buffer.from(s.length > max ? `${s.slice(0, max)}…` : s, "utf8").toString("utf8");
}

/** Deepest nesting of JSON the viewer parses from a run's files (run files nest a few levels). */
export const MAX_VIEW_JSON_DEPTH = 64;

/**
 * `JSON.parse` for text read from a run folder, refusing text nested deeper than `MAX_VIEW_JSON_DEPTH` first (a
 * linear scan): a `summary.json` nested two million deep made a request answer 500 "Maximum call stack size exceeded"
 * (issue 29's outside probe). Callers count a throw as a damaged file or line, as for text that is not JSON.
 * @throws SyntaxError when the text is not JSON or is nested too deep
 */
export function parseRunJson(text: string): unknown {
  if (jsonTextDeeperThan(text, MAX_VIEW_JSON_DEPTH)) throw new SyntaxError(`nested deeper than ${MAX_VIEW_JSON_DEPTH} levels`);
  return JSON.parse(text) as unknown;
}
