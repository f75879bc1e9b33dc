import { describe, expect, it } from "vitest";
import { searchAction } from "../src/core/types.ts";
import { INVALID_ACTION_OBSERVATION } from "../src/protocol/searchR1.ts";
import { isValidSequence, trajectoryText } from "../src/reward/format.ts";
import { handTrajectory } from "./trajectory-helpers.ts";

/** An observation exactly as the environment appends it. */
const I = (s: string): string => `\n\n<information>${s}</information>\n\n`;

type Verdict = [valid: boolean, reason: string];
const OK: Verdict = [true, "Valid sequence format"];

/**
 * [case, text, verdict with requireThink (= Search-R1's `is_valid_sequence` on "<|im_start|>assistant\n" + text,
 * checked by running the Python original on every case), verdict with think optional].
 */
const CASES: [string, string, Verdict, Verdict][] = [
  ["think → answer", "<think>easy</think><answer>Paris</answer>", OK, OK],
  [
    "think → search → information → think → answer",
    `<think>need facts</think><search>capital france</search>${I("Doc 1(Title: France) Paris is the capital.")}<think>found</think><answer>Paris</answer>`,
    OK,
    OK,
  ],
  [
    "two search rounds with thinks",
    `<think>a</think><search>q1</search>${I("d1")}<think>b</think><search>q2</search>${I("d2")}<think>c</think><answer>x</answer>`,
    OK,
    OK,
  ],
  ["bare answer", "<answer>Paris</answer>", [false, "Unexpected tag <answer> in state start"], OK],
  ["bare search → answer", `<search>capital france</search>${I("Doc 1")}<answer>Paris</answer>`, [false, "Unexpected tag <search> in state start"], OK],
  ["bare two searches → answer", `<search>q1</search>${I("d1")}<search>q2</search>${I("d2")}<answer>x</answer>`, [false, "Unexpected tag <search> in state start"], OK],
  ["think only before the answer", `<search>q1</search>${I("d1")}<think>ok</think><answer>x</answer>`, [false, "Unexpected tag <search> in state start"], OK],
  ["trailing text after the answer", "<think>a</think><answer>Paris</answer> trailing", [false, "Unexpected content in state end"], [false, "Unexpected content in state end"]],
  ["search after the answer", "<answer>Paris</answer><search>more</search>", [false, "Unexpected tag <answer> in state start"], [false, "Unexpected tag <search> in state end"]],
  ["two answers", "<think>a</think><answer>x</answer><answer>y</answer>", [false, "Unexpected tag <answer> in state end"], [false, "Unexpected tag <answer> in state end"]],
  ["think after think", "<think>a</think><think>b</think><answer>x</answer>", [false, "Unexpected tag <think> in state after_think"], [false, "Unexpected tag <think> in state after_think"]],
  ["search without information", "<search>q</search><answer>x</answer>", [false, "Unexpected tag <search> in state start"], [false, "Unexpected tag <answer> in state after_search"]],
  ["ends after a search", "<think>a</think><search>q</search>", [false, "Incomplete sequence, ended in state after_search"], [false, "Incomplete sequence, ended in state after_search"]],
  ["information without a search", `${I("d")}<answer>x</answer>`, [false, "Unexpected tag <information> in state start"], [false, "Unexpected tag <information> in state start"]],
  ["text between blocks", "<think>a</think>hello<answer>x</answer>", [false, "Unexpected content 'hello' between tags (state: after_think)"], [false, "Unexpected content 'hello' between tags (state: after_think)"]],
  ["text before the first block", "hello <answer>x</answer>", [false, "Unexpected content 'hello' between tags (state: start)"], [false, "Unexpected content 'hello' between tags (state: start)"]],
  ["nested search inside think", "<think>a <search>q</search></think><answer>x</answer>", [false, "Unexpected tag <search> in state in_think"], [false, "Unexpected tag <search> in state in_think"]],
  ["unclosed answer", "<answer>Paris", [false, "Mismatch in answer tags: 1 opening vs 0 closing tags"], [false, "Mismatch in answer tags: 1 opening vs 0 closing tags"]],
  ["extra closing tag", "<think>a</think><answer>x</answer></answer>", [false, "Mismatch in answer tags: 1 opening vs 2 closing tags"], [false, "Mismatch in answer tags: 1 opening vs 2 closing tags"]],
  ["empty text", "", [false, "Incomplete sequence, ended in state start"], [false, "Incomplete sequence, ended in state start"]],
  ["only whitespace", "   \n  ", [false, "Incomplete sequence, ended in state start"], [false, "Incomplete sequence, ended in state start"]],
  ["only a think", "<think>a</think>", [false, "Incomplete sequence, ended in state after_think"], [false, "Incomplete sequence, ended in state after_think"]],
  ["search + information, no answer", `<search>q</search>${I("d")}`, [false, "Unexpected tag <search> in state start"], [false, "Incomplete sequence, ended in state information"]],
  ["empty answer block", "<answer></answer>", [false, "Unexpected tag <answer> in state start"], OK],
  ["whitespace around blocks is fine", "<think>a</think>\n\n<answer>x</answer>\n\n", OK, OK],
  [
    "Search-R1's invalid-action observation quotes tags",
    `<search>q</search>${INVALID_ACTION_OBSERVATION}<answer>x</answer>`,
    [false, "Unexpected tag <search> in state start"],
    [false, "Unexpected content 'My previous action is invalid. If I want to search, I should put the query between' between tags (state: after_search)"],
  ],
  ["tags are case-sensitive", "<Answer>x</Answer>", [false, "Unexpected content '<Answer>x</Answer>' between tags (state: start)"], [false, "Unexpected content '<Answer>x</Answer>' between tags (state: start)"]],
  // Python's str.strip() treats U+00A0 as whitespace, so a trailing no-break space is blank
  ["trailing no-break space is blank", "<think>a</think><answer>x</answer>\u00a0", OK, OK],
];

describe("isValidSequence (port of Search-R1 is_valid_sequence)", () => {
  it.each(CASES)("%s — requireThink: Search-R1's verdict", (_name, text, strict) => {
    expect(isValidSequence(text, { requireThink: true })).toEqual({ valid: strict[0], reason: strict[1] });
  });
  it.each(CASES)("%s — think optional", (_name, text, _strict, relaxed) => {
    expect(isValidSequence(text, { requireThink: false })).toEqual({ valid: relaxed[0], reason: relaxed[1] });
  });
  it("defaults to think optional", () => {
    expect(isValidSequence("<answer>Paris</answer>")).toEqual({ valid: true, reason: "Valid sequence format" });
  });
  it("the tiny policy's word-spaced text is valid", () => {
    const text = `<search> capital france </search>${I("Doc 1(Title: france) the capital of france is paris .")}<answer> paris </answer>`;
    expect(isValidSequence(text).valid).toBe(true);
  });
});

describe("trajectoryText", () => {
  it("concatenates each turn's action text and observation, without the prompt", () => {
    const traj = handTrajectory(
      { id: "t", question: "q", answers: ["a"], kind: "k" },
      {
        turns: [
          { actionText: "<search> q </search>", action: searchAction("q"), observation: I("d"), sampledTokens: 3, observationTokens: 5, stopReason: "stop" },
          { actionText: "<answer> a </answer>", action: { type: "answer", answer: "a" }, observation: "", sampledTokens: 3, observationTokens: 0, stopReason: "stop" },
        ],
        answer: "a",
        searches: 1,
      },
    );
    expect(trajectoryText(traj)).toBe("<search> q </search>\n\n<information>d</information>\n\n<answer> a </answer>");
  });
});
