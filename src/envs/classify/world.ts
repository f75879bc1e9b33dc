/**
 * The support-ticket world of the classification env (`--env classify`): six labels, each with its cue words (drawn
 * per seed from a fixed pool), and generated tickets. A ticket names one thing that is broken (its label's cue word
 * next to a problem phrase) and, on a *two-cue* ticket, also something that is fine (another label's cue word next to
 * a fine phrase), in either order: `hello , the invoice is fine but the parcel never came . thanks .` is `shipping`.
 * The label of the first cue word is therefore wrong on half of the two-cue tickets (the `first-cue` habit).
 *
 * Every word of a ticket is one token of the embedded word tokenizer; a held-out ticket is an unseen combination of
 * seen words (cue pair, order, phrases, greeting). Task kind of EasyR1's classification examples (single-turn, label
 * accuracy), generated here: there is no data set to download.
 */
import type { Task } from "../../core/types.ts";
import { fnv1a, taskCount, worldStream } from "../../env/world.ts";

/** The labels, in answer order. */
export const LABELS = ["billing", "shipping", "account", "hardware", "software", "returns"] as const;
/** A label. */
export type Label = (typeof LABELS)[number];

/** Each label's pool of cue words; a world draws `CUES_PER_LABEL` of them per label. */
export const CUE_POOL: Readonly<Record<Label, readonly string[]>> = {
  billing: ["charge", "invoice", "bill", "payment", "fee", "subscription", "statement", "price"],
  shipping: ["parcel", "delivery", "courier", "package", "tracking", "shipment", "postage", "box"],
  account: ["password", "login", "username", "profile", "email", "signin", "verification", "avatar"],
  hardware: ["screen", "battery", "charger", "keyboard", "speaker", "camera", "button", "cable"],
  software: ["app", "update", "install", "settings", "sync", "notification", "backup", "download"],
  returns: ["return", "exchange", "refund", "receipt", "warranty", "swap", "replacement", "pickup"],
};
/** Cue words per label in one world. */
export const CUES_PER_LABEL = 5;

/** Phrases that say a thing is broken (the ticket's issue). */
export const PROBLEM_PHRASES = ["is broken", "does not work", "is wrong", "keeps failing", "never came", "is missing", "stopped working"] as const;
/** Phrases that say a thing is fine (a two-cue ticket's other cue). */
export const FINE_PHRASES = ["is fine", "works well", "was ok", "looks good"] as const;
/** Greetings (first words of a ticket; `""` = none). */
export const OPENINGS = ["", "hi ,", "hello ,", "dear support ,", "good morning ,"] as const;
/** Closings (`""` = none). */
export const CLOSINGS = ["", "please help .", "thanks .", "any ideas ?", "this is urgent ."] as const;

/** A classification world: its seed and each label's cue words. */
export interface ClassifyWorld {
  seed: number;
  cues: Record<Label, string[]>;
}

/** What a ticket is about (`Task.data`): the gold label, the cue words and their order. */
export interface Ticket {
  /** The gold label: the label of the broken thing's cue. */
  label: Label;
  /** The cue word of the broken thing. */
  cue: string;
  /** A two-cue ticket's fine thing: its cue word and label (absent on a one-cue ticket). */
  other?: { cue: string; label: Label };
  /** Two-cue ticket: true when the fine thing comes first (the first cue's label is then wrong). */
  fineFirst: boolean;
  /** The ticket text (also `Task.question`). */
  text: string;
}

/**
 * The world of `seed`: `CUES_PER_LABEL` cue words per label drawn from `CUE_POOL` (in pool order).
 * @throws Error when `seed` is not an integer
 */
export function buildClassifyWorld(seed: number): ClassifyWorld {
  if (!Number.isInteger(seed)) throw new Error(`classify world: seed must be an integer, got ${seed}`);
  const rng = worldStream(seed, "cues");
  const cues = {} as Record<Label, string[]>;
  for (const l of LABELS) {
    const keep = new Set(rng.shuffle(CUE_POOL[l].map((_, i) => i)).slice(0, CUES_PER_LABEL));
    cues[l] = CUE_POOL[l].filter((_, i) => keep.has(i));
  }
  return { seed, cues };
}

/** The label of a cue word in `world`, or undefined when it is no cue there. */
export function labelOfCue(world: ClassifyWorld, word: string): Label | undefined {
  return LABELS.find((l) => world.cues[l].includes(word));
}

const join = (...parts: string[]) => parts.filter((p) => p !== "").join(" ");

/** The text of a ticket (see the file doc). */
export function ticketText(t: Omit<Ticket, "text" | "label">, problem: string, fine: string, opening: string, closing: string): string {
  const issue = `the ${t.cue} ${problem}`;
  if (t.other === undefined) return join(opening, `${issue} .`, closing);
  const ok = `the ${t.other.cue} ${fine}`;
  return t.fineFirst ? join(opening, `${ok} but ${issue} .`, closing) : join(opening, `${issue} , ${ok} .`, closing);
}

/**
 * The tasks of `world`: `numTrain` + `numTest` distinct tickets, half of them two-cue. Held out: every ticket whose
 * (broken cue, fine cue) pair is in the test set of pairs, and one-cue tickets of a held-out (cue, problem phrase)
 * combination — so no held-out text appears in training. Deterministic in the world's seed.
 * @throws Error when the counts are not integers in range (`numTest` in [4, 400], `numTrain` in [10, 4000])
 */
export function classifyTasks(world: ClassifyWorld, numTest = 120, numTrain = 1500): { train: Task<Ticket>[]; test: Task<Ticket>[] } {
  taskCount("numTestTasks", numTest, [4, 400]);
  taskCount("numTrainTasks", numTrain, [10, 4000]);
  const rng = worldStream(world.seed, "tickets");
  const all = LABELS.flatMap((l) => world.cues[l].map((cue) => ({ cue, label: l })));
  // Held-out combinations: a fifth of the (broken, fine) cue pairs and of the (cue, problem) pairs.
  const heldPair = (a: string, b: string) => (fnv1a(`${world.seed}|${a}|${b}`) % 5) === 0;
  const heldSingle = (a: string, p: string) => (fnv1a(`${world.seed}|${a}|${p}`) % 5) === 0;
  const make = (split: "train" | "test", n: number): Task<Ticket> | undefined => {
    const broken = all[rng.int(all.length)];
    const two = rng.next() < 0.5;
    const problem = PROBLEM_PHRASES[rng.int(PROBLEM_PHRASES.length)];
    const fine = FINE_PHRASES[rng.int(FINE_PHRASES.length)];
    const opening = OPENINGS[rng.int(OPENINGS.length)];
    const closing = CLOSINGS[rng.int(CLOSINGS.length)];
    let other: Ticket["other"];
    if (two) {
      const others = all.filter((c) => c.label !== broken.label);
      other = others[rng.int(others.length)];
    }
    const fineFirst = two && rng.next() < 0.5;
    const held = other === undefined ? heldSingle(broken.cue, problem) : heldPair(broken.cue, other.cue);
    if (held !== (split === "test")) return undefined;
    const base = { cue: broken.cue, ...(other === undefined ? {} : { other }), fineFirst };
    const text = ticketText(base, problem, fine, opening, closing);
    return { id: `classify:${split}:${n}`, question: text, answers: [broken.label], kind: "classify", data: { label: broken.label, ...base, text }, meta: { label: broken.label, cues: other === undefined ? "1" : "2" } };
  };
  const draw = (split: "train" | "test", count: number): Task<Ticket>[] => {
    const out: Task<Ticket>[] = [];
    const seen = new Set<string>();
    for (let tries = 0; out.length < count && tries < count * 200; tries++) {
      const t = make(split, out.length);
      if (t === undefined || seen.has(t.question)) continue;
      seen.add(t.question);
      out.push(t);
    }
    return out;
  };
  const test = draw("test", numTest);
  const train = draw("train", numTrain);
  return { train, test };
}

