/**
 * The viewer's Trajectories view: a step scrubber (or an evaluation file), filters by task kind, outcome and detector,
 * the file's episodes group by group, and the selected episode in detail.
 */
import { html, nothing, type TemplateResult } from "lit-html";
import { episodeDetail, episodeRow } from "./episodeView.ts";
import { api, index, replaceState, set, source, state, writeHash } from "./state.ts";

/** The Trajectories view: [side panel, content]. */
export async function trajectoriesView(): Promise<[TemplateResult, TemplateResult]> {
  const s = source(state.tsrc);
  if (s === undefined) return [html``, html`<p class="empty">No samples files in these folders.</p>`];
  const payload = state.file ? await api.samples(s.id, state.file) : undefined;
  const detectorSteps = payload?.detectorSteps ?? {};
  const stepFiles = s.sampleFiles.filter((f) => f.type === "step" && (state.detector === "" || (detectorSteps[state.detector] ?? []).includes(f.step!)));
  const evalFiles = s.sampleFiles.filter((f) => f.type === "eval");
  const current = s.sampleFiles.find((f) => f.name === state.file);
  // a URL (or a new detector) that names a step where the chosen detector was not firing: its first firing step
  if (state.detector !== "" && current?.type === "step" && stepFiles.length > 0 && !stepFiles.includes(current)) {
    replaceState({ ...state, file: stepFiles[0].name, ep: null });
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
