/**
 * Tokenizers. The embedded policy uses a word-level vocabulary built from its world's texts, stored as a standard
 * Hugging Face `tokenizer.json` (a WordPiece model whose vocabulary holds whole words only, so every word is one
 * token and an unseen word is `[UNK]`) and run by the maintained `@huggingface/tokenizers` library. Real models'
 * tokenizer folders (`tokenizer.json` + `tokenizer_config.json`, e.g. Qwen3's byte-level BPE and chat template) are
 * loaded by `HfTokenizer` in `./hf/tokenizer.ts`, which implements the same `Tokenizer` interface.
 *
 * Pipeline: NFD → strip accents → lowercase; split on whitespace and punctuation (`\w+|[^\w\s]+`), then every digit
 * alone (numbers become digit sequences, keeping the vocabulary small); protocol tags and `\n` are added tokens.
 */
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import type { AddedToken, Tokenizer } from "../core/tokenizer.ts";
import { PROTOCOL_TAGS } from "../protocol/searchR1.ts";

const UNK = "[UNK]";
const PAD = "<pad>";
const BOS = "<bos>";
const SPECIALS = [UNK, PAD, BOS, ...PROTOCOL_TAGS];

/** A Hugging Face `tokenizer.json` document of the embedded word-level tokenizer (the fields this project writes and reads). */
export interface TokenizerJson {
  version: string;
  added_tokens: AddedToken[];
  normalizer: unknown;
  pre_tokenizer: unknown;
  post_processor: null;
  decoder: unknown;
  model: { type: "WordPiece"; unk_token: string; continuing_subword_prefix: string; max_input_chars_per_word: number; vocab: Record<string, number> };
}

/**
 * An `added_tokens` entry with the flags Hugging Face tokenizers give a token added by default (`AddedToken(content,
 * special)`: not single-word, no strip, not normalised), so it is matched exactly as written. Key order is
 * `tokenizer.json`'s.
 */
export function addedToken(id: number, content: string, special: boolean): AddedToken {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special };
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Splits text the way the tokenizer's pre-tokenizer does (used to collect the vocabulary). */
function preTokenize(text: string, specials: readonly string[]): string[] {
  const out: string[] = [];
  // Added tokens (protocol tags, whole fixed prompts) and newlines are matched in the raw text, as the tokenizer
  // matches them before normalising: cut them out first, longest first so a token containing another is matched
  // whole; then normalise and split the rest.
  const tags = [...specials].sort((a, b) => b.length - a.length).map(escapeRe);
  const parts = text.split(new RegExp(`(${[...tags, "\\n"].join("|")})`));
  for (const raw of parts) {
    if (raw === "" || specials.includes(raw) || raw === "\n") continue;
    const part = raw.normalize("NFD").replace(/\p{M}/gu, "").toLowerCase();
    for (const m of part.matchAll(/\w+|[^\w\s]+/gu)) {
      for (const piece of m[0].split(/(\d)/)) if (piece !== "") out.push(piece);
    }
  }
  return out;
}

/** A word-level tokenizer backed by `@huggingface/tokenizers`. */
export class WordTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bos: number;
  readonly pad: number;
  private readonly hf: HfTokenizer;
  private readonly idToToken: string[];

  /** @throws Error when the document lacks the special tokens this project needs */
  constructor(private readonly json: TokenizerJson) {
    this.hf = new HfTokenizer(json, {});
    const vocab = json.model.vocab;
    this.vocabSize = Object.keys(vocab).length;
    this.idToToken = new Array<string>(this.vocabSize);
    for (const [tok, id] of Object.entries(vocab)) this.idToToken[id] = tok;
    for (const s of SPECIALS) {
      if (!(s in vocab)) throw new Error(`tokenizer.json: missing special token ${JSON.stringify(s)} in model.vocab`);
    }
    this.bos = vocab[BOS];
    this.pad = vocab[PAD];
  }

  /**
   * Builds the vocabulary from every text the world can show the policy, plus digits 0-9 and the protocol tags.
   * Token ids are assigned specials first, then words sorted by first appearance — deterministic for the same texts.
   * `protocolTokens`: further strings kept whole as single tokens, given ids right after `\n` and the digits, matched
   * in the raw text and written as they are (never lower-cased): a protocol's tags (hermes' `<|im_start|>`,
   * `<tool_call>`; `Protocol.specialTokens`) and an env's fixed system prompts (`RecipeInstance.fixedPrompts`: a
   * model trained from scratch learns the tool contract from its demonstrations, so hundreds of constant prompt
   * tokens would only cost compute; the text itself is unchanged, and a real model's tokenizer reads all of it).
   * With none, the vocabulary is exactly the Search-R1 one of earlier versions.
   */
  static fromTexts(texts: Iterable<string>, protocolTokens: readonly string[] = []): WordTokenizer {
    const vocab: Record<string, number> = {};
    const add = (t: string) => {
      if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
    };
    SPECIALS.forEach(add);
    add("\n");
    for (let d = 0; d <= 9; d++) add(String(d));
    const extra = protocolTokens.filter((t) => !(SPECIALS as readonly string[]).includes(t));
    extra.forEach(add);
    const specials = [...SPECIALS, ...extra];
    for (const text of texts) for (const w of preTokenize(text, specials)) add(w);
    const addedSpecial = (content: string, special: boolean) => addedToken(vocab[content], content, special);
    return new WordTokenizer({
      version: "1.0",
      added_tokens: [...SPECIALS.map((s) => addedSpecial(s, true)), addedSpecial("\n", false), ...extra.map((s) => addedSpecial(s, true))],
      normalizer: { type: "Sequence", normalizers: [{ type: "NFD" }, { type: "StripAccents" }, { type: "Lowercase" }] },
      pre_tokenizer: { type: "Sequence", pretokenizers: [{ type: "Whitespace" }, { type: "Digits", individual_digits: true }] },
      post_processor: null,
      decoder: { type: "WordPiece", prefix: "##", cleanup: false },
      model: { type: "WordPiece", unk_token: UNK, continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab },
    });
  }

  encode(text: string): number[] {
    return this.hf.encode(text, { add_special_tokens: false }).ids;
  }

  promptTokens(text: string): number[] {
    return [this.bos, ...this.encode(text)];
  }

  decode(ids: readonly number[]): string {
    // Joined by hand: word-level tokens need no merge rules, and this keeps `\n` and tags exactly as tokens.
    // Tokens are joined by single spaces, none next to a `\n` token (a multi-line added token keeps its own text).
    let out = "";
    let prev: string | undefined;
    for (const id of ids) {
      const tok = this.idToToken[id];
      if (tok === undefined) throw new Error(`tokenizer: id ${id} outside the vocabulary [0, ${this.vocabSize})`);
      if (tok === PAD || tok === BOS) continue;
      if (prev !== undefined && prev !== "\n" && tok !== "\n") out += " ";
      out += tok;
      prev = tok;
    }
    return out;
  }

  id(token: string): number {
    const id = this.json.model.vocab[token];
    if (id === undefined) throw new Error(`tokenizer: token ${JSON.stringify(token)} is not in the vocabulary`);
    return id;
  }

  toJSON(): TokenizerJson {
    return this.json;
  }
}
