/**
 * Answer normalisation and string-match metrics of Search-R1 (`verl/utils/reward_score/qa_em.py`, repo
 * PeterGriffinJin/Search-R1), which itself copies the SQuAD v1.1 evaluation script. Token F1 is the SQuAD v1.1
 * `f1_score` (not in qa_em.py).
 */

/** Python's `string.punctuation`: the 32 ASCII punctuation characters. Unicode punctuation is NOT included. */
const ASCII_PUNCTUATION = new Set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~");

/**
 * `\b(a|an|the)\b` with Python 3 `re` semantics on `str`: word characters are Unicode letters, numbers and `_`
 * (JS `\b` is ASCII-only, so e.g. `éthe` would wrongly lose its `the`).
 */
const ARTICLES = /(?<![\p{L}\p{N}_])(?:a|an|the)(?![\p{L}\p{N}_])/gu;

/** Python `str.split()` whitespace (`str.isspace`): differs from JS `\s` by including \x1c-\x1f, \x85 and not \ufeff. */
const PY_WHITESPACE = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

/** Python `s.split()`: split on runs of whitespace, dropping empty pieces. */
function pySplit(s: string): string[] {
  return s.split(PY_WHITESPACE).filter((t) => t.length > 0);
}

/**
 * Search-R1 / SQuAD answer normalisation, in exactly qa_em.py's order
 * `white_space_fix(remove_articles(remove_punc(lower(s))))`:
 * 1. lowercase; 2. delete (not replace) each ASCII punctuation character (`string.punctuation`);
 * 3. replace each whole word `a`/`an`/`the` by a space; 4. collapse whitespace (`" ".join(s.split())`).
 * Consequences of that order: `"the-end"` → `"theend"` (the hyphen goes first, gluing the article on);
 * `"U.S.A."` → `"usa"`; `"«Paris»"` → `"«paris»"` (Unicode punctuation is kept).
 * @param s any text
 * @returns the normalised text (possibly `""`)
 */
export function normalizeAnswer(s: string): string {
  const hit = normalized.get(s);
  if (hit !== undefined) return hit;
  const out = normalizeUncached(s);
  if (normalizedChars + s.length > NORMALIZED_CACHE_CHARS) {
    normalized.clear();
    normalizedChars = 0;
  }
  normalized.set(s, out);
  normalizedChars += s.length + out.length;
  return out;
}

/**
 * Recent `normalizeAnswer` results. Reward terms normalise the same answer once per passage or per gold answer
 * (`grounded`, `f1`, `goldRetrieved`…); on a long answer against many passages that was quadratic (minutes per
 * request in `arl serve reward`). The function is pure, so a bounded memo changes no value.
 */
const normalized = new Map<string, string>();
let normalizedChars = 0;
/** Characters (inputs + outputs) the memo holds before it starts over. */
const NORMALIZED_CACHE_CHARS = 1 << 23;

function normalizeUncached(s: string): string {
  const lowered = s.toLowerCase();
  let noPunct = "";
  for (const ch of lowered) if (!ASCII_PUNCTUATION.has(ch)) noPunct += ch;
  const noArticles = noPunct.replace(ARTICLES, " ");
  return pySplit(noArticles).join(" ");
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
 * Substring exact match (Search-R1 `subem_check`): 1 when some normalised gold is a substring (characters, not
 * tokens) of the normalised prediction — so `"parisian"` contains `"paris"`, and an empty gold matches anything.
 * @returns 0 | 1 (0 for no golds)
 */
export function subEmCheck(prediction: string, golds: string | readonly string[]): 0 | 1 {
  const p = normalizeAnswer(prediction);
  return asList(golds).some((g) => p.includes(normalizeAnswer(g))) ? 1 : 0;
}

/** SQuAD v1.1 `f1_score` for one gold: multiset token overlap of the normalised texts. */
function f1One(prediction: string, gold: string): number {
  const predTokens = pySplit(normalizeAnswer(prediction));
  const goldTokens = pySplit(normalizeAnswer(gold));
  const counts = new Map<string, number>();
  for (const t of goldTokens) counts.set(t, (counts.get(t) ?? 0) + 1);
  let same = 0;
  for (const t of predTokens) {
    const c = counts.get(t) ?? 0;
    if (c > 0) {
      same += 1;
      counts.set(t, c - 1);
    }
  }
  if (same === 0) return 0;
  const precision = same / predTokens.length;
  const recall = same / goldTokens.length;
  return (2 * precision * recall) / (precision + recall);
}

/**
 * Token-level F1 (SQuAD v1.1 `evaluate-v1.1.py` `f1_score`, maximised over golds as its
 * `metric_max_over_ground_truths`). Tokens are the whitespace pieces of `normalizeAnswer`; overlap counts
 * multiplicity (`Counter & Counter`). No overlap — including an empty prediction or gold — gives 0 (v1.1, not the
 * v2.0 "both empty → 1" rule).
 * @returns F1 in [0, 1]; 0 for no golds
 */
export function tokenF1(prediction: string, golds: string | readonly string[]): number {
  let best = 0;
  for (const g of asList(golds)) best = Math.max(best, f1One(prediction, g));
  return best;
}
