/**
 * The tokenizer boundary: what the rollout and the trainer need from any tokenizer (the embedded `WordTokenizer` of
 * `src/policy/tokenizer.ts`, a real model's `HfTokenizer` of `src/policy/hf/tokenizer.ts`), and the shape of the
 * Hugging Face `tokenizer.json` document a tokenizer is saved as.
 */

/**
 * What the rollout and the trainer need from any tokenizer (the embedded `WordTokenizer`, a real model's
 * `HfTokenizer`). Token ids are integers in `[0, vocabSize)`.
 */
export interface Tokenizer {
  /** Number of token ids the tokenizer knows (largest id + 1); a model's embedding table may have more rows. */
  readonly vocabSize: number;
  /**
   * Id of the beginning-of-sequence token, put before a prompt by `promptTokens` when the tokenizer adds one;
   * -1 when the model has none (Qwen2/Qwen3).
   */
  readonly bos: number;
  /** Id of the padding token (never trained on). */
  readonly pad: number;
  /**
   * Text → ids `[tokens]`, with no BOS/EOS added. Never throws. Word-level: unknown words map to the unknown token;
   * byte-level BPE: every string has an encoding, and special-token strings in the text become their single ids.
   * Must be a pure function of `text` for the tokenizer's lifetime, as must `promptTokens` (the rollout engine
   * remembers the ids of prompts and observations).
   */
  encode(text: string): number[];
  /**
   * An episode's first user prompt → the ids the policy sees before its first turn `[prompt]`: `[bos, …encode(text)]`
   * for the embedded word tokenizer; a chat model renders it through its chat template with the generation prompt
   * (as Search-R1 does with `apply_chat_template`), so later turns and observations are appended as plain text.
   * `options.rendered`: the text is already a whole chat rendering (a chat protocol's `prompt`, e.g. hermes'
   * `<|im_start|>system…<|im_start|>assistant\n`): a chat model encodes it as it is instead of wrapping it again;
   * the word tokenizer, which has no template, is unaffected.
   */
  promptTokens(text: string, options?: { rendered?: boolean }): number[];
  /**
   * Ids → text as the tokenizer decodes it: `WordTokenizer` joins words by single spaces (BOS/pad dropped, protocol
   * tags kept); a byte-level BPE tokenizer gives back the exact text (`decode(encode(s)) === s` for NFC text),
   * special tokens kept. `decode([])` is `''`.
   * @throws Error naming the id when an id is outside `[0, vocabSize)`
   */
  decode(ids: readonly number[]): string;
  /**
   * Id of an exact token string as the vocabulary spells it (a word, an added/special token such as `<|im_end|>`).
   * @throws Error naming the token when it is not in the vocabulary
   */
  id(token: string): number;
  /** The tokenizer as a `tokenizer.json` object, for checkpoints. */
  toJSON(): TokenizerJsonDocument;
}

/** One entry of a `tokenizer.json`'s `added_tokens` (Hugging Face tokenizers' `AddedToken`). */
export interface AddedToken {
  id: number;
  content: string;
  single_word: boolean;
  lstrip: boolean;
  rstrip: boolean;
  normalized: boolean;
  special: boolean;
}

/**
 * Any Hugging Face `tokenizer.json` document (WordPiece, BPE, …): the fields every one has. `TokenizerJson`
 * (src/policy/tokenizer.ts) is the word-level kind this project writes.
 */
export interface TokenizerJsonDocument {
  version: string;
  added_tokens: AddedToken[];
  normalizer: unknown;
  pre_tokenizer: unknown;
  post_processor: unknown;
  decoder: unknown;
  model: { type: string; [field: string]: unknown };
}
