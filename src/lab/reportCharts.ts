/**
 * The lab report's charts: one line chart per metric over RL steps (one coloured line per design), Vega-Lite specs
 * rendered to SVG in Node (no canvas, no DOM), text widths estimated so the SVG is the same on every machine, ids
 * renamed per chart so the document's are unique and deterministic.
 */
import * as vega from "vega";
import * as vl from "vega-lite";
import type { TopLevelSpec } from "vega-lite";
import type { Metrics } from "../core/types.ts";
import { esc } from "./html.ts";
import type { DesignResult, LabResult } from "./types.ts";

/** Metrics always charted first (when any design has a value for them), in this order. */
export const CORE_METRICS = ["reward/mean", "em", "searches", "hack/guess_rate_unknown"] as const;
/** Metrics charted last, when present. */
const TAIL_METRICS = ["train/entropy", "hack/kl_ref", "train/grad_norm"] as const;

/** Tableau 10: one colour per design, in design order (cycled beyond ten designs). */
const PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"];

const CHART_WIDTH = 520;
const CHART_HEIGHT = 200;
/** Draw a point per step only up to this many steps (beyond, points only clutter the lines). */
const MAX_STEPS_WITH_POINTS = 30;

/** True when `key` has a finite value at some step of some design. */
function hasMetric(designs: readonly Pick<DesignResult, "steps">[], key: string): boolean {
  return designs.some((d) => d.steps.some((m) => Number.isFinite(m[key])));
}

/**
 * The metric keys the report charts, in chart order: `reward/mean`, `em`, `searches`, `hack/guess_rate_unknown`,
 * then every other `hack/*` key found in any design's steps (sorted by code unit, `hack/kl_ref` excluded), then
 * `train/entropy` and `hack/kl_ref`. A key is listed only when at least one step of one design has a finite value
 * for it; keys without any data are left out (the report names them under the charts).
 */
export function chartMetrics(lab: Pick<LabResult, "designs">): string[] {
  return chartKeys(lab.designs, CORE_METRICS);
}

/** `core`, then every other `hack/*` key (sorted by code unit), then the tail metrics; only keys with data. */
function chartKeys(designs: readonly Pick<DesignResult, "steps">[], core: readonly string[], skip: readonly string[] = []): string[] {
  const hack = new Set<string>();
  for (const d of designs) for (const m of d.steps) for (const k of Object.keys(m)) if (k.startsWith("hack/") && !skip.includes(k)) hack.add(k);
  const fixed = new Set<string>([...core, ...TAIL_METRICS]);
  const others = [...hack].filter((k) => !fixed.has(k)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return [...core, ...others, ...TAIL_METRICS].filter((k) => hasMetric(designs, k));
}

/** One data point of a chart: a design's metric value at an RL step. */
interface Point {
  step: number;
  value: number;
  design: string;
}

/** The points of one metric across designs, skipping steps where the metric is missing or not finite. */
function metricPoints(designs: readonly Pick<DesignResult, "name" | "steps">[], key: string): Point[] {
  const points: Point[] = [];
  for (const d of designs) {
    d.steps.forEach((m: Metrics, step) => {
      const value = m[key];
      if (Number.isFinite(value)) points.push({ step, value, design: d.name });
    });
  }
  return points;
}

/** The Vega-Lite spec of one metric's chart: one line per design, x = RL step, colour = design (fixed across charts). */
function chartSpec(key: string, points: Point[], designNames: string[], maxStep: number): TopLevelSpec {
  return {
    width: CHART_WIDTH,
    height: CHART_HEIGHT,
    background: "white",
    title: { text: key, anchor: "start" },
    data: { values: points },
    mark: { type: "line", point: maxStep + 1 <= MAX_STEPS_WITH_POINTS, strokeWidth: 1.5, clip: true },
    encoding: {
      x: {
        field: "step",
        type: "quantitative",
        title: "RL step",
        scale: { domain: [0, Math.max(1, maxStep)], nice: false },
        axis: { format: "d", tickMinStep: 1 },
      },
      y: { field: "value", type: "quantitative", title: key, scale: { zero: false } },
      color: {
        field: "design",
        type: "nominal",
        title: "design",
        scale: { domain: designNames, range: designNames.map((_, i) => PALETTE[i % PALETTE.length]) },
      },
    },
  };
}

/** Vega's text-metrics hook (exported by vega at runtime, missing from its type declarations). */
interface TextMetrics {
  width: unknown;
  estimateWidth: unknown;
}

/**
 * Makes vega estimate text widths from font size instead of measuring them with node-canvas, if that package happens
 * to be installed: measured widths depend on installed fonts, which would make the SVG differ between machines.
 * (Without `canvas`, vega estimates anyway; this only changes anything when `canvas` is present in the process.)
 */
export function useEstimatedTextWidths(): void {
  const tm = (vega as unknown as { textMetrics?: TextMetrics }).textMetrics;
  if (tm && typeof tm.estimateWidth === "function" && tm.width !== tm.estimateWidth) tm.width = tm.estimateWidth;
}

/**
 * Renames every id defined in a vega SVG (clip paths, gradients) and its references to `${prefix}${n}` (n = 1, 2, …
 * in order of definition): vega numbers them from a process-wide counter, so ids would differ between renders and
 * collide between charts in one document.
 */
function scopeSvgIds(svg: string, prefix: string): string {
  const ids = new Map<string, string>();
  for (const m of svg.matchAll(/\sid="([^"]+)"/g)) if (!ids.has(m[1])) ids.set(m[1], `${prefix}${ids.size + 1}`);
  if (ids.size === 0) return svg;
  return svg.replace(/(\sid="|="url\(#|\shref="#|\sxlink:href="#)([^")]+)/g, (whole, lead: string, id: string) => {
    const renamed = ids.get(id);
    return renamed === undefined ? whole : `${lead}${renamed}`;
  });
}

/** Renders a Vega-Lite spec to an SVG string in Node (no canvas, no DOM). Throws what vega throws on a bad spec. */
async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const compiled = vl.compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: "none", logLevel: vega.Error });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** The `<section>` of charts, one `<figure>` with an inline SVG per charted metric. */
export async function chartsSection(lab: { designs: readonly Pick<DesignResult, "name" | "steps">[] }, core: readonly string[] = CORE_METRICS, skip: readonly string[] = []): Promise<string> {
  const keys = chartKeys(lab.designs, core, skip);
  const names = lab.designs.map((d) => d.name);
  const maxStep = Math.max(0, ...lab.designs.map((d) => d.steps.length - 1));
  const figures: string[] = [];
  for (const [i, key] of keys.entries()) {
    const svg = scopeSvgIds(await renderSvg(chartSpec(key, metricPoints(lab.designs, key), names, maxStep)), `chart${i}-def`);
    figures.push(`<figure class="chart">${svg}<figcaption>${esc(key)}</figcaption></figure>`);
  }
  const missing = core.filter((k) => !keys.includes(k));
  const note = missing.length > 0 ? `<p class="note">No data for: ${missing.map((k) => `<code>${esc(k)}</code>`).join(", ")}.</p>` : "";
  const body = figures.length > 0 ? `<div class="charts">${figures.join("\n")}</div>` : "<p>No per-step metrics recorded.</p>";
  return `<section id="charts"><h2>Metrics over RL steps</h2>\n${body}\n${note}</section>`;
}
