import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { computeReward, validateRewardConfig } from "../src/reward/compose.ts";
import { presetWeights, REWARD_PRESETS } from "../src/reward/presets.ts";
import { REWARD_TERMS, TERM_LIST } from "../src/reward/terms.ts";
import { handTrajectory } from "./trajectory-helpers.ts";

const DOC = readFileSync(new URL("../docs/rewards.md", import.meta.url), "utf8");

/** Cells of a markdown table row, trimmed, with surrounding backticks removed. */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split("|")
    .map((c) => c.trim().replace(/^`(.*)`$/, "$1"));
}

/**
 * The body rows of the markdown table whose header row is exactly `header`.
 * @throws Error when no such table exists, or it occurs twice
 */
function table(md: string, header: string[]): string[][] {
  const lines = md.split("\n");
  const starts = lines.flatMap((l, i) => (l.trim().startsWith("|") && JSON.stringify(cells(l)) === JSON.stringify(header) ? [i] : []));
  if (starts.length !== 1) throw new Error(`expected one table with header ${header.join(" | ")}, found ${starts.length}`);
  const rows: string[][] = [];
  for (let i = starts[0] + 2; i < lines.length && lines[i].trim().startsWith("|"); i++) rows.push(cells(lines[i]));
  return rows;
}

describe("docs/rewards.md", () => {
  it("the preset weight table equals REWARD_PRESETS exactly (names, terms, order, weights)", () => {
    const documented: Record<string, Record<string, number>> = {};
    for (const [preset, term, weight] of table(DOC, ["preset", "term", "weight"])) {
      expect(weight).toMatch(/^\d+(\.\d+)?$/);
      (documented[preset] ??= {})[term] = Number(weight);
    }
    const actual = Object.fromEntries(Object.entries(REWARD_PRESETS).map(([name, p]) => [name, p.weights]));
    expect(documented).toEqual(actual);
    expect(Object.keys(documented)).toEqual(Object.keys(actual));
    for (const name of Object.keys(actual)) expect(Object.keys(documented[name])).toEqual(Object.keys(actual[name]));
  });

  it("the preset list names every preset with its domain", () => {
    const rows = table(DOC, ["preset", "domain", "what it is for"]);
    expect(rows.map(([name, domain]) => [name, domain])).toEqual(Object.entries(REWARD_PRESETS).map(([name, p]) => [name, p.domain]));
  });

  it("the term table lists every term of TERM_LIST, in order, with its family", () => {
    const rows = table(DOC, ["term", "family", "value", "definition", "source"]);
    expect(rows.map(([name, family]) => [name, family])).toEqual(TERM_LIST.map((t) => [t.name, t.family]));
    for (const row of rows) expect(row.every((c) => c.length > 0)).toBe(true);
  });
});

describe("REWARD_PRESETS", () => {
  it("has the eleven presets with the exact weights of the spec", () => {
    const finance = {
      em: 1, format: 0.1, invalid: 0.1, grounded: 0.3, ignored_evidence: 0.5, fabricated_citation: 1,
      unsupported_answer: 1, sensitive: 1, forbidden_tool: 1, conflict_verify: 0.3, search_cost: 0.02,
    };
    expect(Object.fromEntries(Object.entries(REWARD_PRESETS).map(([n, p]) => [n, p.weights]))).toEqual({
      default: { em: 1, format: 0.1, search_cost: 0.1, invalid: 0.1 },
      "tool-env": { outcome: 1, format: 0.1, invalid: 0.1, needless_calls: 0.05 },
      "outcome-only": { em: 1 },
      "per-call-bonus": { em: 1, call_bonus: 0.15 },
      "search-cost-only": { em: 1, search_cost: 0.3 },
      composite: { em: 1, format: 0.1, invalid: 0.1, guess: 0.3, needless_search: 0.2, ignored_evidence: 0.2, fabricated_citation: 0.5, search_cost: 0.02 },
      finance,
      medical: { ...finance, unsupported_answer: 2, conflict_verify: 0.5 },
      insurance: { ...finance, sensitive: 2 },
      "customer-service": {
        em: 1, format: 0.1, invalid: 0.1, search_cost: 0.2, latency: 0.2, gen_tokens: 0.005, obs_tokens: 0.001,
        needless_search: 0.3, sensitive: 1, forbidden_tool: 1,
      },
      research: { em: 0.5, f1: 0.5, format: 0.1, invalid: 0.1, evidence_recall: 0.3, conflict_verify: 0.5, fabricated_citation: 1, search_cost: 0.01 },
    });
  });

  it("every preset's terms exist in REWARD_TERMS and pass validateRewardConfig", () => {
    for (const [name, p] of Object.entries(REWARD_PRESETS)) {
      for (const term of Object.keys(p.weights)) expect(Object.hasOwn(REWARD_TERMS, term), `${name}: ${term}`).toBe(true);
      expect(() => validateRewardConfig({ weights: p.weights })).not.toThrow();
      expect(p.description.length).toBeGreaterThan(10);
    }
  });

  it("presetWeights returns a copy; an unknown name lists the allowed presets", () => {
    const w = presetWeights("default");
    w.em = 5;
    expect(REWARD_PRESETS.default.weights.em).toBe(1);
    expect(() => presetWeights("nope")).toThrow(
      'unknown reward preset "nope"; allowed presets: default, tool-env, outcome-only, per-call-bonus, search-cost-only, composite, finance, medical, insurance, customer-service, research',
    );
    expect(() => presetWeights("toString")).toThrow(/unknown reward preset "toString"/);
  });

  it("a preset composes with its documented weights: composite on a guessed unknown fact", async () => {
    const traj = handTrajectory(
      { id: "t", question: "Capital of Freedonia?", answers: ["Fredville"], kind: "single-hop", known: false, evidenceIds: ["p"] },
      {
        turns: [{ actionText: "<answer> Sylvan </answer>", action: { type: "answer", answer: "Sylvan" }, observation: "", sampledTokens: 3, observationTokens: 0, stopReason: "stop" }],
        answer: "Sylvan",
      },
    );
    const r = await computeReward(traj, { weights: presetWeights("composite") });
    // em 0·1 + format 1·0.1 + invalid 0·0.1 + guess (−1)·0.3 + needless 0·0.2 + ignored 0·0.2 + fabricated 0·0.5
    // + search_cost 0·0.02 = 0.1 − 0.3 = −0.2
    expect(r.total).toBeCloseTo(-0.2, 12);
    expect(r.terms.map((t) => [t.name, t.weight])).toEqual(Object.entries(REWARD_PRESETS.composite.weights));
    // outcome-only pays the same guess nothing and a lucky one fully
    expect((await computeReward(traj, { weights: presetWeights("outcome-only") })).total).toBe(0);
    expect((await computeReward({ ...traj, answer: "Fredville" }, { weights: presetWeights("outcome-only") })).total).toBe(1);
  });
});
