/**
 * The research grader: F1 over reason labels with evidence per reason, in the episode's own world.
 *
 * The episode's claims are its notebook (`note`'s entries: each label with the document opened before the note,
 * `tools.ts`) plus whatever its final answer adds. The answer lists reasons, each with the id of its supporting
 * document, `;`-separated: `lost_customer filing ; demand_drop news` (as the word tokenizer decodes it; a
 * `filing-prior` arrives as `filing - prior`); the answer `notes` (`NOTES_ANSWER`) adds nothing: "my answer is my
 * notes". Why the notebook counts: `note` records the reasons of the document opened last, and the 2 × 96 policy did
 * not copy a notebook into its final answer (README, run n1).
 * `parseResearchAnswer` reads each part's first word as the label and the rest, whitespace removed, as the citation.
 * A citation is a local id of the episode (`call`: the question's company's call notes, `news`: its sector's news,
 * resolved by `resolveDocId`) or a full id (`red-falcon-call`). A claimed label counts (a true positive) only when it
 * is a gold reason of the question AND its cited document was opened in the episode AND that document supports it
 * (`supports`: the company's last-year stage document — or its sector's news — stating the label). Several citations
 * of one label: it counts when any of them does. An unknown label is a wrong claim.
 *
 * Parts (each in [0, 1]): `answered`; `claimed` (1 when the notes and answer claim at least one label); `precision` = true positives / claimed labels (0 without claims); `recall` =
 * true positives / gold reasons; `f1`; `padding` = claimed labels that are not gold reasons / claimed labels;
 * `unsupported` = claimed labels whose citation was not opened or does not support them / claimed labels; `evidence`
 * = claimed gold labels with a valid citation / claimed gold labels (1 when none); `opened_<stage>` for the four stage
 * documents (the episode opened them); `in_order` (they were first opened in the seed's order filing → call → news →
 * costs; 0 unless all four were opened).
 *
 * Score (`ResearchGradeMode`): `f1` (default) — the F1 above, 1 exactly for all gold reasons, nothing else, each with a
 * valid citation; `recall` — recall over labels, citations unchecked: every gold reason claimed pays, a wrong one costs
 * nothing, so a longer answer never scores less and the list of every label scores 1 without reading anything (the
 * answer-length design of `arl lab --env research`, which breeds padding; its parts are the F1 grade's, so the
 * breakdown still measures the full rubric).
 */
import type { Grade } from "../../core/types.ts";
import type { GradeInput } from "../../env/toolEnv.ts";
import { normId, type ResearchNote, type ResearchState } from "./tools.ts";
import { REASONS, resolveDocId, stageDocId, STAGES, supports, researchIndex, type Reason, type ResearchQuestion, type ResearchWorld } from "./world.ts";

/** What the grade's score is: `f1` (precision and recall with evidence) or `recall` (pays every gold label claimed, citations unchecked; never a wrong one). */
export type ResearchGradeMode = "f1" | "recall";

/** One claim of an answer: the label as written (`label`, a `Reason` when `known`) and its citation (normalised id, '' when none). */
export interface ResearchClaim {
  label: string;
  known: boolean;
  cite: string;
}

/** The final answer that claims nothing beyond the notebook ("my answer is my notes"). */
export const NOTES_ANSWER = "notes";

/** The claims of an answer text, in order (empty parts and `NOTES_ANSWER` parts skipped). */
export function parseResearchAnswer(answer: string): ResearchClaim[] {
  const out: ResearchClaim[] = [];
  for (const raw of answer.toLowerCase().split(/;|\n/)) {
    const part = raw.replace(/\s+/g, " ").trim().replace(/\s*\.$/, "");
    if (part === "" || part === NOTES_ANSWER) continue;
    const [label, ...rest] = part.split(" ");
    out.push({ label, known: (REASONS as readonly string[]).includes(label), cite: normId(rest.join(" ")) });
  }
  return out;
}

/** The answer's claims judged: per claimed label (deduplicated, first-seen order), gold or not and supported or not. */
export interface JudgedAnswer {
  claimed: string[];
  gold: Reason[];
  truePositives: Reason[];
  padded: string[];
  unsupported: string[];
}

/**
 * Judges an answer against world `world`'s gold for `company`, given the documents the episode opened (full ids);
 * citations are resolved in the episode's scope (`resolveDocId`: `call` is the company's call notes).
 * @throws Error when `company` is not in the world
 */
export function judgeAnswer(world: ResearchWorld, company: string, answer: string, opened: readonly string[]): JudgedAnswer {
  const gold = world.reasons[company];
  const co = researchIndex(world).company.get(company);
  if (gold === undefined || co === undefined) throw new Error(`research grader: unknown company "${company}"`);
  const seen = new Set(opened);
  const cites = new Map<string, string[]>();
  for (const c of parseResearchAnswer(answer)) {
    const list = cites.get(c.label) ?? [];
    cites.set(c.label, [...list, resolveDocId(co, c.cite)]);
  }
  const claimed = [...cites.keys()];
  const valid = (label: string) =>
    (REASONS as readonly string[]).includes(label) && cites.get(label)!.some((id) => seen.has(id) && supports(world, company, id, label as Reason));
  const isGold = (label: string) => (gold as readonly string[]).includes(label);
  return {
    claimed,
    gold: [...gold],
    truePositives: gold.filter((r) => cites.has(r) && valid(r)),
    padded: claimed.filter((l) => !isGold(l)),
    unsupported: claimed.filter((l) => !valid(l)),
  };
}

/** The claims text of an episode: its notebook's entries, then its final answer (`label id ; label id`). */
export function claimsText(notes: readonly ResearchNote[], answer: string): string {
  return [...notes.map((n) => `${n.label} ${n.cite}`), answer].join(" ; ");
}

/**
 * Grades an episode (see the file doc).
 * @throws Error when the task has no `data` (not a research task) or names a company the world lacks
 */
export function gradeResearch(world: ResearchWorld, input: GradeInput<ResearchQuestion, ResearchState>, mode: ResearchGradeMode = "f1"): Grade {
  const q = input.task.data;
  if (q === undefined) throw new Error(`gradeResearch: task ${input.task.id} has no research question (data)`);
  const company = researchIndex(world).company.get(q.company);
  if (company === undefined) throw new Error(`gradeResearch: unknown company "${q.company}"`);
  const opened = input.state.opened;
  const firstOpen = STAGES.map((s) => opened.indexOf(stageDocId(company, s)));
  const stages = Object.fromEntries(STAGES.map((s, i) => [`opened_${s}`, firstOpen[i] >= 0 ? 1 : 0]));
  const inOrder = firstOpen.every((x, i) => x >= 0 && (i === 0 || x > firstOpen[i - 1])) ? 1 : 0;
  if (input.answer === null) {
    return {
      score: 0,
      parts: { answered: 0, claimed: 0, precision: 0, recall: 0, f1: 0, padding: 0, unsupported: 0, evidence: 0, ...stages, in_order: inOrder },
      explanation: "no answer",
    };
  }
  const j = judgeAnswer(world, q.company, claimsText(input.state.notes, input.answer), opened);
  const tp = j.truePositives.length;
  const n = j.claimed.length;
  const precision = n === 0 ? 0 : tp / n;
  const recall = tp / j.gold.length;
  const f1 = precision + recall === 0 ? 0 : (2 * precision * recall) / (precision + recall);
  const claimedGold = j.claimed.filter((l) => (j.gold as readonly string[]).includes(l));
  const evidence = claimedGold.length === 0 ? 1 : tp / claimedGold.length;
  // The answer-length design pays every gold label claimed, whatever it cites (see the file doc).
  const score = mode === "recall" ? j.gold.filter((r) => j.claimed.includes(r)).length / j.gold.length : f1;
  const why = [
    `${tp} of ${j.gold.length} reasons found (${j.gold.join(", ")})`,
    j.padded.length > 0 ? `padded with ${j.padded.join(", ")}` : "no padding",
    j.unsupported.length > 0 ? `unsupported: ${j.unsupported.join(", ")}` : "every claim cited",
  ];
  return {
    score,
    parts: { answered: 1, claimed: n === 0 ? 0 : 1, precision, recall, f1, padding: n === 0 ? 0 : j.padded.length / n, unsupported: n === 0 ? 0 : j.unsupported.length / n, evidence, ...stages, in_order: inOrder },
    explanation: `${mode}: ${why.join("; ")}`,
  };
}
