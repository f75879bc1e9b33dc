/**
 * A run's `samples/` files as `arl view` shows them: which files there are, and each line → an episode with its
 * group, outcome, advantage (the trainer's, or recomputed for whole groups) and token books.
 */
import { readdirSync } from "node:fs";
import { grpoAdvantages } from "../algo/advantages.ts";
import { emCheck } from "../reward/em.ts";
import { agentEpisode, isAgentLine } from "./agentEpisodes.ts";
import { fitTo, num, str } from "./fields.ts";
import { isDir } from "./files.ts";
import type { RunSettings } from "./runSettings.ts";
import type { Outcome, SampleFileInfo, ViewEpisode, ViewRewardTerm, ViewTokens, ViewTurn } from "./types.ts";

/** Sample files of a `samples/` folder: `step-<n>` by step, then `eval-<policy>` by name. */
export function sampleFilesIn(dir: string): SampleFileInfo[] {
  if (!isDir(dir)) return [];
  const out: SampleFileInfo[] = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith(".jsonl")) continue;
    const name = f.slice(0, -".jsonl".length);
    const m = /^step-(\d+)$/.exec(name);
    if (m) out.push({ name, type: "step", step: Number(m[1]) });
    else if (name.startsWith("eval-")) out.push({ name, type: "eval", policy: name.slice("eval-".length) });
  }
  return out.sort((a, b) => (a.type !== b.type ? (a.type === "step" ? -1 : 1) : a.type === "step" ? a.step! - b.step! : a.name < b.name ? -1 : 1));
}

/**
 * Success / fail / no answer: the env's grade (score ≥ 1) when present, else the `em` (or `outcome`) reward term = 1,
 * else — evaluation episodes carry no reward — Search-R1 EM of the answer against the gold answers (`emCheck`, the
 * trainer's own check).
 */
export function outcomeOf(answer: string | null, terms: readonly ViewRewardTerm[], grade: { score: number } | undefined, gold: readonly string[] = []): Outcome {
  if (grade !== undefined) return grade.score >= 1 - 1e-9 ? "success" : answer === null ? "no-answer" : "fail";
  if (answer === null) return "no-answer";
  const t = terms.find((x) => x.name === "em") ?? terms.find((x) => x.name === "outcome");
  if (t !== undefined) return t.value >= 1 - 1e-9 ? "success" : "fail";
  return gold.length > 0 && emCheck(answer, [...gold]) === 1 ? "success" : "fail";
}

/**
 * Sample lines → episodes: groups (consecutive lines of one task), outcomes, advantages, token books.
 * @param agent `spaced`: the tokenizer's decoder joins tokens by spaces (WordPiece; undefined = not known); `vocab`:
 *   filled with the token texts an `--agent` samples file carries (id → text)
 */
export function toEpisodes(rows: Record<string, unknown>[], info: SampleFileInfo, settings: RunSettings, agent: { spaced?: boolean; vocab: Record<string, string> } = { vocab: {} }): ViewEpisode[] {
  const episodes: ViewEpisode[] = [];
  let group = -1;
  let member = 0;
  rows.forEach((r, index) => {
    const task = str(r.task, `#${index}`);
    if (index === 0 || task !== str(rows[index - 1].task, `#${index - 1}`)) {
      group++;
      member = 0;
    } else member++;
    if (isAgentLine(r)) {
      episodes.push(agentEpisode(r, { index, task, group, member, spaced: agent.spaced, vocab: agent.vocab }));
      return;
    }
    const reward = r.reward as { total?: unknown; terms?: unknown } | null | undefined;
    const terms: ViewRewardTerm[] = Array.isArray(reward?.terms)
      ? (reward.terms as Record<string, unknown>[]).map((t) => ({ name: str(t.name), value: num(t.value) ?? 0, weight: num(t.weight) ?? 0, explanation: str(t.explanation), ...(typeof t.error === "string" ? { error: t.error } : {}) }))
      : [];
    const g = r.grade as { score?: unknown; parts?: unknown; explanation?: unknown } | undefined;
    const grade =
      g !== undefined && g !== null && num(g.score) !== undefined
        ? { score: num(g.score)!, parts: Object.fromEntries(Object.entries((g.parts ?? {}) as Record<string, unknown>).filter(([, v]) => num(v) !== undefined)) as Record<string, number>, ...(typeof g.explanation === "string" ? { explanation: g.explanation } : {}) }
        : undefined;
    const turns: ViewTurn[] = Array.isArray(r.turns)
      ? (r.turns as Record<string, unknown>[]).map((t) => ({
          action: str(t.action),
          observation: str(t.observation),
          ...(Array.isArray(t.tools) ? { tools: (t.tools as Record<string, unknown>[]).map((c) => ({ name: str(c.name), ok: c.ok === true, ...(typeof c.error === "string" ? { error: c.error } : {}) })) } : {}),
        }))
      : [];
    const answer = typeof r.answer === "string" ? r.answer : null;
    const gold = Array.isArray(r.gold) ? (r.gold as unknown[]).map((x) => String(x)) : [];
    let tokens: ViewTokens | undefined;
    if (Array.isArray(r.tokens) && Array.isArray(r.lossMask)) {
      const ids = (r.tokens as unknown[]).map((x) => num(x) ?? -1);
      tokens = {
        ids,
        // a damaged line's books may disagree in length: every one is `[ids.length]` (missing: not trained, 0 nats)
        lossMask: fitTo(ids.length, (r.lossMask as unknown[]).map((x) => (x === 1 ? 1 : 0)), 0),
        logprobs: fitTo(ids.length, Array.isArray(r.logprobs) ? (r.logprobs as unknown[]).map((x) => num(x) ?? 0) : [], 0),
        promptLength: Math.min(ids.length, Math.max(0, num(r.promptLength) ?? 0)),
      };
    }
    const toolCalls: Record<string, number> = {};
    if (r.toolCalls !== null && typeof r.toolCalls === "object") for (const [k, v] of Object.entries(r.toolCalls)) if (num(v) !== undefined) toolCalls[k] = num(v)!;
    const numbers = (v: unknown): number[] | undefined => (Array.isArray(v) && v.length > 0 && v.every((x) => num(x) !== undefined) ? (v as number[]) : undefined);
    const turnAdvantages = numbers((reward as Record<string, unknown> | null | undefined)?.turnAdvantages);
    const turnRewards = numbers((reward as Record<string, unknown> | null | undefined)?.turnRewards);
    const fileAdv = num(r.advantage) ?? (turnAdvantages !== undefined ? turnAdvantages.reduce((a, b) => a + b, 0) / turnAdvantages.length : undefined);
    episodes.push({
      index,
      task,
      kind: str(r.kind, task.includes(":") ? task.slice(0, task.indexOf(":")) : "?"),
      question: str(r.question),
      gold,
      ...(typeof r.known === "boolean" ? { known: r.known } : {}),
      member: num(r.member) ?? member,
      group,
      turns,
      answer,
      reward: reward !== null && reward !== undefined && num(reward.total) !== undefined ? { total: num(reward.total)!, terms } : null,
      ...(grade !== undefined ? { grade } : {}),
      outcome: outcomeOf(answer, terms, grade, gold),
      toolCalls,
      advantage: fileAdv ?? null,
      advantageSource: fileAdv !== undefined ? "file" : "none",
      ...(fileAdv !== undefined && num(r.advantage) === undefined ? { advantageNote: "from the trainer: the mean of its per-turn advantages (reward.turnAdvantages)" } : {}),
      ...(turnAdvantages !== undefined ? { turnAdvantages } : {}),
      ...(turnRewards !== undefined ? { turnRewards } : {}),
      ...(tokens !== undefined ? { tokens } : {}),
    });
  });
  if (info.type === "eval") {
    for (const e of episodes) if (e.advantageSource === "none") e.advantageNote = "evaluation episodes are not trained: no advantage";
    return episodes;
  }
  // Advantages the trainer did not write: recomputed with the run's estimator for groups written whole. The trainer
  // writes the first run.samplesPerStep episodes of a step (groups in order), so only the last group can be cut.
  const groups = new Map<number, ViewEpisode[]>();
  for (const e of episodes) groups.set(e.group, [...(groups.get(e.group) ?? []), e]);
  const lastGroup = group;
  const allWritten = settings.samplesPerStep !== undefined && episodes.length < settings.samplesPerStep;
  for (const [gi, members] of groups) {
    if (members.every((e) => e.advantageSource === "file" || e.agent !== undefined)) continue; // an agent's are the trainer's or none
    const whole = gi !== lastGroup || allWritten || (settings.groupSize !== undefined && members.length === settings.groupSize);
    const rewards = members.map((e) => e.reward?.total);
    const note = !whole
      ? `group cut by run.samplesPerStep (${members.length} of its members in the file${settings.groupSize ? ` of ${settings.groupSize}` : ""}): advantage unknown`
      : settings.advantage !== "grpo" && settings.advantage !== "drgrpo"
        ? "the run's rl.advantage is not known here: advantage not recomputed"
        : rewards.some((x) => x === undefined)
          ? "a member has no reward: advantage unknown"
          : undefined;
    if (note !== undefined) {
      for (const e of members) if (e.advantageSource !== "file") e.advantageNote = note;
      continue;
    }
    const adv = grpoAdvantages(rewards as number[], { normalizeStd: settings.advantage === "grpo" });
    members.forEach((e, i) => {
      if (e.advantageSource === "file") return;
      e.advantage = adv[i];
      e.advantageSource = "recomputed";
      e.advantageNote = `recomputed from the group's ${members.length} rewards (rl.advantage ${settings.advantage}, src/algo/advantages.ts)`;
    });
  }
  return episodes;
}
