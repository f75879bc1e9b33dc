/**
 * Curves: one Vega-Lite chart per metric (the lab report's charting library, `src/lab/report.ts`), every selected
 * source overlaid, EMA smoothing, detector firings marked. The Vega-Lite spec is compiled at bundle time
 * (`vegaSpecOf`, `src/view/curveTemplates.ts`); a chart's vega view is made once per shape (metric, the sources'
 * colour order, width, renderer) and then updated in place through vega's named data sets and signals (axis ranges
 * included): a smoothing move modifies the smoothed values, a run shown or hidden adds or removes that run's points
 * only, and a new step redraws without a new view. Charts with many points (more than
 * `SVG_POINT_LIMIT`) draw on a canvas: an SVG of thousands of labelled points costs the browser tens of ms of layout
 * per redraw; smaller ones are SVG, whose points carry screen-reader labels (`aria-label`).
 */
import * as vega from "vega";
import type { TopLevelSpec } from "vega-lite";

/** One point of a curve: a source's metric value at an RL (or SFT) step. */
export interface CurvePoint {
  source: string;
  step: number;
  value: number;
  /** Screen-reader label of the point (`<source> step <n>: <value>`), also what the browser tests read. */
  desc: string;
}

/**
 * A detector's firing streak, drawn on every chart as a strip along the top of the plot in its source's colour, one
 * lane per source (so overlaid runs' streaks do not cover each other or the curves).
 */
export interface FiringSpan {
  source: string;
  detector: string;
  /** First and last step of the streak, ±0.5 so a one-step streak is visible. */
  start: number;
  end: number;
  /** The source's lane: pixels from the top of the plot (`lane1 = lane0 + 4`). */
  lane0: number;
  lane1: number;
  desc: string;
}

/** A firing's onset (from `detectors.jsonl`), drawn as a dashed rule and a marker on the chart of the detector's own metric. */
export interface FiringOnset {
  source: string;
  detector: string;
  step: number;
  value: number | null;
  desc: string;
}

/**
 * TensorBoard's debiased exponential moving average: `s_t = w·s_{t−1} + (1−w)·x_t` from `s_0 = 0`, divided by
 * `1 − w^t` (t = finite values so far) so the first values are not pulled toward 0; a constant series is returned as
 * it is (no float residue) and non-finite values pass through. Source: tensorflow/tensorboard
 * `tensorboard/components/vz_line_chart2/line-chart.ts`, `resmoothDataset`, commit
 * 34877f15153e1a2087316b9952c931807a122aa7 (what W&B's "exponential moving average" also matches).
 * @param values one series in step order
 * @param weight smoothing weight in [0, 1) (0 = none)
 * @returns the smoothed series, same length
 */
export function emaSmooth(values: readonly number[], weight: number): number[] {
  if (!(weight > 0) || values.every((v) => v === values[0])) return values.slice();
  let last = 0;
  let n = 0;
  return values.map((v) => {
    if (!Number.isFinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    n++;
    return last / (1 - weight ** n);
  });
}

/** Colours of the overlaid sources, in order (Tableau 10, vega's default category scheme). */
export const SOURCE_COLOURS = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"];

/** The colour of the i-th overlaid source. */
export const sourceColour = (i: number): string => SOURCE_COLOURS[i % SOURCE_COLOURS.length];

/**
 * The Vega-Lite spec of one metric's chart; data comes later through the named sets `points` (raw values: line and
 * labelled points), `smooth` (the smoothed lines; empty without smoothing), `spans` and `onsets` (detectors).
 */
export function curveSpec(metric: string, sources: readonly string[], width: number, labelled = true): TopLevelSpec {
  // Both axes' domains are signals (x0, x1, y0, y1; set by CurveChart.update from the raw values): a smoothed line
  // (a convex combination of raw values, so inside their range), a new step or another run does not re-scale
  // through the data — the spec stays the same and nothing is recompiled.
  // Steps are integers: at most one tick per step of the domain (Vega-Lite drops `tickMinStep` with a signal domain,
  // and a short run got ticks at 0.5, 1.5, …), and no decimals in the labels.
  const x = { field: "step", type: "quantitative" as const, title: "step", axis: { tickCount: { expr: "max(1, min(ceil(width / 40), floor(x1 - x0)))" }, format: "d" }, scale: { domain: { expr: "[x0, x1]" } } };
  const color = { field: "source", type: "nominal" as const, scale: { domain: [...sources], range: sources.map((_, i) => sourceColour(i)) }, legend: null };
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    width,
    height: 170,
    autosize: { type: "fit", contains: "padding" },
    background: "white",
    config: { view: { stroke: null }, axis: { labelFontSize: 10, titleFontSize: 10 } },
    // set by CurveChart.update: the raw line and points fade when a smoothed line is drawn over them
    params: [
      { name: "x0", value: 0 },
      { name: "x1", value: 1 },
      { name: "y0", value: 0 },
      { name: "y1", value: 1 },
      { name: "raw_opacity", value: 1 },
      { name: "raw_width", value: 1.6 },
      { name: "point_opacity", value: 0.8 },
    ],
    layer: [
      {
        data: { name: "spans" },
        mark: { type: "rect", opacity: 0.8 },
        encoding: {
          x: { field: "start", type: "quantitative" },
          x2: { field: "end" },
          y: { field: "lane0", type: "quantitative", scale: null },
          y2: { field: "lane1" },
          color,
          tooltip: [{ field: "desc", title: "detector" }],
          description: { field: "desc" },
        },
      },
      {
        data: { name: "points" },
        mark: { type: "line", strokeWidth: { expr: "raw_width" }, opacity: { expr: "raw_opacity" }, interpolate: "linear" },
        encoding: { x, y: { field: "value", type: "quantitative", title: metric, scale: { zero: false, domain: { expr: "[y0, y1]" }, nice: true } }, color },
      },
      {
        data: { name: "smooth" },
        mark: { type: "line", strokeWidth: 2 },
        encoding: { x, y: { field: "smoothed", type: "quantitative" }, color },
      },
      {
        data: { name: "points" },
        mark: { type: "point", filled: true, size: 14, opacity: { expr: "point_opacity" } },
        encoding: {
          x,
          y: { field: "value", type: "quantitative" },
          color,
          tooltip: [{ field: "source" }, { field: "step" }, { field: "value", format: ".4~g" }],
          ...(labelled ? { description: { field: "desc" } } : {}), // screen-reader labels exist in an SVG only
        },
      },
      {
        data: { name: "onsets" },
        mark: { type: "rule", strokeDash: [4, 3], strokeWidth: 1.2 },
        encoding: { x: { field: "step", type: "quantitative" }, color, tooltip: [{ field: "desc", title: "detector fired" }], description: { field: "desc" } },
      },
      {
        data: { name: "onsets" },
        transform: [{ filter: "isValid(datum.value)" }],
        mark: { type: "point", shape: "triangle-down", size: 90, filled: true, stroke: "#000", strokeWidth: 0.6 },
        encoding: { x: { field: "step", type: "quantitative" }, y: { field: "value", type: "quantitative" }, color, tooltip: [{ field: "desc", title: "detector fired" }] },
      },
    ],
    resolve: { scale: { y: "shared" } },
  } as TopLevelSpec;
}

/** Charts with more points than this draw on a canvas instead of an SVG (see the file's comment). */
export const SVG_POINT_LIMIT = 600;

/** One chart's data before smoothing: labelled points in step order per source, detector marks, axis ranges. */
export interface CurveRaw {
  points: CurvePoint[];
  /**
   * The same points per source (label → its points, in step order). The chart compares these arrays by identity with
   * what it shows, so a caller that keeps a source's array while its file is unchanged makes a change of the other
   * sources (one shown or hidden) cost only that source's points.
   */
  bySource: Map<string, CurvePoint[]>;
  spans: FiringSpan[];
  onsets: FiringOnset[];
  /** Range of the raw values (smoothed ones stay inside it), or null without points. */
  yDomain: [number, number] | null;
  /** Range of the steps and detector spans, or null without points. */
  xDomain: [number, number] | null;
}

/**
 * Builds a chart's raw data, axis ranges included.
 * @param points every source's points, grouped by source
 * @param bySource the same per source (the caller's arrays, kept while a source is unchanged); grouped from `points`
 *   when not given
 */
export function curveRaw(points: CurvePoint[], spans: FiringSpan[], onsets: FiringOnset[], bySource?: Map<string, CurvePoint[]>): CurveRaw {
  if (bySource === undefined) {
    bySource = new Map();
    for (const p of points) {
      let list = bySource.get(p.source);
      if (list === undefined) bySource.set(p.source, (list = []));
      list.push(p);
    }
  }
  let lo = Infinity;
  let hi = -Infinity;
  let x0 = Infinity;
  let x1 = -Infinity;
  for (const p of points) {
    if (p.value < lo) lo = p.value;
    if (p.value > hi) hi = p.value;
    if (p.step < x0) x0 = p.step;
    if (p.step > x1) x1 = p.step;
  }
  for (const s of spans) {
    if (s.start < x0) x0 = s.start;
    if (s.end > x1) x1 = s.end;
  }
  // room above the curves for the detector lanes (chart height 170 px)
  const lanes = spans.reduce((a, sp) => Math.max(a, sp.lane1), 0);
  if (lanes > 0 && lo < hi) hi += ((hi - lo) * (lanes + 3)) / 170;
  const pad = (v: number) => Math.max(1e-9, Math.abs(v) * 0.05);
  const yDomain: [number, number] | null = lo <= hi ? (lo === hi ? [lo - pad(lo), hi + pad(hi)] : [lo, hi]) : null;
  const xDomain: [number, number] | null = x0 <= x1 ? [x0, x0 === x1 ? x0 + 1 : x1] : null;
  return { points, bySource, spans, onsets, yDomain, xDomain };
}

/** A point of a smoothed line. */
type SmoothPoint = { source: string; step: number; smoothed: number };

/**
 * The smoothed line's tuples of a source's points array (made once; a new weight rewrites their `smoothed` values
 * in place), and the weight they hold now.
 */
const smoothTuples = new WeakMap<CurvePoint[], { weight: number; line: SmoothPoint[] }>();

function smoothLineOf(points: CurvePoint[]): { weight: number; line: SmoothPoint[] } {
  let hit = smoothTuples.get(points);
  if (hit === undefined) smoothTuples.set(points, (hit = { weight: NaN, line: points.map((p) => ({ source: p.source, step: p.step, smoothed: p.value })) }));
  return hit;
}

/** The smoothed lines of a chart: each source's values (points are grouped by source, in step order) through `emaSmooth`. */
export function smoothedPoints(raw: CurveRaw, weight: number): { source: string; step: number; smoothed: number }[] {
  const out: { source: string; step: number; smoothed: number }[] = [];
  let start = 0;
  const pts = raw.points;
  for (let i = 1; i <= pts.length; i++) {
    if (i < pts.length && pts[i].source === pts[start].source) continue;
    const sm = emaSmooth(pts.slice(start, i).map((p) => p.value), weight);
    for (let k = start; k < i; k++) out.push({ source: pts[k].source, step: pts[k].step, smoothed: sm[k - start] });
    start = i;
  }
  return out;
}

/** The metric name's stand-in in a compiled spec (a string no metric key is: keys come from JSON lines). */
export const METRIC_SLOT = "\u0000arl-metric\u0000";

/** How the stand-in reads inside a compiled spec's JSON text (its NULs escaped). */
const SLOT_TEXT = JSON.stringify(METRIC_SLOT).slice(1, -1);

/**
 * Vega-Lite's output for a curve chart, compiled once in Node when the page script is bundled (`src/view/curveTemplates.ts`,
 * put in by esbuild's `define`), so the page ships no Vega-Lite (a third of its script) and compiles nothing: the
 * JSON text of `compile(curveSpec(METRIC_SLOT, [one source], 400, labelled))` for labelled (SVG) and plain (canvas) charts.
 */
export interface CurveTemplates {
  labelled: string;
  plain: string;
}

declare const __ARL_CURVE_TEMPLATES__: CurveTemplates | undefined;
/** The templates bundled into the page script (undefined outside it: in Node, pass `curveTemplates()`). */
const BUNDLED_TEMPLATES: CurveTemplates | undefined = typeof __ARL_CURVE_TEMPLATES__ !== "undefined" ? __ARL_CURVE_TEMPLATES__ : undefined;

/**
 * The Vega spec of one chart, from the compiled template: the compiled specs of two charts differ only in the top
 * level `width`, the colour scale's domain (the sources) and range (their colours), and the metric (the y axis title,
 * and a screen-reader description that quotes it inside an expression's string literal) — test/view-data.test.ts
 * checks the result equals Vega-Lite's own compile for several metrics, source lists and widths.
 * @param templates default: those bundled into the page
 * @throws Error when no templates are given and the script was not bundled with them
 */
export function vegaSpecOf(metric: string, sources: readonly string[], width: number, labelled: boolean, templates: CurveTemplates | undefined = BUNDLED_TEMPLATES): vega.Spec {
  if (templates === undefined) throw new Error("arl view: the page script was bundled without its chart templates (src/view/bundle.ts)");
  const title = JSON.stringify(metric); // the axis title: a JSON string
  // inside an expression's string literal, in a JSON string: Vega-Lite escapes only the quotes there
  const inExpr = JSON.stringify(metric.replace(/"/g, '\\"')).slice(1, -1);
  const text = (labelled ? templates.labelled : templates.plain).split(JSON.stringify(METRIC_SLOT)).join(title).split(SLOT_TEXT).join(inExpr);
  const spec = JSON.parse(text) as vega.Spec & { width?: number };
  spec.width = width;
  const colour = spec.scales?.find((sc) => sc.name === "color") as { domain?: unknown; range?: unknown } | undefined;
  if (colour === undefined) throw new Error("arl view: chart template without a colour scale");
  colour.domain = [...sources];
  colour.range = sources.map((_, i) => sourceColour(i));
  return spec;
}

/** A mounted chart: its vega view and the shape it was compiled for. */
export class CurveChart {
  private view: vega.View | null = null;
  private shape = "";
  /** The raw data and smoothing weight the view shows now (so an update replaces only what changed). */
  private raw: CurveRaw | null = null;
  private smoothing = -1;
  /** What the view's `points` and `smooth` sets hold now, per source (the arrays given, by identity). */
  private shownPoints = new Map<string, CurvePoint[]>();
  private shownSmooth = new Map<string, CurvePoint[]>();

  constructor(
    readonly metric: string,
    readonly el: HTMLElement,
  ) {}

  /**
   * Draws the data, compiling the spec only when the shape changed and replacing only the data sets that changed:
   * `raw` is compared by identity (the caller keeps one object per metric until its sources' files change), the
   * smoothed lines by weight. A smoothing move so costs one path per source and chart.
   * @param sources overlaid source labels, in colour order
   * @param raw the chart's raw data (`curveRaw`)
   * @param smoothing the EMA weight in [0, 1)
   * @returns when vega has rendered
   */
  async update(sources: readonly string[], raw: CurveRaw, smoothing: number): Promise<void> {
    const width = Math.max(260, Math.floor(this.el.clientWidth));
    const renderer = raw.points.length > SVG_POINT_LIMIT ? "canvas" : "svg";
    const shape = JSON.stringify([sources, width, renderer]);
    if (this.view === null || shape !== this.shape) {
      this.view?.finalize();
      this.shape = shape;
      const spec = vegaSpecOf(this.metric, sources, width, renderer === "svg");
      this.el.replaceChildren();
      this.view = new vega.View(vega.parse(spec), { renderer, container: this.el, hover: true, logLevel: vega.Error });
      this.raw = null;
      this.smoothing = -1;
      this.shownPoints = new Map();
      this.shownSmooth = new Map();
    }
    let changed = false;
    if (this.raw !== raw) {
      const [x0, x1] = raw.xDomain ?? [0, 1];
      const [y0, y1] = raw.yDomain ?? [0, 1];
      this.view.signal("x0", x0).signal("x1", x1).signal("y0", y0).signal("y1", y1);
      // only the sources whose points changed (or that came or went) leave and enter the view: replacing every tuple
      // of 6 × 200-point lines on each of 8 charts was mostly garbage collection
      this.shownPoints = this.apply("points", this.shownPoints, raw.bySource);
      this.view.data("spans", raw.spans).data("onsets", raw.onsets);
      this.raw = raw;
      changed = true;
    }
    if (smoothing !== this.smoothing || changed) {
      const on = smoothing > 0;
      this.shownSmooth = this.applySmooth(on ? raw.bySource : new Map(), smoothing);
      // On a canvas (many points) the raw points are not drawn under a smoothed line: each redraw repaints the whole
      // canvas, and thousands of faint dots cost more than the lines (the faint raw line stays).
      const pointOpacity = on ? (this.shape.includes('"canvas"') ? 0 : 0.35) : 0.8;
      this.view.signal("raw_opacity", on ? 0.3 : 1).signal("raw_width", on ? 1 : 1.6).signal("point_opacity", pointOpacity);
      changed = true;
    }
    this.smoothing = smoothing;
    if (changed) await this.view.runAsync();
  }

  /**
   * Brings the `smooth` set to the smoothed lines of `next` at `weight` with one changeset: a source that stays keeps
   * its tuples (a new weight modifies their `smoothed` values: no tuples made or dropped — a slider move on 8 charts
   * of 6 × 200 points made ~10 000 objects of garbage before); a source that comes enters with its values set; one
   * that goes (or whose points changed) leaves.
   * @returns the points arrays whose lines the set shows now, per source
   */
  private applySmooth(next: Map<string, CurvePoint[]>, weight: number): Map<string, CurvePoint[]> {
    const shown = this.shownSmooth;
    const cs = vega.changeset();
    let changed = false;
    const leave = new Set<string>();
    for (const [src, pts] of shown) if (next.get(src) !== pts) leave.add(src);
    if (leave.size > 0) {
      cs.remove((d: SmoothPoint) => leave.has(d.source));
      changed = true;
    }
    for (const [src, pts] of next) {
      const entry = smoothLineOf(pts);
      const stays = shown.get(src) === pts;
      if (stays && entry.weight === weight) continue;
      const values = emaSmooth(pts.map((p) => p.value), weight);
      if (stays) entry.line.forEach((t, k) => cs.modify(t, "smoothed", values[k]));
      else {
        entry.line.forEach((t, k) => (t.smoothed = values[k]));
        cs.insert(entry.line);
      }
      entry.weight = weight;
      changed = true;
    }
    if (changed) this.view!.change("smooth", cs);
    return new Map(next);
  }

  /**
   * Brings a named data set from what it shows (`shown`, per source) to `next` with one changeset: the tuples of a
   * source whose array is not the same object leave, its new array enters; unchanged sources are not touched.
   * @returns what the set shows now
   */
  private apply<T extends { source: string }>(name: string, shown: Map<string, T[]>, next: Map<string, T[]>): Map<string, T[]> {
    const leave = new Set<string>();
    const enter: T[][] = [];
    for (const [src, arr] of shown) if (next.get(src) !== arr) leave.add(src);
    for (const [src, arr] of next) if (shown.get(src) !== arr) enter.push(arr);
    if (leave.size === 0 && enter.length === 0) return shown;
    if (leave.size === shown.size) {
      this.view!.data(name, enter.flat()); // everything changes: one replace
    } else {
      const cs = vega.changeset().remove((d: T) => leave.has(d.source));
      for (const arr of enter) cs.insert(arr);
      this.view!.change(name, cs);
    }
    return new Map(next);
  }

  /** Releases the vega view. */
  finalize(): void {
    this.view?.finalize();
    this.view = null;
  }
}
