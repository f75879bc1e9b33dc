/**
 * The reward-term library. Each term maps a finished trajectory (and, for group-relative terms, its GRPO group) to
 * a raw value and a one-line explanation with its numbers; the composer (`compose.ts`) weights and sums them.
 * Families (`TermFamily`): outcome (is the answer right), format (does the episode follow the protocol), necessity
 * (did it search when, and only when, it had to), evidence (did it use what it retrieved), cost (what it spent;
 * value = −quantity, the weight is the unit price), bonus (deliberately hackable, for the lab) and safety.
 * Evidence and necessity terms are built on `evidence.ts`, the helpers the hacking detectors use, so a term and
 * its detector never disagree. A new term is one entry in `TERM_LIST`; the composer needs no change. The terms live in
 * `./terms/` by family; this file is their registry.
 */
import type { RewardTermDef } from "./types.ts";
import { coverEmTerm, emTerm, f1Term, judgeTerm, outcomeTerm } from "./terms/outcome.ts";
import { formatSmTerm, formatTerm, invalidTerm } from "./terms/format.ts";
import { guessTerm, needlessCallsTerm, needlessSearchTerm, otcTerm } from "./terms/necessity.ts";
import { conflictVerifyTerm, evidenceRecallTerm, fabricatedCitationTerm, groundedTerm, ignoredEvidenceTerm } from "./terms/evidence.ts";
import { callBonusTerm, genTokensTerm, latencyTerm, obsTokensTerm, searchCostTerm, toolCallsTerm, toolErrorTerm } from "./terms/cost.ts";
import { forbiddenToolTerm, sensitiveTerm, unsupportedAnswerTerm } from "./terms/safety.ts";

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
