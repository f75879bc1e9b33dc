/**
 * Reads run and lab folders exactly as they are on disk (README "A run on disk"; writers: `src/train/runDir.ts`,
 * `src/train/experiment.ts`, `src/lab/lab.ts`) for `arl view`: `metrics.jsonl`, `detectors.jsonl`, `summary.json`,
 * `samples/*.jsonl`, `config.yaml`, `lab.json` and a checkpoint's `tokenizer.json` (token ids → text). Files are
 * re-read only when their size or mtime changes, and a torn last line (a run writing it right now) is skipped until
 * it is whole, so a folder can be read while a run still trains.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import { grpoAdvantages } from "../algo/advantages.ts";
import { emCheck } from "../reward/em.ts";
import { DEFAULT_DETECTOR_THRESHOLDS, DetectorMonitor, defaultDetectors, type DetectorThresholds } from "../reward/detectors.ts";
import { lockHolder } from "../train/runDir.ts";
import type {
  DetectorFiring,
  MetricsPayload,
  Outcome,
  SampleFileInfo,
  SamplesPayload,
  SourceInfo,
  SourceKind,
  ViewAgentInfo,
  ViewEpisode,
  ViewRewardTerm,
  ViewTokens,
  ViewTurn,
} from "./types.ts";

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

/** Descriptions of a lab's designs from its `lab.json` (empty while the lab runs: it is written at the end). */
function labDescriptions(labPath: string): Record<string, string> {
  try {
    const lab = JSON.parse(readFileSync(join(labPath, "lab.json"), "utf8")) as { designs?: { name: string; description?: string }[] };
    return Object.fromEntries((lab.designs ?? []).map((d) => [d.name, d.description ?? ""]));
  } catch {
    return {};
  }
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

/** A file's text, cached by size and mtime. */
class CachedFile {
  private key = "";
  private text: string | null = null;
  constructor(readonly path: string) {}

  /** `size:mtime`, or `-` when the file is missing. */
  stamp(): string {
    try {
      const s = statSync(this.path);
      return `${s.size}:${s.mtimeMs}`;
    } catch {
      return "-";
    }
  }

  /** The file's text (null when missing); re-read only when its stamp changed. */
  read(): string | null {
    const k = this.stamp();
    if (k !== this.key) {
      this.key = k;
      try {
        this.text = readFileSync(this.path, "utf8");
      } catch {
        this.text = null;
      }
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
      const v = JSON.parse(line) as unknown;
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

/**
 * One viewed folder: its files read lazily and cached. Every method reads the disk as it is now.
 */
export class SourceReader {
  private readonly metricsFile: CachedFile;
  private readonly detectorsFile: CachedFile;
  private readonly summaryFile: CachedFile;
  private readonly configFile: CachedFile;
  /** `arl train --agent` runs: every rollout's status and reward (`rollouts.jsonl`), held-out EM before / after. */
  private readonly rolloutsFile: CachedFile;
  private readonly agentSummaryFile: CachedFile;
  private readonly evalWarmFile: CachedFile;
  private readonly samples = new Map<string, { file: CachedFile; key: string; payload: SamplesPayload }>();
  private metricsCache: { key: string; payload: MetricsPayload; steps: Record<string, number[]> } | null = null;
  /** `metrics.jsonl` column-wise (what the index needs: stages, keys), without the detector replay of `metrics()`. */
  private columnsCache: { key: string; rows: Record<string, unknown>[]; stage: string[]; step: number[]; columns: Record<string, (number | null)[]> } | null = null;
  private firingsCache: { key: string; firings: DetectorFiring[] } | null = null;
  private vocab: { key: string; pieces: string[] | null; spaced: boolean | undefined } | null = null;
  private rolloutStages: { key: string; stages: string[] } | null = null;
  /** `SourceInfo.metricKeysByStage` of the columns it was computed from. */
  private keysByStage: { of: object; keys: Record<string, string[]> } | null = null;
  /** Damaged lines per file (relative path) as of the last read of each: `SourceInfo.damagedLines`. */
  private readonly damaged = new Map<string, number>();

  /** `parseJsonLines` of one of the folder's files, keeping its count of damaged lines. */
  private parse(file: string, text: string | null): Record<string, unknown>[] {
    const counter = { damaged: 0 };
    const rows = parseJsonLines(text, counter);
    if (counter.damaged > 0) this.damaged.set(file, counter.damaged);
    else this.damaged.delete(file);
    return rows;
  }

  constructor(readonly ref: SourceRef) {
    this.metricsFile = new CachedFile(join(ref.path, "metrics.jsonl"));
    this.detectorsFile = new CachedFile(join(ref.path, "detectors.jsonl"));
    this.summaryFile = new CachedFile(join(ref.path, "summary.json"));
    this.configFile = new CachedFile(join(ref.path, "config.yaml"));
    this.rolloutsFile = new CachedFile(join(ref.path, "rollouts.jsonl"));
    this.agentSummaryFile = new CachedFile(join(ref.path, "agent-summary.json"));
    this.evalWarmFile = new CachedFile(join(ref.path, "eval-warm.json"));
  }

  /**
   * The evaluation stages (`eval-…`) of `rollouts.jsonl`, in order of first appearance; found by a scan of the
   * text for `"stage":"eval-…"` (no JSON parse: the index asks on every poll), cached by the file's stamp.
   */
  private evalStages(): string[] {
    const key = this.rolloutsFile.stamp();
    if (this.rolloutStages?.key === key) return this.rolloutStages.stages;
    const stages: string[] = [];
    const text = key === "-" ? null : this.rolloutsFile.read();
    if (text !== null) {
      const complete = text.slice(0, text.lastIndexOf("\n") + 1); // a torn last line waits until it is whole
      for (const m of complete.matchAll(/"stage":"(eval-[^"\\]*)"/g)) if (!stages.includes(m[1])) stages.push(m[1]);
    }
    this.rolloutStages = { key, stages };
    return stages;
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

  /**
   * What the folder holds now (reads `metrics.jsonl` when it changed). Cheap on purpose — the page waits for the index
   * of every source before drawing, and polls it: no detector replay here (that is `metrics()`, per source asked for).
   */
  info(): SourceInfo {
    const m = this.columns();
    const stages: string[] = [];
    const stepsByStage: Record<string, number> = {};
    for (const s of m.stage) {
      if (!(s in stepsByStage)) {
        stages.push(s);
        stepsByStage[s] = 0;
      }
      stepsByStage[s]++;
    }
    const files = this.sampleFiles();
    if (this.keysByStage?.of !== m) {
      const byStage: Record<string, Set<string>> = {};
      for (const [k, col] of Object.entries(m.columns)) col.forEach((v, i) => v !== null && (byStage[m.stage[i]] ??= new Set()).add(k));
      this.keysByStage = { of: m, keys: Object.fromEntries(stages.map((st) => [st, [...(byStage[st] ?? [])].sort()])) };
    }
    const metricKeysByStage = this.keysByStage.keys;
    const detectorCount = this.firings().length;
    return {
      id: this.ref.id,
      label: this.ref.label,
      kind: this.ref.kind,
      lab: this.ref.lab,
      path: this.ref.path,
      live: lockHolder(this.ref.path) !== undefined,
      stages,
      stepsByStage,
      metricKeys: Object.keys(m.columns).sort(),
      metricKeysByStage,
      damagedLines: Object.fromEntries([...this.damaged].sort(([a], [b]) => (a < b ? -1 : 1))),
      sampleFiles: files,
      detectorCount,
      version: this.version(files),
      description: this.ref.description,
    };
  }

  /**
   * Changes whenever a file the viewer reads changes. The trainer writes each samples file through a temp file +
   * rename (RunDir.writeSamples), which changes the folder's mtime: one stat of the folder sees any new or rewritten
   * file, where a stat per file costs ~0.1 ms × steps.
   */
  version(files: readonly SampleFileInfo[] = this.sampleFiles()): string {
    const samplesStamp = new CachedFile(join(this.ref.path, "samples")).stamp();
    return [this.metricsFile.stamp(), this.detectorsFile.stamp(), this.summaryFile.stamp(), samplesStamp, files.length, this.rolloutsFile.stamp(), this.agentSummaryFile.stamp()].join("|");
  }

  private settings(): RunSettings {
    const text = this.configFile.read();
    if (text === null) return {};
    let cfg: Record<string, Record<string, unknown> | undefined>;
    try {
      cfg = (parseYaml(text) ?? {}) as Record<string, Record<string, unknown> | undefined>;
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
   * `metrics.jsonl` column-wise, `detectors.jsonl` and `summary.json`.
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

  /** `metrics.jsonl` parsed and column-wise, cached by its stamp. */
  private columns(): { rows: Record<string, unknown>[]; stage: string[]; step: number[]; columns: Record<string, (number | null)[]> } {
    const key = this.metricsFile.stamp();
    if (this.columnsCache?.key === key) return this.columnsCache;
    const rows = this.parse("metrics.jsonl", this.metricsFile.read());
    const stage: string[] = [];
    const step: number[] = [];
    const columns: Record<string, (number | null)[]> = {};
    rows.forEach((row, i) => {
      stage.push(typeof row.stage === "string" ? row.stage : "?");
      step.push(num(row.step) ?? i);
      for (const [k, v] of Object.entries(row)) {
        if (k === "stage" || k === "step" || typeof v !== "number") continue;
        let col = columns[k];
        if (col === undefined) col = columns[k] = new Array<number | null>(i).fill(null);
        col.push(Number.isFinite(v) ? v : null);
      }
      for (const col of Object.values(columns)) if (col.length < i + 1) col.push(null);
    });
    this.columnsCache = { key, rows, stage, step, columns };
    return this.columnsCache;
  }

  /** `detectors.jsonl`'s firings, cached by its stamp. */
  private firings(): DetectorFiring[] {
    const key = this.detectorsFile.stamp();
    if (this.firingsCache?.key === key) return this.firingsCache.firings;
    const firings = this.parse("detectors.jsonl", this.detectorsFile.read()).flatMap((r): DetectorFiring[] =>
      typeof r.detector === "string" && typeof r.metric === "string" && num(r.step) !== undefined
        ? [{ detector: r.detector, metric: r.metric, step: num(r.step)!, since: num(r.since), value: num(r.value) ?? NaN, baseline: num(r.baseline), threshold: num(r.threshold), message: typeof r.message === "string" ? r.message : r.detector }]
        : [],
    );
    this.firingsCache = { key, firings };
    return firings;
  }

  private metricsWithSteps(): { payload: MetricsPayload; steps: Record<string, number[]> } {
    const key = [this.metricsFile.stamp(), this.detectorsFile.stamp(), this.summaryFile.stamp(), this.configFile.stamp(), this.agentSummaryFile.stamp()].join("|");
    if (this.metricsCache?.key === key) return this.metricsCache;
    const { rows, stage, step, columns } = this.columns();
    const detectors = this.firings();
    let summary: unknown = null;
    const st = this.summaryFile.read() ?? this.agentSummaryFile.read(); // an --agent run writes agent-summary.json
    if (st !== null) {
      try {
        summary = JSON.parse(st);
      } catch {
        summary = null; // being written (never: it is written atomically) or damaged
      }
    }
    const steps: Record<string, number[]> = {};
    const d = this.settings().detectors;
    if (d !== undefined && d.enabled) {
      const monitor = new DetectorMonitor(defaultDetectors(d), d);
      rows.forEach((row, i) => {
        if (stage[i] !== "rl") return;
        const values: Record<string, number> = {};
        for (const [k, v] of Object.entries(row)) if (typeof v === "number") values[k] = v;
        monitor.observe(step[i], values);
        for (const f of monitor.firing()) (steps[f.detector] ??= []).push(step[i]);
      });
    }
    for (const f of detectors) {
      const list = (steps[f.detector] ??= []);
      if (!list.includes(f.step)) list.push(f.step);
    }
    for (const list of Object.values(steps)) list.sort((a, b) => a - b);
    this.metricsCache = { key, payload: { id: this.ref.id, stage, step, columns, detectors, detectorSteps: steps, summary }, steps };
    return this.metricsCache;
  }

  /** Token id → text from the first `tokenizer.json` found in the folder's (or its lab's) checkpoints; null when none. */
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
    if (file !== undefined) {
      try {
        const tok = JSON.parse(readFileSync(file, "utf8")) as { model?: { vocab?: Record<string, number> | [string, number][] }; added_tokens?: { id: number; content: string }[]; decoder?: { type?: unknown } | null };
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
   * One samples file, each episode with its group, outcome, advantage and token text.
   * @param name a file stem from `sampleFiles()` (e.g. `step-3`)
   * @throws Error when the folder has no such samples file
   */
  samplesOf(name: string): SamplesPayload {
    const info = this.sampleFiles().find((f) => f.name === name);
    if (info === undefined) throw new Error(`${this.ref.id} has no samples/${name}.jsonl`);
    let entry = this.samples.get(name);
    if (entry === undefined) {
      entry = { file: new CachedFile(join(this.ref.path, "samples", `${name}.jsonl`)), key: "", payload: { id: this.ref.id, file: name, episodes: [], vocab: {}, detectorSteps: {} } };
      this.samples.set(name, entry);
    }
    const detectorSteps = this.detectorSteps();
    if (info.from === "rollouts") {
      const key = `${this.rolloutsFile.stamp()}|${this.agentSummaryFile.stamp()}|${this.evalWarmFile.stamp()}`;
      if (entry.key !== key) {
        entry.key = key;
        entry.payload = { id: this.ref.id, file: name, episodes: rolloutEvalEpisodes(this.parse("rollouts.jsonl", this.rolloutsFile.read()), name), vocab: {}, detectorSteps, note: this.agentEvalNote(name) };
        const damaged = this.damaged.get("rollouts.jsonl");
        if (damaged !== undefined) entry.payload.damagedLines = damaged;
      }
      entry.payload.detectorSteps = detectorSteps;
      return entry.payload;
    }
    const pieces = this.pieces(); // a checkpoint's tokenizer.json may appear after the samples (key below)
    const key = `${entry.file.stamp()}|${this.configFile.stamp()}|${this.vocab?.key ?? "-"}`;
    if (entry.key !== key) {
      entry.key = key;
      const vocab: Record<string, string> = {};
      const episodes = toEpisodes(this.parse(`samples/${name}.jsonl`, entry.file.read()), info, this.settings(), { spaced: this.vocab?.spaced, vocab });
      if (pieces !== null) for (const e of episodes) for (const seg of e.segments ?? (e.tokens ? [e.tokens] : [])) for (const id of seg.ids) if (vocab[id] === undefined && pieces[id] !== undefined) vocab[id] = pieces[id];
      entry.payload = { id: this.ref.id, file: name, episodes, vocab, detectorSteps };
      const damaged = this.damaged.get(`samples/${name}.jsonl`);
      if (damaged !== undefined) entry.payload.damagedLines = damaged;
      // An --agent run's evaluation transcripts (samples/eval-<label>.jsonl): the held-out EM beside them.
      if (info.type === "eval" && episodes.some((e) => e.agent !== undefined)) entry.payload.note = this.agentEvalNote(name, true);
    }
    entry.payload.detectorSteps = detectorSteps;
    return entry.payload;
  }

  /** An `--agent` run's held-out EM for an evaluation stage, from `agent-summary.json` (or `eval-warm.json`). */
  private agentEvalNote(stage: string, transcripts = false): string {
    const read = (f: CachedFile): Record<string, unknown> | null => {
      try {
        const t = f.read();
        return t === null ? null : (JSON.parse(t) as Record<string, unknown>);
      } catch {
        return null;
      }
    };
    const summary = read(this.agentSummaryFile);
    const part = stage === "eval-after" ? summary?.after : (summary?.before ?? read(this.evalWarmFile));
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

// ---------------------------------------------------------------------------------------------------------------
// `arl train --agent` runs

/** A line of `writeAgentSamples` (src/train/agentExperiment.ts): calls and segments instead of turns and tokens. */
const isAgentLine = (r: Record<string, unknown>): boolean => Array.isArray(r.segments) && Array.isArray(r.calls);

/**
 * Token texts → one text and where each token starts in it. `spaced` (a WordPiece decoder, the embedded
 * `WordTokenizer`): single spaces between tokens, none next to a `\n` token and none before a `##` continuation (as
 * `WordTokenizer.decode`, src/policy/tokenizer.ts); otherwise the texts are concatenated (a byte-level BPE's
 * `decode([id])` keeps its spaces). Undefined `spaced`: guessed — spaced when no token text has a space at either end.
 * @returns `text`, and `starts[i]`/`ends[i]` the character range of token i (`[seq]`)
 */
export function joinTokenTexts(texts: readonly string[], spaced?: boolean): { text: string; starts: number[]; ends: number[] } {
  const sp = spaced ?? !texts.some((t) => /^\s+\S|\S\s+$/.test(t) || t === " ");
  let text = "";
  const starts: number[] = [];
  const ends: number[] = [];
  let prev: string | undefined;
  for (const raw of texts) {
    let t = raw;
    if (sp && t.startsWith("##")) t = t.slice(2);
    else if (sp && prev !== undefined && prev !== "" && t !== "" && !/^\s+$/.test(prev) && !/^\s+$/.test(t)) text += " ";
    starts.push(text.length);
    text += t;
    ends.push(text.length);
    if (t !== "") prev = t;
  }
  return { text, starts, ends };
}

/** ChatML blocks (`<|im_start|>role\n…<|im_end|>`, the Hermes / Qwen template the gateway renders) of a text. */
function chatBlocks(text: string): { role: string; content: string }[] {
  const out: { role: string; content: string }[] = [];
  for (const m of text.matchAll(/<\|im_start\|>[ \t]*([^\s<]*)[ \t]*\n?([\s\S]*?)(?:<\|im_end\|>|$)/g)) out.push({ role: m[1], content: m[2].trim() });
  return out;
}

const TOOL_RESPONSE = /<tool_response>\s*([\s\S]*?)\s*<\/tool_response>/g;

/**
 * One `--agent` rollout as an episode: the calls as turns (content, tool calls, and the tool results the next prompt
 * carried, read from the segment's loss-mask-0 tokens), every segment's tokens with the tool results located, the
 * trainer's advantage, the reward value (and its named parts). A segment's k-th run of loss-mask-1 tokens is a call's
 * completion; segments hold the calls in order, so run k of the rollout is call k (when the counts differ — a call
 * with an empty completion — the turns show no observations rather than wrong ones).
 */
function agentEpisode(r: Record<string, unknown>, index: number, task: string, group: number, member: number, spaced: boolean | undefined, vocab: Record<string, string>): ViewEpisode {
  const calls = (r.calls as Record<string, unknown>[]).filter((c) => c !== null && typeof c === "object");
  const segments: ViewTokens[] = [];
  // per completion (run of mask-1 tokens), in order over all segments: the observation text after it in its segment
  const observations: string[] = [];
  let system = "";
  let question = "";
  for (const [k, raw] of (r.segments as Record<string, unknown>[]).entries()) {
    const ids = Array.isArray(raw?.tokens) ? (raw.tokens as unknown[]).map((x) => num(x) ?? -1) : [];
    const texts = Array.isArray(raw?.text) ? (raw.text as unknown[]).map((x) => str(x)) : [];
    const lossMask = fitTo(ids.length, Array.isArray(raw?.lossMask) ? (raw.lossMask as unknown[]).map((x) => (x === 1 ? 1 : 0)) : [], 0);
    const logprobs = fitTo(ids.length, Array.isArray(raw?.logprobs) ? (raw.logprobs as unknown[]).map((x) => num(x) ?? 0) : [], 0);
    ids.forEach((id, i) => {
      if (texts[i] !== undefined && vocab[id] === undefined) vocab[id] = texts[i];
    });
    const first = lossMask.indexOf(1);
    const promptLength = first < 0 ? ids.length : first;
    const joined = joinTokenTexts(texts.length === ids.length ? texts : ids.map((id) => vocab[id] ?? ""), spaced);
    const span = (a: number, b: number): string => (a >= b ? "" : joined.text.slice(joined.starts[a], joined.ends[b - 1]));
    const toolResults: [number, number][] = [];
    for (const m of joined.text.matchAll(TOOL_RESPONSE)) {
      const a = m.index;
      const b = a + m[0].length;
      let lo = -1;
      let hi = -1;
      for (let i = 0; i < ids.length; i++) {
        if (joined.ends[i] > a && joined.starts[i] < b && lossMask[i] === 0) {
          if (lo < 0) lo = i;
          hi = i + 1;
        }
      }
      if (lo >= 0) toolResults.push([lo, hi]);
    }
    if (k === 0) {
      const blocks = chatBlocks(span(0, promptLength));
      const users = blocks.filter((b) => b.role === "user");
      question = users.at(-1)?.content ?? "";
      system = blocks[0] !== undefined && blocks[0].role !== "user" ? blocks[0].content : blocks.length === 0 ? span(0, promptLength).trim() : "";
    }
    // completions and the observation after each
    for (let i = promptLength; i < ids.length; ) {
      if (lossMask[i] !== 1) {
        i++;
        continue;
      }
      let j = i;
      while (j < ids.length && lossMask[j] === 1) j++;
      let e = j;
      while (e < ids.length && lossMask[e] !== 1) e++;
      observations.push(span(j, e));
      i = e;
    }
    segments.push({ ids, lossMask, logprobs, promptLength, ...(toolResults.length > 0 ? { toolResults } : {}) });
  }
  const paired = observations.length === calls.length;
  const turns: ViewTurn[] = calls.map((c, k) => {
    const observation = paired ? observations[k].trim() : "";
    const results = [...observation.matchAll(TOOL_RESPONSE)].map((m) => m[1]);
    const toolCalls = Array.isArray(c.toolCalls)
      ? (c.toolCalls as Record<string, unknown>[]).map((t) => ({ name: str(t?.name, "?"), arguments: typeof t?.arguments === "string" ? t.arguments : JSON.stringify(t?.arguments ?? {}) }))
      : [];
    return {
      action: str(c.content),
      observation,
      toolCalls,
      ...(results.length > 0 ? { toolResults: results } : {}),
      ...(typeof c.finishReason === "string" ? { finishReason: c.finishReason } : {}),
      invalid: c.invalid === true,
    };
  });
  const rew = r.reward as { value?: unknown; parts?: unknown } | null | undefined;
  const value = num(rew?.value);
  const parts: Record<string, number> = {};
  if (rew?.parts !== null && typeof rew?.parts === "object") for (const [k, v] of Object.entries(rew.parts as Record<string, unknown>)) if (num(v) !== undefined) parts[k] = num(v)!;
  const status = str(r.status, "?");
  const answer = typeof r.answer === "string" ? r.answer : null;
  const toolCalls: Record<string, number> = {};
  for (const t of turns) for (const c of t.toolCalls ?? []) toolCalls[c.name] = (toolCalls[c.name] ?? 0) + 1;
  const advantage = num(r.advantage);
  const info: ViewAgentInfo = { status, dropReason: typeof r.dropReason === "string" ? r.dropReason : null, mismatches: num(r.mismatches) ?? 0, system, parts };
  // Evaluation lines carry the task's question and gold answers (writeAgentSamples with tasks); RL lines do not.
  const gold = Array.isArray(r.answers) ? r.answers.filter((x): x is string => typeof x === "string") : [];
  return {
    index,
    task,
    kind: task.includes(":") ? task.slice(0, task.indexOf(":")) : "?",
    question: typeof r.question === "string" && r.question !== "" ? r.question : question,
    gold,
    member,
    group,
    turns,
    answer,
    reward: value !== undefined ? { total: value, terms: [] } : null,
    outcome: status !== "rewarded" || answer === null || answer.trim() === "" ? "no-answer" : value !== undefined && value >= 1 - 1e-9 ? "success" : "fail",
    toolCalls,
    advantage: advantage ?? null,
    advantageSource: advantage !== undefined ? "file" : "none",
    advantageNote: advantage !== undefined ? "from the trainer (the samples line's advantage)" : status !== "rewarded" ? `dropped (${info.dropReason ?? "no reward"}): not trained` : "the trainer wrote no advantage",
    ...(segments.length > 0 ? { tokens: segments[0], segments } : {}),
    agent: info,
  };
}

/**
 * An `--agent` run's evaluation rollouts (`rollouts.jsonl` lines of one `eval-…` stage) as episodes: task, status,
 * reward (EM of the answer, graded by the trainer) — the file keeps no transcript. Outcome: dropped = `no-answer`,
 * reward 1 = `success`, else `fail`.
 */
function rolloutEvalEpisodes(rows: Record<string, unknown>[], stage: string): ViewEpisode[] {
  return rows
    .filter((r) => r.stage === stage)
    .map((r, index): ViewEpisode => {
      const task = str(r.task, `#${index}`);
      const status = str(r.status, "?");
      const value = num(r.reward);
      return {
        index,
        task,
        kind: task.includes(":") ? task.slice(0, task.indexOf(":")) : "?",
        question: "",
        gold: [],
        member: 0,
        group: index,
        turns: [],
        answer: null,
        reward: value !== undefined ? { total: value, terms: [] } : null,
        outcome: status !== "rewarded" ? "no-answer" : value !== undefined && value >= 1 - 1e-9 ? "success" : "fail",
        toolCalls: {},
        advantage: null,
        advantageSource: "none",
        advantageNote: "evaluation rollouts are not trained: no advantage",
        agent: { status, dropReason: typeof r.dropReason === "string" ? r.dropReason : null, mismatches: num(r.mismatches) ?? 0, system: "", parts: {}, calls: num(r.calls) ?? 0 },
      };
    });
}
