/** The two-passage search world the rollout tests share: passages, a word tokenizer over them, a one-hit retriever. */
import type { Passage } from "../src/core/types.ts";
import { WordTokenizer } from "../src/policy/tokenizer.ts";

export const passages: Passage[] = [
  { id: "p1", title: "france", text: "the capital of france is paris ." },
  { id: "p2", title: "spain", text: "the capital of spain is madrid ." },
];
export const tok = WordTokenizer.fromTexts([
  "question : what is the capital of france ? doc ( title : ) error",
  ...passages.map((p) => p.text),
]);
/** The first passage sharing a word with the query. */
export const retriever = {
  search: (q: string) => passages.filter((p) => q.split(" ").some((w) => p.text.includes(w))).slice(0, 1),
};
