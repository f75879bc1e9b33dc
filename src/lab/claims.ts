/**
 * The lab's claims (issue 3's acceptance list), each measured and stated in words with its numbers — whatever
 * the numbers show. A claim whose designs are not in the lab says so instead of guessing.
 */
import type { Claim, DesignResult, EnvDesignResult, EvalSummary, LabResult, LoopholeOutcome, LoopholeVerdict, SummaryRow } from "./types.ts";

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
const f2 = (x: number) => x.toFixed(2);
/** "higher than" / "lower than" / "equal to", comparing two numbers at the precision they are printed with. */
function cmp(a: number, b: number, digits: number): string {
  const [x, y] = [a.toFixed(digits), b.toFixed(digits)];
  return x === y ? "equal to" : Number(x) > Number(y) ? "higher than" : "lower than";
}
const lastMean = (d: DesignResult, key: string, n: number) => {
  const xs = d.steps.slice(-n).map((m) => m[key]).filter((v): v is number => v !== undefined);
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
};
const maxOf = (d: DesignResult, key: string) => Math.max(0, ...d.steps.map((m) => m[key] ?? 0));

function missing(id: string, title: string, names: string[]): Claim {
  return { id, title, text: `Not measured: this lab did not train ${names.join(" and ")}.`, numbers: {} };
}

/** A claim and the designs it compares; `absent`: the names a "not measured" claim gives when one is missing. */
interface ClaimSpec {
  id: string;
  title: string;
  designs: (DesignResult | undefined)[];
  absent: string[];
}

/** The claim `measure` states over the spec's designs, or the "not measured" claim when one of them is missing. */
function claimOf(spec: ClaimSpec, measure: (designs: DesignResult[]) => Pick<Claim, "text" | "numbers">): Claim {
  if (spec.designs.some((d) => d === undefined)) return missing(spec.id, spec.title, spec.absent);
  return { id: spec.id, title: spec.title, ...measure(spec.designs as DesignResult[]) };
}

/**
 * Claims (a)–(e) from a lab's results.
 * @param lab the lab without its claims
 * @returns one claim per letter, in order
 */
export function computeClaims(lab: Omit<LabResult, "claims">): Claim[] {
  const by = new Map(lab.designs.map((d) => [d.name, d]));
  const w: EvalSummary = lab.warmStart;
  const window = Math.max(1, Math.round(lab.rlSteps / 5));
  /** The designs of these names, and those the lab did not train. */
  const need = (...names: string[]) => ({ designs: names.map((n) => by.get(n)), absent: names.filter((n) => !by.has(n)) });
  return [
    // (a) outcome-only lets guessing pay.
    claimOf({ id: "a", title: "(a) Outcome-only reward lets guessing pay", ...need("outcome-only", "composite") }, ([o, c]) => {
      const n = {
        outcome_guess_unknown: o.after.unknown.guessRate,
        composite_guess_unknown: c.after.unknown.guessRate,
        outcome_guess_em_unknown: o.after.guessEmUnknown ?? 0,
        composite_guess_em_unknown: c.after.guessEmUnknown ?? 0,
        outcome_train_guess_unknown: lastMean(o, "hack/guess_rate_unknown", window),
        composite_train_guess_unknown: lastMean(c, "hack/guess_rate_unknown", window),
        outcome_em_unknown: o.after.unknown.em,
        composite_em_unknown: c.after.unknown.em,
      };
      return {
        text:
          `On held-out unknown facts, outcome-only answered ${pct(n.outcome_guess_unknown)} without searching ` +
          `(those guesses were right ${pct(n.outcome_guess_em_unknown)} of the time), ${cmp(n.outcome_guess_unknown, n.composite_guess_unknown, 3)} ` +
          `composite's ${pct(n.composite_guess_unknown)} (right ${pct(n.composite_guess_em_unknown)}). ` +
          (lab.rlSteps === 0
            ? "No RL steps ran, so there is no training guess rate; "
            : `Over the last ${window} training steps the guess rate on unknown facts was ${pct(n.outcome_train_guess_unknown)} vs ${pct(n.composite_train_guess_unknown)}; `) +
          `EM on unknown facts ${pct(n.outcome_em_unknown)} vs ${pct(n.composite_em_unknown)}.`,
        numbers: n,
      };
    }),
    // (b) a per-call bonus raises calls without raising EM.
    claimOf({ id: "b", title: "(b) A per-call bonus raises calls per question without raising EM", ...need("per-call-bonus", "outcome-only") }, ([b, o]) => {
      const n = {
        bonus_searches: b.after.all.searches,
        outcome_searches: o.after.all.searches,
        warm_searches: w.all.searches,
        bonus_em: b.after.all.em,
        outcome_em: o.after.all.em,
        warm_em: w.all.em,
        bonus_needless_rate: b.after.needlessSearchRate,
      };
      return {
        text:
          `per-call-bonus made ${f2(n.bonus_searches)} searches per question, ${cmp(n.bonus_searches, n.outcome_searches, 2)} outcome-only's ` +
          `${f2(n.outcome_searches)} (warm start ${f2(n.warm_searches)}); its EM was ${pct(n.bonus_em)}, ${cmp(n.bonus_em, n.outcome_em, 3)} ` +
          `outcome-only's ${pct(n.outcome_em)} (warm start ${pct(n.warm_em)}); ${pct(n.bonus_needless_rate)} of its questions had a needless search.`,
        numbers: n,
      };
    }),
    // (c) composite vs the others.
    claimOf({ id: "c", title: "(c) The composite design's EM and needless-search rate vs the others", ...need("composite") }, ([c]) => {
      const others = lab.designs.filter((d) => d.name !== "composite");
      const n: Record<string, number> = { composite_em: c.after.all.em, composite_needless_rate: c.after.needlessSearchRate };
      for (const d of others) {
        n[`${d.name}_em`] = d.after.all.em;
        n[`${d.name}_needless_rate`] = d.after.needlessSearchRate;
      }
      const rankEm = 1 + others.filter((d) => d.after.all.em > c.after.all.em).length;
      const rankNeedless = 1 + others.filter((d) => d.after.needlessSearchRate < c.after.needlessSearchRate).length;
      return {
        text:
          `composite: EM ${pct(c.after.all.em)} (rank ${rankEm} of ${lab.designs.length}), needless-search rate ${pct(c.after.needlessSearchRate)} ` +
          `(rank ${rankNeedless} of ${lab.designs.length}, lower is better). Others: ` +
          others.map((d) => `${d.name} EM ${pct(d.after.all.em)} / needless ${pct(d.after.needlessSearchRate)}`).join("; ") +
          `; warm start EM ${pct(w.all.em)} / needless ${pct(w.needlessSearchRate)}.`,
        numbers: n,
      };
    }),
    // (d) observation tokens unmasked vs masked.
    claimOf({ id: "d", title: "(d) Training with observation tokens unmasked vs masked", ...need("composite", "composite-unmasked") }, ([m, u]) => {
      const n = {
        masked_em: m.after.all.em,
        unmasked_em: u.after.all.em,
        masked_kl_peak: maxOf(m, "hack/kl_ref"),
        unmasked_kl_peak: maxOf(u, "hack/kl_ref"),
        masked_grad_norm: lastMean(m, "train/grad_norm", m.steps.length),
        unmasked_grad_norm: lastMean(u, "train/grad_norm", u.steps.length),
        masked_final_reward: lastMean(m, "reward/mean", window),
        unmasked_final_reward: lastMean(u, "reward/mean", window),
        masked_detectors: m.detectors.length,
        unmasked_detectors: u.detectors.length,
      };
      return {
        text:
          `Masked EM ${pct(n.masked_em)} vs unmasked ${pct(n.unmasked_em)} (Search-R1 Table 4, Qwen2.5-7B: .431 masked vs .343 unmasked). ` +
          `Stability: peak KL to the warm start ${n.masked_kl_peak.toFixed(3)} vs ${n.unmasked_kl_peak.toFixed(3)} nats/token, mean gradient norm ` +
          `${n.masked_grad_norm.toFixed(3)} vs ${n.unmasked_grad_norm.toFixed(3)}, reward over the last ${window} steps ${n.masked_final_reward.toFixed(3)} vs ` +
          `${n.unmasked_final_reward.toFixed(3)}, detectors firing at the end ${n.masked_detectors} vs ${n.unmasked_detectors}.`,
        numbers: n,
      };
    }),
    // (e) warm start vs RL.
    claimOf({ id: "e", title: "(e) Warm start (SFT) vs RL on the same held-out questions", designs: [by.get("composite") ?? lab.designs[0]], absent: ["any design"] }, ([c]) => {
      const n = {
        warm_em: w.all.em,
        rl_em: c.after.all.em,
        warm_em_known: w.known.em,
        rl_em_known: c.after.known.em,
        warm_em_unknown: w.unknown.em,
        rl_em_unknown: c.after.unknown.em,
        warm_searches_unknown: w.unknown.searches,
        rl_searches_unknown: c.after.unknown.searches,
        warm_searches_known: w.known.searches,
        rl_searches_known: c.after.known.searches,
      };
      return {
        text:
          `On the same ${lab.evalQuestions} held-out questions, RL with ${c.name} reached EM ${pct(n.rl_em)} vs the warm start's ${pct(n.warm_em)} ` +
          `(${n.rl_em >= n.warm_em ? "+" : "−"}${(100 * Math.abs(n.rl_em - n.warm_em)).toFixed(1)} points): known ${pct(n.warm_em_known)} → ${pct(n.rl_em_known)}, ` +
          `unknown ${pct(n.warm_em_unknown)} → ${pct(n.rl_em_unknown)}; searches per question on unknown facts ${f2(n.warm_searches_unknown)} → ` +
          `${f2(n.rl_searches_unknown)}, on known facts ${f2(n.warm_searches_known)} → ${f2(n.rl_searches_known)}.`,
        numbers: n,
      };
    }),
  ];
}

/** Names in first-seen order, each once. */
function uniqueNames(firings: readonly { detector: string }[]): string[] {
  return [...new Set(firings.map((f) => f.detector))];
}

/**
 * Per design of an env lab, which loophole it opened: the detectors it expects (`expectedDetectors`) against those
 * that fired during training (`firingsDuringTraining`) and at its end (`detectors`), with held-out success and grade
 * before (the shared warm start) and after RL. Outcomes as {@link LoopholeOutcome}: a detector counts as fired when
 * it fired at any RL step. Pure; throws nothing.
 * @param warm the warm start's held-out row
 * @param designs the designs in lab order
 * @returns one verdict per design, in order
 */
export function loopholeVerdicts(warm: SummaryRow, designs: readonly EnvDesignResult[]): LoopholeVerdict[] {
  return designs.map((d) => {
    const during = uniqueNames(d.firingsDuringTraining);
    const atEnd = uniqueNames(d.detectors);
    const expected = d.expectedDetectors;
    let outcome: LoopholeOutcome;
    if (expected === undefined) outcome = "none declared";
    else if (expected.length === 0) outcome = during.length === 0 ? "closed" : "fired anyway";
    else {
      const hit = expected.filter((e) => during.includes(e)).length;
      outcome = hit === expected.length ? "opened" : hit > 0 ? "partly opened" : "not reproduced";
    }
    const list = (xs: readonly string[]) => (xs.length === 0 ? "none" : xs.join(", "));
    const others = expected === undefined ? during : during.filter((n) => !expected.includes(n));
    const score = `held-out success ${pct(warm.success)} → ${pct(d.after.success)}, grade ${f2(warm.score)} → ${f2(d.after.score)}`;
    const head =
      outcome === "none declared"
        ? `${d.name} declares no loophole; fired during training: ${list(during)}`
        : outcome === "closed" || outcome === "fired anyway"
          ? `${d.name} is expected to fire no detector (a fix): ${outcome === "closed" ? "none fired" : `fired ${list(during)}`}`
          : `${d.name} ${outcome === "opened" ? "opened its loophole" : outcome === "partly opened" ? "partly opened its loophole" : "did not reproduce its loophole"}: expected ${list(expected!)}, fired during training ${list(during)}` +
            (others.length > 0 ? ` (also ${others.join(", ")})` : "");
    return {
      design: d.name,
      ...(expected !== undefined ? { expected: [...expected] } : {}),
      firedDuringTraining: during,
      firedAtEnd: atEnd,
      outcome,
      text: `${head}; at the end: ${list(atEnd)}; ${score}.`,
    };
  });
}
