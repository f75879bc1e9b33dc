/**
 * Reading probes (src/pretrain/probes.ts): the cases are what they say — every (id length, distance) and list length
 * covered, the id exactly that many tokens and found only in the response that many turns back, every prefix within
 * the budget and ending where the model writes its call — and the scoring is exact: a model that writes the expected
 * call scores 100 %, one that writes a near miss (one character off) scores 0, under a protocol whose stop is a
 * token (hermes) and one whose stop is several tokens (react, with this tokenizer).
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { SampleOptions, SamplingClient } from "../src/core/sampling.ts";
import type { Action } from "../src/core/types.ts";
import { HfTokenizer } from "../src/policy/hf/tokenizer.ts";
import { trainByteLevelBpe } from "../src/policy/hf/trainBpe.ts";
import { generateEpisode } from "../src/pretrain/corpus.ts";
import { copyProbeCases, PROBE_DISTANCES, PROBE_ID_TOKENS, PROBE_LIST_LENGTHS, probeRates, runProbes, selectProbeCases, type ProbeCase } from "../src/pretrain/probes.ts";
import { hermesProtocol } from "../src/protocol/hermes.ts";
import { reactProtocol } from "../src/protocol/react.ts";

let tok: HfTokenizer;
beforeAll(() => {
  const texts = Array.from({ length: 300 }, (_, i) => generateEpisode(i, i % 2 ? reactProtocol : hermesProtocol).segments.map((s) => s.text).join(""));
  tok = new HfTokenizer({ json: trainByteLevelBpe(texts, { vocabSize: 600, specialTokens: [...hermesProtocol.specialTokens] }).json, config: undefined, source: "test" });
});

/** A model that writes `write(case)` for each prompt, found by its prefix. */
function scripted(cases: readonly ProbeCase[], write: (c: ProbeCase) => string): SamplingClient {
  const byPrompt = new Map(cases.map((c) => [tok.promptTokens(c.prefix, { rendered: true }).join(","), c]));
  return {
    sample: async (prompt: number[], o: SampleOptions) => {
      const c = byPrompt.get(prompt.join(","))!;
      expect(o.temperature).toBe(0);
      // Like a sampler: the sample ends at its first stop id (kept).
      let tokens = tok.encode(write(c));
      const at = tokens.findIndex((t) => o.stop?.includes(t));
      if (at >= 0) tokens = tokens.slice(0, at + 1);
      return [{ tokens, logprobs: tokens.map(() => 0), stopReason: "stop" as const }];
    },
  };
}

const idOf = (a: Action) => (a.type === "tool_call" ? String(a.calls[0].arguments.id) : "");

describe("reading probes", () => {
  it("copy cases: every length × distance, exact token lengths, the id only in the response that far back", () => {
    const cases = copyProbeCases(tok, hermesProtocol, 2, 900);
    expect(cases).toHaveLength(PROBE_ID_TOKENS.length * PROBE_DISTANCES.length * 2);
    for (const c of cases) {
      expect(tok.promptTokens(c.prefix, { rendered: true }).length).toBeLessThanOrEqual(900);
      expect(c.prefix.endsWith("<|im_start|>assistant\n")).toBe(true);
      const id = idOf(c.expected);
      expect(tok.encode(id)).toHaveLength(c.idTokens!);
      const responses = c.prefix.split("<tool_response>").slice(1);
      const holding = responses.map((r, i) => (r.includes(`"id":${JSON.stringify(id)}`) ? i : -1)).filter((i) => i >= 0);
      expect(holding).toEqual([0]); // found by name in the first response only
      expect(responses.length).toBe(c.distance); // then distance − 1 lists of other records
    }
  });

  it("select cases: every list length, the list that long", () => {
    const cases = selectProbeCases(tok, hermesProtocol, 3, 900);
    expect(cases).toHaveLength(PROBE_LIST_LENGTHS.length * 3);
    for (const c of cases) {
      const list = JSON.parse(c.prefix.split("<tool_response>\n")[1].split("\n</tool_response>")[0]) as unknown[];
      expect(list).toHaveLength(c.listLength!);
    }
  });

  it.each([hermesProtocol, reactProtocol])("scores exactly under $name: the expected call 100 %, a one-character miss 0 %", async (protocol) => {
    const cases = [...copyProbeCases(tok, protocol, 1, 900), ...selectProbeCases(tok, protocol, 1, 900)];
    // After the call the model may run on (react's stop is several tokens here): the text is cut at the stop.
    const right = await runProbes(scripted(cases, (c) => `${protocol.format(c.expected)}\nmore text`), tok, cases);
    expect(right.every((r) => r.exact)).toBe(true);
    const rates = probeRates(right);
    expect(Object.values(rates.copy).every((v) => v === 1)).toBe(true);
    expect(Object.keys(rates.select).sort()).toEqual(PROBE_LIST_LENGTHS.map(String).sort());
    const offByOne = (c: ProbeCase): string => {
      const id = idOf(c.expected);
      const last = id.at(-1)!;
      const wrong = id.slice(0, -1) + (last === "0" ? "1" : last === "a" ? "b" : "0");
      return protocol.format({ type: "tool_call", calls: [{ name: c.expected.type === "tool_call" ? c.expected.calls[0].name : "", arguments: { id: wrong } }] });
    };
    const wrong = await runProbes(scripted(cases, offByOne), tok, cases);
    expect(wrong.some((r) => r.exact)).toBe(false);
  });
});
