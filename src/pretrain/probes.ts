/**
 * Reading probes (issue 32 part 5): can a model read what a tool returned and use it? Held-out generated episodes
 * (seeds no pretraining step draws), each cut just before one of the policy's calls; the model writes that call
 * greedily and it counts only when it parses to exactly the expected call.
 * - `copy`: the call must copy an id of a given length (1–12 tokens) from a tool response `distance` turns back
 *   (1–4), past lists of other records' ids in between (corpus skill `recall`); exact rate per (length, distance).
 * - `select`: a list of 2–8 records came back; the call must name the one the request asks for (lowest, highest,
 *   first with a field ≥ k, first with a yes/no flag set; corpus skill `select`); exact rate per list length.
 * The model is anything with the sampling contract (`SamplingClient`) and its tokenizer.
 */
import { Rng } from "../core/rng.ts";
import type { SamplingClient } from "../core/sampling.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import type { Action } from "../core/types.ts";
import type { Protocol } from "../protocol/types.ts";
import { generateEpisode } from "./corpus.ts";

/** Id lengths (tokens) and distances (turns) the copy probe covers, and the select probe's list lengths. */
export const PROBE_ID_TOKENS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] as const;
export const PROBE_DISTANCES = [1, 2, 3, 4] as const;
export const PROBE_LIST_LENGTHS = [2, 3, 4, 5, 6, 7, 8] as const;

/** One probe: the context up to the probed call and the call expected there. */
export interface ProbeCase {
  kind: "copy" | "select";
  /** The episode's text before the probed turn (ends with the assistant header). */
  prefix: string;
  expected: Action;
  /** copy: the id's length in tokens and its distance in turns; select: the list's length. */
  idTokens?: number;
  distance?: number;
  listLength?: number;
  protocol: Protocol;
  tools: ReturnType<typeof generateEpisode>["tools"];
}

/** Seeds of probe episodes start here (pretraining draws seeds from `Rng.seed()`, uniform over 2³¹; collisions are negligible and the worlds random). */
const PROBE_SEED = 0x6a000000;

/** A random id whose encoding is exactly `n` tokens, in one of the corpus's formats (letters, optional dash, digits). */
function idOfLength(tokenizer: Tokenizer, rng: Rng, n: number): string {
  for (let attempt = 0; attempt < 10_000; attempt++) {
    const letters = rng.int(4);
    const digits = Math.max(0, n - letters - (rng.next() < 0.5 ? 1 : 0));
    let s = "";
    for (let i = 0; i < letters; i++) s += "abcdefghijklmnopqrstuvwxyz"[rng.int(26)];
    if (letters > 0 && digits > 0 && rng.next() < 0.3) s += "-";
    for (let i = 0; i < digits; i++) s += String(rng.int(10));
    if (rng.next() < 0.3) s = s.toUpperCase();
    if (s.length > 0 && tokenizer.encode(s).length === n) return s;
  }
  throw new Error(`reading probes: no id of ${n} tokens found with this tokenizer`);
}

function cut(ep: ReturnType<typeof generateEpisode>, turn: number): string {
  // segments: prompt, then (turn, observation?) pairs; the probed turn's text is the (turn+1)-th trained segment.
  let seen = -1;
  let text = "";
  for (const s of ep.segments) {
    if (s.train && ++seen === turn) return text;
    text += s.text;
  }
  throw new Error(`reading probes: episode has no turn ${turn}`);
}

/**
 * Draws probe episodes until one's prefix fits `maxPrefixTokens` (a longer one could not be answered within the
 * model's context); `make(k)` builds the k-th candidate.
 * @throws Error when 200 candidates in a row are too long
 */
function fitting(tokenizer: Tokenizer, maxPrefixTokens: number, next: () => number, make: (k: number) => ProbeCase): ProbeCase {
  for (let tries = 0; tries < 200; tries++) {
    const c = make(next());
    if (tokenizer.promptTokens(c.prefix, { rendered: true }).length <= maxPrefixTokens) return c;
  }
  throw new Error(`reading probes: no probe episode fits ${maxPrefixTokens} tokens`);
}

/**
 * The copy probe's cases: `perCell` per (id length, distance), in `protocol`, each prefix at most `maxPrefixTokens`
 * tokens (the model's context less the probed turn's budget).
 */
export function copyProbeCases(tokenizer: Tokenizer, protocol: Protocol, perCell: number, maxPrefixTokens: number, seed = 0): ProbeCase[] {
  const rng = new Rng(PROBE_SEED + seed);
  const out: ProbeCase[] = [];
  let k = 0;
  for (const n of PROBE_ID_TOKENS)
    for (const d of PROBE_DISTANCES)
      for (let i = 0; i < perCell; i++)
        out.push(
          fitting(tokenizer, maxPrefixTokens, () => k++, (j) => {
            const ep = generateEpisode(PROBE_SEED + seed * 100_000 + j, protocol, "recall", { distance: d, id: idOfLength(tokenizer, rng, n) });
            return { kind: "copy", prefix: cut(ep, ep.probeTurn!), expected: ep.actions[ep.probeTurn!], idTokens: n, distance: d, protocol, tools: ep.tools };
          }),
        );
  return out;
}

/** The select probe's cases: `perCell` per list length, in `protocol`, each prefix at most `maxPrefixTokens` tokens. */
export function selectProbeCases(tokenizer: Tokenizer, protocol: Protocol, perCell: number, maxPrefixTokens: number, seed = 0): ProbeCase[] {
  const out: ProbeCase[] = [];
  let k = 0;
  for (const m of PROBE_LIST_LENGTHS)
    for (let i = 0; i < perCell; i++)
      out.push(
        fitting(tokenizer, maxPrefixTokens, () => k++, (j) => {
          const ep = generateEpisode(PROBE_SEED + 50_000 + seed * 100_000 + j, protocol, "select", { listLength: m });
          return { kind: "select", prefix: cut(ep, ep.probeTurn!), expected: ep.actions[ep.probeTurn!], listLength: m, protocol, tools: ep.tools };
        }),
      );
  return out;
}

/** One probe's outcome. */
export interface ProbeResult {
  probe: ProbeCase;
  /** The turn the model wrote. */
  text: string;
  exact: boolean;
}

/**
 * Runs the probes greedily (temperature 0), all at once (the sampler batches them).
 * @param maxTokens the most tokens of a probed turn (default 96)
 */
export async function runProbes(client: SamplingClient, tokenizer: Tokenizer, cases: readonly ProbeCase[], maxTokens = 96): Promise<ProbeResult[]> {
  // Per protocol: stops that are one token end the sample; others (several tokens) cut its text after their first occurrence.
  const stopsOf = new Map<Protocol, { stop: number[]; strings: string[] }>();
  for (const p of new Set(cases.map((c) => c.protocol))) {
    const s = { stop: [] as number[], strings: [] as string[] };
    for (const text of p.stops) {
      const ids = tokenizer.encode(text);
      if (ids.length === 1) s.stop.push(ids[0]);
      else s.strings.push(text);
    }
    stopsOf.set(p, s);
  }
  return Promise.all(
    cases.map(async (c) => {
      const { stop, strings } = stopsOf.get(c.protocol)!;
      const [sample] = await client.sample(tokenizer.promptTokens(c.prefix, { rendered: true }), { n: 1, maxTokens, temperature: 0, stop, seed: 0 });
      let text = tokenizer.decode(sample.tokens);
      for (const s of strings) {
        const at = text.indexOf(s);
        if (at >= 0) text = text.slice(0, at + s.length);
      }
      const action = c.protocol.parse(text, { tools: c.tools });
      return { probe: c, text, exact: sameCall(action, c.expected) };
    }),
  );
}

/** JSON with object keys sorted (argument order does not matter to a tool). */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`;
  return JSON.stringify(v);
}

/** Whether `a` is the one tool call `expected` is: same tool name, same arguments (exact values). */
function sameCall(a: Action, expected: Action): boolean {
  if (a.type !== "tool_call" || expected.type !== "tool_call" || a.calls.length !== expected.calls.length) return false;
  return a.calls.every((c, i) => c.name === expected.calls[i].name && canonical(c.arguments) === canonical(expected.calls[i].arguments));
}

/** Exact rates: copy by `"<tokens>x<distance>"`, select by list length. */
export function probeRates(results: readonly ProbeResult[]): { copy: Record<string, number>; select: Record<string, number> } {
  const tally = (key: (r: ProbeResult) => string | undefined) => {
    const acc = new Map<string, [number, number]>();
    for (const r of results) {
      const k = key(r);
      if (k === undefined) continue;
      const a = acc.get(k) ?? [0, 0];
      a[0] += r.exact ? 1 : 0;
      a[1]++;
      acc.set(k, a);
    }
    return Object.fromEntries([...acc].map(([k, [x, n]]) => [k, x / n]));
  };
  return {
    copy: tally((r) => (r.probe.kind === "copy" ? `${r.probe.idTokens}x${r.probe.distance}` : undefined)),
    select: tally((r) => (r.probe.kind === "select" ? String(r.probe.listLength) : undefined)),
  };
}
