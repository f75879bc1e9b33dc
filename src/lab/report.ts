/**
 * Renders a reward lab (`LabResult`) to one self-contained HTML document (`report.html`): title, claims, the final
 * table, per-metric line charts over RL steps (Vega-Lite → SVG, rendered in Node, inlined), detector firings and
 * example trajectories. Opens offline: no scripts, no external fonts, styles or images.
 *
 * Rendering is deterministic: the same `LabResult` gives byte-identical HTML (no dates, ids rewritten per chart,
 * text widths estimated rather than measured with a canvas, so the output does not depend on installed packages).
 * Tables: `./reportTables.ts`; charts: `./reportCharts.ts`.
 */
import { esc } from "./html.ts";
import { chartsSection, useEstimatedTextWidths } from "./reportCharts.ts";
import { DYNAMICS_HEAD, ENV_DYNAMICS_HEAD, LAB_TABLE_HEAD, dynamicsRows, envDynamicsRows, envLabTable, labTableRows, type LabAlgorithm } from "./reportTables.ts";
import type { DesignResult, DetectorFiring, EnvLabResult, LabResult } from "./types.ts";

/** What the charts, firings and examples of a report read of a design (search or env lab alike). */
type DesignView = Pick<DesignResult, "name" | "steps" | "detectors" | "firingsDuringTraining" | "examples" | "description" | "weights" | "overrides" | "rlWallMs">;

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

/** What `reportDocument` assembles: the page's title and sections (HTML), in order. */
interface ReportParts {
  /** `<title>` text (escaped here). */
  title: string;
  /** The lab's name, the `<h1>` (escaped here). */
  name: string;
  /** The line under the title (escaped here). */
  sub: string;
  /** The section before the table (claims, or loopholes per design). */
  lead: string;
  /** The final table (`<table id="final">`). */
  table: string;
  dynamics: string;
  charts: string;
  designs: readonly DesignView[];
}

/** The final table as HTML; `text(i, n)`: whether cell i of a row of n is text (left-aligned) rather than a number. */
function finalTable(head: readonly string[], rows: readonly string[][], text: (i: number, n: number) => boolean): string {
  const th = `<tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
  const tr = rows.map((cells) => `<tr>${cells.map((c, i) => (text(i, cells.length) ? `<td>${esc(c)}</td>` : `<td class="num">${esc(c)}</td>`)).join("")}</tr>`);
  return `<table id="final">\n<thead>${th}</thead>\n<tbody>\n${tr.join("\n")}\n</tbody>\n</table>`;
}

/** The training-dynamics section (empty without designs): the design and algorithm are text, the rest numbers. */
function dynamicsSection(head: readonly string[], rows: readonly string[][], designs: number): string {
  if (designs === 0) return "";
  const th = `<tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
  const tr = rows.map((cells) => `<tr>${cells.map((c, i) => (i < 2 ? `<td>${esc(c)}</td>` : `<td class="num">${esc(c)}</td>`)).join("")}</tr>`);
  return `<section id="dynamics"><h2>Training dynamics per design</h2>\n<table id="dynamics-table">\n<thead>${th}</thead>\n<tbody>\n${tr.join("\n")}\n</tbody>\n</table>\n</section>`;
}

/** The whole HTML document of a report from its parts (the same page for a search and an env lab). */
function reportDocument(p: ReportParts): string {
  const firings = p.designs.length === 0 ? '<p class="quiet">No designs.</p>' : p.designs.map(designFirings).join("\n");
  const examples = p.designs.length === 0 ? '<p class="quiet">No designs.</p>' : p.designs.map(designExamples).join("\n");
  return [
    "<!DOCTYPE html>",
    '<html lang="en">',
    "<head>",
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${esc(p.title)}</title>`,
    `<style>${STYLE}</style>`,
    "</head>",
    "<body>",
    `<h1>Reward lab: ${esc(p.name)}</h1>`,
    `<p class="sub">${esc(p.sub)}</p>`,
    p.lead,
    `<section id="table"><h2>Final evaluation (held-out)</h2>\n${p.table}\n${designList({ designs: p.designs })}\n</section>`,
    p.dynamics,
    p.charts,
    `<section id="detectors"><h2>Detector firings</h2>\n${firings}\n</section>`,
    `<section id="examples"><h2>Example trajectories</h2>\n${examples}\n</section>`,
    "</body>",
    "</html>",
    "",
  ].join("\n");
}

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

  return reportDocument({
    title: `Reward lab: ${lab.name}`,
    name: lab.name,
    sub,
    lead: `<section id="claims"><h2>Claims</h2>\n${claims}\n</section>`,
    table: finalTable(LAB_TABLE_HEAD, labTableRows(lab), (i, n) => i === 0 || i === n - 1),
    dynamics: dynamicsSection(DYNAMICS_HEAD, dynamicsRows(lab, base), lab.designs.length),
    charts: await chartsSection(lab),
    designs: lab.designs,
  });
}

/** Metrics charted first in an env lab (when present): reward, the grader's score, tool calls, invalid actions. */
const ENV_CORE_METRICS = ["reward/mean", "grade/score", "tool_calls", "invalid_rate"] as const;

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
  return reportDocument({
    title: `Reward lab: ${lab.name} (${lab.env})`,
    name: lab.name,
    sub,
    lead: `<section id="loopholes"><h2>Loopholes per design</h2>\n${verdicts}\n</section>`,
    table: finalTable(t.head, t.rows, (i, n) => i === 0 || i >= n - 2),
    dynamics: dynamicsSection(ENV_DYNAMICS_HEAD, envDynamicsRows(lab, base), lab.designs.length),
    // The guess rates split the search env's known / unknown facts: other envs' tasks have no such flag (always 0).
    charts: await chartsSection(lab, ENV_CORE_METRICS, ["hack/guess_rate_known", "hack/guess_rate_unknown"]),
    designs: lab.designs,
  });
}
