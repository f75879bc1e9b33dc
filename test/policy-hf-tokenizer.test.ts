import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tokenizer as HfLibTokenizer } from "@huggingface/tokenizers";
import { afterAll, describe, expect, it } from "vitest";
import {
  ADDED_TOKENS,
  CHAT_TEMPLATE,
  FIXTURE_DIR,
  byteLevelPieces,
  makeTinyTokenizer,
} from "../scripts/make-tiny-tokenizer.ts";
import { HfTokenizer, loadTokenizer, type ChatMessage, type ChatToolSpec } from "../src/policy/hf/index.ts";

const tok = loadTokenizer(FIXTURE_DIR);
const tokenizerJson = JSON.parse(readFileSync(join(FIXTURE_DIR, "tokenizer.json"), "utf8")) as {
  added_tokens: Array<{ id: number; content: string }>;
  model: { vocab: Record<string, number>; merges: string[] };
};
const addedId = (content: string): number => {
  const t = tokenizerJson.added_tokens.find((a) => a.content === content);
  if (t === undefined) throw new Error(`fixture lacks ${content}`);
  return t.id;
};

const tmpDirs: string[] = [];
afterAll(() => {
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});
/** A temporary model folder holding `files` (name → text). */
function modelDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "hf-tok-"));
  tmpDirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}
const FIXTURE_TOKENIZER_JSON = readFileSync(join(FIXTURE_DIR, "tokenizer.json"), "utf8");
const FIXTURE_CONFIG = JSON.parse(readFileSync(join(FIXTURE_DIR, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;

/** Deterministic pseudo-random unicode strings (letters of many scripts, emoji, whitespace, punctuation), NFC. */
function randomTexts(n: number, seed: number): string[] {
  let s = seed >>> 0;
  const rand = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
  const ranges: Array<[number, number]> = [
    [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], // ASCII, weighted
    [0x09, 0x0d], // tab, newlines, CR
    [0xa0, 0x17f], // Latin-1, Latin Extended-A
    [0x300, 0x36f], // combining marks
    [0x391, 0x3c9], // Greek
    [0x410, 0x44f], // Cyrillic
    [0x5d0, 0x5ea], // Hebrew
    [0x3040, 0x30ff], // kana
    [0x4e00, 0x4fff], // CJK
    [0xac00, 0xac7f], // Hangul
    [0x1f300, 0x1f64f], // emoji
    [0x2000, 0x206f], // general punctuation, zero-width joiners
  ];
  return Array.from({ length: n }, () => {
    const len = 1 + Math.floor(rand() * 40);
    let out = "";
    for (let i = 0; i < len; i++) {
      const [lo, hi] = ranges[Math.floor(rand() * ranges.length)];
      out += String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
    }
    return out.normalize("NFC");
  });
}

/**
 * An independent byte-level BPE encoder (GPT-2's algorithm: merge the lowest-ranked pair until none applies) over the
 * fixture's merges, for texts without special tokens.
 */
function referenceEncode(text: string): number[] {
  const ranks = new Map(tokenizerJson.model.merges.map((m, i) => [m, i]));
  const ids: number[] = [];
  for (const piece of byteLevelPieces(text)) {
    let word = piece.slice();
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < word.length; i++) {
        const r = ranks.get(`${word[i]} ${word[i + 1]}`);
        if (r !== undefined && r < bestRank) {
          bestRank = r;
          best = i;
        }
      }
      if (best < 0) break;
      const [l, r] = [word[best], word[best + 1]];
      const next: string[] = [];
      for (let i = 0; i < word.length; i++) {
        if (i + 1 < word.length && word[i] === l && word[i + 1] === r) {
          next.push(l + r);
          i++;
        } else next.push(word[i]);
      }
      word = next;
    }
    for (const sym of word) ids.push(tokenizerJson.model.vocab[sym]);
  }
  return ids;
}

const FIXED_TEXTS = [
  "Hello, world! This is plain ASCII: 1234567890 ~`!@#$%^&*()_+-=[]{}|;':\",./<>?",
  "Café, naïve, résumé, Zürich, São Paulo, Kraków, Ærøskøbing, señor, façade",
  "北京是中国的首都。東京は日本の首都です。서울은 한국의 수도입니다.",
  "emoji 🙂🚀 family 👨‍👩‍👧‍👦 flag 🇫🇷 skin 👍🏽 keycap 1️⃣",
  "   leading spaces, trailing spaces   ",
  "runs   of    spaces\t\ttabs\n\nnewlines\r\nCRLF\n\n\n   \n",
  "\n",
  " ",
  "<search> capital of France </search>\n\n<information>Doc 1(Title: \"Paris\") Paris…</information>\n\n<answer> Paris </answer>",
  "they're we'll I'M it'S",
  "\u00a0non-breaking\u00a0space and zero\u200bwidth",
];

describe("fixture test/fixtures/tiny-chatml", () => {
  it("is what scripts/make-tiny-tokenizer.ts generates (deterministic, committed files up to date, small)", () => {
    const a = makeTinyTokenizer();
    const b = makeTinyTokenizer();
    expect(a).toEqual(b);
    for (const name of ["tokenizer.json", "tokenizer_config.json"] as const) {
      expect(readFileSync(join(FIXTURE_DIR, name), "utf8")).toBe(a[name]);
      expect(statSync(join(FIXTURE_DIR, name)).size).toBeLessThan(100_000);
    }
    expect(FIXTURE_CONFIG.chat_template).toBe(CHAT_TEMPLATE);
  });
});

describe("HfTokenizer encode/decode", () => {
  it("round-trips exactly: ASCII, accents, CJK, emoji, whitespace runs, newlines", () => {
    for (const s of [...FIXED_TEXTS, ...randomTexts(300, 7)]) {
      expect(tok.decode(tok.encode(s))).toBe(s);
    }
    expect(tok.encode("")).toEqual([]);
    expect(tok.decode([])).toBe("");
  });

  it("normalises to NFC like Qwen (decomposed accents come back composed)", () => {
    expect(tok.decode(tok.encode("Cafe\u0301"))).toBe("Café");
  });

  it("gives the ids of an independent GPT-2-style BPE encoder over the same merges", () => {
    for (const s of [...FIXED_TEXTS, ...randomTexts(200, 11)]) {
      expect(tok.encode(s)).toEqual(referenceEncode(s));
    }
  });

  it("gives the ids of tokenizer.json loaded directly by @huggingface/tokenizers", () => {
    const lib = new HfLibTokenizer(JSON.parse(FIXTURE_TOKENIZER_JSON) as object, {});
    for (const s of [...FIXED_TEXTS, "<|im_start|>user\nhi<|im_end|>\n<think>x</think>"]) {
      expect(tok.encode(s)).toEqual(lib.encode(s, { add_special_tokens: false }).ids);
    }
  });

  it("keeps added and special tokens as single ids, never split, and decodes them back", () => {
    for (const [content] of ADDED_TOKENS) {
      const id = addedId(content);
      expect(tok.encode(content)).toEqual([id]);
      expect(tok.id(content)).toBe(id);
      expect(tok.singleTokenId(content)).toBe(id);
      const around = tok.encode(`x ${content}y`);
      expect(around).toEqual([...tok.encode("x "), id, ...tok.encode("y")]);
      expect(tok.decode(around)).toBe(`x ${content}y`);
    }
    // No ordinary text produces a special id.
    const specials = new Set(ADDED_TOKENS.map(([c]) => addedId(c)));
    for (const s of [...FIXED_TEXTS, "<|im_", "im_end|>", "< think>"]) {
      expect(tok.encode(s).some((id) => specials.has(id))).toBe(false);
    }
  });

  it("exposes bos/pad/eos as tokenizer_config.json says (Qwen: no BOS, pad <|endoftext|>, eos <|im_end|>)", () => {
    expect(tok.bos).toBe(-1);
    expect(tok.addsBos).toBe(false);
    expect(tok.pad).toBe(addedId("<|endoftext|>"));
    expect(tok.id("<|im_end|>")).toBe(addedId("<|im_end|>"));
    expect(tok.eosTokenIds).toEqual([addedId("<|im_end|>")]);
    expect(tok.vocabSize).toBe(Math.max(...tokenizerJson.added_tokens.map((a) => a.id)) + 1);
    expect(tok.id("a")).toBe(tokenizerJson.model.vocab.a);
  });

  it("id() throws naming an unknown token; singleTokenId is undefined for multi-token strings", () => {
    expect(() => tok.id("</answer>")).toThrow(/token "<\/answer>" is not in the vocabulary/);
    expect(tok.singleTokenId("</answer>")).toBeUndefined();
    expect(tok.encode("</answer>").length).toBeGreaterThan(1);
    expect(tok.singleTokenId("a")).toBe(tokenizerJson.model.vocab.a);
  });

  it("decode throws naming an id outside the vocabulary", () => {
    expect(() => tok.decode([0, tok.vocabSize])).toThrow(new RegExp(`id ${tok.vocabSize} is not a token`));
    expect(() => tok.decode([-1])).toThrow(/id -1/);
  });
});

const SEARCH_TOOL: ChatToolSpec = {
  type: "function",
  function: {
    name: "search",
    description: "Retrieve passages for a query.",
    parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
  },
};

describe("chat template", () => {
  it("promptTokens renders the question as a ChatML user turn plus the generation prompt", () => {
    const question = "question : what is the capital of france?\n";
    const expected = "<|im_start|>user\nquestion : what is the capital of france?\n<|im_end|>\n<|im_start|>assistant\n";
    expect(tok.applyChatTemplate([{ role: "user", content: question }], { addGenerationPrompt: true })).toBe(expected);
    const ids = tok.promptTokens(question);
    expect(ids).toEqual(tok.encode(expected));
    expect(ids[0]).toBe(addedId("<|im_start|>"));
    expect(tok.decode(ids)).toBe(expected);
  });

  it("enableThinking: false writes Qwen3's empty think block after the generation prompt", () => {
    const noThink = HfTokenizer.fromDir(FIXTURE_DIR, { enableThinking: false });
    const expected = "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    expect(noThink.promptTokens("Q?")).toEqual(tok.encode(expected));
    expect(tok.applyChatTemplate([{ role: "user", content: "Q?" }], { addGenerationPrompt: true, enableThinking: true })).toBe(
      "<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n",
    );
  });

  it("renders a system prompt, tools section, tool calls and tool responses the Qwen way", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "Answer briefly." },
      { role: "user", content: "Capital of France?" },
      {
        role: "assistant",
        content: "<think>\nI should search.\n</think>\n\n",
        tool_calls: [{ type: "function", function: { name: "search", arguments: { query: "capital of France" } } }],
      },
      { role: "tool", content: "Doc 1: Paris is the capital of France." },
      { role: "tool", content: "Doc 2: Paris, city." },
      { role: "assistant", content: "Paris" },
    ];
    const expected =
      "<|im_start|>system\nAnswer briefly.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
      '{"type": "function", "function": {"name": "search", "description": "Retrieve passages for a query.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}\n' +
      "</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
      '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\nCapital of France?<|im_end|>\n" +
      '<|im_start|>assistant\n<tool_call>\n{"name": "search", "arguments": {"query": "capital of France"}}\n</tool_call><|im_end|>\n' +
      "<|im_start|>user\n<tool_response>\nDoc 1: Paris is the capital of France.\n</tool_response>\n<tool_response>\nDoc 2: Paris, city.\n</tool_response><|im_end|>\n" +
      "<|im_start|>assistant\nParis<|im_end|>\n";
    const text = tok.applyChatTemplate(messages, { tools: [SEARCH_TOOL] });
    expect(text).toBe(expected);
    const ids = tok.chatTokens(messages, { tools: [SEARCH_TOOL] });
    expect(ids).toEqual(tok.encode(expected));
    expect(ids.filter((id) => id === addedId("<tool_call>")).length).toBe(3); // two in the tools section, one call
    expect(ids.filter((id) => id === addedId("<|im_end|>")).length).toBe(5);
  });

  it("raises on an unknown role, naming it", () => {
    expect(() => tok.applyChatTemplate([{ role: "wizard", content: "x" }])).toThrow(/unknown chat role: wizard/);
  });

  const python = spawnSync("python3", ["-c", "import jinja2"], { encoding: "utf8" });
  it.skipIf(python.status !== 0)("renders like Python Jinja2 with transformers' settings (when python3 has jinja2)", () => {
    const cases: Array<Record<string, unknown>> = [
      { messages: [{ role: "user", content: "q é 北京 🙂" }], add_generation_prompt: true },
      { messages: [{ role: "user", content: "q" }], add_generation_prompt: true, enable_thinking: false },
      {
        messages: [
          { role: "system", content: "S" },
          { role: "user", content: "U" },
          { role: "assistant", content: "", tool_calls: [{ function: { name: "search", arguments: { query: "x", k: 2 } } }, { function: { name: "search", arguments: '{"query": "y"}' } }] },
          { role: "tool", content: "R" },
          { role: "assistant", content: "<think>r</think>\n\nA" },
          { role: "user", content: "U2" },
        ],
        tools: [SEARCH_TOOL],
        add_generation_prompt: true,
      },
    ];
    const code = [
      "import json, sys",
      "from jinja2.sandbox import ImmutableSandboxedEnvironment",
      "from jinja2.ext import loopcontrols",
      "def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):",
      "    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)",
      "def raise_exception(m):",
      "    raise Exception(m)",
      "env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])",
      "env.filters['tojson'] = tojson",
      "env.globals['raise_exception'] = raise_exception",
      "data = json.load(sys.stdin)",
      "t = env.from_string(data['template'])",
      "print(json.dumps([t.render(**c) for c in data['cases']]))",
    ].join("\n");
    const out = spawnSync("python3", ["-c", code], { input: JSON.stringify({ template: CHAT_TEMPLATE, cases }), encoding: "utf8" });
    expect(out.stderr).toBe("");
    const rendered = JSON.parse(out.stdout) as string[];
    cases.forEach((c, i) => {
      const ours = tok.applyChatTemplate(c.messages as ChatMessage[], {
        addGenerationPrompt: c.add_generation_prompt as boolean,
        ...(c.tools ? { tools: c.tools as ChatToolSpec[] } : {}),
        ...(c.enable_thinking === undefined ? {} : { enableThinking: c.enable_thinking as boolean }),
      });
      expect(ours).toBe(rendered[i]);
    });
  });
});

describe("loading a model folder", () => {
  it("names the missing tokenizer.json", () => {
    const dir = modelDir({});
    expect(() => loadTokenizer(dir)).toThrow(`${join(dir, "tokenizer.json")} not found`);
  });

  it("names a malformed tokenizer_config.json and a malformed field", () => {
    const bad = modelDir({ "tokenizer.json": FIXTURE_TOKENIZER_JSON, "tokenizer_config.json": "{ not json" });
    expect(() => loadTokenizer(bad)).toThrow(`${join(bad, "tokenizer_config.json")} is not valid JSON`);
    const badField = modelDir({ "tokenizer.json": FIXTURE_TOKENIZER_JSON, "tokenizer_config.json": JSON.stringify({ chat_template: 3 }) });
    expect(() => loadTokenizer(badField)).toThrow(/tokenizer_config\.json: chat_template must be a string or a list/);
    const unknownEos = modelDir({ "tokenizer.json": FIXTURE_TOKENIZER_JSON, "tokenizer_config.json": JSON.stringify({ eos_token: "</s>" }) });
    expect(() => loadTokenizer(unknownEos)).toThrow(/eos_token "<\/s>" is not a token of/);
    const badTemplate = modelDir({ "tokenizer.json": FIXTURE_TOKENIZER_JSON, "tokenizer_config.json": JSON.stringify({ chat_template: "{% if %}" }) });
    expect(() => loadTokenizer(badTemplate)).toThrow(/chat_template "default" does not parse/);
  });

  it("without a template, promptTokens is [bos?, ...encode(text)] and applyChatTemplate says there is none", () => {
    const bare = loadTokenizer(modelDir({ "tokenizer.json": FIXTURE_TOKENIZER_JSON }));
    expect(bare.promptTokens("hi there")).toEqual(tok.encode("hi there"));
    expect(bare.pad).toBe(-1);
    expect(() => bare.applyChatTemplate([{ role: "user", content: "x" }])).toThrow(/has no chat template/);
    const withBos = loadTokenizer(
      modelDir({
        "tokenizer.json": FIXTURE_TOKENIZER_JSON,
        "tokenizer_config.json": JSON.stringify({ bos_token: { content: "<|endoftext|>", special: true }, eos_token: { content: "<|im_end|>" }, add_bos_token: true }),
      }),
    );
    expect(withBos.bos).toBe(addedId("<|endoftext|>"));
    expect(withBos.pad).toBe(addedId("<|im_end|>")); // no pad_token: falls back to eos
    expect(withBos.promptTokens("hi there")).toEqual([addedId("<|endoftext|>"), ...tok.encode("hi there")]);
  });

  it("accepts the list-of-named-templates form, chat_template.jinja, and generation_config.json eos ids", () => {
    const named = loadTokenizer(
      modelDir({
        "tokenizer.json": FIXTURE_TOKENIZER_JSON,
        "tokenizer_config.json": JSON.stringify({
          ...FIXTURE_CONFIG,
          chat_template: [
            { name: "default", template: CHAT_TEMPLATE },
            { name: "tool_use", template: "TOOLS{{ tools | length }}" },
          ],
        }),
      }),
    );
    expect(named.promptTokens("Q")).toEqual(tok.promptTokens("Q"));
    expect(named.applyChatTemplate([{ role: "user", content: "Q" }], { tools: [SEARCH_TOOL] })).toBe("TOOLS1");
    const jinjaFile = loadTokenizer(
      modelDir({
        "tokenizer.json": FIXTURE_TOKENIZER_JSON,
        "tokenizer_config.json": JSON.stringify({ ...FIXTURE_CONFIG, chat_template: undefined }),
        "chat_template.jinja": "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{{ eos_token }}",
        "generation_config.json": JSON.stringify({ eos_token_id: [addedId("<|im_end|>"), addedId("<|endoftext|>")] }),
      }),
    );
    expect(jinjaFile.applyChatTemplate([{ role: "user", content: "Q" }])).toBe("[user]Q<|im_end|>");
    expect(jinjaFile.eosTokenIds).toEqual([addedId("<|im_end|>"), addedId("<|endoftext|>")]);
  });
});
