/**
 * The viewer page's state: what is shown (mirrored in `location.hash`, so a link reopens the same view), the index of
 * sources, and the data client. The views read `state` and `index` (live bindings: `set`, `replaceState` and
 * `setIndex` replace them) and change the state through `set`, which redraws the page (`setRedraw`).
 */
import type { SourceInfo, ViewIndex } from "../types.ts";
import { ViewApi } from "./api.ts";

/** The page's three views. */
export type ViewName = "curves" | "trajectories" | "compare";

/** The page's state, mirrored in `location.hash`. */
export interface State {
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

/** The server's (or the exported file's) data, cached per version. */
export const api = new ViewApi();
/** The sources and how to poll them (`setIndex` replaces it when a poll finds a change). */
export let index: ViewIndex = { sources: [], static: true, pollMs: 0 };
/** What the page shows now. */
export let state: State = readHash();
/** Number of the latest draw: a draw that awaited data gives up when a newer one started. */
export let renderSeq = 0;
/** Redraws the page (the page script's `draw`, set by `setRedraw`). */
let redraw: () => void = () => {};

/** Sets what `set` calls after changing the state. */
export function setRedraw(fn: () => void): void {
  redraw = fn;
}

/** Replaces the index of sources. */
export function setIndex(next: ViewIndex): void {
  index = next;
}

/** Replaces the state without redrawing (the caller draws, or is drawing). */
export function replaceState(next: State): void {
  state = next;
}

/** Starts a new draw. @returns its number (compare with `renderSeq` after each await) */
export function nextRenderSeq(): number {
  return ++renderSeq;
}

/** The state the URL's hash says (defaults for what it leaves out). */
export function readHash(): State {
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

/** Writes the state into the URL's hash (replacing the history entry). */
export function writeHash(): void {
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
export function set(patch: Partial<State>): void {
  state = { ...state, ...patch };
  writeHash();
  redraw();
}

/** A source of the index by id. */
export const source = (id: string): SourceInfo | undefined => index.sources.find((s) => s.id === id);
/** The metric keys the sources have values of in a stage (every key, for an index without per-stage keys). */
export const stageKeys = (ids: readonly string[], stage: string): string[] =>
  [...new Set(ids.flatMap((id) => { const s = source(id); return s === undefined ? [] : (s.metricKeysByStage?.[stage] ?? s.metricKeys); }))];

/** Fills in defaults that depend on the index (first sources, default metrics, default files). */
export function settleState(): void {
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
