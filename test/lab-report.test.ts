import { describe, expect, it } from "vitest";
import { renderReport } from "../src/lab/report.ts";
import { chartMetrics } from "../src/lab/reportCharts.ts";
import { LAB_TABLE_HEAD, labTableRows } from "../src/lab/reportTables.ts";
import type { DesignResult, DetectorFiring, EvalSummary, LabResult } from "../src/lab/types.ts";
import type { Metrics } from "../src/core/types.ts";
import { labFingerprint } from "../src/lab/fingerprint.ts";

function summary(em: number, guessUnknown: number): EvalSummary {
  return {
    all: { n: 40, em, searches: 1.25, guessRate: 0.3 },
    known: { n: 20, em: em + 0.1, searches: 0.5, guessRate: 0.6 },
    unknown: { n: 20, em: em - 0.1, searches: 2, guessRate: guessUnknown },
    needlessSearches: 0.4,
    needlessSearchRate: 0.125,
  };
}

const firing: DetectorFiring = {
  detector: "guess_unknown",
  metric: "hack/guess_rate_unknown",
  since: 3,
  step: 5,
  value: 0.62,
  baseline: 0.1,
  threshold: 0.3,
  message: "guess_unknown: hack/guess_rate_unknown 0.62 > 0.30 (baseline 0.10, +0.52) since step 3 <&>",
};

function design(name: string, k: number, withHack: boolean): DesignResult {
  const steps: Metrics[] = Array.from({ length: 6 }, (_, s) => {
    const m: Metrics = { "reward/mean": 0.1 * s + k, em: 0.3 + 0.05 * s, searches: 1 + 0.1 * k * s, "hack/guess_rate_unknown": 0.1 + 0.1 * s * k };
    if (withHack) m["hack/tool_spam"] = 0.05 * s;
    if (s !== 2) m["hack/kl_ref"] = 0.01 * s; // missing at step 2
    if (s === 4) m["train/entropy"] = Number.NaN; // not finite: skipped
    else m["train/entropy"] = 1 - 0.1 * s;
    return m;
  });
  return {
    name,
    description: `design ${name} & friends`,
    weights: { em: 1, format: 0.1 * k },
    overrides: k === 1 ? { "rl.maskObservations": "false" } : {},
    steps,
    detectors: k === 1 ? [firing] : [],
    firingsDuringTraining: k === 1 ? [firing, { ...firing, detector: "tool_spam", message: "tool_spam: spiked at step 2" }] : [],
    after: summary(0.4 + 0.1 * k, 0.2 * k),
    examples: {
      before: ["Q: capital of X?\n<search> a </search>\n<information>Doc 1: \"X\" is in Y</information>\n<answer> Z </answer>"],
      after: [`Q: capital of X?\n<answer> guess-${name} </answer>`],
    },
    wallMs: 1234,
  };
}

const lab: LabResult = {
  name: "test-lab",
  seed: 7,
  quick: true,
  rlSteps: 6,
  evalQuestions: 40,
  warmStart: summary(0.35, 0.05),
  designs: [design("outcome-only", 1, true), design("composite", 2, false), design("masked<obs>", 0, true)],
  claims: [
    { id: "a", title: "Outcome-only guesses", text: "outcome-only guessed on 20.0 % of unknown facts vs 40.0 % for composite", numbers: { a: 20, b: 40 } },
    { id: "b", title: "Masking matters", text: "masked EM 40.0 %", numbers: { em: 40 } },
  ],
  wallMs: 150_000,
};

describe("lab report", () => {
  it("chooses the charted metrics in order, skipping keys without data", () => {
    expect(chartMetrics(lab)).toEqual(["reward/mean", "em", "searches", "hack/guess_rate_unknown", "hack/tool_spam", "train/entropy", "hack/kl_ref"]);
  });

  it("builds the table rows: warm start first, formatted cells, detectors or quiet", () => {
    const rows = labTableRows(lab);
    expect(rows).toHaveLength(4);
    for (const r of rows) expect(r).toHaveLength(LAB_TABLE_HEAD.length);
    expect(rows[0]).toEqual(["warm start (SFT)", "35.0", "45.0", "25.0", "1.25", "0.50", "2.00", "60.0", "5.0", "12.5", "—"]);
    expect(rows[1][0]).toBe("outcome-only");
    expect(rows[1][1]).toBe("50.0");
    expect(rows[1].at(-1)).toBe("guess_unknown");
    expect(rows[2][1]).toBe("60.0");
    expect(rows[2].at(-1)).toBe("quiet");
  });

  it("renders one self-contained, escaped, deterministic HTML document", async () => {
    const html = await renderReport(lab);

    // One document, nothing external.
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(html.match(/<html/g)).toHaveLength(1);
    expect(html.match(/<\/html>/g)).toHaveLength(1);
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<link/i);
    expect(html).not.toMatch(/<img/i);
    expect(html).not.toMatch(/url\(\s*['"]?https?:/i);
    expect(html).not.toMatch(/@import/i);
    expect(html).not.toMatch(/(?:src|href)\s*=\s*["']?https?:/i);
    const external = [...html.matchAll(/https?:\/\/[^\s"'<>)]+/g)].map((m) => m[0]);
    expect(new Set(external)).toEqual(new Set(["http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"]));

    // Title and claims.
    expect(html).toContain("<h1>Reward lab: test-lab</h1>");
    expect(html).toContain("seed 7 · 6 RL steps per design · 40 held-out questions · quick · 2.5 min total");
    expect(html.indexOf("Claims")).toBeLessThan(html.indexOf('id="final"'));
    expect(html).toContain("outcome-only guessed on 20.0 % of unknown facts vs 40.0 % for composite");
    expect(html).toContain("Masking matters");

    // Table: warm-start row and each design's EM %.
    const table = html.slice(html.indexOf('<table id="final">'), html.indexOf("</table>"));
    expect(table).toContain("<td>warm start (SFT)</td>");
    for (const row of labTableRows(lab)) expect(table).toContain(`<td class="num">${row[1]}</td>`);
    expect(table).toContain("<td>masked&lt;obs&gt;</td>");

    // Charts: one SVG per metric, each with a legend naming every design; ids scoped per chart.
    const svgs = html.match(/<svg[\s\S]*?<\/svg>/g) ?? [];
    expect(svgs).toHaveLength(chartMetrics(lab).length);
    for (const svg of svgs) {
      expect(svg).toContain('aria-roledescription="legend"');
      for (const name of ["outcome-only", "composite", "masked&lt;obs&gt;"]) expect(svg).toContain(`opacity="1">${name}</text>`);
      expect(svg).not.toMatch(/NaN/);
    }
    const ids = [...html.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]);
    expect(new Set(ids).size).toBe(ids.length);

    // Detector firings with messages, escaped.
    const detectors = html.slice(html.indexOf('id="detectors"'), html.indexOf('id="examples"'));
    expect(detectors).toContain("since step 3 &lt;&amp;&gt;");
    expect(detectors).toContain("tool_spam: spiked at step 2");

    // Trajectories: tags shown as text.
    const examples = html.slice(html.indexOf('id="examples"'));
    expect(examples).toContain("<pre>Q: capital of X?\n&lt;search&gt; a &lt;/search&gt;\n&lt;information&gt;Doc 1: &quot;X&quot; is in Y&lt;/information&gt;");
    expect(examples).toContain("&lt;answer&gt; guess-masked&lt;obs&gt; &lt;/answer&gt;");
    expect(html).not.toContain("<search>");
    expect(html).not.toContain("<information>");

    // Deterministic.
    expect(await renderReport(lab)).toBe(html);
  });
});

describe("lab fingerprint", () => {
  it("ignores wall times, the name and the warm-start path; changes with any measured number", () => {
    const fp = labFingerprint(lab);
    expect(fp).toMatch(/^[0-9a-f]{16}$/);
    // A rerun elsewhere: other wall times, name and warm-start folder, fields written in another order.
    const rerun: LabResult = {
      ...lab,
      name: "rerun",
      wallMs: 9,
      warmStartFrom: "/elsewhere/checkpoints/sft",
      designs: lab.designs.map((d) => ({ ...d, wallMs: 1, rlWallMs: 2, steps: d.steps.map((m) => Object.fromEntries(Object.entries(m).reverse())) })),
    };
    expect(labFingerprint(rerun)).toBe(fp);
    expect(labFingerprint({ ...lab, fingerprint: "0000000000000000" })).toBe(fp); // a stored fingerprint is not hashed
    // One metric of one step one ulp off: another fingerprint.
    const steps = lab.designs[1].steps.map((m, i) => (i === 3 ? { ...m, "reward/mean": m["reward/mean"] + Number.EPSILON * 4 } : m));
    expect(steps[3]["reward/mean"]).not.toBe(lab.designs[1].steps[3]["reward/mean"]);
    expect(labFingerprint({ ...lab, designs: lab.designs.map((d, i) => (i === 1 ? { ...d, steps } : d)) })).not.toBe(fp);
    expect(labFingerprint({ ...lab, seed: 8 })).not.toBe(fp);
    expect(labFingerprint({ ...lab, designs: lab.designs.map((d) => ({ ...d, examples: { ...d.examples, after: [...d.examples.after, "x"] } })) })).not.toBe(fp);
  });

  it("is shown in the report's subtitle when present", async () => {
    const html = await renderReport({ ...lab, fingerprint: labFingerprint(lab) });
    expect(html).toContain(`fingerprint ${labFingerprint(lab)}`);
  });
});
