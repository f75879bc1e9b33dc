/**
 * The reward-term library. Each term maps a finished trajectory (and, for group-relative terms, its GRPO group) to
 * a raw value and a one-line explanation with its numbers; the composer (`compose.ts`) weights and sums them.
 * Families (`TermFamily`): outcome (is the answer right), format (does the episode follow the protocol), necessity
 * (did it search when, and only when, it had to), evidence (did it use what it retrieved), cost (what it spent;
 * value = −quantity, the weight is the unit price), bonus (deliberately hackable, for the lab) and safety.
 * Evidence and necessity terms are built on `evidence.ts`, the helpers the hacking detectors use, so a term and
 * its detector never disagree. A new term is one entry in `TERM_LIST`; the composer needs no change.
 */
import { searchQuery, toolCallCounts, totalToolCalls, type Trajectory } from "../core/types.ts";
import { describeValue } from "../core/values.ts";
import { emCheck, firstContainedGold, normalizeAnswer, tokenF1 } from "./em.ts";
import {
  answerGrounded,
  citations,
  fabricatedCitations,
  firstConflictTurn,
  firstGoldPassage,
  goldRetrieved,
  groundingPassage,
  ignoredEvidence,
  neededCalls,
  retrievedPassages,
} from "./evidence.ts";
import { isValidSequence, trajectoryText } from "./format.ts";
import type { RewardContext, RewardTermDef, TermResult } from "./types.ts";

/** A term's compute function that needs only the trajectory. */
export type RewardTermFn = (traj: Trajectory) => TermResult;

/** A term's compute function that reads the context too (group, options, judge). */
export type RewardTermCtxFn = (traj: Trajectory, ctx: RewardContext) => TermResult;

function plural(n: number, word: string, many = `${word}s`): string {
  return `${n} ${n === 1 ? word : many}`;
}

/** A number for an explanation: at most 3 decimals, no trailing zeros. */
function num(x: number): string {
  return String(Number(x.toFixed(3)));
}

/** Whitespace collapsed to single spaces, cut to `max` characters (with `…`). */
function oneLine(s: string, max: number): string {
  const t = s.replace(/\s+/g, " ").trim();
  return t.length <= max ? t : `${t.slice(0, max - 1)}…`;
}

/** `0 − x`, never `−0` (so a count of 0 gives `+0`, which `Object.is(v, 0)` accepts). */
function neg(x: number): number {
  return 0 - x;
}

// ───────────────────────────── outcome ─────────────────────────────

/**
 * `em`: 1 when `traj.answer` exactly matches a gold of `traj.task.answers` after Search-R1 normalisation
 * (`emCheck`, Search-R1 `qa_em.py`), else 0; a null answer scores 0 ("no answer").
 */
export const emTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const norm = normalizeAnswer(traj.answer);
  const golds = traj.task.answers;
  // `emCheck(answer, golds) === 1` exactly when some gold normalises to `norm`: the answer is normalised once.
  const hit = golds.find((g) => normalizeAnswer(g) === norm);
  if (hit !== undefined) {
    return { value: 1, explanation: `"${traj.answer}" matches gold "${hit}"` };
  }
  return {
    value: 0,
    explanation: `"${traj.answer}" (normalised "${norm}") matches none of ${plural(golds.length, "gold answer")}`,
  };
};

/**
 * `f1`: token F1 in [0, 1] of the answer against the best gold (`tokenF1`: SQuAD v1.1 `f1_score` over the
 * Search-R1-normalised tokens, maximised over golds); a null answer scores 0 ("no answer").
 */
export const f1Term: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const f1 = tokenF1(traj.answer, traj.task.answers);
  return { value: f1, explanation: `token F1 ${num(f1)} of "${traj.answer}" against ${plural(traj.task.answers.length, "gold answer")}` };
};

/**
 * `cover_em`: 1 when some normalised gold is a substring of the normalised answer (`subEmCheck`, Search-R1
 * `subem_check`), else 0; a null answer scores 0. Pays verbose answers that contain the gold.
 */
export const coverEmTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  // `subEmCheck`'s test, keeping which gold hit: one scan of the normalised answer for all golds.
  const hit = firstContainedGold(normalizeAnswer(traj.answer), traj.task.answers);
  if (hit >= 0) {
    return { value: 1, explanation: `gold "${traj.task.answers[hit]}" is contained in "${traj.answer}"` };
  }
  return { value: 0, explanation: `"${traj.answer}" contains none of ${plural(traj.task.answers.length, "gold answer")}` };
};

/** The error the `judge` term throws when no judge is configured (recorded on the breakdown by the composer). */
export const JUDGE_MISSING = "judge term needs reward.options.judge (an OpenAI-compatible endpoint)";

/**
 * `judge`: an LLM judge's score in [0, 1] for the answer (`ctx.judge.score(question, golds, answer)`, see
 * `judge.ts`); the judge's spend is passed on as `TermResult.cost`. A null answer scores 0 without calling the judge.
 * @throws Error(`JUDGE_MISSING`) when `ctx.judge` is absent; the judge's Error after its retries. The composer
 *   records either as the term's error with value 0; the trajectory is still rewarded.
 */
export const judgeTerm = async (traj: Trajectory, ctx: RewardContext): Promise<TermResult> => {
  if (ctx.judge === undefined) throw new Error(JUDGE_MISSING);
  if (traj.answer === null) return { value: 0, explanation: "no answer (judge not called)" };
  const r = await ctx.judge.score(traj.task.question, traj.task.answers, traj.answer);
  const reason = oneLine(r.reason, 120);
  return { value: r.score, explanation: `judge score ${num(r.score)} for "${traj.answer}": ${reason}`, cost: r.cost };
};

// ───────────────────────────── format ─────────────────────────────

/**
 * `format`: 1 when the episode ended with a non-empty answer, was not truncated by the turn budget and had no
 * invalid actions, else 0. A simplified take on the format reward of Search-R1 (`qa_em_format.py`).
 */
export const formatTerm: RewardTermFn = (traj) => {
  const problems: string[] = [];
  if (traj.answer === null) problems.push("no answer");
  else if (traj.answer.trim() === "") problems.push("empty answer");
  if (traj.truncated) problems.push("truncated by the turn budget");
  if (traj.invalidActions > 0) problems.push(plural(traj.invalidActions, "invalid action"));
  return problems.length === 0
    ? { value: 1, explanation: "answered with no invalid actions" }
    : { value: 0, explanation: problems.join("; ") };
};

/**
 * `format_sm`: 1 when the turn sequence (`trajectoryText`: action texts + observations) is valid under the
 * protocol's state machine (`isValidSequence`, a port of Search-R1 `is_valid_sequence`, with
 * `options.requireThink`), else 0 with the first violation.
 */
export const formatSmTerm: RewardTermCtxFn = (traj, ctx) => {
  const v = isValidSequence(trajectoryText(traj), { requireThink: ctx.options.requireThink });
  return v.valid
    ? { value: 1, explanation: `valid sequence of ${plural(traj.turns.length, "turn")}` }
    : { value: 0, explanation: `invalid sequence: ${oneLine(v.reason, 160)}` };
};

/** `invalid`: −(number of invalid actions); the weight is the price per invalid action. */
export const invalidTerm: RewardTermFn = (traj) => ({
  value: neg(traj.invalidActions),
  explanation: plural(traj.invalidActions, "invalid action"),
});

// ───────────────────────────── necessity ─────────────────────────────

/** What `groupOptimalCalls` read of a group, member by member, and the optimum it found. */
interface GroupOptimum {
  members: readonly Trajectory[];
  answers: (string | null)[];
  searches: number[];
  tasks: Trajectory["task"][];
  golds: (readonly string[])[];
  goldCounts: number[];
  best: number | undefined;
}

/**
 * `groupOptimalCalls` by group array. The composer scores each member with the same group array
 * (`rewardGroups`, `RewardScorer.scoreBatch`), and `needless_search` and `otc` read the optimum for every member:
 * computing it each time EM-checked the whole group per member (O(G²) normalisations; 32 s for a batch of 1024).
 */
const GROUP_OPTIMUM = new WeakMap<readonly Trajectory[], GroupOptimum>();

function computeGroupOptimum(group: readonly Trajectory[]): GroupOptimum {
  let best: number | undefined;
  for (const t of group) {
    if (t.answer === null || emCheck(t.answer, t.task.answers) === 0) continue;
    best = best === undefined ? t.searches : Math.min(best, t.searches);
  }
  return {
    members: [...group],
    answers: group.map((t) => t.answer),
    searches: group.map((t) => t.searches),
    tasks: group.map((t) => t.task),
    golds: group.map((t) => t.task.answers),
    goldCounts: group.map((t) => t.task.answers.length),
    best,
  };
}

/**
 * True when the group still holds what `o` read: the same members, answers, searches, tasks and gold lists (by
 * identity, and the lists' lengths). O(G) reference comparisons and no normalisation (a few ns per member: ~0.1 s
 * in all for a group of 4096 scored member by member), so a group changed between calls is never scored against a
 * stale optimum.
 */
function stillValid(o: GroupOptimum, group: readonly Trajectory[]): boolean {
  if (o.members.length !== group.length) return false;
  for (let i = 0; i < group.length; i++) {
    const t = group[i];
    if (t !== o.members[i] || t.answer !== o.answers[i] || !Object.is(t.searches, o.searches[i]) || t.task !== o.tasks[i]) return false;
    if (t.task.answers !== o.golds[i] || t.task.answers.length !== o.goldCounts[i]) return false;
  }
  return true;
}

/**
 * OTC-GRPO's estimate of a task's optimal number of tool calls: the fewest searches among the group's trajectories
 * whose answer is EM-correct (Wang et al. 2025, "Acting Less is Reasoning More", OTC-GRPO).
 * Computed once per group array and reused while the group is unchanged (`GROUP_OPTIMUM`): a batch of G members
 * costs G EM checks, not G². Changing a member, its answer, its searches, its task or its task's gold list (or the
 * list's length) recomputes; replacing a gold string inside the same list in place is not seen (the task of a
 * trajectory being scored is treated as fixed).
 * @returns that minimum, or `undefined` without a group or without a correct trajectory in it
 */
export function groupOptimalCalls(group: readonly Trajectory[] | undefined): number | undefined {
  if (group === undefined || group.length === 0) return undefined;
  let o = GROUP_OPTIMUM.get(group);
  if (o === undefined || !stillValid(o, group)) {
    o = computeGroupOptimum(group);
    GROUP_OPTIMUM.set(group, o);
  }
  return o.best;
}

/**
 * The optimal tool-call count of a trajectory's task: `neededCalls(task)` when the task says (`source: "task"`),
 * else the group estimate `groupOptimalCalls` (`source: "group"`), else `undefined`.
 */
export function optimalCalls(
  traj: Trajectory,
  group: readonly Trajectory[] | undefined,
): { n: number; source: "task" | "group" } | undefined {
  const need = neededCalls(traj.task);
  if (need !== undefined) return { n: need, source: "task" };
  const est = groupOptimalCalls(group);
  return est === undefined ? undefined : { n: est, source: "group" };
}

function optimumText(o: { n: number; source: "task" | "group" }): string {
  return o.source === "task" ? `the task needs ${o.n}` : `the group's fewest searches among correct answers is ${o.n}`;
}

/**
 * `guess`: −1 when the task is unknown to the policy (`task.known === false`) and the episode answered (non-null
 * answer) with zero searches — a search it needed but skipped; else 0.
 */
export const guessTerm: RewardTermFn = (traj) => {
  if (traj.task.known !== false) {
    return { value: 0, explanation: traj.task.known === true ? "known fact: no search needed" : "task does not say whether it is known" };
  }
  if (traj.searches > 0) return { value: 0, explanation: `unknown fact, searched (${plural(traj.searches, "search", "searches")})` };
  if (traj.answer === null) return { value: 0, explanation: "unknown fact, no search but no answer either" };
  return { value: -1, explanation: `unknown fact answered "${traj.answer}" with 0 searches (a guess)` };
};

/**
 * `needless_search`: −(searches beyond the optimum) = −max(0, searches − n), with n = `neededCalls(task)` when the
 * task says, else OTC-GRPO's group estimate (`groupOptimalCalls`). With neither (no group, or no correct
 * trajectory in it) the optimum is unknown and the value is 0.
 */
export const needlessSearchTerm: RewardTermCtxFn = (traj, ctx) => {
  const o = optimalCalls(traj, ctx.group);
  if (o === undefined) {
    return { value: 0, explanation: `optimum unknown (task does not say, no correct trajectory in the group); ${plural(traj.searches, "search", "searches")}` };
  }
  const extra = Math.max(0, traj.searches - o.n);
  return { value: neg(extra), explanation: `${plural(traj.searches, "search", "searches")}, ${optimumText(o)}: ${extra} needless` };
};

/**
 * OTC's tool-efficiency reward r_tool in [0, 1] for m tool calls when the optimum is n
 * (Wang et al. 2025, "Acting Less is Reasoning More! Teaching Model to Act Efficiently", arXiv 2504.14870, §3):
 * - OTC-PPO (n unknown): `cos(m·π / (2m + c))` — 1 at m = 0, decreasing towards cos(π/2) = 0 as m grows;
 * - OTC-GRPO (n known): with `f(m, n) = 0` if m = n = 0, `m` if n = 0, `2nm / (m + n)` otherwise,
 *   `r_tool = 1` if f(m, n) = n = 0, `cos(m·π / (2m + c))` if n = 0, `sin(f(m, n)·π / (2n))` otherwise —
 *   1 at m = n, 0 at m = 0 < n, falling towards sin(π) = 0 as m → ∞ (f → 2n).
 * Source note: the OTC-PPO form is as quoted from the paper; the OTC-GRPO piecewise form was read from two
 * independent public re-implementations that quote the paper's equation (the paper's own text was not reachable
 * here); its shape (peak 1 at m = n, decay on both sides) is checked by the tests.
 * In the paper r_tool multiplies the correctness reward (r = α·r_tool·r_correct); here it is a separate term.
 * @param m tool calls of the trajectory (≥ 0)
 * @param n optimal calls, or `undefined` for the OTC-PPO form
 * @param c smoothing constant (> 0)
 * @throws Error when c is not a positive finite number
 */
export function otcToolReward(m: number, n: number | undefined, c: number): number {
  if (!(Number.isFinite(c) && c > 0)) throw new Error(`otc: options.otcC must be a positive finite number, got ${describeValue(c)}`);
  const ppo = Math.cos((m * Math.PI) / (2 * m + c));
  if (n === undefined) return ppo;
  if (n === 0) return m === 0 ? 1 : ppo;
  const f = (2 * n * m) / (m + n);
  return Math.sin((f * Math.PI) / (2 * n));
}

/**
 * `otc`: OTC's tool-efficiency reward in [0, 1] (`otcToolReward`) with m = searches and n = `optimalCalls`
 * (the task's need, else the OTC-GRPO group estimate); unknown n → the OTC-PPO form. c = `options.otcC`.
 * @throws Error when `options.otcC` is not positive (recorded by the composer)
 */
export const otcTerm: RewardTermCtxFn = (traj, ctx) => {
  const m = traj.searches;
  const c = ctx.options.otcC;
  const o = optimalCalls(traj, ctx.group);
  const r = otcToolReward(m, o?.n, c);
  const why = o === undefined ? `optimum unknown: OTC-PPO cos(mπ/(2m+c)), c=${c}` : `${optimumText(o)}, c=${c}`;
  return { value: r, explanation: `r_tool ${num(r)} for m=${m} calls; ${why}` };
};

// ───────────────────────────── evidence ─────────────────────────────

/** `evidence_recall`: 1 when the answer's evidence was retrieved (`goldRetrieved`: every `task.evidenceIds` passage, or else a passage containing a gold answer), else 0. */
export const evidenceRecallTerm: RewardTermFn = (traj) => {
  const passages = retrievedPassages(traj);
  const evidence = traj.task.evidenceIds ?? [];
  if (evidence.length > 0 && goldRetrieved(traj)) {
    return { value: 1, explanation: `all ${plural(evidence.length, "evidence passage")} retrieved (${evidence.join(", ")})` };
  }
  if (evidence.length === 0) {
    // `goldRetrieved` without evidence ids is `firstGoldPassage(traj) !== undefined`.
    const hit = firstGoldPassage(traj);
    if (hit !== undefined) return { value: 1, explanation: `gold "${hit.gold}" retrieved in passage ${hit.passage.id}` };
  }
  if (evidence.length > 0) {
    const ids = new Set(passages.map((p) => p.id));
    const missing = evidence.filter((id) => !ids.has(id));
    return { value: 0, explanation: `evidence not retrieved: ${missing.join(", ")}` };
  }
  return { value: 0, explanation: `no gold answer in ${plural(passages.length, "retrieved passage")}` };
};

/** `grounded`: 1 when the answer occurs (whole words, normalised) in a retrieved passage (`answerGrounded`), else 0. */
export const groundedTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const answer = traj.answer;
  // `answerGrounded(traj)` is `groundingPassage(traj) !== undefined`.
  const p = groundingPassage(traj);
  if (p !== undefined) return { value: 1, explanation: `"${answer}" appears in passage ${p.id}` };
  return { value: 0, explanation: `"${answer}" appears in none of ${plural(retrievedPassages(traj).length, "retrieved passage")}` };
};

/**
 * `ignored_evidence`: −1 for search-then-ignore (`ignoredEvidence`: the answer's evidence was retrieved, yet the
 * final answer matches no gold, or there is none), else 0.
 */
export const ignoredEvidenceTerm: RewardTermFn = (traj) => {
  if (ignoredEvidence(traj)) {
    const a = traj.answer === null ? "no answer" : `answered "${traj.answer}"`;
    return { value: -1, explanation: `the answer's evidence was retrieved, yet ${a}` };
  }
  return { value: 0, explanation: goldRetrieved(traj) ? "evidence retrieved and answered correctly" : "the answer's evidence was not retrieved" };
};

/**
 * `fabricated_citation`: −(number of `<cite>…</cite>` citations naming no retrieved passage, by id or normalised
 * title; `fabricatedCitations`), else 0.
 */
export const fabricatedCitationTerm: RewardTermFn = (traj) => {
  const all = citations(traj);
  const fake = fabricatedCitations(traj);
  if (all.length === 0) return { value: 0, explanation: "no citations" };
  if (fake.length === 0) return { value: 0, explanation: `${plural(all.length, "citation")}, all retrieved` };
  return {
    value: neg(fake.length),
    explanation: `${fake.length} of ${plural(all.length, "citation")} never retrieved: ${fake.map((c) => `"${c}"`).join(", ")}`,
  };
};

/**
 * `conflict_verify`: 0 when the retrieved evidence never conflicted (`firstConflictTurn` undefined); else +1 when
 * the policy searched again in a turn after the one that revealed the conflict (it verified), −1 when it did not.
 * Turns are numbered from 1 in the explanation.
 */
export const conflictVerifyTerm: RewardTermFn = (traj) => {
  const first = firstConflictTurn(traj);
  if (first === undefined) return { value: 0, explanation: "no evidence conflict" };
  const later = traj.turns.findIndex((t, i) => i > first && searchQuery(t.action) !== undefined);
  return later >= 0
    ? { value: 1, explanation: `conflicting passages at turn ${first + 1}, searched again at turn ${later + 1}` }
    : { value: -1, explanation: `conflicting passages at turn ${first + 1}, never searched again` };
};

// ───────────────────────────── any env ─────────────────────────────

/**
 * `outcome`: the env's grade of the episode (`Trajectory.grade.score`, in [0, 1]; its named parts in the
 * explanation); 0 when the env gave no grade (an env without a grader: use `em` or `judge`).
 */
export const outcomeTerm: RewardTermFn = (traj) => {
  if (traj.grade === undefined) return { value: 0, explanation: "no grade (the env has no grader)" };
  const parts = Object.entries(traj.grade.parts).map(([k, v]) => `${k} ${v}`).join(", ");
  return { value: traj.grade.score, explanation: `grade ${traj.grade.score}${parts ? ` (${parts})` : ""}` };
};

/** `tool_calls`: −(tool calls of every tool); the weight is the price per call (`search_cost` counts searches only). */
export const toolCallsTerm: RewardTermFn = (traj) => {
  const counts = toolCallCounts(traj);
  const n = totalToolCalls(traj);
  return { value: neg(n), explanation: n === 0 ? "no tool calls" : Object.entries(counts).map(([k, c]) => `${c} ${k}`).join(", ") };
};

/**
 * `needless_calls`: −(tool calls beyond the fewest made by a fully successful member of the group, grade score 1);
 * 0 when no member of the group succeeded (the optimum is unknown). The any-env form of `needless_search`.
 */
export const needlessCallsTerm: RewardTermCtxFn = (traj, ctx) => {
  const n = totalToolCalls(traj);
  const best = (ctx.group ?? [traj]).filter((t) => t.grade !== undefined && t.grade.score >= 1).map(totalToolCalls);
  if (best.length === 0) return { value: 0, explanation: `optimum unknown (no successful episode in the group); ${plural(n, "call")}` };
  const extra = Math.max(0, n - Math.min(...best));
  return { value: neg(extra), explanation: `${plural(n, "call")}, the group's best success used ${Math.min(...best)}: ${extra} needless` };
};

// ───────────────────────────── cost ─────────────────────────────

/** `search_cost`: −(number of searches); the weight is the price per search. */
export const searchCostTerm: RewardTermFn = (traj) => ({
  value: neg(traj.searches),
  explanation: plural(traj.searches, "search", "searches"),
});

/** `gen_tokens`: −Σ turn.sampledTokens (tokens the policy generated); the weight is the price per token. */
export const genTokensTerm: RewardTermFn = (traj) => {
  const n = traj.turns.reduce((s, t) => s + t.sampledTokens, 0);
  return { value: neg(n), explanation: `${plural(n, "generated token")} over ${plural(traj.turns.length, "turn")}` };
};

/** `obs_tokens`: −Σ turn.observationTokens (tokens of tool output fed back); the weight is the price per token. */
export const obsTokensTerm: RewardTermFn = (traj) => {
  const n = traj.turns.reduce((s, t) => s + t.observationTokens, 0);
  return { value: neg(n), explanation: `${plural(n, "observation token")} over ${plural(traj.turns.length, "turn")}` };
};

/** `latency`: −Σ turn.toolLatencyMs / 1000 (seconds of simulated tool latency); the weight is the price per second. */
export const latencyTerm: RewardTermFn = (traj) => {
  const ms = traj.turns.reduce((s, t) => s + (t.toolLatencyMs ?? 0), 0);
  const calls = traj.turns.filter((t) => t.toolLatencyMs !== undefined).length;
  return { value: neg(ms / 1000), explanation: `${num(ms / 1000)} s of tool latency over ${plural(calls, "call")}` };
};

/**
 * `tool_error`: −(tool calls that failed: threw, timed out, returned invalid or oversize output, hit the episode
 * deadline — `Turn.toolError`); the weight is the penalty per failed call. The failure was an error observation
 * and the episode went on (verl #3070, verl PR #1948); this term lets a reward price it. It is in no preset:
 * enable it with `reward.weights.tool_error`. The explanation counts the failures by kind.
 */
export const toolErrorTerm: RewardTermFn = (traj) => {
  // A turn with several calls (tool envs) counts each failed call; a single-call turn its `toolError`.
  const kinds = traj.turns.flatMap((t): string[] =>
    t.toolResults !== undefined ? t.toolResults.filter((r) => !r.ok).map((r) => r.errorKind ?? "error") : t.toolError === undefined ? [] : [t.toolError],
  );
  if (kinds.length === 0) return { value: 0, explanation: "no tool errors" };
  const counts = new Map<string, number>();
  for (const k of kinds) counts.set(k, (counts.get(k) ?? 0) + 1);
  return { value: neg(kinds.length), explanation: `${plural(kinds.length, "tool error")}: ${[...counts].map(([k, n]) => `${n} ${k}`).join(", ")}` };
};

// ───────────────────────────── bonus ─────────────────────────────

/** `call_bonus`: +(number of tool calls = searches). Deliberately hackable: pays tool spam (for the reward lab). */
export const callBonusTerm: RewardTermFn = (traj) => ({
  value: totalToolCalls(traj),
  explanation: `${plural(totalToolCalls(traj), "tool call")} paid`,
});

// ───────────────────────────── safety ─────────────────────────────

/** Kinds of sensitive data the `sensitive` term looks for. */
export type SensitiveKind = "email" | "card" | "ssn" | "phone";

/**
 * Patterns of sensitive data in an answer, matched in this order (each match is blanked before the next pattern
 * runs, so a card number is never also counted as a phone number):
 * - `email`: `local@domain.tld`;
 * - `card`: a payment-card-like number, 4 groups of 4 digits separated by a space or hyphen;
 * - `ssn`: a US SSN-like `ddd-dd-dddd`;
 * - `phone`: a phone number written with separators (space, `.` or `-`), optional `+country` prefix and optional
 *   parenthesised area code: `+1 415-555-0100`, `(415) 555 0100`, `415.555.0100`. A bare integer such as
 *   `9984670` (our world's areas) never matches.
 * All are global regexes; digit groups must not touch other word characters. `findSensitive` finds `email` with a
 * linear scan (`emailMatches`), the same matches: the regex engine retries every position of a long run of
 * local-part characters, each retry rescanning the run (quadratic: 4.6 s on 100 000 letters).
 */
export const SENSITIVE_PATTERNS: Readonly<Record<SensitiveKind, RegExp>> = {
  email: /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g,
  card: /(?<![\w-])\d{4}[ -]\d{4}[ -]\d{4}[ -]\d{4}(?![\w-])/g,
  ssn: /(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])/g,
  phone: /(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w-])/g,
};

/** `SENSITIVE_PATTERNS.email` after its `@`, matched where it stands (sticky). */
const EMAIL_DOMAIN = /[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/y;
/** A character of the e-mail local part `[A-Za-z0-9._%+-]`. */
function isLocalChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 95 || c === 37 || c === 43 || c === 45;
}

/**
 * The matches of `SENSITIVE_PATTERNS.email` in `text`, in order — exactly what `text.match(SENSITIVE_PATTERNS.email)`
 * gives — in linear time. The local part holds no `@`, so a match uses the first `@` after its start: for each `@`,
 * the match starts at the leftmost local-part character before it (not before the previous match's end) and ends
 * where the domain pattern, matched right after the `@`, ends. Each character is looked at a bounded number of times
 * (the left walk stops at the previous `@`, the domain pattern at the next).
 */
export function emailMatches(text: string): { index: number; match: string }[] {
  const out: { index: number; match: string }[] = [];
  let lastEnd = 0;
  for (let at = text.indexOf("@"); at >= 0; at = text.indexOf("@", at + 1)) {
    if (at < lastEnd) continue;
    let start = at;
    while (start > lastEnd && isLocalChar(text.charCodeAt(start - 1))) start--;
    if (start === at) continue;
    EMAIL_DOMAIN.lastIndex = at + 1;
    if (EMAIL_DOMAIN.exec(text) === null) continue;
    out.push({ index: start, match: text.slice(start, EMAIL_DOMAIN.lastIndex) });
    lastEnd = EMAIL_DOMAIN.lastIndex;
  }
  return out;
}

/**
 * Sensitive-data matches in a text (`SENSITIVE_PATTERNS`, in their order, each match blanked before the next kind).
 * @returns one entry per match, in kind order then text order
 */
export function findSensitive(text: string): { kind: SensitiveKind; match: string }[] {
  const out: { kind: SensitiveKind; match: string }[] = [];
  let rest = text;
  for (const kind of Object.keys(SENSITIVE_PATTERNS) as SensitiveKind[]) {
    if (kind === "email") {
      const found = emailMatches(rest);
      let blanked = "";
      let from = 0;
      for (const m of found) {
        out.push({ kind, match: m.match });
        blanked += rest.slice(from, m.index) + " ".repeat(m.match.length);
        from = m.index + m.match.length;
      }
      rest = blanked + rest.slice(from);
      continue;
    }
    const re = new RegExp(SENSITIVE_PATTERNS[kind].source, "g");
    rest = rest.replace(re, (m) => {
      out.push({ kind, match: m });
      return " ".repeat(m.length);
    });
  }
  return out;
}

/** `forbidden_tool`: −(number of turns whose `tool` is in `task.forbiddenTools`), else 0. */
export const forbiddenToolTerm: RewardTermFn = (traj) => {
  const forbidden = traj.task.forbiddenTools ?? [];
  if (forbidden.length === 0) return { value: 0, explanation: "no tool is forbidden for this task" };
  // Every call of a turn counts (tool envs may make several); a turn without parsed calls counts its `tool`.
  const called = traj.turns.flatMap((t): string[] => (t.action.type === "tool_call" ? t.action.calls.map((c) => c.name) : t.tool !== undefined ? [t.tool] : []));
  const hits = called.filter((name) => forbidden.includes(name));
  if (hits.length === 0) return { value: 0, explanation: `no call to forbidden ${forbidden.map((f) => `"${f}"`).join(", ")}` };
  const names = [...new Set(hits)].map((f) => `"${f}"`).join(", ");
  return { value: neg(hits.length), explanation: `${plural(hits.length, "call")} to forbidden ${names}` };
};

/** `sensitive`: −(number of sensitive-data matches in the answer, `findSensitive`); the explanation lists the kinds. */
export const sensitiveTerm: RewardTermFn = (traj) => {
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const found = findSensitive(traj.answer);
  if (found.length === 0) return { value: 0, explanation: "no sensitive data in the answer" };
  const counts = new Map<SensitiveKind, number>();
  for (const f of found) counts.set(f.kind, (counts.get(f.kind) ?? 0) + 1);
  const kinds = [...counts].map(([k, n]) => `${n} ${k}`).join(", ");
  return { value: neg(found.length), explanation: `sensitive data in the answer: ${kinds}` };
};

/**
 * `unsupported_answer`: −1 when the task is high-risk (`task.risk === "high"`) and the answer is definite — non-null,
 * non-empty after normalisation, and not an abstention (`options.abstentions`, compared after `normalizeAnswer`) —
 * but not grounded in the retrieved evidence (`answerGrounded`); else 0.
 */
export const unsupportedAnswerTerm: RewardTermCtxFn = (traj, ctx) => {
  if (traj.task.risk !== "high") return { value: 0, explanation: "not a high-risk task" };
  if (traj.answer === null) return { value: 0, explanation: "no answer" };
  const norm = normalizeAnswer(traj.answer);
  if (norm === "") return { value: 0, explanation: "empty answer" };
  if (ctx.options.abstentions.some((a) => normalizeAnswer(a) === norm)) {
    return { value: 0, explanation: `abstained ("${traj.answer}")` };
  }
  if (answerGrounded(traj)) return { value: 0, explanation: `"${traj.answer}" is supported by a retrieved passage` };
  return { value: -1, explanation: `high-risk answer "${traj.answer}" not supported by any of ${plural(retrievedPassages(traj).length, "retrieved passage")}` };
};

// ───────────────────────────── registry ─────────────────────────────

/** The library's terms, in documentation order (`docs/rewards.md` lists them in this order). */
export const TERM_LIST: readonly RewardTermDef[] = [
  { name: "em", family: "outcome", description: "1 if the answer exactly matches a gold answer (Search-R1 qa_em.py), else 0", compute: emTerm },
  { name: "f1", family: "outcome", description: "token F1 in [0, 1] of the answer vs the best gold (SQuAD v1.1); 0 without an answer", compute: f1Term },
  { name: "cover_em", family: "outcome", description: "1 if a normalised gold is contained in the normalised answer (Search-R1 subem_check), else 0", compute: coverEmTerm },
  { name: "judge", family: "outcome", description: "LLM-judge score in [0, 1] (OpenAI-compatible endpoint, reward.options.judge); 0 without an answer", compute: judgeTerm },
  { name: "format", family: "format", description: "1 if the episode ended with a non-empty answer, untruncated, without invalid actions, else 0", compute: formatTerm },
  { name: "format_sm", family: "format", description: "1 if the turn sequence is valid under the protocol state machine (Search-R1 is_valid_sequence), else 0", compute: formatSmTerm },
  { name: "invalid", family: "format", description: "−(invalid actions): the weight is the price per invalid action", compute: invalidTerm },
  { name: "guess", family: "necessity", description: "−1 if an unknown fact was answered with 0 searches (a needed search skipped), else 0", compute: guessTerm },
  { name: "needless_search", family: "necessity", description: "−(searches beyond the optimum: the task's need, else the group's fewest among correct); 0 if unknown", compute: needlessSearchTerm },
  { name: "otc", family: "necessity", description: "OTC tool-efficiency reward in [0, 1]: 1 at the optimal call count, decaying on both sides", compute: otcTerm },
  { name: "evidence_recall", family: "evidence", description: "1 if a gold answer appears in a retrieved passage, else 0", compute: evidenceRecallTerm },
  { name: "grounded", family: "evidence", description: "1 if the answer appears in a retrieved passage, else 0", compute: groundedTerm },
  { name: "ignored_evidence", family: "evidence", description: "−1 if a gold answer was retrieved but the answer is wrong or missing, else 0", compute: ignoredEvidenceTerm },
  { name: "fabricated_citation", family: "evidence", description: "−(citations <cite>…</cite> naming no retrieved passage by id or title)", compute: fabricatedCitationTerm },
  { name: "conflict_verify", family: "evidence", description: "after conflicting evidence: +1 if the policy searched again, −1 if not; 0 without a conflict", compute: conflictVerifyTerm },
  { name: "outcome", family: "outcome", description: "the env's grade in [0, 1] (its grader's score; parts in the explanation); 0 without a grader", compute: outcomeTerm },
  { name: "tool_calls", family: "cost", description: "−(tool calls of every tool): the weight is the price per call", compute: toolCallsTerm },
  { name: "needless_calls", family: "necessity", description: "−(tool calls beyond the fewest of a fully successful group member); 0 if none succeeded", compute: needlessCallsTerm },
  { name: "search_cost", family: "cost", description: "−(tool calls): the weight is the price per search", compute: searchCostTerm },
  { name: "gen_tokens", family: "cost", description: "−(generated tokens): the weight is the price per token", compute: genTokensTerm },
  { name: "obs_tokens", family: "cost", description: "−(observation tokens): the weight is the price per token", compute: obsTokensTerm },
  { name: "latency", family: "cost", description: "−(seconds of simulated tool latency): the weight is the price per second", compute: latencyTerm },
  { name: "tool_error", family: "cost", description: "−(failed tool calls: threw, timed out, invalid or oversize output): the weight is the penalty per failure", compute: toolErrorTerm },
  { name: "call_bonus", family: "bonus", description: "+(tool calls): deliberately hackable per-call pay, for the reward lab", compute: callBonusTerm },
  { name: "forbidden_tool", family: "safety", description: "−(calls to a tool the task forbids)", compute: forbiddenToolTerm },
  { name: "sensitive", family: "safety", description: "−(e-mails, phone, SSN-like and card-like numbers in the answer)", compute: sensitiveTerm },
  { name: "unsupported_answer", family: "safety", description: "−1 if a high-risk task gets a definite answer not supported by retrieved evidence, else 0", compute: unsupportedAnswerTerm },
];

/** The registry of reward terms by name (the names a `RewardConfig` may weight). */
export const REWARD_TERMS: Readonly<Record<string, RewardTermDef>> = Object.fromEntries(TERM_LIST.map((t) => [t.name, t]));
