/**
 * The facility-handbook world of the long-document QA env (`--env longdoc`): per task a handbook of `PARAGRAPHS`
 * paragraphs (`p1` … `p8`), too long for the prompt, read through the tools of `./tools.ts`. Two kinds of paragraph,
 * in a seeded order: `FACILITY_PARAGRAPHS` facility paragraphs, each saying which staff run one facility (`the mill is
 * run by the bakers .`), and `NOTICES` notices that name two facilities in passing and no staff (`staff from the mill
 * visit the port on friday .`). A question asks which department runs one facility (`which department runs the mill ?
 * cite the paragraph .`); its answer is the department of the staff its own paragraph names (`DEPARTMENT_OF`: bakers →
 * catering), and the paragraph to cite is that one. A facility is named by 0–2 notices, so the first paragraph that
 * names it is a notice on a share of the questions (the `skimmer` habit: answering from a paragraph that says nothing
 * about who runs it).
 *
 * Why this shape (README, "Measured"): the first version asked for a person's name (`the depot is run by hana`) with
 * every paragraph naming a person; the from-scratch 2 × 96 model read the right paragraph but did not copy the name out
 * of the tool result. What it learns is a cue word anywhere in the context → a label (the classify and extract envs):
 * here the only staff word an episode ever reads is its own paragraph's (notices name none, and search never lists
 * another facility's own paragraph), so the department is a presence → label mapping, and "did it locate and read the
 * right paragraph" decides whether the cue is there at all. Task kind of EasyR1's long-document QA examples, generated
 * (no data set to download).
 */
import type { Task } from "../../core/types.ts";
import { drawSplit, fnv1a, taskCount, worldStream, type SplitCandidate } from "../../env/world.ts";

/** Facilities. */
export const FACILITIES = ["port", "library", "clinic", "depot", "archive", "studio", "garage", "bakery", "lab", "farm", "mill", "hangar"] as const;
/** Departments: the answer labels. */
export const DEPARTMENTS = ["catering", "medical", "logistics", "records", "maintenance", "research"] as const;
/** A department. */
export type Department = (typeof DEPARTMENTS)[number];
/** The staff words of each department (what a facility paragraph names; the answer is their department). */
export const STAFF_OF: Readonly<Record<Department, readonly string[]>> = {
  catering: ["cooks", "bakers"],
  medical: ["nurses", "medics"],
  logistics: ["drivers", "porters"],
  records: ["clerks", "archivists"],
  maintenance: ["mechanics", "welders"],
  research: ["chemists", "analysts"],
};
/** The department of each staff word. */
export const DEPARTMENT_OF: Readonly<Record<string, Department>> = Object.fromEntries(DEPARTMENTS.flatMap((d) => STAFF_OF[d].map((s) => [s, d])));
/** Every staff word. */
export const STAFF: readonly string[] = DEPARTMENTS.flatMap((d) => STAFF_OF[d]);
/** Days of the notices. */
export const DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"] as const;
/** Facility paragraphs per handbook (one facility each). */
export const FACILITY_PARAGRAPHS = 5;
/** Notices per handbook (two facilities named each, no staff). */
export const NOTICES = 3;
/** Paragraphs per handbook. */
export const PARAGRAPHS = FACILITY_PARAGRAPHS + NOTICES;

/**
 * One paragraph: its id (`p3`), kind, the facilities it names (a facility paragraph: its own one; a notice: two), the
 * staff who run it (facility paragraphs only) and its text.
 */
export interface Paragraph {
  id: string;
  kind: "facility" | "notice";
  facilities: string[];
  staff?: string;
  text: string;
}

/** A question (`Task.data`): the handbook, the facility asked about, the gold department and paragraph id. */
export interface HandbookQuestion {
  paragraphs: Paragraph[];
  facility: string;
  department: Department;
  paragraph: string;
}

/** The question text of a facility. */
export function questionText(facility: string): string {
  return `which department runs the ${facility} ? cite the paragraph .`;
}

/** The paragraphs that name `facility` (its own and the notices), in handbook order: what `search` lists. */
export function namingParagraphs(q: Pick<HandbookQuestion, "paragraphs">, facility: string): Paragraph[] {
  return q.paragraphs.filter((p) => p.facilities.includes(facility));
}

/**
 * The tasks of world `seed`: `numTrain` + `numTest` handbooks, one question each. A handbook has
 * `FACILITY_PARAGRAPHS` distinct facilities, each run by a seeded staff word, and `NOTICES` notices naming two of them
 * each (every facility named by at most 2 notices), shuffled into one order. A handbook is held out when its (asked
 * facility, its staff, the first paragraph's text) hashes into the test fifth. Deterministic in the seed.
 * @throws Error when the seed is not an integer or a count is out of range (`numTest` in [4, 400], `numTrain` in [10, 4000])
 */
export function longdocTasks(seed: number, numTest = 120, numTrain = 1500): { train: Task<HandbookQuestion>[]; test: Task<HandbookQuestion>[] } {
  if (!Number.isInteger(seed)) throw new Error(`longdoc world: seed must be an integer, got ${seed}`);
  taskCount("numTestTasks", numTest, [4, 400]);
  taskCount("numTrainTasks", numTrain, [10, 4000]);
  const rng = worldStream(seed, "longdoc");
  return drawSplit(numTrain, numTest, (): SplitCandidate<HandbookQuestion> => {
    const fs = rng.shuffle([...FACILITIES]).slice(0, FACILITY_PARAGRAPHS);
    const own = fs.map((facility) => {
      const staff = rng.pick(STAFF);
      return { kind: "facility" as const, facilities: [facility], staff, text: `the ${facility} is run by the ${staff} .` };
    });
    const named = new Map<string, number>();
    const notices = Array.from({ length: NOTICES }, () => {
      const [a, b] = rng.shuffle(fs.filter((f) => (named.get(f) ?? 0) < 2)).slice(0, 2);
      for (const f of [a, b]) named.set(f, (named.get(f) ?? 0) + 1);
      return { kind: "notice" as const, facilities: [a, b], text: `staff from the ${a} visit the ${b} on ${rng.pick(DAYS)} .` };
    });
    const paragraphs: Paragraph[] = rng.shuffle<Omit<Paragraph, "id">>([...own, ...notices]).map((p, i) => ({ id: `p${i + 1}`, ...p }));
    const asked = rng.pick(paragraphs.filter((p) => p.kind === "facility"));
    const facility = asked.facilities[0];
    const held = fnv1a(`${seed}|${facility}|${asked.staff}|${paragraphs[0].text}`) % 5 === 0;
    const department = DEPARTMENT_OF[asked.staff!];
    return {
      held,
      signature: paragraphs.map((p) => p.text).join(" ") + facility,
      task: (split, i) => ({
        id: `longdoc:${split}:${i}`,
        question: questionText(facility),
        answers: [department],
        kind: "longdoc",
        data: { paragraphs, facility, department, paragraph: asked.id },
        meta: { paragraph: asked.id },
      }),
    };
  });
}
