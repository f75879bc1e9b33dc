/**
 * Renders a reward lab (`LabResult`) to one self-contained HTML document (`report.html`): title, claims, the final
 * table, per-metric line charts over RL steps (Vega-Lite → SVG, rendered in Node, inlined), detector firings and
 * example trajectories. Opens offline: no scripts, no external fonts, styles or images.
 *
 * Rendering is deterministic: the same `LabResult` gives byte-identical HTML (no dates, ids rewritten per chart,
 * text widths estimated rather than measured with a canvas, so the output does not depend on installed packages).
 */
import * as vega from "vega";
import * as vl from "vega-lite";
import type { TopLevelSpec } from "vega-lite";
import type { Metrics } from "../core/types.ts";
import type { DesignResult, DetectorFiring, EnvDesignResult, EnvLabResult, EvalSummary, LabResult, RecipeRow } from "./types.ts";

/** What the charts, firings and examples of a report read of a design (search or env lab alike). */
type DesignView = Pick<DesignResult, "name" | "steps" | "detectors" | "firingsDuringTraining" | "examples" | "description" | "weights" | "overrides" | "rlWallMs">;

/** Column headings of the final table, in the order of the cells of {@link labTableRows}. */
export const LAB_TABLE_HEAD: readonly string[] = [
  "policy",
  "EM %",
  "EM % known",
  "EM % unknown",
  "searches/q",
  "searches/q known",
  "searches/q unknown",
  "guess % known",
  "guess % unknown",
  "needless-search %",
  "detectors at end",
];

/** Metrics always charted first (when any design has a value for them), in this order. */
const CORE_METRICS = ["reward/mean", "em", "searches", "hack/guess_rate_unknown"] as const;
/** Metrics charted last, when present. */
const TAIL_METRICS = ["train/entropy", "hack/kl_ref", "train/grad_norm"] as const;

/** Tableau 10: one colour per design, in design order (cycled beyond ten designs). */
const PALETTE = ["#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"];

const CHART_WIDTH = 520;
const CHART_HEIGHT = 200;
/** Draw a point per step only up to this many steps (beyond, points only clutter the lines). */
const MAX_STEPS_WITH_POINTS = 30;

/** A number in [0, 1] as a percentage with one decimal, e.g. `0.4102` → `"41.0"`; `"n/a"` when not finite. */
function pct(x: number): string {
  return Number.isFinite(x) ? (100 * x).toFixed(1) : "n/a";
}

/** A mean count with two decimals, e.g. `1.5` → `"1.50"`; `"n/a"` when not finite. */
function f2(x: number): string {
  return Number.isFinite(x) ? x.toFixed(2) : "n/a";
}

/** One table row's cells (after the policy name) from an evaluation summary. */
function evalCells(e: EvalSummary): string[] {
  return [
    pct(e.all.em),
    pct(e.known.em),
    pct(e.unknown.em),
    f2(e.all.searches),
    f2(e.known.searches),
    f2(e.unknown.searches),
    pct(e.known.guessRate),
    pct(e.unknown.guessRate),
    pct(e.needlessSearchRate),
  ];
}

/** Names of the detectors firing at the end of a design's training, comma separated, or `quiet`. */
function detectorCell(d: Pick<DesignResult, "detectors">): string {
  return d.detectors.length === 0 ? "quiet" : d.detectors.map((f) => f.detector).join(", ");
}

/**
 * The final table as formatted cells, one row per policy: first the warm start (`"warm start (SFT)"`), then one row
 * per design in `lab.designs` order. Cells follow {@link LAB_TABLE_HEAD}: EM % (all / known / unknown, one decimal),
 * searches per question (all / known / unknown, two decimals), guess % on known and unknown facts, needless-search
 * rate % (one decimal; `"n/a"` for a non-finite value, e.g. an empty slice), and the detectors firing at the end
 * (names joined by `", "`, `"quiet"` when none, `"—"` for the warm start, which has no training). The HTML report
 * shows exactly these strings, so the CLI can print the same table. Throws nothing for a well-formed `LabResult`.
 */
export function labTableRows(lab: LabResult): string[][] {
  return [
    ["warm start (SFT)", ...evalCells(lab.warmStart), "—"],
    ...lab.designs.map((d) => [d.name, ...evalCells(d.after), detectorCell(d)]),
  ];
}

/** Columns of {@link dynamicsRows}. */
export const DYNAMICS_HEAD: readonly string[] = ["design", "algorithm", "held-out EM %", "Δ EM vs warm start (pts)", "reward (last 20 %)", "KL to warm start (last 20 %)", "entropy (last 20 %)", "grad norm (mean)", "s / RL step"];

/** Mean of `key` over the last ⌈steps/5⌉ steps that have it (the claims' window); NaN when none. */
export function finalWindowMean(steps: readonly Metrics[], key: string): number {
  const vals = steps.map((m) => m[key]).filter((v): v is number => Number.isFinite(v));
  if (vals.length === 0) return Number.NaN;
  const w = vals.slice(-Math.max(1, Math.ceil(vals.length / 5)));
  return w.reduce((a, b) => a + b, 0) / w.length;
}

/**
 * The lab's own algorithm, under every design that does not set its own: the lab config's `rl.advantage` and
 * `rl.lossFn` (a `--rl.advantage gae` flag applies to all designs). Absent → `grpo · ppo`, the defaults.
 */
export interface LabAlgorithm {
  advantage: string;
  lossFn: string;
}

/**
 * The algorithm a design trains: its `rl.advantage` / `rl.lossFn` overrides, else the lab's (`base`, its config's),
 * else `grpo · ppo`; then its other `rl.*` overrides.
 */
export function algorithmLabel(d: Pick<DesignResult, "overrides">, base?: LabAlgorithm): string {
  const o = d.overrides;
  const adv = o["rl.advantage"] ?? base?.advantage ?? "grpo";
  const loss = o["rl.lossFn"] ?? base?.lossFn ?? "ppo";
  const extra = Object.entries(o).filter(([k]) => k.startsWith("rl.") && k !== "rl.advantage" && k !== "rl.lossFn").map(([k, v]) => `${k.slice(3)}=${v}`);
  return [`${adv} · ${loss}`, ...extra].join(", ");
}

/**
 * The training-dynamics table, one row per design (cells follow {@link DYNAMICS_HEAD}): held-out EM after RL and its
 * change from the warm start, then over the last 20 % of RL steps the mean reward, KL to the warm start
 * (`hack/kl_ref`, nats/token) and entropy (`train/entropy`, nats), the mean gradient norm over all steps, and RL
 * wall seconds per step (`rlWallMs`; the only cell that is not deterministic). `"n/a"` where a metric is missing.
 */
export function dynamicsRows(lab: LabResult, base?: LabAlgorithm): string[][] {
  return dynamicsOf(lab.designs, (d) => d.after.all.em, lab.warmStart.all.em, base);
}

/** {@link dynamicsRows} of an env lab: held-out task success (`RecipeRow.success`) in place of EM. Columns {@link ENV_DYNAMICS_HEAD}. */
export function envDynamicsRows(lab: EnvLabResult, base?: LabAlgorithm): string[][] {
  return dynamicsOf(lab.designs, (d) => d.after.success, lab.warmStart.success, base);
}

/** Columns of {@link envDynamicsRows}. */
export const ENV_DYNAMICS_HEAD: readonly string[] = ["design", "algorithm", "held-out success %", "Δ success vs warm start (pts)", ...DYNAMICS_HEAD.slice(4)];

/** The dynamics cells of designs whose held-out score (in [0, 1]) is `score`; `warm` the warm start's. */
function dynamicsOf<D extends Pick<DesignResult, "name" | "steps" | "overrides" | "rlWallMs">>(designs: readonly D[], score: (d: D) => number, warm: number, base?: LabAlgorithm): string[][] {
  const f = (x: number, digits: number) => (Number.isFinite(x) ? x.toFixed(digits) : "n/a");
  return designs.map((d) => {
    const gn = d.steps.map((m) => m["train/grad_norm"]).filter((v): v is number => Number.isFinite(v));
    return [
      d.name,
      algorithmLabel(d, base),
      f(100 * score(d), 1),
      f(100 * (score(d) - warm), 1),
      f(finalWindowMean(d.steps, "reward/mean"), 3),
      f(finalWindowMean(d.steps, "hack/kl_ref"), 4),
      f(finalWindowMean(d.steps, "train/entropy"), 3),
      f(gn.length > 0 ? gn.reduce((a, b) => a + b, 0) / gn.length : Number.NaN, 3),
      d.rlWallMs === undefined || d.steps.length === 0 ? "n/a" : (d.rlWallMs / 1000 / d.steps.length).toFixed(2),
    ];
  });
}

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

/** HTML-escapes text for element content and double-quoted attribute values. */
function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
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
function useEstimatedTextWidths(): void {
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
async function chartsSection(lab: { designs: readonly Pick<DesignResult, "name" | "steps">[] }, core: readonly string[] = CORE_METRICS, skip: readonly string[] = []): Promise<string> {
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

/** A `<ul>` of firings (detector name and message), or a "none" paragraph. */
function firingList(firings: readonly DetectorFiring[], none: string): string {
  if (firings.length === 0) return `<p class="quiet">${esc(none)}</p>`;
  const items = firings.map((f) => `<li><code>${esc(f.detector)}</code> ${esc(f.message)}</li>`);
  return `<ul>${items.join("")}</ul>`;
}

/** One design's detector block: firing at the end and ever raised during training. */
function designFirings(d: DesignView): string {
  return [
    `<div class="design"><h3>${esc(d.name)}</h3>`,
    `<h4>Firing at the end of training</h4>`,
    firingList(d.detectors, "quiet"),
    `<h4>Raised during training</h4>`,
    firingList(d.firingsDuringTraining, "none"),
    `</div>`,
  ].join("\n");
}

/** One design's example trajectories: warm start and after RL, paired by index, side by side. */
function designExamples(d: DesignView): string {
  const n = Math.max(d.examples.before.length, d.examples.after.length);
  const pairs: string[] = [];
  for (let i = 0; i < n; i++) {
    const before = d.examples.before[i];
    const after = d.examples.after[i];
    const cell = (label: string, text: string | undefined) =>
      `<div><div class="label">${label}</div>${text === undefined ? '<p class="quiet">(none)</p>' : `<pre>${esc(text)}</pre>`}</div>`;
    pairs.push(`<div class="pair">${cell(`#${i + 1} warm start (SFT)`, before)}${cell(`#${i + 1} after RL`, after)}</div>`);
  }
  const body = pairs.length > 0 ? pairs.join("\n") : '<p class="quiet">No examples recorded.</p>';
  return `<div class="design"><h3>${esc(d.name)}</h3>\n${body}\n</div>`;
}

/** The design list under the table: description, reward weights and option overrides. */
function designList(lab: { designs: readonly DesignView[] }): string {
  if (lab.designs.length === 0) return "";
  const items = lab.designs.map((d) => {
    const weights = Object.entries(d.weights).map(([k, v]) => `${k} ${v}`).join(", ");
    const overrides = Object.entries(d.overrides).map(([k, v]) => `${k}=${v}`).join(", ");
    const extra = [weights && `weights: ${weights}`, overrides && `overrides: ${overrides}`].filter(Boolean).join("; ");
    return `<dt>${esc(d.name)}</dt><dd>${esc(d.description)}${extra ? `<br><span class="small">${esc(extra)}</span>` : ""}</dd>`;
  });
  return `<dl class="designs">${items.join("")}</dl>`;
}

const STYLE = `
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#222;line-height:1.4}
h1{margin-bottom:.2em}.sub{color:#555;margin-top:0}
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}td.num{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}tr:first-child td{background:#fafafa}
.charts{display:flex;flex-wrap:wrap;gap:1em}.chart{margin:0}.chart svg{max-width:100%;height:auto}figcaption{font-size:.8em;color:#666}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;border:1px solid #e2e2e2;padding:.6em;font-size:.8em;margin:0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em;margin-bottom:1em}.label{font-weight:bold;font-size:.85em;margin-bottom:.2em}
.quiet,.note,.small{color:#666}.small{font-size:.85em}dl.designs dt{font-weight:bold;margin-top:.5em}
`;

/**
 * Renders a lab to one self-contained HTML document (UTF-8, inline CSS and SVG, no scripts, no network references).
 * Sections in order: title (name, seed, RL steps per design, held-out questions, quick/full, total wall time in
 * minutes); claims (title and text each); the final table ({@link labTableRows}: warm start and one row per design) with
 * each design's description; one line chart per metric of {@link chartMetrics} (x = RL step, one coloured line per
 * design, legend on every chart, missing or non-finite values skipped); detector firings per design (at the end and
 * during training, with messages); example trajectories per design (warm start and after RL side by side, `<pre>`).
 * All text from the lab is HTML-escaped (trajectories show `<search>` tags as text). Deterministic: the same input
 * gives byte-identical output. Charts are Vega-Lite specs rendered to SVG with vega in Node (~tens of ms each; text
 * widths are estimated — `canvas` is neither needed nor used). Rejects with vega's error if a chart fails to render.
 * `base`: the lab config's algorithm, named for the designs that do not set their own (`algorithmLabel`).
 */
export async function renderReport(lab: LabResult, base?: LabAlgorithm): Promise<string> {
  useEstimatedTextWidths();
  const minutes = (lab.wallMs / 60_000).toFixed(1);
  const sub = [
    `seed ${lab.seed}`,
    `${lab.rlSteps} RL steps per design`,
    `${lab.evalQuestions} held-out questions`,
    lab.quick ? "quick" : "full",
    `${minutes} min total`,
    ...(lab.fingerprint !== undefined ? [`fingerprint ${lab.fingerprint}`] : []),
  ].join(" · ");

  const claims =
    lab.claims.length === 0
      ? '<p class="quiet">No claims.</p>'
      : `<ul class="claims">${lab.claims.map((c) => `<li><strong>${esc(c.title)}</strong> — ${esc(c.text)}</li>`).join("\n")}</ul>`;

  const head = `<tr>${LAB_TABLE_HEAD.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
  const rows = labTableRows(lab).map(
    (cells) => `<tr>${cells.map((c, i) => (i === 0 || i === cells.length - 1 ? `<td>${esc(c)}</td>` : `<td class="num">${esc(c)}</td>`)).join("")}</tr>`,
  );
  const table = `<table id="final">\n<thead>${head}</thead>\n<tbody>\n${rows.join("\n")}\n</tbody>\n</table>`;

  const dynHead = `<tr>${DYNAMICS_HEAD.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
  const dynRows = dynamicsRows(lab, base).map((cells) => `<tr>${cells.map((c, i) => (i < 2 ? `<td>${esc(c)}</td>` : `<td class="num">${esc(c)}</td>`)).join("")}</tr>`);
  const dynamics = lab.designs.length === 0 ? "" : `<section id="dynamics"><h2>Training dynamics per design</h2>\n<table id="dynamics-table">\n<thead>${dynHead}</thead>\n<tbody>\n${dynRows.join("\n")}\n</tbody>\n</table>\n</section>`;
  const charts = await chartsSection(lab);
  const firings = lab.designs.length === 0 ? '<p class="quiet">No designs.</p>' : lab.designs.map(designFirings).join("\n");
  const examples = lab.designs.length === 0 ? '<p class="quiet">No designs.</p>' : lab.designs.map(designExamples).join("\n");

  return [
    "<!DOCTYPE html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>Reward lab: ${esc(lab.name)}</title>`,
    `<style>${STYLE}</style>`,
    "</head>",
    "<body>",
    `<h1>Reward lab: ${esc(lab.name)}</h1>`,
    `<p class="sub">${esc(sub)}</p>`,
    `<section id="claims"><h2>Claims</h2>\n${claims}\n</section>`,
    `<section id="table"><h2>Final evaluation (held-out)</h2>\n${table}\n${designList(lab)}\n</section>`,
    dynamics,
    charts,
    `<section id="detectors"><h2>Detector firings</h2>\n${firings}\n</section>`,
    `<section id="examples"><h2>Example trajectories</h2>\n${examples}\n</section>`,
    "</body>",
    "</html>",
    "",
  ].join("\n");
}

/** Metrics charted first in an env lab (when present): reward, the grader's score, tool calls, invalid actions. */
const ENV_CORE_METRICS = ["reward/mean", "grade/score", "tool_calls", "invalid_rate"] as const;

/** The breakdown keys an env lab's table shows: the labelled ones some row has (`success` / `calls` are columns already). */
function envBreakdownKeys(lab: Pick<EnvLabResult, "breakdownLabels" | "warmStart" | "designs">): string[] {
  const rows = [lab.warmStart, ...lab.designs.map((d) => d.after)];
  return Object.keys(lab.breakdownLabels).filter((k) => k !== "success" && k !== "calls" && rows.some((r) => r.breakdown[k] !== undefined));
}

/**
 * The env lab's final table: heading and formatted cells, one row per policy — the warm start (`"warm start (SFT)"`),
 * then one row per design. Columns: policy, success % (grade = 1), mean grade (two decimals), tool calls per task,
 * invalid actions per turn %, no-answer %, then each breakdown key of the recipe (`breakdownLabels`, in its order;
 * `rate % (n)`, n = episodes where it arose; counts as `x.xx (n)`; `-` where it never arose), then the detectors
 * firing at the end (`quiet`; `—` for the warm start) and those the design expects (`—` when it declares none).
 */
export function envLabTable(lab: EnvLabResult): { head: string[]; rows: string[][] } {
  const keys = envBreakdownKeys(lab);
  const cells = (r: RecipeRow) => [
    pct(r.success),
    f2(r.score),
    f2(r.calls),
    pct(r.invalidRate),
    pct(r.noAnswer),
    ...keys.map((k) => {
      const c = r.breakdown[k];
      if (c === undefined) return "-";
      return k.startsWith("count/") || k === "failed_calls" ? `${f2(c.rate)} (${c.n})` : `${pct(c.rate)} (${c.n})`;
    }),
  ];
  const expected = (d: EnvDesignResult) => (d.expectedDetectors === undefined ? "—" : d.expectedDetectors.length === 0 ? "none (a fix)" : d.expectedDetectors.join(", "));
  return {
    head: ["policy", "success %", "grade", "calls/task", "invalid %", "no answer %", ...keys.map((k) => lab.breakdownLabels[k]), "detectors at end", "expected"],
    rows: [["warm start (SFT)", ...cells(lab.warmStart), "—", "—"], ...lab.designs.map((d) => [d.name, ...cells(d.after), detectorCell(d), expected(d)])],
  };
}

/**
 * Renders an env lab (`EnvLabResult`, `arl lab --env NAME`) to one self-contained HTML document, like
 * {@link renderReport}: title (name, env and protocol, seed, RL steps per design, held-out tasks, quick/full, wall
 * minutes); "Loopholes per design" (each design's verdict: expected detectors vs those that fired, with held-out
 * success before → after); the final table ({@link envLabTable}) with each design's description; the training
 * dynamics ({@link envDynamicsRows}); charts (reward, grade, tool calls, invalid rate, every `hack/*` metric but the
 * search env's known / unknown guess rates, entropy, KL, grad norm); detector firings; example trajectories before and after RL. Deterministic; rejects with vega's
 * error if a chart fails to render.
 * `base` as in {@link renderReport}.
 */
export async function renderEnvReport(lab: EnvLabResult, base?: LabAlgorithm): Promise<string> {
  useEstimatedTextWidths();
  const sub = [
    `env ${lab.env} (${lab.protocol})`,
    `seed ${lab.seed}`,
    `${lab.rlSteps} RL steps per design`,
    `${lab.evalQuestions} held-out tasks`,
    lab.quick ? "quick" : "full",
    ...(lab.warmStartFrom !== undefined ? [`warm start ${lab.warmStartFrom}`] : []),
    `${(lab.wallMs / 60_000).toFixed(1)} min total`,
    ...(lab.fingerprint !== undefined ? [`fingerprint ${lab.fingerprint}`] : []),
  ].join(" · ");
  const verdicts =
    lab.loopholes.length === 0
      ? '<p class="quiet">No designs.</p>'
      : `<ul class="claims">${lab.loopholes.map((v) => `<li><strong>${esc(v.design)}: ${esc(v.outcome)}</strong> — ${esc(v.text)}</li>`).join("\n")}</ul>`;
  const t = envLabTable(lab);
  const head = `<tr>${t.head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
  const rows = t.rows.map((cells) => `<tr>${cells.map((c, i) => (i === 0 || i >= cells.length - 2 ? `<td>${esc(c)}</td>` : `<td class="num">${esc(c)}</td>`)).join("")}</tr>`);
  const table = `<table id="final">\n<thead>${head}</thead>\n<tbody>\n${rows.join("\n")}\n</tbody>\n</table>`;
  const dynHead = `<tr>${ENV_DYNAMICS_HEAD.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
  const dynRows = envDynamicsRows(lab, base).map((cells) => `<tr>${cells.map((c, i) => (i < 2 ? `<td>${esc(c)}</td>` : `<td class="num">${esc(c)}</td>`)).join("")}</tr>`);
  const dynamics = lab.designs.length === 0 ? "" : `<section id="dynamics"><h2>Training dynamics per design</h2>\n<table id="dynamics-table">\n<thead>${dynHead}</thead>\n<tbody>\n${dynRows.join("\n")}\n</tbody>\n</table>\n</section>`;
  // The guess rates split the search env's known / unknown facts: other envs' tasks have no such flag (always 0).
  const charts = await chartsSection(lab, ENV_CORE_METRICS, ["hack/guess_rate_known", "hack/guess_rate_unknown"]);
  const firings = lab.designs.length === 0 ? '<p class="quiet">No designs.</p>' : lab.designs.map(designFirings).join("\n");
  const examples = lab.designs.length === 0 ? '<p class="quiet">No designs.</p>' : lab.designs.map(designExamples).join("\n");
  return [
    "<!DOCTYPE html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>Reward lab: ${esc(lab.name)} (${esc(lab.env)})</title>`,
    `<style>${STYLE}</style>`,
    "</head>",
    "<body>",
    `<h1>Reward lab: ${esc(lab.name)}</h1>`,
    `<p class="sub">${esc(sub)}</p>`,
    `<section id="loopholes"><h2>Loopholes per design</h2>\n${verdicts}\n</section>`,
    `<section id="table"><h2>Final evaluation (held-out)</h2>\n${table}\n${designList(lab)}\n</section>`,
    dynamics,
    charts,
    `<section id="detectors"><h2>Detector firings</h2>\n${firings}\n</section>`,
    `<section id="examples"><h2>Example trajectories</h2>\n${examples}\n</section>`,
    "</body>",
    "</html>",
    "",
  ].join("\n");
}
