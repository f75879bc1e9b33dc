/**
 * The lab's tables as formatted cells, shared by the HTML report (`./report.ts`) and the console (`arl lab`, `arl
 * eval`): the final table of a search lab (`labTableRows`) and of an env lab (`envLabTable`), and the training
 * dynamics per design (`dynamicsRows`, `envDynamicsRows`).
 */
import type { Metrics } from "../core/types.ts";
import type { DesignResult, EnvDesignResult, EnvLabResult, EvalSummary, LabResult, SummaryRow } from "./types.ts";

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

/** A number in [0, 1] as a percentage with one decimal, e.g. `0.4102` → `"41.0"`; `"n/a"` when not finite. */
export function pct(x: number): string {
  return Number.isFinite(x) ? (100 * x).toFixed(1) : "n/a";
}

/** A mean count with two decimals, e.g. `1.5` → `"1.50"`; `"n/a"` when not finite. */
export function f2(x: number): string {
  return Number.isFinite(x) ? x.toFixed(2) : "n/a";
}

/**
 * The cells of a question-answering evaluation, all / known / unknown facts: EM % (one decimal), searches per
 * question (two decimals), guess % on known and unknown facts — the first cells of the lab's final table and of
 * `arl eval`'s table. `"n/a"` for a value that is not finite (an empty slice).
 */
export function qaCells(e: Pick<EvalSummary, "all" | "known" | "unknown">): string[] {
  return [
    pct(e.all.em),
    pct(e.known.em),
    pct(e.unknown.em),
    f2(e.all.searches),
    f2(e.known.searches),
    f2(e.unknown.searches),
    pct(e.known.guessRate),
    pct(e.unknown.guessRate),
  ];
}

/** One table row's cells (after the policy name) from an evaluation summary: `qaCells`, then the needless-search rate %. */
function evalCells(e: EvalSummary): string[] {
  return [...qaCells(e), pct(e.needlessSearchRate)];
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

/** {@link dynamicsRows} of an env lab: held-out task success (`SummaryRow.success`) in place of EM. Columns {@link ENV_DYNAMICS_HEAD}. */
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
  const cells = (r: SummaryRow) => [
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
