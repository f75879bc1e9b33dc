/**
 * The viewer's Compare view: two evaluation files (warm start vs RL, or two designs / runs) task by task, with the
 * selected task's episodes side by side.
 */
import { html, nothing, type TemplateResult } from "lit-html";
import type { SamplesPayload, ViewEpisode } from "../types.ts";
import { answerOf, episodeDetail, fmt } from "./episodeView.ts";
import { api, index, set, source, state } from "./state.ts";

/** The Compare view: [side panel, content]. */
export async function compareView(): Promise<[TemplateResult, TemplateResult]> {
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
