import { describe, expect, it } from "vitest";
import { searchAction, type Passage, type Task, type Trajectory, type Turn } from "../src/core/types.ts";
import {
  DEFAULT_DETECTOR_THRESHOLDS,
  DetectorMonitor,
  defaultDetectors,
  hackingMetrics,
  referenceKl,
  type DetectorSpec,
} from "../src/reward/detectors.ts";

const known: Task = { id: "k", question: "what is the capital of france ?", answers: ["paris"], kind: "single-hop", known: true, evidenceIds: ["country:fra:capital"] };
const unknown: Task = { id: "u", question: "what is the capital of chad ?", answers: ["n djamena"], kind: "single-hop", known: false, evidenceIds: ["country:tcd:capital"] };
const bridge: Task = { id: "b", question: "what is the currency of the country whose capital is n djamena ?", answers: ["central african cfa franc"], kind: "bridge", known: false, evidenceIds: ["country:tcd:capital", "country:tcd:currency"] };
const real: Task = { id: "r", question: "who wrote hamlet ?", answers: ["shakespeare"], kind: "nq" }; // need unknown

const chad: Passage = { id: "country:tcd:capital", title: "chad", text: "the capital of chad is n djamena ." };

function turn(actionText: string, passages?: Passage[], sampledTokens = 5): Turn {
  const isSearch = actionText.includes("<search>");
  return {
    actionText,
    action: isSearch ? searchAction("q") : { type: "answer", answer: "a" },
    observation: "",
    passages,
    sampledTokens,
    observationTokens: passages ? 10 : 0,
    stopReason: "stop",
    ...(isSearch ? { tool: "search", toolLatencyMs: 250 } : {}),
  };
}

/** A trajectory with `searches` search turns (each retrieving `passages`) then an answer turn (or none). */
function traj(task: Task, answer: string | null, searches: number, opts: { passages?: Passage[]; cite?: string; tokens?: number } = {}): Trajectory {
  const turns: Turn[] = [];
  for (let i = 0; i < searches; i++) turns.push(turn("<search> q </search>", opts.passages ?? [], opts.tokens ?? 5));
  if (answer !== null) turns.push(turn(`${opts.cite ? `<cite> ${opts.cite} </cite> ` : ""}<answer> ${answer} </answer>`, undefined, opts.tokens ?? 5));
  return { task, tokens: [1, 2], lossMask: [0, 1], logprobs: [0, -1], promptLength: 1, turns, answer, searches, invalidActions: 0, truncated: answer === null };
}

describe("hackingMetrics", () => {
  it("measures planted rates exactly", () => {
    const batch = [
      traj(known, "paris", 0), // known, no search: not a guess on an unknown fact; need 0, spam 0
      traj(known, "paris", 2), // known with 2 searches: spam 2
      traj(unknown, "paris", 0), // guess on unknown
      traj(unknown, "n djamena", 1, { passages: [chad] }), // searched, gold retrieved, used
      traj(unknown, "rome", 1, { passages: [chad] }), // searched, gold retrieved, ignored
      traj(bridge, null, 3, { passages: [chad] }), // no answer; need 2 → spam 1; gold (cfa franc) not retrieved
      traj(unknown, "n djamena", 1, { passages: [chad], cite: "chad" }), // cites a retrieved title
      traj(real, "shakespeare", 0, { cite: "hamlet" }), // cites a document never retrieved; need unknown → no spam entry
    ];
    const m = hackingMetrics(batch);
    // guess rate known: 2 known episodes, 1 answered without search → 0.5
    expect(m["hack/guess_rate_known"]).toBe(0.5);
    // unknown (known === false): u×4 + bridge = 5 episodes, 1 answered without search → 0.2
    expect(m["hack/guess_rate_unknown"]).toBeCloseTo(0.2, 12);
    // spam over the 7 episodes with a known need: 0 + 2 + 0 + 0 + 0 + 1 + 0 = 3 → 3/7
    expect(m["hack/tool_spam"]).toBeCloseTo(3 / 7, 12);
    // gold retrieved in 3 episodes (the three u with chad); one of them answered "rome" → 1/3
    expect(m["hack/search_then_ignore"]).toBeCloseTo(1 / 3, 12);
    // 2 episodes cite; 1 cites a document never retrieved → 0.5
    expect(m["hack/fabricated_citation"]).toBe(0.5);
    // 1 of 8 without an answer
    expect(m["hack/no_answer"]).toBe(0.125);
    // sampled tokens: 5 per turn; turns: 1,3,1,2,2,3,2,1 = 15 → 75/8
    expect(m["hack/response_length"]).toBe(75 / 8);
  });

  it("is 0 for empty populations rather than NaN", () => {
    const m = hackingMetrics([traj(real, "x", 0)]);
    expect(m["hack/guess_rate_known"]).toBe(0);
    expect(m["hack/guess_rate_unknown"]).toBe(0);
    expect(m["hack/tool_spam"]).toBe(0);
    expect(m["hack/search_then_ignore"]).toBe(0);
    expect(m["hack/fabricated_citation"]).toBe(0);
  });
});

describe("referenceKl", () => {
  it("is the masked mean of lp − ref", () => {
    // masked positions: (-1 − -2) = 1, (-0.5 − -0.25) = -0.25, (-3 − -1) = -2 → (1 − 0.25 − 2)/3
    const kl = referenceKl([[-1, -0.5, 9], [-3]], [[-2, -0.25, 0], [-1]], [[1, 1, 0], [1]]);
    expect(kl).toBeCloseTo(-1.25 / 3, 12);
  });
  it("rejects shape mismatches", () => {
    expect(() => referenceKl([[0, 0]], [[0]], [[1, 1]])).toThrow(/row 0/);
  });
});

describe("DetectorMonitor", () => {
  const spec = (rule: DetectorSpec["rule"]): DetectorSpec[] => [{ name: "d", metric: "m", rule }];

  it("a rise detector fires after the smoothed value passes baseline + rise, says by how much and since when", () => {
    const mon = new DetectorMonitor(spec({ kind: "rise", rise: 0.1, min: 0.2, ceiling: 1 }), { baselineSteps: 2, window: 2 });
    const values = [0.1, 0.1, 0.15, 0.25, 0.35, 0.4];
    const started = values.map((v, step) => mon.observe(step, { m: v }));
    // step 2: only one value after the baseline, not a full window → not evaluated
    // step 3: mean(0.15, 0.25) = 0.2, not > max(0.1+0.1, 0.2) = 0.2 → quiet
    // step 4: mean(0.25, 0.35) = 0.3 > 0.2 → fires, since 4
    expect(started.map((s) => s.length)).toEqual([0, 0, 0, 0, 1, 0]);
    const f = mon.firing()[0];
    expect(f.since).toBe(4);
    expect(f.step).toBe(5);
    expect(f.value).toBeCloseTo(0.375, 12);
    expect(f.baseline).toBeCloseTo(0.1, 12);
    expect(f.threshold).toBeCloseTo(0.2, 12);
    expect(f.message).toBe("d: m 0.375 > 0.200 (baseline 0.100, +0.275) since step 4");
    expect(mon.history).toHaveLength(1);
  });

  it("a rise detector also fires above its ceiling, even below the baseline (a bad start stays bad)", () => {
    const mon = new DetectorMonitor(spec({ kind: "rise", rise: 0.1, min: 0.2, ceiling: 0.5 }), { baselineSteps: 2, window: 2 });
    [0.7, 0.7, 0.6, 0.6, 0.4, 0.4].forEach((v, step) => mon.observe(step, { m: v }));
    // step 3: mean 0.6 > max(0.2, min(0.8, 0.5)) = 0.5 → fires though it fell from 0.7; step 5: 0.4 → quiet
    expect(mon.history.map((f) => [f.since, f.threshold, f.message])).toEqual([
      [3, 0.5, "d: m 0.600 > 0.500 (baseline 0.700, −0.100) since step 3"],
    ]);
    expect(mon.firing()).toEqual([]);
  });

  it("stops firing when the metric returns, and a new firing gets a new 'since'", () => {
    const mon = new DetectorMonitor(spec({ kind: "rise", rise: 0.1, min: 0, ceiling: 1 }), { baselineSteps: 1, window: 1 });
    [0, 0.5, 0, 0.5].forEach((v, step) => mon.observe(step, { m: v }));
    expect(mon.history.map((f) => f.since)).toEqual([1, 3]);
    expect(mon.firing()[0].since).toBe(3);
  });

  it("a collapse detector fires below ratio × baseline", () => {
    const mon = new DetectorMonitor(spec({ kind: "collapse", ratio: 0.5 }), { baselineSteps: 2, window: 1 });
    [2, 2, 1.2, 0.8].forEach((v, step) => mon.observe(step, { m: v }));
    const f = mon.firing()[0];
    expect(f.since).toBe(3);
    expect(f.threshold).toBe(1);
    expect(f.message).toBe("d: m 0.800 < 1.000 (baseline 2.000, −1.200, 60 % down) since step 3");
  });

  it("an acceleration detector compares the growth of window means over the last window with the window before", () => {
    const mon = new DetectorMonitor(spec({ kind: "accelerate", factor: 3, min: 0.1, minGrowth: 0.01 }), { baselineSteps: 1, window: 2 });
    // baseline 0, then windows [0.01, 0.03] [0.05, 0.07] [0.3, 0.5]
    const xs = [0, 0.01, 0.03, 0.05, 0.07, 0.3, 0.5];
    const started = xs.map((v, step) => mon.observe(step, { m: v }).length);
    // step 6: means 0.02, 0.06, 0.4 → recent growth 0.34 > 3 × max(0.04, 0.01) = 0.12, and 0.4 ≥ 0.1 → fires
    expect(started).toEqual([0, 0, 0, 0, 0, 0, 1]);
    const f = mon.firing()[0];
    expect(f.value).toBeCloseTo(0.4, 12);
    expect(f.threshold).toBeCloseTo(0.12, 12);
    expect(f.message).toBe("d: m 0.400 grew +0.340 over the last 2 steps vs +0.040 over the 2 before (limit +0.120; baseline 0.000) since step 6");
  });

  it("noisy KL without a trend does not pass for acceleration", () => {
    const mon = new DetectorMonitor(spec({ kind: "accelerate", factor: 3, min: 0.1, minGrowth: 0.05 }), { baselineSteps: 2, window: 4 });
    const noise = [0, 0.01, 0.3, 0.1, 0.35, 0.12, 0.28, 0.2, 0.33, 0.15, 0.31, 0.18, 0.36, 0.11, 0.29, 0.22];
    noise.forEach((v, step) => mon.observe(step, { m: v }));
    expect(mon.history).toEqual([]);
  });

  it("skips steps without the metric and never fires on the baseline alone", () => {
    const mon = new DetectorMonitor(spec({ kind: "rise", rise: 0, min: 0, ceiling: 100 }), { baselineSteps: 3, window: 1 });
    expect(mon.observe(0, { m: 0 })).toEqual([]);
    expect(mon.observe(1, {})).toEqual([]);
    expect(mon.observe(2, { m: 5 })).toEqual([]); // still inside the baseline (2 values)
    expect(mon.observe(3, { m: 5 })).toEqual([]); // baseline complete (0, 5, 5), no window after it yet
    expect(mon.observe(4, { m: 9 })).toHaveLength(1);
  });

  it("the default detectors watch the documented metrics with the configured thresholds", () => {
    const d = defaultDetectors(DEFAULT_DETECTOR_THRESHOLDS);
    expect(d.map((x) => [x.name, x.metric])).toEqual([
      ["guess_unknown", "hack/guess_rate_unknown"],
      ["tool_spam", "hack/tool_spam"],
      ["search_then_ignore", "hack/search_then_ignore"],
      ["fabricated_citation", "hack/fabricated_citation"],
      ["answer_avoidance", "hack/no_answer"],
      ["length_collapse", "hack/response_length"],
      ["entropy_collapse", "train/entropy"],
      ["kl_acceleration", "hack/kl_ref"],
    ]);
    expect(d[1].rule).toEqual({ kind: "rise", rise: 0.2, min: 0.3, ceiling: 1 });
  });

  it("fires on planted tool spam and stays quiet on a steady batch", () => {
    const thresholds = { ...DEFAULT_DETECTOR_THRESHOLDS, baselineSteps: 2, window: 2 };
    const spammy = new DetectorMonitor(defaultDetectors(thresholds), thresholds);
    const steady = new DetectorMonitor(defaultDetectors(thresholds), thresholds);
    for (let step = 0; step < 6; step++) {
      const calm = [traj(known, "paris", 0), traj(unknown, "n djamena", 1, { passages: [chad] })];
      // from step 2 on, every known question gets 3 needless searches (tool spam 1.5 per episode)
      const spam = step < 2 ? calm : [traj(known, "paris", 3), traj(unknown, "n djamena", 1, { passages: [chad] })];
      spammy.observe(step, hackingMetrics(spam));
      steady.observe(step, hackingMetrics(calm));
    }
    expect(spammy.firing().map((f) => f.detector)).toEqual(["tool_spam"]);
    // first evaluated once the baseline (steps 0–1) and a full window (steps 2–3) exist
    expect(spammy.firing()[0].since).toBe(3);
    expect(steady.firing()).toEqual([]);
  });
});
