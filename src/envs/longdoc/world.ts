/**
 * The facility-handbook world of the long-document QA env (`--env longdoc`): per task a handbook of `PARAGRAPHS`
 * paragraphs (`p1` … `p8`), too long for the prompt, read through the tools of `./tools.ts`. Paragraph k is about one
 * facility: `the depot is run by hana . staff from the mill visit it on friday .` — who runs it, and a passing mention
 * of another facility of the handbook. A question asks who runs one facility (`who runs the mill ?`); its answer is the
 * person in the facility's own paragraph, and the right paragraph to cite is that one. A facility is mentioned in
 * passing by 0–2 other paragraphs, so the first paragraph that names it is not always its own (the `skimmer` habit).
 * Task kind of EasyR1's long-document QA examples, generated (no data set to download).
 */
import { Rng } from "../../core/rng.ts";
import type { Task } from "../../core/types.ts";

/** Facilities. */
export const FACILITIES = ["port", "library", "clinic", "depot", "archive", "studio", "garage", "bakery", "lab", "farm", "mill", "hangar"] as const;
/** People who run them. */
export const PEOPLE = ["ana", "ben", "carla", "dev", "eli", "femi", "gus", "hana", "ivan", "lea"] as const;
/** Days of the passing mentions. */
export const DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"] as const;
/** Paragraphs per handbook. */
export const PARAGRAPHS = 8;

/** One paragraph: its id (`p3`), facility, who runs it, and the facility it mentions in passing. */
export interface Paragraph {
  id: string;
  facility: string;
  person: string;
  mentions: string;
  text: string;
}

/** A question (`Task.data`): the handbook, the facility asked about, the gold person and paragraph id. */
export interface HandbookQuestion {
  paragraphs: Paragraph[];
  facility: string;
  person: string;
  paragraph: string;
}

/** 32-bit FNV-1a of a string. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (const ch of s) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

/** The question text of a facility. */
export function questionText(facility: string): string {
  return `who runs the ${facility} ? cite the paragraph .`;
}

/**
 * The tasks of world `seed`: `numTrain` + `numTest` handbooks, one question each. A handbook is held out when its
 * (asked facility, its person, the first paragraph's facility) hashes into the test fifth. Deterministic in the seed.
 * @throws Error when the seed is not an integer or a count is out of range (`numTest` in [4, 400], `numTrain` in [10, 4000])
 */
export function longdocTasks(seed: number, numTest = 120, numTrain = 1500): { train: Task<HandbookQuestion>[]; test: Task<HandbookQuestion>[] } {
  if (!Number.isInteger(seed)) throw new Error(`longdoc world: seed must be an integer, got ${seed}`);
  if (!Number.isInteger(numTest) || numTest < 4 || numTest > 400) throw new Error(`numTestTasks must be an integer in [4, 400], got ${numTest}`);
  if (!Number.isInteger(numTrain) || numTrain < 10 || numTrain > 4000) throw new Error(`numTrainTasks must be an integer in [10, 4000], got ${numTrain}`);
  const rng = new Rng((hash("longdoc") ^ Math.imul(seed >>> 0, 0x9e3779b1)) >>> 0);
  const out = { train: [] as Task<HandbookQuestion>[], test: [] as Task<HandbookQuestion>[] };
  const seen = new Set<string>();
  for (let tries = 0; (out.train.length < numTrain || out.test.length < numTest) && tries < 200 * (numTrain + numTest); tries++) {
    const fs = rng.shuffle([...FACILITIES]).slice(0, PARAGRAPHS);
    const mentioned = new Map<string, number>();
    const paragraphs: Paragraph[] = fs.map((facility, i) => {
      const others = fs.filter((f) => f !== facility && (mentioned.get(f) ?? 0) < 2);
      const person = rng.pick(PEOPLE);
      const mentions = rng.pick(others);
      mentioned.set(mentions, (mentioned.get(mentions) ?? 0) + 1);
      return { id: `p${i + 1}`, facility, person, mentions, text: `the ${facility} is run by ${person} . staff from the ${mentions} visit it on ${rng.pick(DAYS)} .` };
    });
    const asked = paragraphs[rng.int(PARAGRAPHS)];
    const key = `${asked.facility}|${asked.person}|${paragraphs[0].facility}`;
    const held = hash(`${seed}|${key}`) % 5 === 0;
    const split = held ? "test" : "train";
    const sig = paragraphs.map((p) => p.text).join(" ") + asked.facility;
    if (out[split].length >= (held ? numTest : numTrain) || seen.has(sig)) continue;
    seen.add(sig);
    out[split].push({
      id: `longdoc:${split}:${out[split].length}`,
      question: questionText(asked.facility),
      answers: [asked.person],
      kind: "longdoc",
      data: { paragraphs, facility: asked.facility, person: asked.person, paragraph: asked.id },
      meta: { paragraph: asked.id },
    });
  }
  return out;
}
