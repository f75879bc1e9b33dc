/**
 * Loaders for the real-data path: the wiki-18 passage corpus (Search-R1 / FlashRAG JSONL) and QA files
 * (FlashRAG, NQ-open, Bamboogle). Files are streamed line by line, so `limit` reads only the head of a large file.
 */
import { createReadStream, existsSync, statSync } from "node:fs";
import { basename } from "node:path";
import { createInterface } from "node:readline";
import type { Passage, Task } from "../core/types.ts";

/** Options of the loaders. `limit`: keep at most this many records (non-negative integer; default all). */
export interface LoadOptions {
  limit?: number;
}

/** A parsed JSON line with its 1-based line number. */
interface JsonLine {
  line: number;
  value: Record<string, unknown>;
}

/**
 * Streams the non-blank lines of a JSONL file as objects, stopping after `limit` records.
 * @throws Error `<file>:<line>: invalid JSON (…)` or `<file>:<line>: expected a JSON object`; fs errors (ENOENT…)
 */
async function* readJsonl(file: string, limit: number): AsyncGenerator<JsonLine> {
  if (limit !== Infinity && (!Number.isInteger(limit) || limit < 0)) throw new Error(`${file}: limit must be a non-negative integer, got ${limit}`);
  if (limit === 0) return;
  if (!existsSync(file)) throw new Error(`${file}: no such file`);
  if (!statSync(file).isFile()) throw new Error(`${file}: not a file`);
  const rl = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
  let line = 0;
  let count = 0;
  try {
    for await (const raw of rl) {
      line++;
      if (raw.trim() === "") continue;
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch (e) {
        throw new Error(`${file}:${line}: invalid JSON (${e instanceof Error ? e.message : String(e)})`);
      }
      if (typeof value !== "object" || value === null || Array.isArray(value)) {
        throw new Error(`${file}:${line}: expected a JSON object, got ${Array.isArray(value) ? "an array" : typeof value}`);
      }
      yield { line, value: value as Record<string, unknown> };
      if (++count >= limit) return;
    }
  } finally {
    rl.close();
  }
}

/**
 * Splits wiki-18 `contents` (`"Title"\ntext`) into an unquoted title and the text. Search-R1 `_passages2string`
 * takes the first line as the title and the remaining lines as the text; we also remove the title's surrounding
 * double quotes. Contents without a newline → title '' and the whole string as text.
 */
export function splitContents(contents: string): { title: string; text: string } {
  const nl = contents.indexOf("\n");
  if (nl < 0) return { title: "", text: contents };
  let title = contents.slice(0, nl).trim();
  if (title.length >= 2 && title.startsWith('"') && title.endsWith('"')) title = title.slice(1, -1);
  return { title, text: contents.slice(nl + 1) };
}

/**
 * Loads a wiki-18 corpus JSONL (`{"id": str|int, "contents": "\"Title\"\ntext"}` per line, the format Search-R1's
 * retriever serves; FlashRAG `examples/quick_start/indexes/sample_data.jsonl`) into passages (no score).
 * @throws Error naming the file and line on bad JSON, a missing/non-string `contents`, or a missing `id`
 */
export async function loadCorpus(file: string, options: LoadOptions = {}): Promise<Passage[]> {
  const out: Passage[] = [];
  for await (const { line, value } of readJsonl(file, options.limit ?? Infinity)) {
    const { id, contents } = value;
    if (typeof id !== "string" && typeof id !== "number") {
      throw new Error(`${file}:${line}: missing field "id" (expected a string or number) in {id, contents}`);
    }
    if (typeof contents !== "string") {
      throw new Error(`${file}:${line}: missing field "contents" (expected a string "\\"Title\\"\\ntext") in {id, contents}`);
    }
    out.push({ id: String(id), ...splitContents(contents) });
  }
  return out;
}

/** The QA record formats `loadQA` accepts, and the task kind each gives by default. */
export type QAFormat = "flashrag" | "nq-open" | "bamboogle";

/** Options of `loadQA`. `kind`: overrides the task kind (default by format: `qa`, `nq`, `bamboogle`). */
export interface LoadQAOptions extends LoadOptions {
  kind?: string;
}

const QA_FORMATS =
  '{"id", "question", "golden_answers": [str]} (FlashRAG) | {"question", "answer": [str]} (NQ-open) | ' +
  '{"idx", "question", "answer": str} (Bamboogle)';

/** Answers as non-empty strings (numbers are stringified), or null when the value is not a non-empty list of them. */
function answerList(v: unknown): string[] | null {
  const items = Array.isArray(v) ? v : [v];
  const out: string[] = [];
  for (const a of items) {
    if (typeof a === "number") out.push(String(a));
    else if (typeof a === "string" && a.trim() !== "") out.push(a);
    else return null;
  }
  return out.length > 0 ? out : null;
}

/**
 * Loads a QA JSONL file into tasks, detecting the format per line:
 * - FlashRAG `{id, question, golden_answers: [...]}` → kind `qa`, id `qa:<id>`;
 * - NQ-open `{question, answer: [...]}` → kind `nq`, id `nq:<n>` (n = 0-based record index);
 * - Bamboogle `{idx, question, answer: str}` → kind `bamboogle`, id `bamboogle:<idx>`.
 * Any listed answer counts (Search-R1 EM). `known` is undefined (real data); `meta` = `{source: <file name>}`.
 * @throws Error naming the file, line and field on bad JSON, a missing/empty `question`, or answers that are not a
 *   non-empty string or list of strings (listing the accepted formats)
 */
export async function loadQA(file: string, options: LoadQAOptions = {}): Promise<Task[]> {
  const out: Task[] = [];
  const source = basename(file);
  for await (const { line, value } of readJsonl(file, options.limit ?? Infinity)) {
    const { question } = value;
    if (typeof question !== "string" || question.trim() === "") {
      throw new Error(`${file}:${line}: missing field "question" (a non-empty string); accepted: ${QA_FORMATS}`);
    }
    let format: QAFormat;
    let field: string;
    let sourceId: string;
    if ("golden_answers" in value) {
      format = "flashrag";
      field = "golden_answers";
      sourceId = String(value.id ?? out.length);
    } else if ("answer" in value && Array.isArray(value.answer)) {
      format = "nq-open";
      field = "answer";
      sourceId = String(out.length);
    } else if ("answer" in value) {
      format = "bamboogle";
      field = "answer";
      sourceId = String(value.idx ?? value.id ?? out.length);
    } else {
      throw new Error(`${file}:${line}: missing field "golden_answers" or "answer"; accepted: ${QA_FORMATS}`);
    }
    const answers = answerList(value[field]);
    if (answers === null) {
      throw new Error(`${file}:${line}: field "${field}" must be a non-empty string or list of non-empty strings`);
    }
    const kind = options.kind ?? { flashrag: "qa", "nq-open": "nq", bamboogle: "bamboogle" }[format];
    out.push({ id: `${kind}:${sourceId}`, question: question.trim(), answers, kind, evidenceIds: [], meta: { source } });
  }
  return out;
}
