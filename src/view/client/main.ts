/**
 * The viewer's page (bundled by `src/view/bundle.ts`): three views over run and lab folders —
 * - **Curves**: any metric over steps, several runs or lab designs overlaid, EMA smoothing, detector firings marked;
 * - **Trajectories**: a step scrubber; per step the sampled episodes of each group with reward and advantage; one
 *   episode as turns and as tokens (loss mask shown, per-token logprob or advantage as colour), its reward term by
 *   term and the grader's parts; filters by task kind, outcome and detector;
 * - **Compare**: two evaluation files (warm start vs RL, or two designs/runs) on the same held-out task, side by side.
 * An `arl train --agent` run's rollouts show the same way: its calls as turns (tool calls, the tool results sent
 * back), its segments as tokens (tool results marked, never trained), its held-out rollouts before / after RL.
 * The state lives in the URL's hash (`#view=trajectories&src=…`), so a link reopens the same view. The page polls
 * `/api/index` (served, not exported) and redraws when a source's files changed — a run that is training.
 * Rendering: lit-html templates; charts: vega-lite (`charts.ts`).
 */
import { html, nothing, render, type TemplateResult } from "lit-html";
import { repeat } from "lit-html/directives/repeat.js";
import type { MetricsPayload, SamplesPayload, SourceInfo, ViewEpisode, ViewIndex, ViewTokens } from "../types.ts";
import { ViewApi } from "./api.ts";
import { CurveChart, curveRaw, sourceColour, type CurvePoint, type CurveRaw, type FiringOnset, type FiringSpan } from "./charts.ts";

type ViewName = "curves" | "trajectories" | "compare";

/** The page's state, mirrored in `location.hash`. */
interface State {
  view: ViewName;
  /** Curves: sources overlaid, metrics shown, stage, smoothing weight, metric-list filter. */
  src: string[];
  metrics: string[];
  stage: string;
  smooth: number;
  mfilter: string;
  /** Trajectories: source, samples file, filters, selected episode (line index), tab, token colour. */
  tsrc: string;
  file: string;
  kind: string;
  outcome: string;
  detector: string;
  ep: number | null;
  tab: "turns" | "tokens";
  colour: "logprob" | "advantage" | "none";
  showPrompt: boolean;
  /** Compare: left and right source + file, selected task, only tasks whose outcome differs. */
  lsrc: string;
  lfile: string;
  rsrc: string;
  rfile: string;
  task: string;
  diff: boolean;
}

// `reward` / `reward/em`: an `arl train --agent` run's names for the step's mean reward and its EM part.
const DEFAULT_METRICS = ["reward/mean", "reward", "em", "reward/em", "grade/score", "tool_calls", "train/kl", "train/entropy", "train/grad_norm", "train/clip_fraction", "loss", "grad_norm"]; // the last two: SFT lines

const api = new ViewApi();
let index: ViewIndex = { sources: [], static: true, pollMs: 0 };
let state: State = readHash();
const charts = new Map<string, CurveChart>();
let renderSeq = 0;
let lastError = "";

function readHash(): State {
  const p = new URLSearchParams(location.hash.slice(1));
  // one parameter per item (src=a&src=b): a folder or metric name may hold a comma
  const list = (k: string) => p.getAll(k).filter((x) => x !== "");
  const view = p.get("view");
  const tab = p.get("tab");
  const colour = p.get("colour");
  const ep = p.get("ep");
  return {
    view: view === "trajectories" || view === "compare" ? view : "curves",
    src: list("src"),
    metrics: list("m"),
    stage: p.get("stage") ?? "",
    smooth: Math.min(0.99, Math.max(0, Number(p.get("smooth") ?? "0") || 0)),
    mfilter: p.get("mfilter") ?? "",
    tsrc: p.get("tsrc") ?? "",
    file: p.get("file") ?? "",
    kind: p.get("kind") ?? "",
    outcome: p.get("outcome") ?? "",
    detector: p.get("detector") ?? "",
    ep: ep !== null && ep !== "" && Number.isInteger(Number(ep)) ? Number(ep) : null,
    tab: tab === "tokens" ? "tokens" : "turns",
    colour: colour === "advantage" || colour === "none" ? colour : "logprob",
    showPrompt: p.get("prompt") === "1",
    lsrc: p.get("lsrc") ?? "",
    lfile: p.get("lfile") ?? "",
    rsrc: p.get("rsrc") ?? "",
    rfile: p.get("rfile") ?? "",
    task: p.get("task") ?? "",
    diff: p.get("diff") === "1",
  };
}

function writeHash(): void {
  const p = new URLSearchParams();
  p.set("view", state.view);
  for (const id of state.src) p.append("src", id);
  for (const m of state.metrics) p.append("m", m);
  if (state.stage) p.set("stage", state.stage);
  if (state.smooth > 0) p.set("smooth", String(state.smooth));
  if (state.mfilter) p.set("mfilter", state.mfilter);
  for (const k of ["tsrc", "file", "kind", "outcome", "detector", "lsrc", "lfile", "rsrc", "rfile", "task"] as const) if (state[k]) p.set(k, state[k]);
  if (state.ep !== null) p.set("ep", String(state.ep));
  if (state.tab !== "turns") p.set("tab", state.tab);
  if (state.colour !== "logprob") p.set("colour", state.colour);
  if (state.showPrompt) p.set("prompt", "1");
  if (state.diff) p.set("diff", "1");
  const hash = `#${p.toString()}`;
  if (location.hash !== hash) history.replaceState(null, "", hash);
}

/** Changes the state and redraws. */
function set(patch: Partial<State>): void {
  state = { ...state, ...patch };
  writeHash();
  void draw();
}

const source = (id: string): SourceInfo | undefined => index.sources.find((s) => s.id === id);
/** The metric keys the sources have values of in a stage (every key, for an index without per-stage keys). */
const stageKeys = (ids: readonly string[], stage: string): string[] =>
  [...new Set(ids.flatMap((id) => { const s = source(id); return s === undefined ? [] : (s.metricKeysByStage?.[stage] ?? s.metricKeys); }))];
/** An episode's answer cell: the answer, "none", or — an --agent evaluation rollout (rollouts.jsonl) — "not written". */
const answerOf = (e: ViewEpisode): TemplateResult | string =>
  e.answer ?? (e.agent !== undefined && e.turns.length === 0 ? html`<span class="muted" title="rollouts.jsonl keeps status and reward only">not written</span>` : html`<span class="muted">none</span>`);
const fmt = (x: number | null | undefined, digits = 3): string => (x === null || x === undefined || !Number.isFinite(x) ? "–" : Math.abs(x) >= 1000 ? x.toFixed(0) : x.toFixed(digits));

/** Fills in defaults that depend on the index (first sources, default metrics, default files). */
function settleState(): void {
  const ids = index.sources.map((s) => s.id);
  // a link written before one parameter per item joined them with commas: an unknown entry is split on them
  const known = (list: string[], has: (x: string) => boolean) => list.flatMap((x) => (has(x) ? [x] : x.split(",").filter(has)));
  let src = known(state.src, (id) => ids.includes(id));
  if (src.length === 0) {
    // default: every run, and every design of the first lab (its warm start has SFT lines only)
    src = index.sources.filter((s) => s.kind !== "warm-start").map((s) => s.id).slice(0, 8);
    if (src.length === 0) src = ids.slice(0, 1);
  }
  const stages = [...new Set(src.flatMap((id) => source(id)?.stages ?? []))];
  const stage = stages.includes(state.stage) ? state.stage : stages.includes("rl") ? "rl" : (stages[0] ?? "");
  // the metric list is the stage's: SFT lines have `loss`, RL lines the rest (a metric selected for another stage
  // is dropped when the stage changes, and the stage's defaults come instead of empty charts)
  const keys = new Set(stageKeys(src, stage));
  let metrics = known(state.metrics, (m) => keys.has(m));
  if (metrics.length === 0) metrics = DEFAULT_METRICS.filter((m) => keys.has(m));
  if (metrics.length === 0) metrics = [...keys].slice(0, 4);
  const withSamples = index.sources.filter((s) => s.sampleFiles.length > 0);
  const tsrc = source(state.tsrc)?.sampleFiles.length ? state.tsrc : (withSamples.find((s) => s.sampleFiles.some((f) => f.type === "step"))?.id ?? withSamples[0]?.id ?? "");
  const tfiles = source(tsrc)?.sampleFiles ?? [];
  const file = tfiles.some((f) => f.name === state.file) ? state.file : (tfiles.find((f) => f.type === "step")?.name ?? tfiles[0]?.name ?? "");
  // compare: warm start vs RL of one run when it has both; else the last eval file of the first two sources
  const evalsOf = (id: string) => (source(id)?.sampleFiles ?? []).filter((f) => f.type === "eval");
  let { lsrc, lfile, rsrc, rfile } = state;
  const hasFile = (id: string, f: string) => (source(id)?.sampleFiles ?? []).some((x) => x.name === f);
  if (!hasFile(lsrc, lfile) || !hasFile(rsrc, rfile)) {
    const run = withSamples.find((s) => s.sampleFiles.some((f) => f.name === "eval-warm-start-sft") && s.sampleFiles.some((f) => f.type === "eval" && /rl|grpo/.test(f.name)));
    // an `arl train --agent` run: its held-out rollouts before (eval-warm, or eval-before without a warm start) and after RL
    const agentRun = withSamples.find((s) => s.sampleFiles.some((f) => f.name === "eval-after") && s.sampleFiles.some((f) => f.name === "eval-warm" || f.name === "eval-before"));
    if (run === undefined && agentRun !== undefined) {
      lsrc = rsrc = agentRun.id;
      lfile = agentRun.sampleFiles.some((f) => f.name === "eval-warm") ? "eval-warm" : "eval-before";
      rfile = "eval-after";
    } else if (run !== undefined) {
      lsrc = rsrc = run.id;
      lfile = "eval-warm-start-sft";
      rfile = run.sampleFiles.find((f) => f.type === "eval" && /rl|grpo/.test(f.name))!.name;
    } else {
      const withEval = withSamples.filter((s) => evalsOf(s.id).length > 0);
      lsrc = withEval[0]?.id ?? "";
      rsrc = withEval[1]?.id ?? lsrc;
      lfile = evalsOf(lsrc).at(-1)?.name ?? "";
      rfile = evalsOf(rsrc).at(-1)?.name ?? "";
    }
  }
  state = { ...state, src, stage, metrics, tsrc, file, lsrc, lfile, rsrc, rfile };
}

// ---------------------------------------------------------------------------------------------------------------
// Curves

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

function curvesAside(): TemplateResult {
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

function curvesContent(): TemplateResult {
  if (state.src.length === 0) return html`<p class="empty">No run selected.</p>`;
  const legend = html`<div class="legend curves-legend">${state.src.map((id) => html`<span><span class="swatch" style="background:${sourceColour(index.sources.findIndex((s) => s.id === id))}"></span>${source(id)?.label ?? id}</span>`)}
    <span class="muted">strips along the top: a detector firing (one lane per run, in its colour; hover for which); dashed line and ▼: where it started, on the detector's own metric</span></div>`;
  return html`${legend}${damagedNote(state.src)}<div class="charts">
    ${repeat(state.metrics, (m) => m, (m) => html`<div class="chart" data-chart=${m}><h3>${m}</h3><div class="vega" data-vega=${m}></div></div>`)}
  </div>`;
}

async function drawCharts(seq: number): Promise<void> {
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

// ---------------------------------------------------------------------------------------------------------------
// Trajectories

function episodeRow(e: ViewEpisode, selected: boolean, first: boolean, isEval: boolean, onClick: () => void): TemplateResult {
  const calls = Object.values(e.toolCalls).reduce((a, b) => a + b, 0);
  return html`<tr class="episode ${selected ? "selected" : ""} ${first && !isEval ? "group-start" : ""}" data-episode=${e.index} @click=${onClick}>
    ${isEval ? nothing : html`<td class="num">${e.group}</td><td class="num">${e.member}</td>`}
    <td><span class="badge ${e.outcome}">${e.outcome}</span></td>
    <td class="num" data-col="reward">${fmt(e.reward?.total)}</td>
    ${isEval ? nothing : html`<td class="num" data-col="advantage" title=${e.advantageNote ?? ""}>${e.advantage === null ? html`<span class="muted">n/a</span>` : fmt(e.advantage)}${e.advantageSource === "recomputed" ? "*" : ""}</td>`}
    <td class="num">${calls}</td><td class="num">${e.turns.length || (e.agent?.calls ?? 0)}</td><td>${e.kind}</td>
    <td class="q" title=${e.question}>${e.question}</td>
    <td class="q" title=${e.answer ?? ""}>${answerOf(e)}</td>
  </tr>`;
}

function rewardTable(e: ViewEpisode): TemplateResult {
  if (e.reward === null) return html`<p class="muted">no reward recorded</p>`;
  return html`<table class="reward-breakdown">
    <thead><tr><th>term</th><th class="num">value</th><th class="num">weight</th><th class="num">contribution</th><th>why</th></tr></thead>
    <tbody>
      ${e.reward.terms.map(
        (t) => html`<tr data-term=${t.name}><td>${t.name}</td><td class="num">${fmt(t.value)}</td><td class="num">${fmt(t.weight)}</td><td class="num">${fmt(t.value * t.weight)}</td><td>${t.explanation}${t.error ? html` <b>error: ${t.error}</b>` : nothing}</td></tr>`,
      )}
      <tr><th>total</th><td></td><td></td><th class="num" data-total>${fmt(e.reward.total)}</th><td></td></tr>
    </tbody>
  </table>`;
}

function gradeTable(e: ViewEpisode): TemplateResult {
  if (e.grade === undefined) return html`<p class="muted">no grader parts (this env's outcome is EM against the gold answers)</p>`;
  return html`<table class="grade"><thead><tr><th>grader part</th><th class="num">score</th></tr></thead><tbody>
    <tr><th>score</th><th class="num">${fmt(e.grade.score)}</th></tr>
    ${Object.entries(e.grade.parts).map(([k, v]) => html`<tr data-part=${k}><td>${k}</td><td class="num">${fmt(v)}</td></tr>`)}
  </tbody></table>${e.grade.explanation ? html`<p class="muted">${e.grade.explanation}</p>` : nothing}`;
}

/** An `arl train --agent` rollout as its model calls: what each returned, its tool calls, the tool results sent back. */
function agentTurnsView(e: ViewEpisode, evaluation: boolean): TemplateResult {
  const a = e.agent!;
  if (e.turns.length === 0) {
    return html`<p class="muted">${a.calls !== undefined ? `${a.calls} model call(s); ` : ""}no transcript: an --agent run writes its evaluation rollouts to rollouts.jsonl as status and reward only (the RL steps' samples files have the calls and tokens)</p>`;
  }
  return html`<div class="turns">
    ${a.system !== "" ? html`<details class="turn"><summary class="who">system (the agent's instructions and the template's tools section; ${a.system.length} characters)</summary><pre>${a.system}</pre></details>` : nothing}
    <div class="turn"><div class="who">user</div><pre>${e.question}</pre></div>
    ${e.turns.map(
      (t, i) => html`<div class="turn" data-turn=${i}>
        <div class="who">call ${i + 1} · assistant ${evaluation ? html`<span title="an evaluation rollout: sampled by the policy, never trained on">(sampled; evaluation, not trained)</span>` : "(trained)"}${t.finishReason ? html` · finish <span data-finish>${t.finishReason}</span>` : nothing}${t.invalid ? html` · <span class="badge fail">invalid</span>` : nothing}</div>
        <pre class="action">${t.action}</pre>
        ${t.toolCalls?.length ? html`<div class="calls">${t.toolCalls.map((c) => html`<span class="ok" data-tool-call=${c.name}>${c.name}(${c.arguments})</span>`)}</div>` : nothing}
        ${(t.toolResults ?? []).map((r) => html`<div class="who">tool result (not trained)</div><pre class="obs" data-tool-result>${r}</pre>`)}
        ${!t.toolResults?.length && t.observation !== "" ? html`<div class="who">next prompt (not trained)</div><pre class="obs">${t.observation}</pre>` : nothing}
      </div>`,
    )}
  </div>`;
}

function turnsView(e: ViewEpisode, evaluation: boolean): TemplateResult {
  if (e.agent !== undefined) return agentTurnsView(e, evaluation);
  return html`<div class="turns">
    <div class="turn"><div class="who">user</div><pre>${e.question}</pre></div>
    ${e.turns.map(
      (t, i) => html`<div class="turn" data-turn=${i}>
        <div class="who">turn ${i + 1} · action${e.turnAdvantages?.[i] !== undefined ? html` · <span data-turn-advantage>advantage ${fmt(e.turnAdvantages[i])}</span>` : nothing}${e.turnRewards?.[i] !== undefined ? html` · step reward ${fmt(e.turnRewards[i])}` : nothing}</div><pre class="action">${t.action}</pre>
        ${t.tools?.length ? html`<div class="calls">${t.tools.map((c) => html`<span class=${c.ok ? "ok" : "err"}>${c.name}() ${c.ok ? "ok" : `failed: ${c.error ?? "error"}`}</span>`)}</div>` : nothing}
        ${t.observation !== "" ? html`<div class="who">observation (not trained)</div><pre class="obs">${t.observation}</pre>` : nothing}
      </div>`,
    )}
  </div>`;
}

/** Background of a trained token: its probability (green = likely, red = unlikely) or the episode's advantage (blue +, red −). */
function tokenColour(tokens: ViewTokens, i: number, adv: number | null, mode: State["colour"]): string {
  if (tokens.lossMask[i] !== 1 || mode === "none") return "";
  if (mode === "logprob") {
    const p = Math.exp(tokens.logprobs[i]);
    return `background:hsl(${Math.round(120 * p)},70%,${Math.round(80 + 10 * p)}%)`;
  }
  if (adv === null) return "";
  const a = Math.max(-1, Math.min(1, adv / 2));
  return a >= 0 ? `background:hsl(215,80%,${Math.round(95 - 30 * a)}%)` : `background:hsl(0,80%,${Math.round(95 + 30 * a)}%)`;
}

const pieceText = (p: string): string => p.replace(/\n/g, "↵\n").replace(/Ġ/g, "·").replace(/Ċ/g, "↵\n");

/** One token sequence: spans with role (prompt, action, observation, tool result), loss mask and colour. */
function tokenSpans(e: ViewEpisode, t: ViewTokens, seg: number, vocab: Record<string, string>): TemplateResult[] {
  const start = state.showPrompt ? 0 : t.promptLength;
  // Each turn's sampled tokens are one run of loss-mask-1 tokens: with the trainer's per-turn advantages, run k is
  // coloured by turn k's (when the runs and turns do not pair up, every token gets the episode's).
  const runOf: number[] = [];
  let runs = -1;
  for (let i = 0; i < t.ids.length; i++) {
    if (t.lossMask[i] === 1 && (i === 0 || t.lossMask[i - 1] !== 1)) runs++;
    runOf.push(runs);
  }
  const perTurn = e.turnAdvantages !== undefined && e.turnAdvantages.length === runs + 1 ? e.turnAdvantages : undefined;
  const advOf = (i: number): number | null => (perTurn !== undefined ? perTurn[runOf[i]] : e.advantage);
  const toolResult = new Uint8Array(t.ids.length);
  for (const [a, b] of t.toolResults ?? []) toolResult.fill(1, a, b);
  const spans: TemplateResult[] = [];
  for (let i = start; i < t.ids.length; i++) {
    const mask = t.lossMask[i] === 1 ? 1 : 0;
    const role = i < t.promptLength ? "prompt" : mask === 1 ? "action" : toolResult[i] === 1 ? "tool-result" : "observation";
    const tip = `#${i} id ${t.ids[i]} · ${role} · loss mask ${mask}${mask === 1 ? ` · logprob ${t.logprobs[i].toFixed(4)} nats (p ${Math.exp(t.logprobs[i]).toFixed(3)})${advOf(i) !== null ? ` · advantage ${advOf(i)!.toFixed(3)}` : ""}` : " · not trained"}`;
    spans.push(html`<span class="tok ${mask === 1 ? "trained" : "masked"}${role === "tool-result" ? " tool" : ""}" data-seg=${seg} data-i=${i} data-mask=${mask} data-role=${role} style=${tokenColour(t, i, advOf(i), state.colour)} title=${tip}>${pieceText(vocab[t.ids[i]] ?? `[${t.ids[i]}]`)}</span>`);
  }
  return spans;
}

function tokensView(e: ViewEpisode, vocab: Record<string, string>, evaluation: boolean): TemplateResult {
  const segs = e.segments ?? (e.tokens !== undefined ? [e.tokens] : []);
  if (segs.length === 0) return html`<p class="muted">This samples file has no token books (written before they were kept). Newer runs write tokens, loss mask and logprobs.</p>`;
  const total = segs.reduce((a, t) => a + t.ids.length, 0);
  const trained = segs.reduce((a, t) => a + t.lossMask.reduce((x, y) => x + y, 0), 0);
  const tool = segs.reduce((a, t) => a + (t.toolResults ?? []).reduce((x, [lo, hi]) => x + hi - lo, 0), 0);
  const prompt = segs.reduce((a, t) => a + t.promptLength, 0);
  const perTurn = e.turnAdvantages !== undefined;
  return html`<div class="legend">
      ${evaluation
        ? html`<span><span class="tok trained">sampled</span> loss mask 1 (sampled by the policy; an evaluation rollout is never trained on)</span>`
        : html`<span><span class="tok trained">trained</span> loss mask 1 (sampled by the policy)</span>`}
      <span><span class="tok masked">not trained</span> loss mask 0 (prompt, observation, forced)</span>
      ${tool > 0 ? html`<span><span class="tok masked tool">tool result</span> loss mask 0 (what the agent's tool returned)</span>` : nothing}
      <label style="display:inline">colour <select id="colour" @change=${(ev: Event) => set({ colour: (ev.target as HTMLSelectElement).value as State["colour"] })}>
        ${(["logprob", "advantage", "none"] as const).map((c) => html`<option value=${c} ?selected=${state.colour === c}>${c}</option>`)}
      </select></label>
      <label style="display:inline"><input type="checkbox" id="show-prompt" .checked=${state.showPrompt} @change=${(ev: Event) => set({ showPrompt: (ev.target as HTMLInputElement).checked })} /> prompt (${prompt} tokens)</label>
    </div>
    <p class="muted">${total} tokens, ${trained} ${evaluation ? "sampled (evaluation: not trained)" : "trained"}${tool > 0 ? `, ${tool} tool-result tokens (not trained)` : ""}${segs.length > 1 ? ` in ${segs.length} segments (a call rewrote the history: kept apart, never re-tokenised)` : ""}${perTurn ? ", each turn's tokens coloured by its advantage (advantage mode)" : e.advantage !== null ? `, advantage ${fmt(e.advantage)} on each trained token` : ""}</p>
    ${segs.map((t, k) => html`${segs.length > 1 ? html`<h4>segment ${k + 1}</h4>` : nothing}<div class="tokens" data-segment=${k}>${tokenSpans(e, t, k, vocab)}</div>`)}`;
}

/** An agent rollout's status, drop reason, segments and the reward's named parts. */
function agentFacts(e: ViewEpisode): TemplateResult {
  const a = e.agent!;
  const parts = Object.entries(a.parts);
  return html`<p class="agent-facts"><b>status</b> <span data-status>${a.status}</span>${a.dropReason ? html` — ${a.dropReason}` : nothing}
    ${e.segments !== undefined ? html` · <b>segments</b> ${e.segments.length} · <b>mismatches</b> ${a.mismatches}` : nothing}
    · <span class="muted">reward: ${e.turns.length === 0 ? "EM of the answer, graded by the trainer" : "EM of the answer graded by the trainer (or the config's reward terms), or the agent's own reward"}</span></p>
    ${parts.length > 0 ? html`<table class="grade"><thead><tr><th>reward part (reward.parts)</th><th class="num">value</th></tr></thead><tbody>${parts.map(([k, v]) => html`<tr data-part=${k}><td>${k}</td><td class="num">${fmt(v)}</td></tr>`)}</tbody></table>` : nothing}`;
}

/**
 * One episode: facts, reward and grader tables, turns / tokens.
 * @param compact the Compare view's narrower form (turns only)
 * @param evaluation the episode is from an evaluation file (`samples/eval-*`): sampled, never trained on
 */
function episodeDetail(e: ViewEpisode, vocab: Record<string, string>, compact = false, evaluation = compact): TemplateResult {
  return html`<div class="episode-detail" data-detail=${e.index}>
    <h3>${e.task} <span class="badge ${e.outcome}">${e.outcome}</span> <span class="muted">${e.kind}${e.known === undefined ? "" : e.known ? " · known" : " · unknown"}</span></h3>
    <p><b>question</b> ${e.question || html`<span class="muted">${e.agent !== undefined ? "not written (rollouts.jsonl)" : "–"}</span>`}<br />${e.agent !== undefined && e.gold.length === 0 ? nothing : html`<b>gold</b> ${e.gold.join(" | ") || "–"}<br />`}<b>answer</b> ${answerOf(e)}<br />
    ${e.reward !== null || !compact
      ? html`<b>reward</b> ${fmt(e.reward?.total)} · <b>advantage</b> ${e.advantage === null ? html`<span class="muted" title=${e.advantageNote ?? ""}>n/a — ${e.advantageNote ?? ""}</span>` : html`${fmt(e.advantage)} <span class="muted">(${e.advantageSource === "recomputed" ? e.advantageNote : "from the trainer"})</span>`}`
      : html`<span class="muted">evaluation episode: no reward, no advantage (outcome by EM against the gold answers)</span>`}</p>
    ${e.agent !== undefined ? agentFacts(e) : nothing}
    ${compact ? turnsView(e, evaluation) : nothing}
    ${e.agent !== undefined ? nothing : html`${e.reward !== null || !compact ? html`<h3>Reward, term by term</h3>${rewardTable(e)}` : nothing}
    ${e.grade !== undefined || !compact ? html`<h3>Grader</h3>${gradeTable(e)}` : nothing}`}
    ${compact
      ? nothing
      : html`<div class="tabs" style="margin-top:10px">
            <button class=${state.tab === "turns" ? "active" : ""} data-tab="turns" @click=${() => set({ tab: "turns" })}>turns</button>
            <button class=${state.tab === "tokens" ? "active" : ""} data-tab="tokens" @click=${() => set({ tab: "tokens" })}>tokens</button>
          </div>
          ${state.tab === "turns" ? turnsView(e, evaluation) : tokensView(e, vocab, evaluation)}`}
  </div>`;
}

async function trajectoriesView(): Promise<[TemplateResult, TemplateResult]> {
  const s = source(state.tsrc);
  if (s === undefined) return [html``, html`<p class="empty">No samples files in these folders.</p>`];
  const payload = state.file ? await api.samples(s.id, state.file) : undefined;
  const detectorSteps = payload?.detectorSteps ?? {};
  const stepFiles = s.sampleFiles.filter((f) => f.type === "step" && (state.detector === "" || (detectorSteps[state.detector] ?? []).includes(f.step!)));
  const evalFiles = s.sampleFiles.filter((f) => f.type === "eval");
  const current = s.sampleFiles.find((f) => f.name === state.file);
  // a URL (or a new detector) that names a step where the chosen detector was not firing: its first firing step
  if (state.detector !== "" && current?.type === "step" && stepFiles.length > 0 && !stepFiles.includes(current)) {
    state = { ...state, file: stepFiles[0].name, ep: null };
    writeHash();
    return trajectoriesView();
  }
  const pos = Math.max(0, stepFiles.findIndex((f) => f.name === state.file));
  const episodes = (payload?.episodes ?? []).filter((e) => (state.kind === "" || e.kind === state.kind) && (state.outcome === "" || e.outcome === state.outcome));
  const kinds = [...new Set((payload?.episodes ?? []).map((e) => e.kind))].sort();
  const firingHere = current?.type === "step" ? Object.entries(detectorSteps).filter(([, st]) => st.includes(current.step!)).map(([d]) => d) : [];
  const selected = episodes.find((e) => e.index === state.ep) ?? null;
  const aside = html`
    <h2>Source</h2>
    <select id="tsrc" @change=${(e: Event) => set({ tsrc: (e.target as HTMLSelectElement).value, file: "", ep: null })}>
      ${index.sources.filter((x) => x.sampleFiles.length > 0).map((x) => html`<option value=${x.id} ?selected=${x.id === s.id}>${x.label}</option>`)}
    </select>
    <h2>RL step ${current?.type === "step" ? current.step : "–"}</h2>
    ${stepFiles.length > 0
      ? html`<div class="scrubber">
          <button id="prev-step" @click=${() => set({ file: stepFiles[Math.max(0, pos - 1)].name, ep: null })}>◀</button>
          <input id="step-scrubber" type="range" min="0" max=${stepFiles.length - 1} .value=${String(current?.type === "step" ? pos : 0)} @input=${(e: Event) => set({ file: stepFiles[Number((e.target as HTMLInputElement).value)].name, ep: null })} />
          <button id="next-step" @click=${() => set({ file: stepFiles[Math.min(stepFiles.length - 1, pos + 1)].name, ep: null })}>▶</button>
        </div>
        <p class="muted">${stepFiles.length} step files${state.detector ? ` where ${state.detector} fired` : ""} (steps ${stepFiles[0].step}–${stepFiles.at(-1)!.step})</p>`
      : html`<p class="muted">no step samples${state.detector ? ` where ${state.detector} fired` : ""} (run.samplesPerStep)</p>`}
    <h2>Evaluation</h2>
    <select id="eval-file" @change=${(e: Event) => set({ file: (e.target as HTMLSelectElement).value, ep: null })}>
      <option value="" ?selected=${current?.type !== "eval"}>—</option>
      ${evalFiles.map((f) => html`<option value=${f.name} ?selected=${f.name === state.file}>${f.policy}</option>`)}
    </select>
    <h2>Filters</h2>
    <label>task kind <select id="filter-kind" @change=${(e: Event) => set({ kind: (e.target as HTMLSelectElement).value, ep: null })}>
      <option value="">all</option>${kinds.map((k) => html`<option value=${k} ?selected=${k === state.kind}>${k}</option>`)}</select></label>
    <label>outcome <select id="filter-outcome" @change=${(e: Event) => set({ outcome: (e.target as HTMLSelectElement).value, ep: null })}>
      <option value="">all</option>${(["success", "fail", "no-answer"] as const).map((k) => html`<option value=${k} ?selected=${k === state.outcome}>${k}</option>`)}</select></label>
    <label>detector (steps where it fired) <select id="filter-detector" @change=${(e: Event) => {
      const detector = (e.target as HTMLSelectElement).value;
      const first = s.sampleFiles.find((f) => f.type === "step" && (detector === "" || (detectorSteps[detector] ?? []).includes(f.step!)));
      set({ detector, file: first?.name ?? state.file, ep: null });
    }}>
      <option value="">any</option>${Object.keys(detectorSteps).sort().map((d) => html`<option value=${d} ?selected=${d === state.detector}>${d} (${detectorSteps[d].length} steps)</option>`)}</select></label>`;
  const groups = new Set(episodes.map((e) => e.group)).size;
  const isEval = current?.type === "eval";
  const content = html`
    <h2>${s.label} · ${current?.type === "eval" ? `evaluation: ${current.policy}` : `RL step ${current?.step ?? "–"}`}</h2>
    <p class="muted">${episodes.length} of ${payload?.episodes.length ?? 0} episodes${current?.type === "step" ? ` in ${groups} group(s)` : ""}
      ${firingHere.map((d) => html` <span class="badge firing">${d} firing</span>`)}
      ${episodes.some((e) => e.advantageSource === "recomputed") ? html` · * advantage recomputed from the group's rewards (hover for why)` : nothing}
      ${episodes.some((e) => e.advantageSource === "file") ? html` · advantages from the trainer` : nothing}</p>
    ${payload?.note ? html`<p class="muted" data-note>${payload.note}</p>` : nothing}
    ${payload?.damagedLines ? html`<p class="warn" data-damaged>${payload.damagedLines} line(s) of this file are not JSON or over the viewer's size limit (a damaged or hand-edited file): skipped</p>` : nothing}
    ${payload?.unreadBytes ? html`<p class="warn" data-unread>the last ${(payload.unreadBytes / 2 ** 20).toFixed(1)} MiB of this file are past the viewer's size limit: not read</p>` : nothing}
    <div class="traj"><div>
    <table class="episodes">
      <thead><tr>${isEval ? nothing : html`<th class="num">group</th><th class="num">member</th>`}<th>outcome</th><th class="num">reward</th>${isEval ? nothing : html`<th class="num">advantage</th>`}<th class="num">calls</th><th class="num">turns</th><th>kind</th><th>question</th><th>answer</th></tr></thead>
      <tbody>${episodes.map((e, i) => episodeRow(e, e.index === state.ep, i === 0 || episodes[i - 1].group !== e.group, isEval, () => set({ ep: e.index })))}</tbody>
    </table>
    </div><div>${selected !== null ? episodeDetail(selected, payload?.vocab ?? {}, false, isEval) : html`<p class="muted">Click an episode to see its turns, tokens and reward.</p>`}</div></div>`;
  return [aside, content];
}

// ---------------------------------------------------------------------------------------------------------------
// Compare

async function compareView(): Promise<[TemplateResult, TemplateResult]> {
  const withSamples = index.sources.filter((x) => x.sampleFiles.length > 0);
  const picker = (side: "l" | "r") => {
    const src = side === "l" ? state.lsrc : state.rsrc;
    const file = side === "l" ? state.lfile : state.rfile;
    const files = source(src)?.sampleFiles ?? [];
    return html`<label>source <select id=${`${side}src`} @change=${(e: Event) => {
        const id = (e.target as HTMLSelectElement).value;
        const f = (source(id)?.sampleFiles ?? []).filter((x) => x.type === "eval").at(-1)?.name ?? "";
        set(side === "l" ? { lsrc: id, lfile: f } : { rsrc: id, rfile: f });
      }}>${withSamples.map((x) => html`<option value=${x.id} ?selected=${x.id === src}>${x.label}</option>`)}</select></label>
      <label>file <select id=${`${side}file`} @change=${(e: Event) => set(side === "l" ? { lfile: (e.target as HTMLSelectElement).value } : { rfile: (e.target as HTMLSelectElement).value })}>
        ${files.map((f) => html`<option value=${f.name} ?selected=${f.name === file}>${f.name}</option>`)}</select></label>`;
  };
  const asideOf = (kinds: string[]) => html`<h2>Left</h2>${picker("l")}<h2>Right</h2>${picker("r")}
    <h2>Tasks</h2>
    <label><input type="checkbox" id="only-diff" .checked=${state.diff} @change=${(e: Event) => set({ diff: (e.target as HTMLInputElement).checked })} /> only where the outcome differs</label>
    <label>task kind <select id="compare-kind" @change=${(e: Event) => set({ kind: (e.target as HTMLSelectElement).value })}><option value="">all</option>${kinds.map((k) => html`<option value=${k} ?selected=${k === state.kind}>${k}</option>`)}</select></label>`;
  if (!state.lsrc || !state.lfile || !state.rsrc || !state.rfile) return [asideOf([]), html`<p class="empty">Two samples files are needed (evaluation files: samples/eval-*.jsonl).</p>`];
  const [left, right] = await Promise.all([api.samples(state.lsrc, state.lfile), api.samples(state.rsrc, state.rfile)]);
  const byTask = (p: SamplesPayload) => {
    const m = new Map<string, ViewEpisode>();
    for (const e of p.episodes) if (!m.has(e.task)) m.set(e.task, e);
    return m;
  };
  const L = byTask(left);
  const R = byTask(right);
  const tasks = [...L.keys()].filter((t) => R.has(t) && (state.kind === "" || L.get(t)!.kind === state.kind) && (!state.diff || L.get(t)!.outcome !== R.get(t)!.outcome));
  const kinds = [...new Set([...L.values()].map((e) => e.kind))].sort();
  const task = tasks.includes(state.task) ? state.task : (tasks[0] ?? "");
  const name = (id: string, file: string) => `${source(id)?.label ?? id} · ${file}`;
  const content = html`
    <h2>${name(state.lsrc, state.lfile)} <span class="muted">vs</span> ${name(state.rsrc, state.rfile)}</h2>
    <p class="muted">${tasks.length} task(s) in both files${state.diff ? " with different outcomes" : ""}; success ${[...L.values()].filter((e) => R.has(e.task) && e.outcome === "success").length} vs ${[...R.values()].filter((e) => L.has(e.task) && e.outcome === "success").length}</p>
    ${[left, right].map((p, k) => (p.note ? html`<p class="muted" data-note=${k === 0 ? "left" : "right"}><b>${k === 0 ? "left" : "right"}:</b> ${p.note}</p>` : nothing))}
    <div class="task-list"><table class="compare-tasks">
      <thead><tr><th>task</th><th>kind</th><th>question</th><th>left</th><th>answer</th><th>right</th><th>answer</th></tr></thead>
      <tbody>${tasks.map((t) => {
        const a = L.get(t)!;
        const b = R.get(t)!;
        return html`<tr class="episode ${t === task ? "selected" : ""}" data-task=${t} @click=${() => set({ task: t })}><td>${t}</td><td>${a.kind}</td><td>${a.question}</td>
          <td><span class="badge ${a.outcome}">${a.outcome}</span>${a.reward !== null ? html` ${fmt(a.reward.total)}` : nothing}</td><td class="q" title=${a.answer ?? ""}>${answerOf(a)}</td>
          <td><span class="badge ${b.outcome}">${b.outcome}</span>${b.reward !== null ? html` ${fmt(b.reward.total)}` : nothing}</td><td class="q" title=${b.answer ?? ""}>${answerOf(b)}</td></tr>`;
      })}</tbody>
    </table></div>
    ${task !== ""
      ? html`<div class="compare">
          <div data-side="left"><h3>${name(state.lsrc, state.lfile)}</h3>${episodeDetail(L.get(task)!, left.vocab, true)}</div>
          <div data-side="right"><h3>${name(state.rsrc, state.rfile)}</h3>${episodeDetail(R.get(task)!, right.vocab, true)}</div>
        </div>`
      : nothing}`;
  return [asideOf(kinds), content];
}

// ---------------------------------------------------------------------------------------------------------------
// The page

function header(): TemplateResult {
  const live = index.sources.filter((s) => s.live).length;
  const nav = (v: ViewName, label: string) => html`<a href="#view=${v}" class=${state.view === v ? "active" : ""} data-nav=${v} @click=${(e: Event) => {
    e.preventDefault();
    set({ view: v });
  }}>${label}</a>`;
  return html`<header><h1>arl view</h1><nav>${nav("curves", "Curves")}${nav("trajectories", "Trajectories")}${nav("compare", "Compare")}</nav>
    <span class="status">${index.sources.length} source(s)${live > 0 ? ` · ${live} training (live)` : ""}${api.isStatic ? " · exported file" : ""}${lastError ? ` · ${lastError}` : ""}</span></header>`;
}

/** Redraws the whole page for the current state (data from the cache unless a source's version changed). */
async function draw(): Promise<void> {
  const seq = ++renderSeq;
  const t0 = performance.now();
  settleState();
  writeHash();
  document.body.dataset.ready = "";
  const app = document.getElementById("app")!;
  try {
    let aside: TemplateResult;
    let content: TemplateResult;
    if (state.view === "curves") {
      aside = curvesAside();
      content = curvesContent();
    } else if (state.view === "trajectories") [aside, content] = await trajectoriesView();
    else [aside, content] = await compareView();
    if (seq !== renderSeq) return;
    const tData = performance.now();
    render(html`${header()}<main><aside>${aside}</aside><section class="content" data-view=${state.view}>${content}</section></main>`, app);
    const tDom = performance.now();
    if (state.view === "curves") await drawCharts(seq);
    else {
      for (const c of charts.values()) c.finalize();
      charts.clear();
    }
    if (seq !== renderSeq) return;
    lastError = "";
    // User Timing entries of the last draw (DevTools' Performance panel; bench/view.ts reads them): data, DOM,
    // charts, the whole draw (ms). Older ones are cleared, so a long session does not pile them up.
    for (const n of ["data", "dom", "charts", "draw"]) performance.clearMeasures(`arl-view:${n}`);
    performance.measure("arl-view:data", { start: t0, end: tData });
    performance.measure("arl-view:dom", { start: tData, end: tDom });
    performance.measure("arl-view:charts", { start: tDom });
    performance.measure("arl-view:draw", { start: t0 });
    document.body.dataset.ready = String(seq);
    document.body.dataset.view = state.view;
  } catch (e) {
    lastError = (e as Error).message;
    render(html`${header()}<p class="empty">error: ${lastError}</p>`, app);
    document.body.dataset.ready = String(seq);
  }
}

async function poll(): Promise<void> {
  try {
    const before = new Map(index.sources.map((s) => [s.id, s.version]));
    const next = await api.index();
    const changed = next.sources.length !== before.size || next.sources.some((s) => before.get(s.id) !== s.version);
    if (changed) {
      // follow a training run: when the scrubber is on the newest step file, move to the new newest
      const old = source(state.tsrc)?.sampleFiles.filter((f) => f.type === "step") ?? [];
      const atEnd = old.length > 0 && old.at(-1)!.name === state.file;
      index = next;
      if (atEnd) {
        const now = source(state.tsrc)?.sampleFiles.filter((f) => f.type === "step") ?? [];
        if (now.length > 0 && state.ep === null) state = { ...state, file: now.at(-1)!.name };
      }
      await draw();
    }
  } catch (e) {
    lastError = `poll failed: ${(e as Error).message}`;
  }
  if (index.pollMs > 0) setTimeout(() => void poll(), index.pollMs);
}

async function start(): Promise<void> {
  document.getElementById("app")!.replaceChildren(); // lit-html renders beside existing children: drop "loading…"
  try {
    const pending = api.index(); // asked first: the server answers in order, and the index is what every view needs
    if (state.view === "curves") api.prefetchMetrics(state.src); // in parallel with the index (a link names its sources)
    index = await pending;
  } catch (e) {
    render(html`<p class="empty">cannot read the index: ${(e as Error).message}</p>`, document.getElementById("app")!);
    document.body.dataset.ready = "error";
    return;
  }
  window.addEventListener("hashchange", () => {
    state = readHash();
    void draw();
  });
  let resizeTimer: ReturnType<typeof setTimeout> | undefined;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => void draw(), 200);
  });
  await draw();
  if (!index.static && index.pollMs > 0) setTimeout(() => void poll(), index.pollMs);
}

void start();
