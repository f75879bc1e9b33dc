import { describe, expect, it } from "vitest";
import { BM25Index } from "../src/retrieval/bm25.ts";
import { buildWorld, eligibleCountries, normalizeName, valuesOf, worldTexts } from "../src/envs/search/world.ts";

describe("buildWorld", () => {
  const w = buildWorld();
  const all = [...w.train, ...w.test];

  it("is deterministic and seed-dependent", () => {
    expect(buildWorld()).toEqual(w);
    expect(buildWorld({ seed: 0, numCountries: 80 })).toEqual(w);
    expect(buildWorld({ seed: 1 }).countries.map((c) => c.cca3)).not.toEqual(w.countries.map((c) => c.cca3));
    // Popularity does not change the selection.
    expect(buildWorld({ knownFraction: 0.1 }).countries.map((c) => c.cca3)).toEqual(w.countries.map((c) => c.cca3));
  });

  it("has the configured sizes and one passage per country and fact", () => {
    expect(w.countries).toHaveLength(80);
    expect(w.passages).toHaveLength(80 * 4);
    expect(w.countries.filter((c) => c.popular)).toHaveLength(32);
    expect(all).toHaveLength(80 * 5);
    expect(new Set(all.map((t) => t.id)).size).toBe(all.length);
    expect(w.test.length).toBe(120);
    const ids = new Set(w.passages.map((p) => p.id));
    for (const t of all) for (const e of t.evidenceIds ?? []) expect(ids.has(e)).toBe(true);
  });

  it("marks known iff every involved country is popular", () => {
    const popular = new Set(w.countries.filter((c) => c.popular).map((c) => c.cca3));
    for (const t of all) expect(t.known).toBe((t.evidenceIds ?? []).every((e) => popular.has(e.split(":")[1])));
    expect(all.filter((t) => t.kind === "single-hop" && t.known)).toHaveLength(96);
    expect(all.filter((t) => t.kind === "bridge" && t.known)).toHaveLength(32);
  });

  it("splits by question, stratified by kind × attribute × known", () => {
    const key = (t: (typeof all)[number]) => `${t.kind}/${t.meta?.attribute}/${t.known}`;
    const trainKeys = new Set(w.train.map(key));
    const testKeys = new Set(w.test.map(key));
    expect([...testKeys].sort()).toEqual([...trainKeys].sort());
    expect(trainKeys.size).toBe(10);
    const trainIds = new Set(w.train.map((t) => t.id));
    expect(w.test.some((t) => trainIds.has(t.id))).toBe(false);
  });

  it("uses normalised lowercase texts and real facts", () => {
    for (const s of worldTexts(w)) expect(s).toMatch(/^[a-z0-9 .,?]+$/);
    expect(normalizeName("São Tomé and Príncipe")).toBe("sao tome and principe");
    expect(normalizeName("Washington D.C.")).toBe("washington dc");
    expect(normalizeName("Polish złoty")).toBe("polish zloty");
    const fra = eligibleCountries().find((c) => c.cca3 === "fra");
    expect(fra).toMatchObject({ name: "france", capital: "paris", currency: "euro", region: "europe" });
    const big = buildWorld({ numCountries: eligibleCountries().length });
    expect(big.train.find((t) => t.id === "capital:fra")?.answers ?? big.test.find((t) => t.id === "capital:fra")?.answers).toEqual(["paris"]);
    expect(valuesOf(w, "region")).toEqual(["africa", "americas", "asia", "europe", "oceania"]);
  });

  it("comparison answers name the larger country", () => {
    const area = new Map(w.countries.map((c) => [c.name, c.area]));
    for (const t of all.filter((x) => x.kind === "comparison")) {
      const [a, b] = [t.meta?.entity ?? "", t.meta?.entity2 ?? ""];
      expect(t.answers[0]).toBe((area.get(a) ?? 0) > (area.get(b) ?? 0) ? a : b);
      expect(t.question).toBe(`which country is larger by area , ${a} or ${b} ?`);
    }
  });

  it("one search with the whole question finds single-hop evidence, most comparisons, not the bridge's second hop", () => {
    const index = new BM25Index(w.passages);
    const found = (t: (typeof all)[number]) => {
      const got = index.search(t.question, 3).map((p) => p.id);
      return (t.evidenceIds ?? []).every((e) => got.includes(e));
    };
    const rate = (kind: string) => {
      const ts = all.filter((t) => t.kind === kind);
      return ts.filter(found).length / ts.length;
    };
    expect(rate("single-hop")).toBeGreaterThan(0.9);
    // Comparisons need two area passages; multi-word names can crowd one out of the top 3.
    expect(rate("comparison")).toBeGreaterThan(0.5);
    // The bridge's currency passage does not mention the capital: RAG with the question cannot find it.
    expect(rate("bridge")).toBeLessThan(0.2);
    // Searching the capital, then the country it names, finds both hops.
    for (const t of all.filter((x) => x.kind === "bridge")) {
      expect(index.search(`capital ${t.meta?.bridgeValue}`, 3).map((p) => p.id)).toContain(t.evidenceIds?.[0]);
      expect(index.search(`${t.meta?.entity} currency`, 3).map((p) => p.id)).toContain(t.evidenceIds?.[1]);
    }
  });

  it("validates the config", () => {
    expect(() => buildWorld({ numCountries: 1 })).toThrow(/numCountries must be an integer in \[2, \d+\]/);
    expect(() => buildWorld({ knownFraction: 2 })).toThrow(/knownFraction must be in \[0, 1\]/);
  });
});

describe("evidence conflicts (noiseFraction)", () => {
  it("adds contradicting forum passages for unknown facts only, and is off by default", async () => {
    const { buildWorld, counterfactualWorld } = await import("../src/envs/search/world.ts");
    const clean = buildWorld({ seed: 3, numCountries: 20 });
    expect(clean.passages.every((p) => p.source === undefined && p.fact === p.id)).toBe(true);
    const noisy = buildWorld({ seed: 3, numCountries: 20, noiseFraction: 0.5, noiseReliability: 0.25 });
    const noise = noisy.passages.filter((p) => p.id.endsWith(":noise"));
    const unknownFacts = noisy.countries.filter((c) => !c.popular).length * 4;
    // about half of the unknown facts, never a popular country's
    expect(noise.length).toBeGreaterThan(unknownFacts * 0.3);
    expect(noise.length).toBeLessThan(unknownFacts * 0.7);
    const popular = new Set(noisy.countries.filter((c) => c.popular).map((c) => c.cca3));
    for (const p of noise) {
      const [, cca3, fact] = p.id.split(":");
      expect(popular.has(cca3)).toBe(false);
      expect(p).toMatchObject({ source: "forum", reliability: 0.25, fact: `country:${cca3}:${fact}` });
      const truth = noisy.passages.find((q) => q.id === `country:${cca3}:${fact}`)!;
      expect(truth).toMatchObject({ source: "encyclopedia", reliability: 1, title: p.title });
      expect(p.text).not.toBe(truth.text); // it contradicts the true fact
    }
    // The questions and the true passages are those of the clean world.
    expect(noisy.train).toEqual(clean.train);
    expect(noisy.passages.filter((p) => !p.id.endsWith(":noise")).map((p) => p.text)).toEqual(clean.passages.map((p) => p.text));
    // Counterfactual copies keep the noise option.
    expect(counterfactualWorld(noisy, 9).passages.some((p) => p.id.endsWith(":noise"))).toBe(true);
    expect(() => buildWorld({ noiseFraction: 2 })).toThrow("WorldConfig.noiseFraction must be in [0, 1], got 2");
  });

  it("a search in a noisy world observes both sources and the conflict is detected", async () => {
    const { buildWorld } = await import("../src/envs/search/world.ts");
    const { BM25Index } = await import("../src/retrieval/bm25.ts");
    const { SearchEnv } = await import("../src/envs/search/env.ts");
    const { firstConflictTurn } = await import("../src/reward/evidence.ts");
    const world = buildWorld({ seed: 3, numCountries: 20, noiseFraction: 1 });
    const task = world.train.find((t) => t.known === false && t.kind === "single-hop" && t.meta?.attribute === "capital")!;
    const env = new SearchEnv({ retriever: new BM25Index(world.passages), topK: 3 });
    await env.reset(task);
    const r = await env.step(`<search> ${task.meta!.entity} capital </search>`);
    expect(r.observation).toContain("source : encyclopedia");
    expect(r.observation).toContain("source : forum");
    expect(r.info).toMatchObject({ tool: "search", latencyMs: 200 + 50 * 3 });
    const turn = { actionText: "", action: r.info.action, observation: r.observation, passages: r.info.passages, sampledTokens: 3, observationTokens: 10, stopReason: "stop" as const };
    const traj = { task, tokens: [1], lossMask: [0], logprobs: [0], promptLength: 1, turns: [turn], answer: null, searches: 1, invalidActions: 0, truncated: true };
    expect(firstConflictTurn(traj)).toBe(0);
  });
});
