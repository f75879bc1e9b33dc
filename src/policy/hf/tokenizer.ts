/**
 * Client-side tokenisation for real models: a Hugging Face model folder's `tokenizer.json` (run by the maintained
 * `@huggingface/tokenizers`) and its chat template (`tokenizer_config.json` `chat_template`, or `chat_template.jinja`,
 * rendered by `@huggingface/jinja`). With it the RL loop tokenises prompts and observations on the client, sends token
 * ids to a training API (Tinker) and reads token ids back, so the tokens trained on are exactly the tokens sampled.
 *
 * Conventions follow transformers' `PreTrainedTokenizerFast` / `apply_chat_template`: the template is rendered with
 * `messages`, `add_generation_prompt`, `tools` (when given), extra keyword variables such as `enable_thinking`, and the
 * special-token strings (`bos_token`, `eos_token`, `pad_token`); the rendered text is then encoded without adding
 * special tokens (the template writes them itself). Sources: transformers `tokenization_utils_base.py`
 * (`apply_chat_template`), the HF `tokenizer.json` / `tokenizer_config.json` formats, Qwen2.5/Qwen3 model folders,
 * Search-R1 (`apply_chat_template(..., add_generation_prompt=True)` on the first prompt).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { Tokenizer as HfLibTokenizer } from "@huggingface/tokenizers";
import type { Tokenizer, TokenizerJsonDocument } from "../../core/tokenizer.ts";

/** One tool call of an assistant message (OpenAI / transformers shape; `arguments` an object or a JSON string). */
export interface ChatToolCall {
  type?: "function";
  id?: string;
  function: { name: string; arguments: Record<string, unknown> | string };
}

/** A chat message as chat templates read it. `role` is usually system | user | assistant | tool. */
export interface ChatMessage {
  role: string;
  content: string;
  /** Assistant tool calls, rendered by templates that support tools. */
  tool_calls?: ChatToolCall[];
  /** Name of the tool a `tool` message answers (some templates print it). */
  name?: string;
  /** Qwen3 templates read an assistant's reasoning from here when given. */
  reasoning_content?: string;
}

/** A tool declaration in the JSON-schema form templates print in their tools section (`{type: 'function', function}`). */
export interface ChatToolSpec {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** Options of `applyChatTemplate`. */
export interface ChatTemplateOptions {
  /** Append the assistant header so the model writes the next turn (transformers' `add_generation_prompt`). */
  addGenerationPrompt?: boolean;
  /** Tools to declare (the template's `tools` variable); omitted or empty = no tools section. */
  tools?: readonly ChatToolSpec[];
  /**
   * Qwen3's `enable_thinking` template variable: `false` writes an empty `<think>\n\n</think>\n\n` after the
   * generation prompt; undefined leaves it undefined, so the template's default applies (Qwen3: thinking on).
   */
  enableThinking?: boolean;
  /** Further template variables (transformers' `**kwargs` of `apply_chat_template`). */
  extra?: Record<string, unknown>;
}

/** Options of `HfTokenizer.fromDir`. */
export interface HfTokenizerOptions {
  /** `enableThinking` used by `promptTokens` (default undefined: the template's default). */
  enableThinking?: boolean;
  /** Name of the chat template to use when `chat_template` is a list of named templates (default `"default"`). */
  templateName?: string;
}

/** The parsed documents of a model folder that `HfTokenizer` is built from (`fromDir` reads them). */
export interface HfTokenizerFiles {
  /** The parsed `tokenizer.json`. */
  json: TokenizerJsonDocument;
  /** The parsed `tokenizer_config.json`, or undefined when the folder has none. */
  config: unknown;
  /** The folder the files came from (named in errors). */
  source: string;
  /** Text of `chat_template.jinja`, which takes precedence over `chat_template` in the config. */
  templateFile?: string;
  /** The parsed `generation_config.json`, or undefined. */
  generationConfig?: unknown;
}

/** What `HfTokenizer` reads from `tokenizer_config.json` (all optional). */
interface TokenizerConfigFields {
  chatTemplate?: string | Record<string, string>;
  bosToken?: string | null;
  eosToken?: string | null;
  padToken?: string | null;
  addBosToken?: boolean;
}

/** Reads a JSON file. @throws Error naming the file when it is missing (if `required`) or not valid JSON */
function readJson(path: string, required: boolean): unknown {
  if (!existsSync(path)) {
    if (required) throw new Error(`HfTokenizer: ${path} not found (a model folder needs tokenizer.json)`);
    return undefined;
  }
  const text = readFileSync(path, "utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`HfTokenizer: ${path} is not valid JSON (${(err as Error).message})`);
  }
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/**
 * A special-token field of `tokenizer_config.json`: a string, an `AddedToken` object `{content, …}`, or null.
 * @throws Error naming the file and field otherwise
 */
function tokenField(cfg: Record<string, unknown>, field: string, file: string): string | null | undefined {
  const v = cfg[field];
  if (v === undefined || v === null || typeof v === "string") return v;
  if (isRecord(v) && typeof v.content === "string") return v.content;
  throw new Error(`HfTokenizer: ${file}: ${field} must be a string, {"content": string} or null, got ${JSON.stringify(v)}`);
}

/**
 * Parses the fields of `tokenizer_config.json` this loader uses.
 * @throws Error naming the file and field when a field has the wrong shape
 */
function parseConfig(raw: unknown, file: string): TokenizerConfigFields {
  if (raw === undefined) return {};
  if (!isRecord(raw)) throw new Error(`HfTokenizer: ${file} must hold a JSON object, got ${JSON.stringify(raw)?.slice(0, 80)}`);
  const out: TokenizerConfigFields = {
    bosToken: tokenField(raw, "bos_token", file),
    eosToken: tokenField(raw, "eos_token", file),
    padToken: tokenField(raw, "pad_token", file),
  };
  const ct = raw.chat_template;
  if (typeof ct === "string") out.chatTemplate = ct;
  else if (Array.isArray(ct)) {
    const named: Record<string, string> = {};
    for (const entry of ct) {
      if (!isRecord(entry) || typeof entry.name !== "string" || typeof entry.template !== "string") {
        throw new Error(`HfTokenizer: ${file}: chat_template list entries must be {"name": string, "template": string}, got ${JSON.stringify(entry)?.slice(0, 80)}`);
      }
      named[entry.name] = entry.template;
    }
    out.chatTemplate = named;
  } else if (ct !== undefined && ct !== null) {
    throw new Error(`HfTokenizer: ${file}: chat_template must be a string or a list of {"name", "template"}, got ${typeof ct}`);
  }
  const abt = raw.add_bos_token;
  if (typeof abt === "boolean") out.addBosToken = abt;
  else if (abt !== undefined && abt !== null) throw new Error(`HfTokenizer: ${file}: add_bos_token must be a boolean, got ${JSON.stringify(abt)}`);
  return out;
}

/**
 * A real model's tokenizer (byte-level BPE, SentencePiece-BPE, WordPiece… whatever `tokenizer.json` describes),
 * with its chat template. Implements the rollout's `Tokenizer`:
 * - `encode(text)` `[tokens]`: no BOS/EOS added; special-token strings in the text are matched as their single ids
 *   (transformers' default, `split_special_tokens=false`);
 * - `decode(ids)`: the library's decoder with `clean_up_tokenization_spaces` off and special tokens kept, so byte-level
 *   BPE round-trips exactly (`decode(encode(s)) === s` for NFC text; a tokenizer with an NFC normalizer, such as
 *   Qwen's, gives back the NFC form of other text). A turn cut inside a multi-byte character decodes the partial
 *   bytes as U+FFFD (like `errors="replace"`);
 * - `promptTokens(text)` `[prompt]`: the chat template of `[{role: 'user', content: text}]` with the generation prompt,
 *   or `[bos?, …encode(text)]` when the folder has no template;
 * - `bos`: the BOS id, -1 when the model has none (Qwen); `pad`: the pad token's id, else the first EOS id, else -1.
 */
export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bos: number;
  readonly pad: number;
  /**
   * Ids that end a generation: the `eos_token` of `tokenizer_config.json` first, then `generation_config.json`'s
   * `eos_token_id` (a number or a list) — e.g. Qwen3 `[<|im_end|>, <|endoftext|>]`. Deduplicated, in that order.
   */
  readonly eosTokenIds: readonly number[];
  /** Whether `promptTokens` puts `bos` first when there is no chat template. */
  readonly addsBos: boolean;
  private readonly hf: HfLibTokenizer;
  private readonly templates: ReadonlyMap<string, Template>;
  private readonly specialTokenVars: Record<string, string>;
  private readonly json: TokenizerJsonDocument;
  private readonly source: string;
  private readonly files: HfTokenizerFiles;

  /**
   * @param files the parsed documents of the model folder (see `HfTokenizerFiles`)
   * @param options see `HfTokenizerOptions`
   * @throws Error naming the file and field when the documents are malformed, a special token is not in the
   *   vocabulary, or a chat template does not parse
   */
  constructor(
    files: HfTokenizerFiles,
    private readonly options: HfTokenizerOptions = {},
  ) {
    const { json, config, source, templateFile, generationConfig } = files;
    this.files = files;
    this.json = json;
    this.source = source;
    const tokFile = join(source, "tokenizer.json");
    const cfgFile = join(source, "tokenizer_config.json");
    if (!isRecord(json) || !isRecord(json.model) || typeof json.model.type !== "string" || !Array.isArray(json.added_tokens)) {
      throw new Error(`HfTokenizer: ${tokFile} must be a tokenizer.json object with "model": {"type", …} and "added_tokens": [...]`);
    }
    const cfg = parseConfig(config, cfgFile);
    try {
      // Decoding must give back the sampled text exactly: no clean-up of spaces before punctuation.
      this.hf = new HfLibTokenizer(json, { clean_up_tokenization_spaces: false });
    } catch (err) {
      throw new Error(`HfTokenizer: ${tokFile} could not be loaded by @huggingface/tokenizers (${(err as Error).message})`);
    }
    let maxId = -1;
    for (const id of this.hf.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;

    const idOf = (tok: string | null | undefined, field: string): number => {
      if (tok === undefined || tok === null) return -1;
      const id = this.hf.token_to_id(tok);
      if (id === undefined) throw new Error(`HfTokenizer: ${cfgFile}: ${field} ${JSON.stringify(tok)} is not a token of ${tokFile}`);
      return id;
    };
    this.bos = idOf(cfg.bosToken, "bos_token");
    const eos = idOf(cfg.eosToken, "eos_token");
    const eosIds = eos >= 0 ? [eos] : [];
    if (generationConfig !== undefined) {
      const g = isRecord(generationConfig) ? generationConfig.eos_token_id : undefined;
      const list = typeof g === "number" ? [g] : Array.isArray(g) ? g : [];
      for (const id of list) {
        if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= this.vocabSize) {
          throw new Error(`HfTokenizer: ${join(source, "generation_config.json")}: eos_token_id ${JSON.stringify(id)} is not an id in [0, ${this.vocabSize})`);
        }
        if (!eosIds.includes(id as number)) eosIds.push(id as number);
      }
    }
    this.eosTokenIds = eosIds;
    const pad = idOf(cfg.padToken, "pad_token");
    this.pad = pad >= 0 ? pad : (eosIds[0] ?? -1);
    // BOS: an explicit add_bos_token wins; otherwise whether the tokenizer.json post-processor puts BOS first
    // (Llama 3's TemplateProcessing does, Qwen's ByteLevel does not).
    this.addsBos =
      this.bos >= 0 && (cfg.addBosToken ?? this.hf.encode("a", { add_special_tokens: true }).ids[0] === this.bos);

    this.specialTokenVars = {};
    for (const [name, tok] of [["bos_token", cfg.bosToken], ["eos_token", cfg.eosToken], ["pad_token", cfg.padToken]] as const) {
      if (typeof tok === "string") this.specialTokenVars[name] = tok;
    }
    const sources: Record<string, string> =
      templateFile !== undefined ? { default: templateFile } : typeof cfg.chatTemplate === "string" ? { default: cfg.chatTemplate } : (cfg.chatTemplate ?? {});
    const templates = new Map<string, Template>();
    for (const [name, text] of Object.entries(sources)) {
      try {
        templates.set(name, new Template(text));
      } catch (err) {
        const where = templateFile !== undefined ? join(source, "chat_template.jinja") : `${cfgFile}: chat_template ${JSON.stringify(name)}`;
        throw new Error(`HfTokenizer: ${where} does not parse as a Jinja template (${(err as Error).message})`);
      }
    }
    this.templates = templates;
  }

  /**
   * Loads a model folder: `tokenizer.json` (required), `tokenizer_config.json`, `chat_template.jinja` and
   * `generation_config.json` (optional). A Hugging Face download of e.g. `Qwen/Qwen3-8B` has all of them.
   * @throws Error naming the path when `tokenizer.json` is missing, or the file and field when a file is malformed
   */
  static fromDir(dir: string, options: HfTokenizerOptions = {}): HfTokenizer {
    const json = readJson(join(dir, "tokenizer.json"), true) as TokenizerJsonDocument;
    const config = readJson(join(dir, "tokenizer_config.json"), false);
    const jinjaPath = join(dir, "chat_template.jinja");
    const templateFile = existsSync(jinjaPath) ? readFileSync(jinjaPath, "utf8") : undefined;
    const generationConfig = readJson(join(dir, "generation_config.json"), false);
    return new HfTokenizer({ json, config, source: dir, templateFile, generationConfig }, options);
  }

  /** The folder the tokenizer files were read from (checkpoints copy its optional files next to `tokenizer.json`). */
  get sourceDir(): string {
    return this.source;
  }

  /** Whether the folder has a chat template (the named one, or `"default"`). */
  get hasChatTemplate(): boolean {
    return this.templates.size > 0;
  }

  encode(text: string): number[] {
    return this.hf.encode(text, { add_special_tokens: false }).ids;
  }

  promptTokens(text: string, options: { rendered?: boolean } = {}): number[] {
    // A chat protocol's prompt is the template's own rendering already: encode it, never wrap it twice.
    if (options.rendered === true) return this.encode(text);
    if (this.hasChatTemplate) {
      return this.chatTokens([{ role: "user", content: text }], {
        addGenerationPrompt: true,
        ...(this.options.enableThinking === undefined ? {} : { enableThinking: this.options.enableThinking }),
      });
    }
    const ids = this.encode(text);
    return this.addsBos ? [this.bos, ...ids] : ids;
  }

  decode(ids: readonly number[]): string {
    if (ids.length === 0) return "";
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize || this.hf.id_to_token(id) === undefined) {
        throw new Error(`HfTokenizer: id ${id} is not a token of ${join(this.source, "tokenizer.json")} (ids in [0, ${this.vocabSize}))`);
      }
    }
    return this.hf.decode(ids.slice(), { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /**
   * Id of a token as the vocabulary spells it: an added/special token (`<|im_end|>`, `<think>`) or a single vocabulary
   * entry (byte-level entries spell a leading space `Ġ`; use `singleTokenId` for plain text).
   * @throws Error naming the token (and how many tokens the text encodes to) when it is not one vocabulary entry
   */
  id(token: string): number {
    const id = this.hf.token_to_id(token);
    if (id === undefined) {
      const n = this.encode(token).length;
      throw new Error(
        `HfTokenizer: token ${JSON.stringify(token)} is not in the vocabulary of ${join(this.source, "tokenizer.json")} (as text it encodes to ${n} tokens; stop on it as a string)`,
      );
    }
    return id;
  }

  /**
   * The id of `text` when it encodes to exactly one token, else undefined — to turn stop strings into stop token ids
   * where possible (`</answer>` is one token of the embedded tokenizer but several of Qwen's).
   */
  singleTokenId(text: string): number | undefined {
    const ids = this.encode(text);
    return ids.length === 1 ? ids[0] : undefined;
  }

  /**
   * Renders messages with the chat template, as transformers' `apply_chat_template(..., tokenize=False)`.
   * Picks the template named by `options.templateName` (default `"default"`; a `"tool_use"` template when tools are
   * given and it exists, as transformers does).
   * @returns the prompt text
   * @throws Error when the folder has no chat template, the named template is missing, or the template raises
   *   (e.g. `raise_exception` on an unsupported role)
   */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const template = this.pickTemplate(options.tools !== undefined && options.tools.length > 0);
    const vars: Record<string, unknown> = {
      ...this.specialTokenVars,
      ...options.extra,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: options.addGenerationPrompt ?? false,
    };
    if (options.tools !== undefined && options.tools.length > 0) vars.tools = options.tools;
    if (options.enableThinking !== undefined) vars.enable_thinking = options.enableThinking;
    try {
      return template.render(vars);
    } catch (err) {
      throw new Error(`HfTokenizer: chat template of ${this.source} failed to render (${(err as Error).message})`);
    }
  }

  /**
   * `encode(applyChatTemplate(messages, options))` `[tokens]` — the template writes the special tokens itself, so
   * nothing is added (transformers' `apply_chat_template(..., tokenize=True)`).
   */
  chatTokens(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): number[] {
    return this.encode(this.applyChatTemplate(messages, options));
  }

  toJSON(): TokenizerJsonDocument {
    return this.json;
  }

  /**
   * A copy with each of `contents` added as one token, ids `vocabSize`, `vocabSize + 1`, … in order: an `added_tokens`
   * entry (`special: true`, `normalized: false`, no stripping — what Hugging Face's `add_special_tokens` writes) in a
   * copy of `tokenizer.json`, so the copy is an ordinary tokenizer any HF runtime loads; the rest of the document, the
   * chat template and the config files are this one's. Added tokens are matched in the raw text before the
   * pre-tokenizer runs (the longest at each position, as `@huggingface/tokenizers`' trie and the Rust crate's
   * Aho-Corasick both do), so a text holding a content encodes it as its one id, whatever tags or lines it holds, and
   * `decode` gives the content back byte for byte.
   * @throws Error when a content is empty, given twice, or already a token of this vocabulary
   */
  withAddedTokens(contents: readonly string[]): HfTokenizer {
    const added = contents.map((content, i) => {
      if (content === "" || contents.indexOf(content) !== i || this.hf.token_to_id(content) !== undefined) {
        throw new Error(`HfTokenizer.withAddedTokens: ${JSON.stringify(content.slice(0, 60))} is empty, repeated or already a token of ${join(this.source, "tokenizer.json")}`);
      }
      return { id: this.vocabSize + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
    });
    const json = { ...this.json, added_tokens: [...this.json.added_tokens, ...added] };
    return new HfTokenizer({ ...this.files, json }, this.options);
  }

  private pickTemplate(withTools: boolean): Template {
    if (this.templates.size === 0) {
      throw new Error(
        `HfTokenizer: ${this.source} has no chat template (expected "chat_template" in tokenizer_config.json or a chat_template.jinja file)`,
      );
    }
    const wanted = this.options.templateName ?? (withTools && this.templates.has("tool_use") ? "tool_use" : "default");
    const t = this.templates.get(wanted) ?? (this.templates.size === 1 && this.options.templateName === undefined ? [...this.templates.values()][0] : undefined);
    if (t === undefined) {
      throw new Error(`HfTokenizer: ${join(this.source, "tokenizer_config.json")}: no chat template named ${JSON.stringify(wanted)} (have ${[...this.templates.keys()].join(", ")})`);
    }
    return t;
  }
}
