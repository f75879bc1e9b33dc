/**
 * Reads run and lab folders exactly as they are on disk (README "A run on disk"; writers: `src/train/runDir.ts`,
 * `src/train/experiment.ts`, `src/lab/lab.ts`) for `arl view`: `metrics.jsonl`, `detectors.jsonl`, `summary.json`,
 * `samples/*.jsonl`, `config.yaml`, `lab.json` and a checkpoint's `tokenizer.json` (token ids → text). JSON-lines
 * files are read incrementally (only the bytes appended since the last poll: src/view/tail.ts) and a torn last line
 * (a run writing it right now) waits until it is whole, so a folder can be read while a run still trains; whole
 * files are re-read only when their size or mtime changes. Every read is bounded (src/view/limits.ts): what is left
 * out is counted (`SourceInfo.damagedLines`, `SourceInfo.cutLines`).
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { parseBoundedYaml } from "../train/configGuards.ts";
import { grpoAdvantages } from "../algo/advantages.ts";
import { emCheck } from "../reward/em.ts";
import { DEFAULT_DETECTOR_THRESHOLDS, type DetectorThresholds } from "../reward/detectors.ts";
import { lockHolder } from "../train/runDir.ts";
import { agentEpisode, isAgentLine, rolloutEvalEpisodes } from "./agentEpisodes.ts";
import { DEFAULT_VIEW_LIMITS, ownText, parseRunJson, type ViewLimits } from "./limits.ts";
import { MetricsTable } from "./metricsTable.ts";
import { JsonlTail, readCapped, type TailStats } from "./tail.ts";
import type {
  DetectorFiring,
  MetricsPayload,
  Outcome,
  SampleFileInfo,
  SamplesPayload,
  SourceInfo,
  SourceKind,
  ViewEpisode,
  ViewRewardTerm,
  ViewTokens,
  ViewTurn,
} from "./types.ts";

export { joinTokenTexts } from "./agentEpisodes.ts";

/** A folder to view, before reading it. */
export interface SourceRef {
  id: string;
  label: string;
  kind: SourceKind;
  lab?: string;
  path: string;
  /** Folder holding the lab's shared warm start (its `checkpoints/sft/tokenizer.json` serves the designs too). */
  labPath?: string;
  description?: string;
}

const isDir = (p: string): boolean => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};
const isRunFolder = (p: string): boolean => ["metrics.jsonl", "config.yaml", "summary.json"].some((f) => existsSync(join(p, f)));
const isLabFolder = (p: string): boolean => existsSync(join(p, "lab.json")) || isDir(join(p, "designs"));

/** `labDescriptions` by `lab.json` path, with the file's stamp: the sources are found again on every poll. */
const descriptionsCache = new Map<string, { stamp: string; descriptions: Record<string, string> }>();

/**
 * Descriptions of a lab's designs from its `lab.json` (empty while the lab runs: it is written at the end; empty when
 * the file is over `maxJsonFileBytes`), each cut to `maxTextChars`; re-read only when the file changed.
 */
function labDescriptions(labPath: string): Record<string, string> {
  const file = new CachedFile(join(labPath, "lab.json"), DEFAULT_VIEW_LIMITS.maxJsonFileBytes);
  const stamp = file.stamp();
  const hit = descriptionsCache.get(file.path);
  if (hit?.stamp === stamp) return hit.descriptions;
  let descriptions: Record<string, string> = {};
  try {
    const lab = parseRunJson(file.read() ?? "{}") as { designs?: { name?: unknown; description?: unknown }[] };
    if (Array.isArray(lab.designs)) {
      const named = lab.designs.filter((d): d is { name: string; description?: unknown } => typeof d?.name === "string");
      descriptions = Object.fromEntries(named.map((d) => [d.name, ownText(typeof d.description === "string" ? d.description : "", DEFAULT_VIEW_LIMITS.maxTextChars)]));
    }
  } catch {
    descriptions = {};
  }
  descriptionsCache.set(file.path, { stamp, descriptions });
  return descriptions;
}

/**
 * Finds the runs and labs to view. Each path is a run folder (`metrics.jsonl`, `config.yaml` or `summary.json`), a
 * lab folder (`lab.json` or `designs/`: its warm start and every design), or a folder of those (e.g. `runs/`,
 * looked into one level deep).
 * @param paths folders (relative to the working directory or absolute)
 * @returns the sources, ids unique (`<run>`, `<lab>`, `<lab>/<design>`)
 * @throws Error naming a path that does not exist or holds no run or lab
 */
export function discoverSources(paths: readonly string[]): SourceRef[] {
  const out: SourceRef[] = [];
  const used = new Set<string>();
  const unique = (id: string): string => {
    let name = id;
    for (let n = 2; used.has(name); n++) name = `${id}~${n}`;
    used.add(name);
    return name;
  };
  // a folder given twice (runs/a runs/a ./runs/a, or a run and the folder holding it) is one source
  const seen = new Set<string>();
  const addLab = (labPath: string): void => {
    if (seen.has(labPath)) return;
    seen.add(labPath);
    const labName = unique(basename(labPath));
    const descriptions = labDescriptions(labPath);
    if (existsSync(join(labPath, "metrics.jsonl"))) out.push({ id: labName, label: `${labName} (warm start)`, kind: "warm-start", lab: labName, path: labPath, labPath });
    const designs = isDir(join(labPath, "designs")) ? readdirSync(join(labPath, "designs")).sort() : [];
    for (const d of designs) {
      const p = join(labPath, "designs", d);
      if (!isDir(p) || !isRunFolder(p)) continue;
      const id = unique(`${labName}/${d}`);
      out.push({ id, label: id, kind: "design", lab: labName, path: p, labPath, description: descriptions[d] });
    }
  };
  const addRun = (p: string): void => {
    if (seen.has(p)) return;
    seen.add(p);
    const id = unique(basename(p));
    out.push({ id, label: id, kind: "run", path: p });
  };
  for (const given of paths) {
    const p = resolve(given);
    if (!isDir(p)) {
      const what = existsSync(p) ? `a file, not a folder${isRunFolder(dirname(p)) ? ` (its run folder is ${dirname(given) || "."})` : ""}` : "no such folder";
      throw new Error(`arl view: ${given}: ${what} (give a run folder such as runs/default, a lab such as runs/lab, or a folder of them)`);
    }
    if (isLabFolder(p)) addLab(p);
    else if (isRunFolder(p)) addRun(p);
    else {
      const children = readdirSync(p)
        .sort()
        .map((c) => join(p, c))
        .filter(isDir);
      const before = seen.size;
      for (const c of children) {
        if (isLabFolder(c)) addLab(c);
        else if (isRunFolder(c)) addRun(c);
      }
      if (seen.size === before && !children.some((c) => seen.has(c))) throw new Error(`arl view: ${given} holds no run or lab (a run folder has metrics.jsonl or config.yaml; a lab has lab.json or designs/)`);
    }
  }
  return out;
}

/** A file's (or folder's) `size:mtime`, or `-` when it is missing. */
function stampOf(path: string): string {
  try {
    const s = statSync(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return "-";
  }
}

/** A whole file's text, cached by size and mtime; not read when it is over `maxBytes` (`tooBig`). */
class CachedFile {
  private key = "";
  private text: string | null = null;
  /** The file's size when it is over `maxBytes` (as of the last `read`). */
  tooBig: number | undefined;
  constructor(
    readonly path: string,
    private readonly maxBytes: number,
    private readonly stats?: TailStats,
  ) {}

  /** `size:mtime`, or `-` when the file is missing. */
  stamp(): string {
    return stampOf(this.path);
  }

  /** The file's text (null when missing or over `maxBytes`); re-read only when its stamp changed. */
  read(): string | null {
    const k = this.stamp();
    if (k !== this.key) {
      this.key = k;
      const got = readCapped(this.path, this.maxBytes, this.stats);
      this.text = got !== null && "text" in got ? got.text : null;
      this.tooBig = got !== null && "tooBig" in got ? got.tooBig : undefined;
    }
    return this.text;
  }
}

/**
 * Parses the complete lines of a JSON-lines text (a last line without its newline is being written: skipped).
 * @param counter when given, `counter.damaged` is set to the number of complete lines that are not JSON objects
 *   (skipped, never a crash of the viewer; the page reports them: `SourceInfo.damagedLines`)
 */
export function parseJsonLines(text: string | null, counter?: { damaged: number }): Record<string, unknown>[] {
  if (counter !== undefined) counter.damaged = 0;
  if (text === null || text === "") return [];
  const lines = text.split("\n");
  lines.pop(); // "" after the final newline, or a line still being written
  const out: Record<string, unknown>[] = [];
  for (const line of lines) {
    if (line.trim() === "") continue;
    try {
      const v = parseRunJson(line);
      if (v !== null && typeof v === "object" && !Array.isArray(v)) out.push(v as Record<string, unknown>);
      else if (counter !== undefined) counter.damaged++;
    } catch {
      if (counter !== undefined) counter.damaged++; // not JSON: skipped, and counted
    }
  }
  return out;
}

/** The fields of `config.yaml` the viewer uses. */
interface RunSettings {
  groupSize?: number;
  advantage?: string;
  samplesPerStep?: number;
  detectors?: DetectorThresholds & { enabled: boolean };
}

/**
 * The run's detector thresholds: `config.yaml`'s `detectors` section (the resolved config holds every field) over
 * `DEFAULT_DETECTOR_THRESHOLDS`, rule by rule; undefined when a field has the wrong type (nothing is replayed then).
 */
function detectorSettings(section: Record<string, unknown> | undefined): (DetectorThresholds & { enabled: boolean }) | undefined {
  const s = section ?? {};
  const out: Record<string, unknown> = { enabled: s.enabled !== false };
  for (const [k, def] of Object.entries(DEFAULT_DETECTOR_THRESHOLDS) as [string, unknown][]) {
    const v = s[k];
    if (typeof def === "number") {
      if (v !== undefined && num(v) === undefined) return undefined;
      out[k] = num(v) ?? def;
    } else {
      if (v !== undefined && (v === null || typeof v !== "object")) return undefined;
      const rule: Record<string, number> = { ...(def as Record<string, number>) };
      for (const [rk, rv] of Object.entries((v ?? {}) as Record<string, unknown>)) {
        if (num(rv) === undefined) return undefined;
        rule[rk] = num(rv)!;
      }
      out[k] = rule;
    }
  }
  if (!((out.baselineSteps as number) >= 1 && (out.window as number) >= 1)) return undefined;
  return out as unknown as DetectorThresholds & { enabled: boolean };
}

/** Sample files of a `samples/` folder: `step-<n>` by step, then `eval-<policy>` by name. */
function sampleFiles(dir: string): SampleFileInfo[] {
  if (!isDir(dir)) return [];
  const out: SampleFileInfo[] = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith(".jsonl")) continue;
    const name = f.slice(0, -".jsonl".length);
    const m = /^step-(\d+)$/.exec(name);
    if (m) out.push({ name, type: "step", step: Number(m[1]) });
    else if (name.startsWith("eval-")) out.push({ name, type: "eval", policy: name.slice("eval-".length) });
  }
  return out.sort((a, b) => (a.type !== b.type ? (a.type === "step" ? -1 : 1) : a.type === "step" ? a.step! - b.step! : a.name < b.name ? -1 : 1));
}

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** `xs` cut or padded with `fill` to `n` items (token books of one sequence are all `[seq]`). */
const fitTo = <T>(n: number, xs: T[], fill: T): T[] => (xs.length === n ? xs : Array.from({ length: n }, (_, i) => (i < xs.length ? xs[i] : fill)));

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
    const files = sampleFiles(join(this.ref.path, "samples"));
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
    const stamp = (file: string): string => stampOf(join(this.ref.path, file));
    const read = [this.metricsTail, this.detectorsTail, this.rolloutsTail].map((t) => t.position).join(",");
    return [stamp("metrics.jsonl"), stamp("detectors.jsonl"), this.summaryFile.stamp(), stamp("samples"), files.length, stamp("rollouts.jsonl"), this.agentSummaryFile.stamp(), read].join("|");
  }

  private settings(): RunSettings {
    const text = this.whole(this.configFile, "config.yaml");
    if (text === null) return {};
    let cfg: Record<string, Record<string, unknown> | undefined>;
    try {
      cfg = (parseBoundedYaml(text) ?? {}) as Record<string, Record<string, unknown> | undefined>;
    } catch {
      return {};
    }
    const out: RunSettings = {
      groupSize: num(cfg.rl?.groupSize),
      advantage: typeof cfg.rl?.advantage === "string" ? cfg.rl.advantage : undefined,
      samplesPerStep: num(cfg.run?.samplesPerStep),
    };
    out.detectors = detectorSettings(cfg.detectors);
    return out;
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
    const candidates: string[] = [];
    for (const d of dirs) {
      const ck = join(d, "checkpoints");
      if (!isDir(ck)) continue;
      const names = readdirSync(ck).sort((a, b) => (a === "final" ? -1 : b === "final" ? 1 : a === "sft" ? -1 : b === "sft" ? 1 : a < b ? -1 : 1));
      for (const n of names) candidates.push(join(ck, n, "tokenizer.json"));
    }
    const file = candidates.find((c) => existsSync(c));
    const key = file ?? "-";
    if (this.vocab?.key === key) return this.vocab.pieces;
    let pieces: string[] | null = null;
    let spaced: boolean | undefined;
    const got = file !== undefined ? readCapped(file, this.limits.maxTokenizerBytes, this.stats) : null;
    if (got !== null && "text" in got) {
      try {
        const tok = parseRunJson(got.text) as { model?: { vocab?: Record<string, number> | [string, number][] }; added_tokens?: { id: number; content: string }[]; decoder?: { type?: unknown } | null };
        // a WordPiece decoder joins tokens by spaces (the embedded WordTokenizer's); ByteLevel and others keep the text
        spaced = typeof tok.decoder?.type === "string" ? tok.decoder.type === "WordPiece" : undefined;
        pieces = [];
        const vocab = tok.model?.vocab;
        const entries: [string, number][] = Array.isArray(vocab) ? vocab.map(([t], i) => [t, i]) : Object.entries(vocab ?? {});
        for (const [t, id] of entries) pieces[id] = t;
        for (const a of tok.added_tokens ?? []) pieces[a.id] = a.content;
      } catch {
        pieces = null;
      }
    }
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

const str = (v: unknown, fallback = ""): string => (typeof v === "string" ? v : fallback);

/**
 * Success / fail / no answer: the env's grade (score ≥ 1) when present, else the `em` (or `outcome`) reward term = 1,
 * else — evaluation episodes carry no reward — Search-R1 EM of the answer against the gold answers (`emCheck`, the
 * trainer's own check).
 */
export function outcomeOf(answer: string | null, terms: readonly ViewRewardTerm[], grade: { score: number } | undefined, gold: readonly string[] = []): Outcome {
  if (grade !== undefined) return grade.score >= 1 - 1e-9 ? "success" : answer === null ? "no-answer" : "fail";
  if (answer === null) return "no-answer";
  const t = terms.find((x) => x.name === "em") ?? terms.find((x) => x.name === "outcome");
  if (t !== undefined) return t.value >= 1 - 1e-9 ? "success" : "fail";
  return gold.length > 0 && emCheck(answer, [...gold]) === 1 ? "success" : "fail";
}

/**
 * Sample lines → episodes: groups (consecutive lines of one task), outcomes, advantages, token books.
 * @param agent `spaced`: the tokenizer's decoder joins tokens by spaces (WordPiece; undefined = not known); `vocab`:
 *   filled with the token texts an `--agent` samples file carries (id → text)
 */
function toEpisodes(rows: Record<string, unknown>[], info: SampleFileInfo, settings: RunSettings, agent: { spaced?: boolean; vocab: Record<string, string> } = { vocab: {} }): ViewEpisode[] {
  const episodes: ViewEpisode[] = [];
  let group = -1;
  let member = 0;
  rows.forEach((r, index) => {
    const task = str(r.task, `#${index}`);
    if (index === 0 || task !== str(rows[index - 1].task, `#${index - 1}`)) {
      group++;
      member = 0;
    } else member++;
    if (isAgentLine(r)) {
      episodes.push(agentEpisode(r, index, task, group, member, agent.spaced, agent.vocab));
      return;
    }
    const reward = r.reward as { total?: unknown; terms?: unknown } | null | undefined;
    const terms: ViewRewardTerm[] = Array.isArray(reward?.terms)
      ? (reward.terms as Record<string, unknown>[]).map((t) => ({ name: str(t.name), value: num(t.value) ?? 0, weight: num(t.weight) ?? 0, explanation: str(t.explanation), ...(typeof t.error === "string" ? { error: t.error } : {}) }))
      : [];
    const g = r.grade as { score?: unknown; parts?: unknown; explanation?: unknown } | undefined;
    const grade =
      g !== undefined && g !== null && num(g.score) !== undefined
        ? { score: num(g.score)!, parts: Object.fromEntries(Object.entries((g.parts ?? {}) as Record<string, unknown>).filter(([, v]) => num(v) !== undefined)) as Record<string, number>, ...(typeof g.explanation === "string" ? { explanation: g.explanation } : {}) }
        : undefined;
    const turns: ViewTurn[] = Array.isArray(r.turns)
      ? (r.turns as Record<string, unknown>[]).map((t) => ({
          action: str(t.action),
          observation: str(t.observation),
          ...(Array.isArray(t.tools) ? { tools: (t.tools as Record<string, unknown>[]).map((c) => ({ name: str(c.name), ok: c.ok === true, ...(typeof c.error === "string" ? { error: c.error } : {}) })) } : {}),
        }))
      : [];
    const answer = typeof r.answer === "string" ? r.answer : null;
    const gold = Array.isArray(r.gold) ? (r.gold as unknown[]).map((x) => String(x)) : [];
    let tokens: ViewTokens | undefined;
    if (Array.isArray(r.tokens) && Array.isArray(r.lossMask)) {
      const ids = (r.tokens as unknown[]).map((x) => num(x) ?? -1);
      tokens = {
        ids,
        // a damaged line's books may disagree in length: every one is `[ids.length]` (missing: not trained, 0 nats)
        lossMask: fitTo(ids.length, (r.lossMask as unknown[]).map((x) => (x === 1 ? 1 : 0)), 0),
        logprobs: fitTo(ids.length, Array.isArray(r.logprobs) ? (r.logprobs as unknown[]).map((x) => num(x) ?? 0) : [], 0),
        promptLength: Math.min(ids.length, Math.max(0, num(r.promptLength) ?? 0)),
      };
    }
    const toolCalls: Record<string, number> = {};
    if (r.toolCalls !== null && typeof r.toolCalls === "object") for (const [k, v] of Object.entries(r.toolCalls)) if (num(v) !== undefined) toolCalls[k] = num(v)!;
    const numbers = (v: unknown): number[] | undefined => (Array.isArray(v) && v.length > 0 && v.every((x) => num(x) !== undefined) ? (v as number[]) : undefined);
    const turnAdvantages = numbers((reward as Record<string, unknown> | null | undefined)?.turnAdvantages);
    const turnRewards = numbers((reward as Record<string, unknown> | null | undefined)?.turnRewards);
    const fileAdv = num(r.advantage) ?? (turnAdvantages !== undefined ? turnAdvantages.reduce((a, b) => a + b, 0) / turnAdvantages.length : undefined);
    episodes.push({
      index,
      task,
      kind: str(r.kind, task.includes(":") ? task.slice(0, task.indexOf(":")) : "?"),
      question: str(r.question),
      gold,
      ...(typeof r.known === "boolean" ? { known: r.known } : {}),
      member: num(r.member) ?? member,
      group,
      turns,
      answer,
      reward: reward !== null && reward !== undefined && num(reward.total) !== undefined ? { total: num(reward.total)!, terms } : null,
      ...(grade !== undefined ? { grade } : {}),
      outcome: outcomeOf(answer, terms, grade, gold),
      toolCalls,
      advantage: fileAdv ?? null,
      advantageSource: fileAdv !== undefined ? "file" : "none",
      ...(fileAdv !== undefined && num(r.advantage) === undefined ? { advantageNote: "from the trainer: the mean of its per-turn advantages (reward.turnAdvantages)" } : {}),
      ...(turnAdvantages !== undefined ? { turnAdvantages } : {}),
      ...(turnRewards !== undefined ? { turnRewards } : {}),
      ...(tokens !== undefined ? { tokens } : {}),
    });
  });
  if (info.type === "eval") {
    for (const e of episodes) if (e.advantageSource === "none") e.advantageNote = "evaluation episodes are not trained: no advantage";
    return episodes;
  }
  // Advantages the trainer did not write: recomputed with the run's estimator for groups written whole. The trainer
  // writes the first run.samplesPerStep episodes of a step (groups in order), so only the last group can be cut.
  const groups = new Map<number, ViewEpisode[]>();
  for (const e of episodes) groups.set(e.group, [...(groups.get(e.group) ?? []), e]);
  const lastGroup = group;
  const allWritten = settings.samplesPerStep !== undefined && episodes.length < settings.samplesPerStep;
  for (const [gi, members] of groups) {
    if (members.every((e) => e.advantageSource === "file" || e.agent !== undefined)) continue; // an agent's are the trainer's or none
    const whole = gi !== lastGroup || allWritten || (settings.groupSize !== undefined && members.length === settings.groupSize);
    const rewards = members.map((e) => e.reward?.total);
    const note = !whole
      ? `group cut by run.samplesPerStep (${members.length} of its members in the file${settings.groupSize ? ` of ${settings.groupSize}` : ""}): advantage unknown`
      : settings.advantage !== "grpo" && settings.advantage !== "drgrpo"
        ? "the run's rl.advantage is not known here: advantage not recomputed"
        : rewards.some((x) => x === undefined)
          ? "a member has no reward: advantage unknown"
          : undefined;
    if (note !== undefined) {
      for (const e of members) if (e.advantageSource !== "file") e.advantageNote = note;
      continue;
    }
    const adv = grpoAdvantages(rewards as number[], { normalizeStd: settings.advantage === "grpo" });
    members.forEach((e, i) => {
      if (e.advantageSource === "file") return;
      e.advantage = adv[i];
      e.advantageSource = "recomputed";
      e.advantageNote = `recomputed from the group's ${members.length} rewards (rl.advantage ${settings.advantage}, src/algo/advantages.ts)`;
    });
  }
  return episodes;
}
