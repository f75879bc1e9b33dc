/**
 * One episode as the viewer shows it: its row in an episode table, and its detail — facts, reward term by term, the
 * grader's parts, turns (or an `--agent` rollout's calls) and tokens (loss mask shown, per-token logprob or advantage
 * as colour).
 */
import { html, nothing, type TemplateResult } from "lit-html";
import type { ViewEpisode, ViewTokens } from "../types.ts";
import { set, state, type State } from "./state.ts";

/** A number for a table cell: "–" when missing, no decimals from 1000 on. */
export const fmt = (x: number | null | undefined, digits = 3): string => (x === null || x === undefined || !Number.isFinite(x) ? "–" : Math.abs(x) >= 1000 ? x.toFixed(0) : x.toFixed(digits));
/** An episode's answer cell: the answer, "none", or — an --agent evaluation rollout (rollouts.jsonl) — "not written". */
export const answerOf = (e: ViewEpisode): TemplateResult | string =>
  e.answer ?? (e.agent !== undefined && e.turns.length === 0 ? html`<span class="muted" title="rollouts.jsonl keeps status and reward only">not written</span>` : html`<span class="muted">none</span>`);

/** An episode's row in the Trajectories table (group and member, outcome, reward, advantage, calls, question, answer). */
export function episodeRow(e: ViewEpisode, selected: boolean, first: boolean, isEval: boolean, onClick: () => void): TemplateResult {
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
export function episodeDetail(e: ViewEpisode, vocab: Record<string, string>, compact = false, evaluation = compact): TemplateResult {
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
