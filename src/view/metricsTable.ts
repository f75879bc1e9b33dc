/**
 * `metrics.jsonl` as `arl view` keeps it (src/view/sourceReader.ts): lines appended one at a time as a run writes them
 * (`JsonlTail`, src/view/tail.ts), their numeric values in typed arrays (~10 bytes a value, whatever the keys), within
 * `ViewLimits` (keys per line, distinct keys, stages, lines, values: what is dropped is counted in `cut`). It answers
 * what the index needs (stages, keys) without a pass over the lines, replays the trainer's detector monitor over new
 * lines only, and thins the lines it sends so a payload holds at most `maxCells` values.
 */
import { DetectorMonitor, defaultDetectors, type DetectorThresholds } from "../reward/detectors.ts";
import { num } from "./fields.ts";
import { ownText, type ViewLimits } from "./limits.ts";

/** `a` with room for `n` items (doubling), its items kept. */
function room<T extends Float64Array | Uint32Array | Uint8Array>(a: T, n: number, make: (size: number) => T): T {
  if (n <= a.length) return a;
  const b = make(Math.max(n, a.length * 2, 64));
  b.set(a);
  return b;
}

/** The index's view of the lines (`SourceInfo` fields of the same names). */
export interface MetricsSummary {
  stages: string[];
  stepsByStage: Record<string, number>;
  metricKeys: string[];
  metricKeysByStage: Record<string, string[]>;
}

/** The lines column-wise (`MetricsPayload` fields of the same names), thinned to `maxCells` values. */
export interface MetricsColumns {
  stage: string[];
  step: number[];
  columns: Record<string, (number | null)[]>;
  /** Set when lines were left out: `rows` lines kept, `sent` of them sent. */
  thinned?: { rows: number; sent: number };
}

/** The lines of one `metrics.jsonl` (see the file's comment). */
export class MetricsTable {
  /** Lines kept. */
  rows = 0;
  /** Lines kept in part (keys past the limits) or dropped (past `maxRows` / `maxValues`), since the last `clear`. */
  cut = 0;
  /** Bumped by every change: derived data is cached by it. */
  changes = 0;
  private generation = 0;
  /** Line i's stage (an index into `stages`: at most `maxStages` + 1 of them, `?` included). */
  private stageOf = new Uint8Array(0);
  private stepOf = new Float64Array(0);
  /** Line i's values are `values[rowStart[i] .. rowStart[i + 1])` of keys `keyOf[…]`; NaN: not a finite number. */
  private rowStart = new Uint32Array(1);
  private values = new Float64Array(0);
  private keyOf = new Uint32Array(0);
  private count = 0;
  private readonly keys: string[] = [];
  private readonly keyIndex = new Map<string, number>();
  private readonly stages: string[] = [];
  private readonly stageIndex = new Map<string, number>();
  /** Per stage: keys with at least one finite value there, and its lines. */
  private byStage: Set<number>[] = [];
  private linesOf: number[] = [];
  private summaryCache: { changes: number; summary: MetricsSummary } | null = null;
  private replay: { key: string; generation: number; monitor: DetectorMonitor; done: number; steps: Record<string, number[]> } | null = null;

  constructor(private readonly limits: ViewLimits) {}

  /** Forgets every line (the file was replaced or truncated). */
  clear(): void {
    this.rows = this.cut = this.count = 0;
    this.rowStart = new Uint32Array(1);
    this.stageOf = new Uint8Array(0);
    this.stepOf = new Float64Array(0);
    this.values = new Float64Array(0);
    this.keyOf = new Uint32Array(0);
    this.keys.length = this.stages.length = 0;
    this.keyIndex.clear();
    this.stageIndex.clear();
    this.byStage = [];
    this.linesOf = [];
    this.generation++;
    this.changes++;
  }

  private stageId(row: Record<string, unknown>): { id: number; cut: boolean } {
    let name = typeof row.stage === "string" ? row.stage : "?";
    let cut = false;
    if (!this.stageIndex.has(name) && (name.length > this.limits.maxKeyLength || this.stages.length >= this.limits.maxStages)) {
      name = "?";
      cut = true;
    }
    let id = this.stageIndex.get(name);
    if (id === undefined) {
      id = this.stages.length;
      this.stages.push(ownText(name, this.limits.maxKeyLength));
      this.stageIndex.set(this.stages[id], id);
      this.byStage.push(new Set());
      this.linesOf.push(0);
    }
    return { id, cut };
  }

  /** Adds one line: its stage, step (its index when it has none) and the numeric values of its first keys. */
  add(row: Record<string, unknown>): void {
    const { maxRows, maxValues, maxKeysPerLine, maxMetricKeys, maxKeyLength } = this.limits;
    this.changes++;
    if (this.rows >= maxRows || this.count >= maxValues) {
      this.cut++;
      return;
    }
    const i = this.rows;
    const stage = this.stageId(row);
    let cut = stage.cut;
    this.stageOf = room(this.stageOf, i + 1, (n) => new Uint8Array(n));
    this.stepOf = room(this.stepOf, i + 1, (n) => new Float64Array(n));
    this.stageOf[i] = stage.id;
    this.stepOf[i] = num(row.step) ?? i;
    this.linesOf[stage.id]++;
    let kept = 0;
    for (const k in row) {
      const v = row[k];
      if (k === "stage" || k === "step" || typeof v !== "number") continue;
      if (kept >= maxKeysPerLine || this.count >= maxValues) {
        cut = true;
        break;
      }
      let key = this.keyIndex.get(k);
      if (key === undefined) {
        if (k.length > maxKeyLength || this.keys.length >= maxMetricKeys) {
          cut = true;
          continue;
        }
        key = this.keys.length;
        this.keys.push(k);
        this.keyIndex.set(k, key);
      }
      this.values = room(this.values, this.count + 1, (n) => new Float64Array(n));
      this.keyOf = room(this.keyOf, this.count + 1, (n) => new Uint32Array(n));
      this.values[this.count] = Number.isFinite(v) ? v : NaN;
      this.keyOf[this.count++] = key;
      kept++;
      if (Number.isFinite(v)) this.byStage[stage.id].add(key);
    }
    this.rowStart = room(this.rowStart, i + 2, (n) => new Uint32Array(n));
    this.rowStart[i + 1] = this.count;
    this.rows++;
    if (cut) this.cut++;
  }

  /** Stages, lines per stage and keys (per stage: keys with a finite value there), all sorted; cached while unchanged. */
  summary(): MetricsSummary {
    if (this.summaryCache?.changes === this.changes) return this.summaryCache.summary;
    const stepsByStage: Record<string, number> = Object.fromEntries(this.stages.map((s, id) => [s, this.linesOf[id]]));
    const summary: MetricsSummary = {
      stages: [...this.stages],
      stepsByStage,
      metricKeys: [...this.keys].sort(),
      metricKeysByStage: Object.fromEntries(this.stages.map((s, id) => [s, [...this.byStage[id]].map((k) => this.keys[k]).sort()])),
    };
    this.summaryCache = { changes: this.changes, summary };
    return summary;
  }

  /**
   * The lines column-wise. When lines × keys pass `maxCells`, each stage keeps every n-th line and its last (n the
   * same for all stages), so no stage vanishes and the newest step is always there.
   */
  columns(): MetricsColumns {
    const limit = Math.max(1, Math.floor(this.limits.maxCells / Math.max(1, this.keys.length)));
    const stride = Math.max(1, Math.ceil(this.rows / limit));
    const last = new Map<number, number>();
    for (let i = 0; i < this.rows; i++) last.set(this.stageOf[i], i);
    const seen = new Array<number>(this.stages.length).fill(0);
    const kept: number[] = [];
    for (let i = 0; i < this.rows; i++) {
      const s = this.stageOf[i];
      if (seen[s]++ % stride === 0 || last.get(s) === i) kept.push(i);
    }
    const columns: Record<string, (number | null)[]> = {};
    const cols = this.keys.map((k) => (columns[k] = new Array<number | null>(kept.length).fill(null)));
    kept.forEach((i, j) => {
      for (let v = this.rowStart[i]; v < this.rowStart[i + 1]; v++) if (!Number.isNaN(this.values[v])) cols[this.keyOf[v]][j] = this.values[v];
    });
    return {
      stage: kept.map((i) => this.stages[this.stageOf[i]]),
      step: kept.map((i) => this.stepOf[i]),
      columns,
      ...(kept.length < this.rows ? { thinned: { rows: this.rows, sent: kept.length } } : {}),
    };
  }

  /**
   * RL steps (stage `rl`) at which each detector was firing: the trainer's `DetectorMonitor` replayed over the lines
   * with thresholds `d`. Lines added since the last call are replayed onto the monitor's state; a new `key` (the
   * config changed) or a `clear` replays from the first line.
   * @param d the run's detector config (undefined or disabled: none)
   * @param key identifies `d` (e.g. the config file's stamp)
   * @returns detector name → steps, ascending in line order (the caller must not change it)
   */
  detectorSteps(d: (DetectorThresholds & { enabled: boolean }) | undefined, key: string): Record<string, number[]> {
    if (d === undefined || !d.enabled) return {};
    if (this.replay === null || this.replay.key !== key || this.replay.generation !== this.generation) {
      this.replay = { key, generation: this.generation, monitor: new DetectorMonitor(defaultDetectors(d), d), done: 0, steps: {} };
    }
    const r = this.replay;
    const rl = this.stageIndex.get("rl");
    for (let i = r.done; i < this.rows; i++) {
      if (this.stageOf[i] !== rl) continue;
      const values: Record<string, number> = {};
      for (let v = this.rowStart[i]; v < this.rowStart[i + 1]; v++) values[this.keys[this.keyOf[v]]] = this.values[v];
      r.monitor.observe(this.stepOf[i], values);
      for (const f of r.monitor.firing()) (r.steps[f.detector] ??= []).push(this.stepOf[i]);
    }
    r.done = this.rows;
    return r.steps;
  }
}
