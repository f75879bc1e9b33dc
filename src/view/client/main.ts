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
 * Rendering: lit-html templates; charts: vega-lite (`charts.ts`). This file draws the page and polls; the views are
 * `curvesView.ts`, `trajectoriesView.ts` (with `episodeView.ts`) and `compareView.ts`, the shared state `state.ts`.
 */
import { html, render, type TemplateResult } from "lit-html";
import { compareView } from "./compareView.ts";
import { clearCharts, curvesAside, curvesContent, drawCharts } from "./curvesView.ts";
import { api, index, nextRenderSeq, readHash, renderSeq, replaceState, set, setIndex, setRedraw, settleState, source, state, writeHash, type ViewName } from "./state.ts";
import { trajectoriesView } from "./trajectoriesView.ts";

/** The last failure to read data, shown in the header until a draw succeeds. */
let lastError = "";

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
  const seq = nextRenderSeq();
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
      clearCharts();
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
      setIndex(next);
      if (atEnd) {
        const now = source(state.tsrc)?.sampleFiles.filter((f) => f.type === "step") ?? [];
        if (now.length > 0 && state.ep === null) replaceState({ ...state, file: now.at(-1)!.name });
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
    setIndex(await pending);
  } catch (e) {
    render(html`<p class="empty">cannot read the index: ${(e as Error).message}</p>`, document.getElementById("app")!);
    document.body.dataset.ready = "error";
    return;
  }
  window.addEventListener("hashchange", () => {
    replaceState(readHash());
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

setRedraw(() => void draw());
void start();
