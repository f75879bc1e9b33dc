/**
 * Reads run and lab folders exactly as they are on disk (README "A run on disk"; writers: `src/train/runDir.ts`,
 * `src/train/experiment.ts`, `src/lab/lab.ts`) for `arl view`: `metrics.jsonl`, `detectors.jsonl`, `summary.json`,
 * `samples/*.jsonl`, `config.yaml`, `lab.json` and a checkpoint's `tokenizer.json` (token ids → text). JSON-lines
 * files are read incrementally (only the bytes appended since the last poll: src/view/tail.ts) and a torn last line
 * (a run writing it right now) waits until it is whole, so a folder can be read while a run still trains; whole
 * files are re-read only when their size or mtime changes. Every read is bounded (src/view/limits.ts): what is left
 * out is counted (`SourceInfo.damagedLines`, `SourceInfo.cutLines`). The folders come from `discoverSources`
 * (src/view/sources.ts).
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { lockHolder } from "../train/runDir.ts";
import { rolloutEvalEpisodes } from "./agentEpisodes.ts";
import { num } from "./fields.ts";
import { CachedFile, fileStamp } from "./files.ts";
import { DEFAULT_VIEW_LIMITS, ownText, parseRunJson, type ViewLimits } from "./limits.ts";
import { MetricsTable } from "./metricsTable.ts";
import { runSettingsOf, type RunSettings } from "./runSettings.ts";
import { sampleFilesIn, toEpisodes } from "./sampleEpisodes.ts";
import type { SourceRef } from "./sources.ts";
import { JsonlTail, type TailStats } from "./tail.ts";
import { findTokenizerFile, readTokenPieces } from "./tokenPieces.ts";
import type { DetectorFiring, MetricsPayload, SampleFileInfo, SamplesPayload, SourceInfo } from "./types.ts";

/** Options of a `SourceReader`. */
export interface SourceReaderOptions {
  /** Limits over `DEFAULT_VIEW_LIMITS` (tests use small ones). */
  limits?: Partial<ViewLimits>;
  /** Counter every read of the folder's files is added to (bytes read, lines parsed). */
  stats?: TailStats;
}

/** An `arl train --agent` evaluation line of `rollouts.jsonl`, as kept: the fields `rolloutEvalEpisodes` shows. */
type EvalRow = Record<string, unknown>;

/**
 * One viewed folder: its files read lazily, JSON-lines files incrementally. Every method reads the disk as it is now.
 */
export class SourceReader {
  private readonly limits: ViewLimits;
  private readonly stats: TailStats | undefined;
  private readonly metricsTail: JsonlTail;
  private readonly detectorsTail: JsonlTail;
  private readonly rolloutsTail: JsonlTail;
  private readonly summaryFile: CachedFile;
  private readonly configFile: CachedFile;
  /** `arl train --agent` runs: held-out EM before / after. */
  private readonly agentSummaryFile: CachedFile;
  private readonly evalWarmFile: CachedFile;
  private readonly samples = new Map<string, { tail: JsonlTail; rows: Record<string, unknown>[]; changes: number; key: string; payload: SamplesPayload }>();
  /** `metrics.jsonl`'s lines as they arrive. */
  private readonly table: MetricsTable;
  /** `detectors.jsonl`'s firings, and a count bumped when they change. */
  private readonly firingList: DetectorFiring[] = [];
  private firingChanges = 0;
  /** An `--agent` run's evaluation stages (`eval-…`, in order of first appearance) and lines of `rollouts.jsonl`, and a count bumped when they change. */
  private readonly evalStageList: string[] = [];
  private readonly evalRows: EvalRow[] = [];
  private evalChanges = 0;
  private metricsCache: { key: string; payload: MetricsPayload; steps: Record<string, number[]> } | null = null;
  private vocab: { key: string; pieces: string[] | null; spaced: boolean | undefined } | null = null;
  /** Lines skipped per file (relative path) as of the last read of each: not JSON objects, or over a size limit (`SourceInfo.damagedLines`). */
  private readonly damaged = new Map<string, number>();
  /** Lines kept in part or dropped per file, past the reader's limits (`SourceInfo.cutLines`). */
  private readonly cut = new Map<string, number>();

  /**
   * @param ref the folder
   * @param options limits (default `DEFAULT_VIEW_LIMITS`) and a read counter
   */
  constructor(
    readonly ref: SourceRef,
    options: SourceReaderOptions = {},
  ) {
    const limits = (this.limits = { ...DEFAULT_VIEW_LIMITS, ...options.limits });
    const stats = (this.stats = options.stats);
    const tail = (file: string): JsonlTail => new JsonlTail(join(ref.path, file), { maxLineBytes: limits.maxLineBytes, maxReadBytes: limits.maxReadBytes, maxReadLines: limits.maxReadLines, stats });
    this.metricsTail = tail("metrics.jsonl");
    this.detectorsTail = tail("detectors.jsonl");
    this.rolloutsTail = tail("rollouts.jsonl");
    this.summaryFile = new CachedFile(join(ref.path, "summary.json"), limits.maxJsonFileBytes, stats);
    this.configFile = new CachedFile(join(ref.path, "config.yaml"), limits.maxConfigBytes, stats);
    this.agentSummaryFile = new CachedFile(join(ref.path, "agent-summary.json"), limits.maxJsonFileBytes, stats);
    this.evalWarmFile = new CachedFile(join(ref.path, "eval-warm.json"), limits.maxJsonFileBytes, stats);
    this.table = new MetricsTable(limits);
  }

  /** True while a JSON-lines file is still being read over several requests (`maxReadBytes`, `maxReadLines`). */
  get reading(): boolean {
    return this.metricsTail.behind || this.detectorsTail.behind || this.rolloutsTail.behind;
  }

  /** Reads the JSON-lines files to their ends now, however many budgets that takes (an export holds everything). */
  readAll(): void {
    do {
      this.updateMetrics();
      this.firings();
      this.evalStages();
    } while (this.reading);
  }

  /** Records a file's counts of skipped (`damaged`) and cut lines; a file with none is not listed. */
  private count(file: string, damaged: number, cut = 0): void {
    if (damaged > 0) this.damaged.set(file, damaged);
    else this.damaged.delete(file);
    if (cut > 0) this.cut.set(file, cut);
    else this.cut.delete(file);
  }

  /** A whole file's text (null when missing or over its limit: then counted as one damaged line). */
  private whole(file: CachedFile, name: string): string | null {
    const text = file.read();
    this.count(name, file.tooBig !== undefined ? 1 : 0, this.cut.get(name) ?? 0);
    return text;
  }

  /** Reads what `metrics.jsonl` gained since the last call into the table. */
  private updateMetrics(): MetricsTable {
    const u = this.metricsTail.update();
    if (u !== null) {
      if (u.reset) this.table.clear();
      for (const row of u.rows) this.table.add(row);
      this.count("metrics.jsonl", this.metricsTail.damaged, this.table.cut);
    }
    return this.table;
  }

  /** `detectors.jsonl`'s firings (lines without a detector, metric and step are left out), read incrementally. */
  private firings(): DetectorFiring[] {
    const u = this.detectorsTail.update();
    if (u === null) return this.firingList;
    const { maxFirings, maxTextChars } = this.limits;
    if (u.reset) this.firingList.length = 0;
    let cut = u.reset ? 0 : (this.cut.get("detectors.jsonl") ?? 0);
    for (const r of u.rows) {
      if (!(typeof r.detector === "string" && typeof r.metric === "string" && num(r.step) !== undefined)) continue;
      if (this.firingList.length >= maxFirings) {
        cut++;
        continue;
      }
      const text = (v: string): string => ownText(v, maxTextChars);
      this.firingList.push({ detector: text(r.detector), metric: text(r.metric), step: num(r.step)!, since: num(r.since), value: num(r.value) ?? NaN, baseline: num(r.baseline), threshold: num(r.threshold), message: text(typeof r.message === "string" ? r.message : r.detector) });
    }
    this.firingChanges++;
    this.count("detectors.jsonl", this.detectorsTail.damaged, cut);
    return this.firingList;
  }

  /**
   * An `--agent` run's evaluation stages (`eval-…`) of `rollouts.jsonl`, in order of first appearance, and their
   * lines (the fields shown, texts cut to `maxTextChars`), read incrementally: the index asks on every poll.
   */
  private evalStages(): string[] {
    const u = this.rolloutsTail.update();
    if (u === null) return this.evalStageList;
    const { maxEvalRows, maxStages, maxKeyLength, maxTextChars } = this.limits;
    if (u.reset) this.evalStageList.length = this.evalRows.length = 0;
    let cut = u.reset ? 0 : (this.cut.get("rollouts.jsonl") ?? 0);
    const text = (v: unknown): unknown => (typeof v === "string" ? ownText(v, maxTextChars) : v);
    for (const r of u.rows) {
      const stage = r.stage;
      if (typeof stage !== "string" || !stage.startsWith("eval-")) continue;
      const known = this.evalStageList.includes(stage);
      if (this.evalRows.length >= maxEvalRows || (!known && (stage.length > maxKeyLength || this.evalStageList.length >= maxStages))) {
        cut++;
        continue;
      }
      if (!known) this.evalStageList.push(ownText(stage, maxKeyLength));
      this.evalRows.push({ stage: this.evalStageList.find((s) => s === stage), task: text(r.task), status: text(r.status), reward: num(r.reward), dropReason: text(r.dropReason), mismatches: num(r.mismatches), calls: num(r.calls) });
    }
    this.evalChanges++;
    this.count("rollouts.jsonl", this.rolloutsTail.damaged, cut);
    return this.evalStageList;
  }

  /**
   * The folder's sample files now: `samples/*.jsonl`, and an `--agent` run's evaluations, which live in
   * `rollouts.jsonl` only (`from: "rollouts"`; a samples file of the same name wins).
   */
  sampleFiles(): SampleFileInfo[] {
    const files = sampleFilesIn(join(this.ref.path, "samples"));
    for (const stage of this.evalStages()) {
      if (!files.some((f) => f.name === stage)) files.push({ name: stage, type: "eval", policy: stage.slice("eval-".length), from: "rollouts" });
    }
    return files;
  }

  /** True while a live process other than this one holds the folder's `.lock` (a pid: a larger file is not one). */
  private live(): boolean {
    try {
      const st = statSync(join(this.ref.path, ".lock"));
      if (!st.isFile() || st.size > 32) return false; // a FIFO would block the read below, and the event loop with it
    } catch {
      return false;
    }
    return lockHolder(this.ref.path) !== undefined;
  }

  /**
   * What the folder holds now (reads what `metrics.jsonl` gained). Cheap on purpose — the page waits for the index
   * of every source before drawing, and polls it: no detector replay here (that is `metrics()`, per source asked for).
   * Its size is bounded by the limits (keys, stages, text lengths), whatever the files hold.
   */
  info(): SourceInfo {
    const m = this.updateMetrics().summary();
    const files = this.sampleFiles();
    const detectorCount = this.firings().length;
    const sorted = (map: Map<string, number>): Record<string, number> => Object.fromEntries([...map].sort(([a], [b]) => (a < b ? -1 : 1)));
    return {
      id: this.ref.id,
      label: this.ref.label,
      kind: this.ref.kind,
      lab: this.ref.lab,
      path: this.ref.path,
      live: this.live(),
      stages: m.stages,
      stepsByStage: m.stepsByStage,
      metricKeys: m.metricKeys,
      metricKeysByStage: m.metricKeysByStage,
      damagedLines: sorted(this.damaged),
      ...(this.cut.size > 0 ? { cutLines: sorted(this.cut) } : {}),
      sampleFiles: files,
      detectorCount,
      version: this.version(files),
      description: this.ref.description,
    };
  }

  /**
   * Changes whenever a file the viewer reads changes, and as a long JSON-lines file is read over several polls (the
   * bytes read so far). The trainer writes each samples file through a temp file + rename (RunDir.writeSamples),
   * which changes the folder's mtime: one stat of the folder sees any new or rewritten file, where a stat per file
   * costs ~0.1 ms × steps.
   */
  version(files: readonly SampleFileInfo[] = this.sampleFiles()): string {
    const stamp = (file: string): string => fileStamp(join(this.ref.path, file));
    const read = [this.metricsTail, this.detectorsTail, this.rolloutsTail].map((t) => t.position).join(",");
    return [stamp("metrics.jsonl"), stamp("detectors.jsonl"), this.summaryFile.stamp(), stamp("samples"), files.length, stamp("rollouts.jsonl"), this.agentSummaryFile.stamp(), read].join("|");
  }

  /** The run's `config.yaml` settings the viewer uses (`runSettingsOf`). */
  private settings(): RunSettings {
    return runSettingsOf(this.whole(this.configFile, "config.yaml"));
  }

  /**
   * `metrics.jsonl` column-wise (at most `maxCells` values: lines thinned evenly past it, `thinned` set),
   * `detectors.jsonl` and `summary.json`.
   * @returns the payload; empty columns when the run has written nothing yet
   */
  metrics(): MetricsPayload {
    const version = this.version(); // before reading: a file that changes meanwhile makes the next version differ
    return { ...this.metricsWithSteps().payload, version };
  }

  /**
   * RL steps at which each detector was firing: the trainer's own `DetectorMonitor` replayed over the RL lines of
   * `metrics.jsonl` with the run's `detectors` config (so a streak's end is known, which `detectors.jsonl` — onsets
   * only — does not say); without a readable config, the onset steps of `detectors.jsonl`.
   */
  detectorSteps(): Record<string, number[]> {
    return this.metricsWithSteps().steps;
  }

  private metricsWithSteps(): { payload: MetricsPayload; steps: Record<string, number[]> } {
    const table = this.updateMetrics();
    const detectors = this.firings();
    const key = [table.changes, this.firingChanges, this.summaryFile.stamp(), this.configFile.stamp(), this.agentSummaryFile.stamp()].join("|");
    if (this.metricsCache?.key === key) return this.metricsCache;
    let summary: unknown = null;
    // an --agent run writes agent-summary.json
    const st = existsSync(this.summaryFile.path) ? this.whole(this.summaryFile, "summary.json") : this.whole(this.agentSummaryFile, "agent-summary.json");
    if (st !== null) {
      try {
        summary = parseRunJson(st);
      } catch {
        summary = null; // being written (never: it is written atomically) or damaged
      }
    }
    const steps: Record<string, number[]> = {};
    for (const [d, list] of Object.entries(table.detectorSteps(this.settings().detectors, this.configFile.stamp()))) steps[d] = [...list];
    for (const f of detectors) {
      const list = (steps[f.detector] ??= []);
      if (!list.includes(f.step)) list.push(f.step);
    }
    for (const list of Object.values(steps)) list.sort((a, b) => a - b);
    this.metricsCache = { key, payload: { id: this.ref.id, ...table.columns(), detectors: [...detectors], detectorSteps: steps, summary }, steps };
    return this.metricsCache;
  }

  /**
   * Token id → text from the first `tokenizer.json` found in the folder's (or its lab's) checkpoints; null when none
   * (or it is over `maxTokenizerBytes`).
   */
  private pieces(): string[] | null {
    const dirs = [this.ref.path, ...(this.ref.labPath !== undefined && this.ref.labPath !== this.ref.path ? [this.ref.labPath] : [])];
    const file = findTokenizerFile(dirs);
    const key = file ?? "-";
    if (this.vocab?.key === key) return this.vocab.pieces;
    const { pieces, spaced } = file !== undefined ? readTokenPieces(file, this.limits.maxTokenizerBytes, this.stats) : { pieces: null, spaced: undefined };
    this.vocab = { key, pieces, spaced };
    return pieces;
  }

  /**
   * One samples file, each episode with its group, outcome, advantage and token text. Lines over
   * `maxSampleLineBytes` are skipped as damaged; bytes past `maxSampleFileBytes` are not read (`unreadBytes`).
   * @param name a file stem from `sampleFiles()` (e.g. `step-3`)
   * @throws Error when the folder has no such samples file
   */
  samplesOf(name: string): SamplesPayload {
    const info = this.sampleFiles().find((f) => f.name === name);
    if (info === undefined) throw new Error(`${this.ref.id} has no samples/${name}.jsonl`);
    let entry = this.samples.get(name);
    if (entry === undefined) {
      const tail = new JsonlTail(join(this.ref.path, "samples", `${name}.jsonl`), { maxLineBytes: this.limits.maxSampleLineBytes, maxBytes: this.limits.maxSampleFileBytes, stats: this.stats });
      entry = { tail, rows: [], changes: 0, key: "", payload: { id: this.ref.id, file: name, episodes: [], vocab: {}, detectorSteps: {} } };
      this.samples.set(name, entry);
    }
    const detectorSteps = this.detectorSteps();
    if (info.from === "rollouts") {
      const key = `${this.evalChanges}|${this.agentSummaryFile.stamp()}|${this.evalWarmFile.stamp()}`;
      if (entry.key !== key) {
        entry.key = key;
        entry.payload = { id: this.ref.id, file: name, episodes: rolloutEvalEpisodes(this.evalRows, name), vocab: {}, detectorSteps, note: this.agentEvalNote(name) };
        const damaged = this.damaged.get("rollouts.jsonl");
        if (damaged !== undefined) entry.payload.damagedLines = damaged;
      }
      entry.payload.detectorSteps = detectorSteps;
      return entry.payload;
    }
    const u = entry.tail.update();
    if (u !== null) {
      if (u.reset) entry.rows = [];
      for (const row of u.rows) entry.rows.push(row);
      entry.changes++;
      this.count(`samples/${name}.jsonl`, entry.tail.damaged);
    }
    const pieces = this.pieces(); // a checkpoint's tokenizer.json may appear after the samples (key below)
    const key = `${entry.changes}|${this.configFile.stamp()}|${this.vocab?.key ?? "-"}`;
    if (entry.key !== key) {
      entry.key = key;
      const vocab: Record<string, string> = {};
      const episodes = toEpisodes(entry.rows, info, this.settings(), { spaced: this.vocab?.spaced, vocab });
      if (pieces !== null) for (const e of episodes) for (const seg of e.segments ?? (e.tokens ? [e.tokens] : [])) for (const id of seg.ids) if (vocab[id] === undefined && pieces[id] !== undefined) vocab[id] = pieces[id];
      entry.payload = { id: this.ref.id, file: name, episodes, vocab, detectorSteps };
      const damaged = this.damaged.get(`samples/${name}.jsonl`);
      if (damaged !== undefined) entry.payload.damagedLines = damaged;
      if (entry.tail.unread > 0) entry.payload.unreadBytes = entry.tail.unread;
      // An --agent run's evaluation transcripts (samples/eval-<label>.jsonl): the held-out EM beside them.
      if (info.type === "eval" && episodes.some((e) => e.agent !== undefined)) entry.payload.note = this.agentEvalNote(name, true);
    }
    entry.payload.detectorSteps = detectorSteps;
    return entry.payload;
  }

  /** An `--agent` run's held-out EM for an evaluation stage, from `agent-summary.json` (or `eval-warm.json`). */
  private agentEvalNote(stage: string, transcripts = false): string {
    const read = (f: CachedFile, name: string): Record<string, unknown> | null => {
      try {
        const t = this.whole(f, name);
        return t === null ? null : (parseRunJson(t) as Record<string, unknown>);
      } catch {
        return null;
      }
    };
    const summary = read(this.agentSummaryFile, "agent-summary.json");
    const part = stage === "eval-after" ? summary?.after : (summary?.before ?? read(this.evalWarmFile, "eval-warm.json"));
    const e = part as { success?: unknown; n?: unknown; dropped?: unknown } | undefined | null;
    const em = num(e?.success) !== undefined ? `held-out EM ${num(e?.success)!.toFixed(1)} % of ${num(e?.n) ?? "?"} tasks (${num(e?.dropped) ?? 0} dropped; ${stage === "eval-after" ? "agent-summary.json" : summary ? "agent-summary.json" : "eval-warm.json"}). ` : "";
    if (transcripts) return `${em}Each rollout's transcript, answer and the task's gold answers from samples/${stage}.jsonl; success = EM of the answer, graded by the trainer.`;
    return `${em}An --agent run keeps only each evaluation rollout's status and reward (rollouts.jsonl; reward = EM of the answer, graded by the trainer): no transcript, no answer.`;
  }
}
