/**
 * The order-note world of the extraction env (`--env extract`): short notes that state some of an order's five
 * fields in the customer's words, and the normalised record a careful clerk extracts from each. Schema (`FIELDS`, in
 * record order): `country`, `payment`, `delivery`, `size` (strings, each from a closed value set) and `items` (a JSON
 * number, 1–9). The note never names the value itself: it uses one of the value's *cue words* (`ships to lyon` →
 * `"country":"france"`, `paid by visa` → `"payment":"card"`, `qty seven` → `"items":7`), so extracting is normalising
 * (entity normalisation, slot filling), not copying — a from-scratch 2 × 96 model learns word → label mappings (see
 * the classify env) but did not learn to copy a value word from the prompt in 500 SFT steps (README, "Measured").
 * A note states each field with probability 0.6 (at least two), each in one of two phrasings, in a seeded order:
 * `order note : ships to lyon , qty seven , paid by visa .` → `{"country":"france","payment":"card","items":7}`. A
 * field the note does not state is absent from the record: writing it is a hallucinated field. Task kind of EasyR1's
 * information-extraction examples, generated (no data set to download).
 */
import type { Task } from "../../core/types.ts";
import { drawSplit, fnv1a, taskCount, worldStream } from "../../env/world.ts";

/** The schema's fields, in record order. */
export const FIELDS = ["country", "payment", "delivery", "size", "items"] as const;
/** A field name. */
export type Field = (typeof FIELDS)[number];
/** A string field. */
export type TextField = Exclude<Field, "items">;
/** An extracted record: string fields, and `items` a number. */
export type OrderRecord = Partial<Record<TextField, string>> & { items?: number };

/** Each string field's values and each value's pool of cue words (a world keeps `CUES_PER_VALUE` of each pool). */
export const CUE_POOL: Readonly<Record<TextField, Readonly<Record<string, readonly string[]>>>> = {
  country: { france: ["lyon", "paris", "nice"], spain: ["madrid", "seville", "bilbao"], italy: ["turin", "rome", "milan"], norway: ["oslo", "bergen", "tromso"] },
  payment: { card: ["visa", "mastercard", "amex"], cash: ["coins", "banknotes", "cash"], transfer: ["wire", "iban", "transfer"], voucher: ["coupon", "giftcard", "voucher"] },
  delivery: { express: ["express", "urgent", "rush"], standard: ["standard", "normal", "slow"], pickup: ["pickup", "collect", "locker"] },
  size: { small: ["small", "mini", "compact"], medium: ["medium", "midsize", "average"], large: ["large", "big", "jumbo"] },
};
/** The number words of `items` (index + 1 is the value). */
export const NUMBER_WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"] as const;
/** Cue words per value in one world. */
export const CUES_PER_VALUE = 2;

/** The two phrasings of each field in a note (`{}` is the cue word). */
export const FIELD_PHRASES: Readonly<Record<Field, readonly [string, string]>> = {
  country: ["ships to {}", "deliver in {}"],
  payment: ["paid by {}", "pays with {}"],
  delivery: ["{} delivery", "sent {}"],
  size: ["size {}", "a {} one"],
  items: ["{} items", "qty {}"],
};

/** A world: its seed and, per string field, each value's cue words. */
export interface ExtractWorld {
  seed: number;
  cues: Record<TextField, Record<string, string[]>>;
}

/** What a note is (`Task.data`): the gold record, the note's text, the fields it states (text order) and their cue words. */
export interface OrderNote {
  record: OrderRecord;
  text: string;
  order: Field[];
  cues: Partial<Record<Field, string>>;
}

/** The values of a string field, in pool order. */
export function fieldValues(f: TextField): string[] {
  return Object.keys(CUE_POOL[f]);
}

/**
 * The world of `seed`: `CUES_PER_VALUE` cue words per value drawn from `CUE_POOL` (pool order).
 * @throws Error when `seed` is not an integer
 */
export function buildExtractWorld(seed: number): ExtractWorld {
  if (!Number.isInteger(seed)) throw new Error(`extract world: seed must be an integer, got ${seed}`);
  const rng = worldStream(seed, "cues");
  const cues = {} as ExtractWorld["cues"];
  for (const f of ["country", "payment", "delivery", "size"] as const) {
    cues[f] = {};
    for (const [v, pool] of Object.entries(CUE_POOL[f])) {
      const keep = new Set(rng.shuffle(pool.map((_, i) => i)).slice(0, CUES_PER_VALUE));
      cues[f][v] = pool.filter((_, i) => keep.has(i));
    }
  }
  return { seed, cues };
}

/** The value a cue word stands for in `world` (`items`: a number word's number), or undefined. */
export function valueOfCue(world: ExtractWorld, field: Field, word: string): string | number | undefined {
  if (field === "items") {
    const i = (NUMBER_WORDS as readonly string[]).indexOf(word);
    return i < 0 ? undefined : i + 1;
  }
  return Object.entries(world.cues[field]).find(([, ws]) => ws.includes(word))?.[0];
}

/**
 * The record's JSON as a careful clerk writes it: compact (`JSON.stringify`), schema order, `items` a number
 * (`{"country":"france","items":7}`: 3 word tokens per field — `","`, the key, `":"` — plus the value).
 */
export function recordJson(r: OrderRecord): string {
  return JSON.stringify(Object.fromEntries(FIELDS.filter((f) => r[f] !== undefined).map((f) => [f, r[f]])));
}

/**
 * The tasks of `world`: distinct notes; a note is held out when its (country cue, payment cue) pair — or, without both,
 * its record — hashes into the test fifth, so a held-out note is an unseen combination of seen words.
 * @throws Error when the counts are out of range (`numTest` in [4, 400], `numTrain` in [10, 4000])
 */
export function extractTasks(world: ExtractWorld, numTest = 120, numTrain = 1500): { train: Task<OrderNote>[]; test: Task<OrderNote>[] } {
  taskCount("numTestTasks", numTest, [4, 400]);
  taskCount("numTrainTasks", numTrain, [10, 4000]);
  const rng = worldStream(world.seed, "notes");
  const make = (): { note: OrderNote; held: boolean } => {
    let present: Field[] = [];
    while (present.length < 2) present = FIELDS.filter(() => rng.next() < 0.6);
    const record: OrderRecord = {};
    const cues: OrderNote["cues"] = {};
    for (const f of present) {
      if (f === "items") {
        record.items = 1 + rng.int(9);
        cues.items = NUMBER_WORDS[record.items - 1];
      } else {
        const v = rng.pick(fieldValues(f));
        record[f] = v;
        cues[f] = rng.pick(world.cues[f][v]);
      }
    }
    const order = rng.shuffle(present);
    const text = `order note : ${order.map((f) => FIELD_PHRASES[f][rng.int(2)].replace("{}", cues[f]!)).join(" , ")} .`;
    const key = cues.country !== undefined && cues.payment !== undefined ? `${cues.country}|${cues.payment}` : recordJson(record);
    return { note: { record, text, order, cues }, held: fnv1a(`${world.seed}|${key}`) % 5 === 0 };
  };
  return drawSplit(numTrain, numTest, () => {
    const { note, held } = make();
    const task = (split: "train" | "test", i: number): Task<OrderNote> => ({ id: `extract:${split}:${i}`, question: note.text, answers: [recordJson(note.record)], kind: "extract", data: note, meta: { fields: String(note.order.length) } });
    return { held, signature: note.text, task };
  });
}
