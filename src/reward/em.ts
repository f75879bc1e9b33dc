/**
 * Answer normalisation and string-match metrics of Search-R1 (`verl/utils/reward_score/qa_em.py`, repo
 * PeterGriffinJin/Search-R1), which itself copies the SQuAD v1.1 evaluation script. Token F1 is the SQuAD v1.1
 * `f1_score` (not in qa_em.py).
 */

import { SequenceMatcher } from "./match.ts";

/**
 * Python's `string.punctuation`: the 32 ASCII punctuation characters, U+0021–U+002F, U+003A–U+0040,
 * U+005B–U+0060 and U+007B–U+007E. Unicode punctuation is NOT included.
 */
const ASCII_PUNCTUATION = /[!-/:-@[-`{-~]/g;

/**
 * `\b(a|an|the)\b` with Python 3 `re` semantics on `str`: word characters are Unicode letters, numbers and `_`
 * (JS `\b` is ASCII-only, so e.g. `éthe` would wrongly lose its `the`).
 */
const ARTICLES = /(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu;

/**
 * Runs of Python `str.split()` whitespace (`str.isspace`: differs from JS `\s` by including \x1c-\x1f, \x85 and not
 * \ufeff) that are not a single space: a run starting with a character other than U+0020 (or with one space and
 * then such a character), or with two spaces, each to the end of the run. Replacing these by one space is replacing
 * every run by one space, without rewriting the (usually many) single spaces between words.
 */
const PY_WHITESPACE_ODD_RUNS =
  /(?: ?[\t\n\v\f\r\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]| {2})[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*/gu;

/**
 * Search-R1 / SQuAD answer normalisation, in exactly qa_em.py's order
 * `white_space_fix(remove_articles(remove_punc(lower(s))))`:
 * 1. lowercase; 2. delete (not replace) each ASCII punctuation character (`string.punctuation`);
 * 3. replace each whole word `a`/`an`/`the` by a space; 4. collapse whitespace (`" ".join(s.split())`).
 * Consequences of that order: `"the-end"` → `"theend"` (the hyphen goes first, gluing the article on);
 * `"U.S.A."` → `"usa"`; `"«Paris»"` → `"«paris»"` (Unicode punctuation is kept).
 * Each step is one native regex pass (step 4 replaces each whitespace run other than a single space by one space,
 * then drops the space at either end, which is `" ".join(s.split())`): a few ms on a million characters of
 * `1 1 1 …`, where a character-by-character loop and split/join took ~170 ms.
 * @param s any text
 * @returns the normalised text (possibly `""`): words separated by single spaces (U+0020), none at either end
 */
export function normalizeAnswer(s: string): string {
  const noArticles = s.toLowerCase().replace(ASCII_PUNCTUATION, "").replace(ARTICLES, " ");
  const spaced = noArticles.replace(PY_WHITESPACE_ODD_RUNS, " ");
  const from = spaced.startsWith(" ") ? 1 : 0;
  const to = spaced.length > from && spaced.endsWith(" ") ? spaced.length - 1 : spaced.length;
  return from === 0 && to === spaced.length ? spaced : spaced.slice(from, to);
}

/**
 * The words of a normalised text (`normalizeAnswer`'s output): `[]` for `""`. Python's `s.split()` on it, as its
 * only whitespace is single spaces between words.
 */
export function normalizedWords(norm: string): string[] {
  return norm === "" ? [] : norm.split(" ");
}

function asList(golds: string | readonly string[]): readonly string[] {
  return typeof golds === "string" ? [golds] : golds;
}

/**
 * Exact match after normalisation against any gold (Search-R1 `em_check`).
 * @param prediction the predicted answer text
 * @param golds gold answers (a single string is treated as a one-element list, as in Search-R1)
 * @returns 1 when `normalizeAnswer(prediction)` equals some `normalizeAnswer(gold)`, else 0 (0 for no golds)
 */
export function emCheck(prediction: string, golds: string | readonly string[]): 0 | 1 {
  const p = normalizeAnswer(prediction);
  return asList(golds).some((g) => normalizeAnswer(g) === p) ? 1 : 0;
}

/**
 * The index of the first gold (in list order) whose normalised form is a substring (code units) of `norm`, or −1.
 * One pass over `norm` whatever the number of golds (`SequenceMatcher`): `golds.findIndex((g) =>
 * norm.includes(normalizeAnswer(g)))` cost O(golds × |norm|).
 * @param norm an already normalised prediction (`normalizeAnswer`)
 */
export function firstContainedGold(norm: string, golds: string | readonly string[]): number {
  return new SequenceMatcher(asList(golds).map(normalizeAnswer)).first(norm);
}

/**
 * Substring exact match (Search-R1 `subem_check`): 1 when some normalised gold is a substring (characters, not
 * tokens) of the normalised prediction — so `"parisian"` contains `"paris"`, and an empty gold matches anything.
 * Linear in the prediction plus the golds (`firstContainedGold`).
 * @returns 0 | 1 (0 for no golds)
 */
export function subEmCheck(prediction: string, golds: string | readonly string[]): 0 | 1 {
  return firstContainedGold(normalizeAnswer(prediction), golds) >= 0 ? 1 : 0;
}

/** Token counts of a word list. */
function tokenCounts(tokens: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
  return counts;
}

/**
 * SQuAD v1.1 `f1_score` for one gold: multiset token overlap of the normalised texts. The overlap
 * `sum((Counter(pred) & Counter(gold)).values())` is Σ over the gold's distinct tokens of min(pred count, gold
 * count), so the prediction is counted once (`predCounts`) for all golds: O(|prediction| + Σ |gold|), not
 * O(golds × |prediction|).
 */
function f1One(predLength: number, predCounts: ReadonlyMap<string, number>, gold: string): number {
  const goldTokens = normalizedWords(normalizeAnswer(gold));
  let same = 0;
  for (const [t, c] of tokenCounts(goldTokens)) same += Math.min(c, predCounts.get(t) ?? 0);
  if (same === 0) return 0;
  const precision = same / predLength;
  const recall = same / goldTokens.length;
  return (2 * precision * recall) / (precision + recall);
}

/**
 * Token-level F1 (SQuAD v1.1 `evaluate-v1.1.py` `f1_score`, maximised over golds as its
 * `metric_max_over_ground_truths`). Tokens are the whitespace pieces of `normalizeAnswer`; overlap counts
 * multiplicity (`Counter & Counter`). No overlap — including an empty prediction or gold — gives 0 (v1.1, not the
 * v2.0 "both empty → 1" rule). The prediction is normalised and counted once for all golds.
 * @returns F1 in [0, 1]; 0 for no golds
 */
export function tokenF1(prediction: string, golds: string | readonly string[]): number {
  const list = asList(golds);
  if (list.length === 0) return 0;
  const predTokens = normalizedWords(normalizeAnswer(prediction));
  const predCounts = tokenCounts(predTokens);
  let best = 0;
  for (const g of list) best = Math.max(best, f1One(predTokens.length, predCounts, g));
  return best;
}
