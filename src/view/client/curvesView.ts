/**
 * The viewer's Curves view: any metric over steps, several runs or lab designs overlaid, EMA smoothing, detector
 * firings marked (strips where a detector fired, ▼ where it started). Charts: vega-lite (`charts.ts`).
 */
import { html, nothing, type TemplateResult } from "lit-html";
import { repeat } from "lit-html/directives/repeat.js";
import type { MetricsPayload, SourceInfo } from "../types.ts";
import { CurveChart, curveRaw, sourceColour, type CurvePoint, type CurveRaw, type FiringOnset, type FiringSpan } from "./charts.ts";
import { api, index, renderSeq, set, source, stageKeys, state } from "./state.ts";

/** The charts on the page, by metric. */
const charts = new Map<string, CurveChart>();

/** Steps (sorted) → spans of consecutive steps. */
function spansOf(steps: readonly number[]): [number, number][] {
  const out: [number, number][] = [];
  for (const s of steps) {
    const last = out.at(-1);
    if (last !== undefined && s === last[1] + 1) last[1] = s;
    else out.push([s, s]);
  }
  return out;
}

/** Each source's points per metric, stage and label, kept while its payload (one object per file version) is the same. */
const pointsCache = new WeakMap<MetricsPayload, Map<string, CurvePoint[]>>();

/** One source's points of a metric in a stage (the same array while its payload is: the chart diffs by identity). */
function sourcePoints(m: MetricsPayload, metric: string, stage: string, label: string): CurvePoint[] {
  let byKey = pointsCache.get(m);
  if (byKey === undefined) pointsCache.set(m, (byKey = new Map()));
  const key = `${metric}\u0000${stage}\u0000${label}`;
  let pts = byKey.get(key);
  if (pts === undefined) {
    pts = [];
    const col = m.columns[metric];
    if (col !== undefined) m.stage.forEach((s, i) => {
      if (s === stage && col[i] !== null) pts!.push({ source: label, step: m.step[i], value: col[i] as number, desc: `${label} step ${m.step[i]}: ${col[i]}` });
    });
    byKey.set(key, pts);
  }
  return pts;
}

/** One chart's data sets: every selected source's values (raw and smoothed), detector streaks and onsets. */
function curveData(metric: string, payloads: MetricsPayload[], stage: string, detectorSteps: Map<string, Record<string, number[]>>): CurveRaw {
  const points: CurvePoint[] = [];
  const bySource = new Map<string, CurvePoint[]>();
  const spans: FiringSpan[] = [];
  const onsets: FiringOnset[] = [];
  payloads.forEach((m, lane) => {
    const label = source(m.id)?.label ?? m.id;
    const pts = sourcePoints(m, metric, stage, label);
    if (pts.length > 0) {
      bySource.set(label, pts);
      for (const p of pts) points.push(p);
    }
    if (stage !== "rl") return;
    for (const [detector, steps] of Object.entries(detectorSteps.get(m.id) ?? {})) {
      for (const [a, b] of spansOf(steps)) spans.push({ source: label, detector, start: a - 0.5, end: b + 0.5, lane0: lane * 5, lane1: lane * 5 + 4, desc: `${label}: ${detector} firing, steps ${a}–${b}` });
    }
    for (const f of m.detectors) {
      if (f.metric !== metric) continue; // onsets are marked on the detector's own metric
      onsets.push({ source: label, detector: f.detector, step: f.since ?? f.step, value: Number.isFinite(f.value) ? f.value : null, desc: `${label}: ${f.message}` });
    }
  });
  return curveRaw(points, spans, onsets, bySource);
}

/** Each chart's raw data, kept while its sources' payloads (cached per version), stage and labels are the same. */
const rawCache = new Map<string, { deps: unknown[]; raw: CurveRaw }>();

/** The Curves view's side panel: sources, stage, smoothing, metrics. */
export function curvesAside(): TemplateResult {
  const keys = stageKeys(state.src, state.stage).sort();
  const shown = keys.filter((k) => state.mfilter === "" || k.includes(state.mfilter));
  const stages = [...new Set(state.src.flatMap((id) => source(id)?.stages ?? []))];
  const labs = [...new Set(index.sources.filter((s) => s.kind === "design").map((s) => s.lab!))];
  const toggle = (id: string, on: boolean) => set({ src: on ? [...state.src, id] : state.src.filter((x) => x !== id) });
  const preset = (test: (k: string) => boolean) => set({ metrics: keys.filter(test) });
  return html`
    <h2>Runs and designs</h2>
    ${index.sources.map(
      (s) => html`<label title=${s.path}><input type="checkbox" data-source=${s.id} .checked=${state.src.includes(s.id)} @change=${(e: Event) => toggle(s.id, (e.target as HTMLInputElement).checked)} />
        ${s.label} ${s.live ? html`<span class="badge firing">live</span>` : nothing}${s.detectorCount > 0 ? html` <span class="badge firing" title="detector firings">${s.detectorCount}⚑</span>` : nothing}</label>`,
    )}
    ${labs.map((lab) => html`<button @click=${() => set({ src: index.sources.filter((s) => s.lab === lab && s.kind === "design").map((s) => s.id) })}>all designs of ${lab}</button> `)}
    <h2>Stage</h2>
    <select id="stage" @change=${(e: Event) => set({ stage: (e.target as HTMLSelectElement).value })}>
      ${stages.map((s) => html`<option value=${s} ?selected=${s === state.stage}>${s}</option>`)}
    </select>
    <h2>Smoothing <span id="smooth-value">${state.smooth.toFixed(2)}</span></h2>
    <input id="smoothing" type="range" min="0" max="0.99" step="0.01" .value=${String(state.smooth)} @input=${(e: Event) => set({ smooth: Number((e.target as HTMLInputElement).value) })} />
    <h2>Metrics (${state.metrics.length} of ${keys.length})</h2>
    <div class="two">
      <button @click=${() => preset((k) => k.startsWith("reward/"))}>reward</button>
      <button @click=${() => preset((k) => k.startsWith("tool_calls") || k === "searches" || k.startsWith("searches/"))}>tools</button>
      <button @click=${() => preset((k) => k.startsWith("train/"))}>train</button>
      <button @click=${() => preset((k) => k.startsWith("hack/"))}>hack</button>
    </div>
    <input type="text" placeholder="filter metrics" .value=${state.mfilter} @input=${(e: Event) => set({ mfilter: (e.target as HTMLInputElement).value })} />
    <div class="metric-list">
      ${shown.map(
        (k) => html`<label><input type="checkbox" data-metric=${k} .checked=${state.metrics.includes(k)} @change=${(e: Event) => set({ metrics: (e.target as HTMLInputElement).checked ? [...state.metrics, k] : state.metrics.filter((x) => x !== k) })} /> ${k}</label>`,
      )}
    </div>`;
}

/**
 * Lines the viewer skipped (not JSON, or over its size limits) and lines it kept only in part (past its limits on
 * metric keys, lines, …), per file of each selected source (nothing when none).
 */
function damagedNote(ids: readonly string[]): TemplateResult | typeof nothing {
  const list = (pick: (s: SourceInfo) => Record<string, number> | undefined): string[] =>
    ids.flatMap((id) => {
      const s = source(id);
      return Object.entries((s !== undefined ? pick(s) : undefined) ?? {}).map(([f, n]) => `${s?.label ?? id}/${f}: ${n}`);
    });
  const damaged = list((s) => s.damagedLines);
  const cut = list((s) => s.cutLines);
  return html`${damaged.length === 0 ? nothing : html`<p class="warn" data-damaged>skipped lines that are not JSON or over the viewer's size limit (a damaged or hand-edited file): ${damaged.join("; ")}</p>`}${
    cut.length === 0 ? nothing : html`<p class="warn" data-cut>lines kept only in part (past the viewer's limits on metric keys or lines): ${cut.join("; ")}</p>`
  }`;
}

/** The Curves view's content: legend, notes on skipped lines, one chart element per metric (drawn by `drawCharts`). */
export function curvesContent(): TemplateResult {
  if (state.src.length === 0) return html`<p class="empty">No run selected.</p>`;
  const legend = html`<div class="legend curves-legend">${state.src.map((id) => html`<span><span class="swatch" style="background:${sourceColour(index.sources.findIndex((s) => s.id === id))}"></span>${source(id)?.label ?? id}</span>`)}
    <span class="muted">strips along the top: a detector firing (one lane per run, in its colour; hover for which); dashed line and ▼: where it started, on the detector's own metric</span></div>`;
  return html`${legend}${damagedNote(state.src)}<div class="charts">
    ${repeat(state.metrics, (m) => m, (m) => html`<div class="chart" data-chart=${m}><h3>${m}</h3><div class="vega" data-vega=${m}></div></div>`)}
  </div>`;
}

/** Draws (or updates) the charts of the Curves view; gives up when draw `seq` is no longer the latest. */
export async function drawCharts(seq: number): Promise<void> {
  const payloads = await Promise.all(state.src.map((id) => api.metrics(id)));
  const detectorSteps = new Map(payloads.map((p) => [p.id, p.detectorSteps]));
  if (seq !== renderSeq) return;
  // every source's label in index order: a run keeps its colour whatever else is selected, and selecting another
  // run changes the charts' data, not their specs
  const labels = index.sources.map((s) => s.label);
  const seen = new Set<string>();
  const jobs: Promise<void>[] = [];
  for (const el of document.querySelectorAll<HTMLElement>("[data-vega]")) {
    const metric = el.dataset.vega!;
    seen.add(metric);
    let chart = charts.get(metric);
    // keyed by metric (lit's repeat), but a chart never draws into another metric's element
    if (chart === undefined || chart.el !== el || el.childElementCount === 0) {
      chart?.finalize();
      chart = new CurveChart(metric, el);
      charts.set(metric, chart);
    }
    const deps: unknown[] = [state.stage, ...labels, ...payloads];
    let hit = rawCache.get(metric);
    if (hit === undefined || hit.deps.length !== deps.length || hit.deps.some((d, i) => d !== deps[i])) {
      hit = { deps, raw: curveData(metric, payloads, state.stage, detectorSteps) };
      rawCache.set(metric, hit);
    }
    jobs.push(chart.update(labels, hit.raw, state.smooth));
  }
  for (const [m, c] of charts) {
    if (!seen.has(m)) {
      c.finalize();
      charts.delete(m);
      rawCache.delete(m);
    }
  }
  await Promise.all(jobs);
}

/** Removes every chart (another view is shown). */
export function clearCharts(): void {
  for (const c of charts.values()) c.finalize();
  charts.clear();
}
