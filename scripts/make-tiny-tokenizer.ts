/**
 * Writes the test fixture `test/fixtures/tiny-chatml/{tokenizer.json, tokenizer_config.json}`: a tiny byte-level BPE
 * tokenizer in the layout of Qwen2/Qwen3 model folders, so the Hugging Face tokenizer loader
 * (`src/policy/hf/tokenizer.ts`) is tested on the same kind of files a real model ships, without downloading one.
 *
 * - Model: byte-level BPE (GPT-2 / Qwen2 style): NFC normalizer; a `Split` pre-tokenizer with Qwen2's regex, then
 *   `ByteLevel` (no prefix space, no regex); `ByteLevel` decoder. 256 byte tokens (GPT-2's bytes→unicode map, ids in
 *   its order) + up to `MERGES` merges learnt from `TRAINING_TEXT` by the small BPE trainer below.
 * - Added tokens after the merges, as in Qwen3: `<|endoftext|>`, `<|im_start|>`, `<|im_end|>` (special),
 *   `<tool_call>`, `</tool_call>`, `<tool_response>`, `</tool_response>`, `<think>`, `</think>` (not special).
 * - `tokenizer_config.json`: Qwen3-like fields (`eos_token` `<|im_end|>`, `pad_token` `<|endoftext|>`,
 *   `bos_token` null, `add_bos_token` false) and a ChatML chat template written for this project that renders the
 *   Qwen2.5/Qwen3 conventions: system/user/assistant/tool roles, a `# Tools` system section with `<tools>` JSON lines,
 *   `<tool_call>` JSON in assistant turns, tool results as `<tool_response>` inside a user turn, the generation
 *   prompt `<|im_start|>assistant\n`, and `<think>\n\n</think>\n\n` after it when `enable_thinking` is false.
 *
 * The trainer is fixture tooling, not a runtime path. Output is deterministic (no clock, no randomness, ties broken
 * by string order): running the script twice gives byte-identical files, and `test/policy-hf-tokenizer.test.ts`
 * checks the committed files equal a fresh `makeTinyTokenizer()`.
 *
 * Usage: `node --import tsx scripts/make-tiny-tokenizer.ts [outDir]` (default `test/fixtures/tiny-chatml`).
 * Sources: GPT-2 `encoder.py` (`bytes_to_unicode`, BPE merges), HF tokenizers `tokenizer.json` format, Qwen2/Qwen3
 * `tokenizer.json` / `tokenizer_config.json` (pre-tokenizer regex, added tokens, ChatML chat template conventions).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { addedToken } from "../src/policy/tokenizer.ts";

/** Most BPE merges learnt (fewer when no pair occurs twice any more); vocabulary = 256 bytes + merges + added tokens. */
export const MERGES = 320;

/** Qwen2's pre-tokenizer regex, as written in its `tokenizer.json` (Oniguruma syntax: `(?i:…)`). */
export const QWEN2_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/**
 * The same regex for JavaScript: the inline case-insensitive group spelt out, `\s`/`\S` as Unicode White_Space
 * (the Rust regex meaning). Used by the trainer and by the tests' reference encoder.
 */
export const QWEN2_SPLIT_REGEX_JS =
  /(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\p{White_Space}\p{L}\p{N}]+[\r\n]*|\p{White_Space}*[\r\n]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+/gu;

/** Added tokens in id order after the BPE vocabulary: `[content, special]`. */
export const ADDED_TOKENS: ReadonlyArray<readonly [string, boolean]> = [
  ["<|endoftext|>", true],
  ["<|im_start|>", true],
  ["<|im_end|>", true],
  ["<tool_call>", false],
  ["</tool_call>", false],
  ["<tool_response>", false],
  ["</tool_response>", false],
  ["<think>", false],
  ["</think>", false],
];

/**
 * The chat template (Jinja, rendered with `trim_blocks` + `lstrip_blocks` as transformers does). Renders Qwen's
 * ChatML conventions (see the file doc); assistant reasoning before `</think>` is dropped from rendered history,
 * like Qwen3 does for turns before the last user message. Unknown roles raise.
 */
export const CHAT_TEMPLATE = [
  "{%- if tools %}",
  "    {{- '<|im_start|>system\\n' }}",
  "    {%- if messages[0].role == 'system' %}",
  "        {{- messages[0].content + '\\n\\n' }}",
  "    {%- endif %}",
  "    {{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}",
  "    {%- for tool in tools %}",
  "        {{- '\\n' }}",
  "        {{- tool | tojson }}",
  "    {%- endfor %}",
  "    {{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}",
  "{%- elif messages[0].role == 'system' %}",
  "    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
  "{%- endif %}",
  "{%- for message in messages %}",
  "    {%- if message.content is string %}",
  "        {%- set content = message.content %}",
  "    {%- else %}",
  "        {%- set content = '' %}",
  "    {%- endif %}",
  "    {%- if message.role == 'system' %}",
  "        {%- if not loop.first %}",
  "            {{- '<|im_start|>system\\n' + content + '<|im_end|>\\n' }}",
  "        {%- endif %}",
  "    {%- elif message.role == 'user' %}",
  "        {{- '<|im_start|>user\\n' + content + '<|im_end|>\\n' }}",
  "    {%- elif message.role == 'assistant' %}",
  "        {%- if '</think>' in content %}",
  "            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}",
  "        {%- endif %}",
  "        {{- '<|im_start|>assistant\\n' + content }}",
  "        {%- if message.tool_calls %}",
  "            {%- for tool_call in message.tool_calls %}",
  "                {%- if content or not loop.first %}",
  "                    {{- '\\n' }}",
  "                {%- endif %}",
  "                {%- if tool_call.function %}",
  "                    {%- set tool_call = tool_call.function %}",
  "                {%- endif %}",
  "                {{- '<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}",
  "                {%- if tool_call.arguments is string %}",
  "                    {{- tool_call.arguments }}",
  "                {%- else %}",
  "                    {{- tool_call.arguments | tojson }}",
  "                {%- endif %}",
  "                {{- '}\\n</tool_call>' }}",
  "            {%- endfor %}",
  "        {%- endif %}",
  "        {{- '<|im_end|>\\n' }}",
  "    {%- elif message.role == 'tool' %}",
  "        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}",
  "            {{- '<|im_start|>user' }}",
  "        {%- endif %}",
  "        {{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}",
  "        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}",
  "            {{- '<|im_end|>\\n' }}",
  "        {%- endif %}",
  "    {%- else %}",
  "        {{- raise_exception('unknown chat role: ' + message.role) }}",
  "    {%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}",
  "    {{- '<|im_start|>assistant\\n' }}",
  "    {%- if enable_thinking is defined and enable_thinking is false %}",
  "        {{- '<think>\\n\\n</think>\\n\\n' }}",
  "    {%- endif %}",
  "{%- endif %}",
].join("\n");

/**
 * The text the merges are learnt from: Search-R1 style turns, questions and passages, a little accented, CJK and
 * emoji text so multi-byte sequences get merges too. Changing it changes the fixture (regenerate and commit).
 */
export const TRAINING_TEXT = `Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information.
After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>.
You can search as many times as you want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>.
Question: What is the capital of France?
<think> I need to find the capital of France. </think>
<search> capital of France </search>
<information>Doc 1(Title: "Paris") Paris is the capital and most populous city of France. Doc 2(Title: "France") France is a country in Western Europe.</information>
<think> The capital of France is Paris. </think>
<answer> Paris </answer>
Question: Who wrote the novel that the film was based on?
<search> film based on the novel written by </search>
<information>Doc 1(Title: "Novel") The novel was written in 1925 and published the same year. Doc 2(Title: "Film") The film was released in 1974.</information>
<answer> F. Scott Fitzgerald </answer>
Question: In which year was the country's first university founded? The university was founded in 1088.
The river flows through the city and into the sea; the population of the city is 2,165,423 people.
Café, naïve, résumé, Zürich, São Paulo, Kraków, Ærøskøbing, señor, façade — they're the names we'll see.
北京是中国的首都。东京是日本的首都。首都的人口很多。
Emoji and symbols: 🙂 🚀 ✓ → € £ ¥ 🙂🚀
def search(query: str, top_k: int = 3) -> list:
    return index.search(query, top_k)
{"name": "search", "arguments": {"query": "capital of France", "top_k": 3}}
`;

/**
 * GPT-2's reversible byte → printable-unicode map (`bytes_to_unicode` in GPT-2's `encoder.py`).
 * @returns `[256]` characters indexed by byte, and the byte order GPT-2 vocabularies list them in
 */
export function bytesToUnicode(): { byteToChar: string[]; order: number[] } {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const byteToChar = new Array<string>(256);
  bs.forEach((b, i) => (byteToChar[b] = String.fromCodePoint(cs[i])));
  return { byteToChar, order: bs };
}

const BYTE_TO_CHAR = bytesToUnicode().byteToChar;

/** Text → byte-level symbols of each pre-token (NFC, Qwen2 split, UTF-8 bytes mapped by `bytesToUnicode`). */
export function byteLevelPieces(text: string): string[][] {
  const enc = new TextEncoder();
  return (text.normalize("NFC").match(QWEN2_SPLIT_REGEX_JS) ?? []).map((piece) =>
    Array.from(enc.encode(piece), (b) => BYTE_TO_CHAR[b]),
  );
}

/**
 * A small BPE trainer (fixture generation only): counts pre-token frequencies, then repeatedly merges the most
 * frequent adjacent pair, ties broken by the smaller `left`, then `right` (code-unit order). Stops after `count`
 * merges or when no pair occurs twice.
 * @returns merges in rank order `[merges]`, each `[left, right]`
 */
export function trainBpe(text: string, count: number): Array<[string, string]> {
  const freq = new Map<string, number>();
  for (const piece of byteLevelPieces(text)) {
    const key = piece.join("\u0000");
    freq.set(key, (freq.get(key) ?? 0) + 1);
  }
  // Sorted for determinism (Map order would also be, but this keeps it independent of the split order).
  const words = [...freq.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, f]) => ({ syms: k.split("\u0000"), f }));
  const merges: Array<[string, string]> = [];
  while (merges.length < count) {
    const pairs = new Map<string, number>();
    for (const { syms, f } of words) {
      for (let i = 0; i + 1 < syms.length; i++) {
        const key = syms[i] + "\u0000" + syms[i + 1];
        pairs.set(key, (pairs.get(key) ?? 0) + f);
      }
    }
    let best: string | null = null;
    let bestCount = 1;
    for (const [key, c] of pairs) {
      if (c > bestCount || (c === bestCount && best !== null && key < best)) {
        best = key;
        bestCount = c;
      }
    }
    if (best === null) break;
    const [l, r] = best.split("\u0000") as [string, string];
    merges.push([l, r]);
    for (const w of words) {
      const out: string[] = [];
      for (let i = 0; i < w.syms.length; i++) {
        if (i + 1 < w.syms.length && w.syms[i] === l && w.syms[i + 1] === r) {
          out.push(l + r);
          i++;
        } else out.push(w.syms[i]);
      }
      w.syms = out;
    }
  }
  return merges;
}

/** The two fixture files' contents (pretty JSON, trailing newline). */
export interface TinyTokenizerFiles {
  "tokenizer.json": string;
  "tokenizer_config.json": string;
}

/** Builds the fixture files in memory (deterministic). */
export function makeTinyTokenizer(): TinyTokenizerFiles {
  const { byteToChar, order } = bytesToUnicode();
  const vocab: Record<string, number> = {};
  for (const b of order) vocab[byteToChar[b]] = Object.keys(vocab).length;
  const merges = trainBpe(TRAINING_TEXT, MERGES);
  for (const [l, r] of merges) {
    if (!(l + r in vocab)) vocab[l + r] = Object.keys(vocab).length;
  }
  const firstAdded = Object.keys(vocab).length;
  const added = ADDED_TOKENS.map(([content, special], i) => addedToken(firstAdded + i, content, special));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };
  const tokenizer = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: QWEN2_SPLIT_REGEX }, behavior: "Isolated", invert: false },
        byteLevel,
      ],
    },
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([l, r]) => `${l} ${r}`),
    },
  };
  const addedDecoder: Record<string, Omit<(typeof added)[number], "id">> = {};
  for (const { id, ...rest } of added) addedDecoder[String(id)] = rest;
  const config = {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: addedDecoder,
    additional_special_tokens: ["<|im_start|>", "<|im_end|>"],
    bos_token: null,
    chat_template: CHAT_TEMPLATE,
    clean_up_tokenization_spaces: false,
    eos_token: "<|im_end|>",
    errors: "replace",
    model_max_length: 4096,
    pad_token: "<|endoftext|>",
    split_special_tokens: false,
    tokenizer_class: "Qwen2Tokenizer",
    unk_token: null,
  };
  return {
    "tokenizer.json": JSON.stringify(tokenizer, null, 2) + "\n",
    "tokenizer_config.json": JSON.stringify(config, null, 2) + "\n",
  };
}

/** Where the fixture lives, relative to the repository root. */
export const FIXTURE_DIR = "test/fixtures/tiny-chatml";

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const outDir = resolve(process.argv[2] ?? FIXTURE_DIR);
  mkdirSync(outDir, { recursive: true });
  const files = makeTinyTokenizer();
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(outDir, name), text);
    console.log(`wrote ${join(outDir, name)} (${Buffer.byteLength(text)} bytes)`);
  }
}
