/**
 * Issue 29, part 2's kind for envs not built on `toolEnv`: an env's `step` may return a 50 MB observation, and the
 * rollout tokenised all of it to keep `maxObservationTokens` (96) tokens. `observationTextToTokenize` bounds the text
 * first; the kept tokens must be exactly those of the whole text.
 */
import { describe, expect, it } from "vitest";
import { INFORMATION_CLOSE } from "../src/protocol/searchR1.ts";
import { loadTokenizer } from "../src/policy/hf/index.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";
import type { Tokenizer } from "../src/core/tokenizer.ts";
import { OBSERVATION_TEXT_FLOOR, capObservation, observationTextToTokenize } from "../src/rollout/rollout.ts";
import { FIXTURE_DIR } from "../scripts/make-tiny-tokenizer.ts";

const words = "the capital of ireland is dublin . doc ( title : france ) paris error".split(" ");
const word = WordTokenizer.fromTexts([words.join(" "), INFORMATION_CLOSE]);
const bpe = loadTokenizer(FIXTURE_DIR);
const tokenizers: Array<[string, Tokenizer]> = [
  ["word tokenizer", word],
  ["BPE fixture", bpe],
];

/** ≈ `chars` characters of passage-like text, deterministic, then the closing text. */
function observation(chars: number, closing: string): string {
  const parts: string[] = ["<information> "];
  let n = 0;
  for (let i = 0; n < chars; i++) {
    const w = words[(i * 7 + (i >> 3)) % words.length];
    parts.push(w, i % 13 === 0 ? "\n" : " ");
    n += w.length + 1;
  }
  return parts.join("") + closing;
}

describe("a huge observation from an env's step", () => {
  it("short observations are tokenised whole (every run of today's envs is unchanged)", () => {
    const text = observation(200_000, INFORMATION_CLOSE);
    expect(observationTextToTokenize(text, 96, INFORMATION_CLOSE)).toBe(text);
  });

  for (const [name, tok] of tokenizers) {
    it(`${name}: a long observation is cut before tokenising, and the kept tokens are the whole text's`, () => {
      // The floor scaled down (1 Mi → 120 k characters) so that the BPE fixture tokenises the whole text in the suite's
      // time; the cap of 1 000 tokens (1 024 000 characters) then shows the per-token bound at the default floor's size.
      const floor = 120_000;
      const text = observation(400_000, INFORMATION_CLOSE);
      const bounded = observationTextToTokenize(text, 96, INFORMATION_CLOSE, floor);
      expect(bounded.length).toBeLessThanOrEqual(floor + INFORMATION_CLOSE.length + 1024);
      expect(observationTextToTokenize(text, 1000, INFORMATION_CLOSE, floor)).toBe(text);
      const whole = tok.encode(text);
      const cut = tok.encode(bounded);
      for (const cap of [0, 5, 96, 117]) {
        const close = { text: INFORMATION_CLOSE, tokenizer: tok };
        expect(capObservation(cut, cap, close)).toEqual(capObservation(whole, cap, close));
        expect(capObservation(cut, cap)).toEqual(capObservation(whole, cap));
      }
    });
  }

  it("never splits a surrogate pair at either cut", () => {
    const text = "😀".repeat(OBSERVATION_TEXT_FLOOR); // 2 code units each: every cut point falls mid-pair or between
    for (const close of ["", "x", "xy"]) {
      const bounded = observationTextToTokenize(text + close, 96, close);
      expect(bounded.length).toBeLessThan(text.length);
      expect(() => encodeURIComponent(bounded)).not.toThrow(); // throws URIError on a lone surrogate
    }
  });
});
