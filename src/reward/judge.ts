/**
 * An LLM judge over any OpenAI-compatible endpoint (`POST {baseUrl}/chat/completions`), for the `judge` reward
 * term: it scores a prediction in [0, 1] against the gold answers, caches every verdict (in memory and, optionally,
 * in a JSON file), retries failed calls with exponential backoff and counts its calls and spend.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { describeValue } from "../core/values.ts";
import { MAX_TIMER_MS } from "../env/tool.ts";
import type { Judge, JudgeOptions } from "./types.ts";

/** A judge verdict as cached: the score and the judge's reply. */
interface Verdict {
  score: number;
  reason: string;
}

/** Default retries after the first failed call. */
export const DEFAULT_JUDGE_RETRIES = 2;
/** Default limit of one call (ms). */
export const DEFAULT_JUDGE_TIMEOUT_MS = 30_000;
/** Backoff before retry i (0-based): `JUDGE_BACKOFF_MS · 2^i` ms. */
export const JUDGE_BACKOFF_MS = 50;

const NUMBER_RE = /[-+]?(?:\d+(?:\.\d*)?|\.\d+)/g;

/**
 * The judge's score from its reply: the first number in the text whose value lies in [0, 1] (so `"Score: 0.8"`
 * → 0.8, `"1"` → 1, `"7/10"` → none).
 * @throws Error when no number in [0, 1] occurs in the reply (quoting its start)
 */
export function parseJudgeScore(content: string): number {
  for (const m of content.matchAll(NUMBER_RE)) {
    const x = Number(m[0]);
    if (Number.isFinite(x) && x >= 0 && x <= 1) return x;
  }
  throw new Error(`judge reply has no number in [0, 1]: ${JSON.stringify(content.slice(0, 100))}`);
}

/** The user message sent to the judge (after the rubric as system message). */
export function judgeUserMessage(question: string, golds: readonly string[], prediction: string): string {
  return `question: ${question}\ngold answers: ${golds.join(" | ")}\nprediction: ${prediction}`;
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function finiteOr0(x: unknown): number {
  return typeof x === "number" && Number.isFinite(x) ? x : 0;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * `Judge` over an OpenAI-compatible chat-completions endpoint.
 *
 * One call: `POST {baseUrl}/chat/completions` with `{model, messages: [{role: "system", content: rubric},
 * {role: "user", content: "question: …\ngold answers: a | b\nprediction: …"}], temperature: 0}` and, when
 * `apiKeyEnv` names a set environment variable, `Authorization: Bearer <its value>`; limited to `timeoutMs`
 * (`AbortSignal.timeout`). The score is `parseJudgeScore(choices[0].message.content)`.
 *
 * Failures (network error, timeout, HTTP status ≥ 400, a reply without `choices[0].message.content`, or without a
 * number in [0, 1]) are retried `maxRetries` times (default 2) after `50 · 2^i` ms; then `score` throws an Error
 * with the last failure's message.
 *
 * Cache: by sha256 of (model, rubric, question, golds, prediction), in memory and — when `cacheFile` is given —
 * in that JSON file (`{ "<sha256>": { "score": …, "reason": "…" } }`), loaded at construction and rewritten after
 * each new verdict (temp file + rename). A cache hit makes no HTTP call and costs 0; concurrent calls for the same
 * key share one request (the later ones count as cache hits).
 *
 * Cost of a call = `usage.prompt_tokens × pricePerInputToken + usage.completion_tokens × pricePerOutputToken`
 * (each part 0 when the usage field or the price is absent), in the prices' unit; failed attempts cost 0.
 */
export class OpenAIJudge implements Judge {
  /** HTTP requests sent (every attempt, retries included). */
  calls = 0;
  /** Requests retried after a failure. */
  retries = 0;
  /** Scores answered from the cache (or from an identical request in flight), with no request of their own. */
  cacheHits = 0;
  /** `score` calls that gave up after their retries (threw). */
  failures = 0;
  /** Σ cost of all successful calls, in the prices' unit. */
  totalCost = 0;

  private readonly options: JudgeOptions;
  private readonly maxRetries: number;
  private readonly timeoutMs: number;
  private readonly cacheFile: string | undefined;
  private readonly cache = new Map<string, Verdict>();
  private readonly pending = new Map<string, Promise<{ verdict: Verdict; cost: number }>>();

  /**
   * @param options endpoint, model, rubric, key variable, retries, timeout and prices (`JudgeOptions`)
   * @param cacheFile optional JSON cache file (created on the first verdict; its folder too)
   * @throws Error naming the field when baseUrl, model or rubric is empty, maxRetries is not an integer ≥ 0,
   *   timeoutMs is not positive or exceeds `MAX_TIMER_MS` (2³¹−1 ms), or a price is negative; Error naming the file when the cache file is not valid JSON
   */
  constructor(options: JudgeOptions, cacheFile?: string) {
    for (const k of ["baseUrl", "model", "rubric"] as const) {
      if (typeof options[k] !== "string" || options[k].trim() === "") throw new Error(`judge.${k} must be a non-empty string`);
    }
    this.maxRetries = options.maxRetries ?? DEFAULT_JUDGE_RETRIES;
    if (!Number.isInteger(this.maxRetries) || this.maxRetries < 0) {
      throw new Error(`judge.maxRetries must be an integer ≥ 0, got ${describeValue(options.maxRetries)}`);
    }
    this.timeoutMs = options.timeoutMs ?? DEFAULT_JUDGE_TIMEOUT_MS;
    if (!(Number.isFinite(this.timeoutMs) && this.timeoutMs > 0)) {
      throw new Error(`judge.timeoutMs must be a positive number of ms, got ${describeValue(options.timeoutMs)}`);
    }
    if (this.timeoutMs > MAX_TIMER_MS) {
      // AbortSignal.timeout clamps a delay above 2³¹−1 ms to 1 ms: every call would time out at once.
      throw new Error(`judge.timeoutMs must be at most ${MAX_TIMER_MS} ms (Node's timer limit; a longer timeout would fire after 1 ms), got ${options.timeoutMs}`);
    }
    for (const k of ["pricePerInputToken", "pricePerOutputToken"] as const) {
      const p = options[k];
      if (p !== undefined && !(Number.isFinite(p) && p >= 0)) throw new Error(`judge.${k} must be a finite number ≥ 0, got ${describeValue(p)}`);
    }
    this.options = options;
    this.cacheFile = cacheFile;
    if (cacheFile !== undefined && existsSync(cacheFile)) this.loadCache(cacheFile);
  }

  /** Number of cached verdicts. */
  get cacheSize(): number {
    return this.cache.size;
  }

  /**
   * Scores `prediction` against `golds` (see the class doc).
   * @returns score in [0, 1], the judge's reply as reason, and this call's cost (0 on a cache hit)
   * @throws Error with the last failure's message after `maxRetries` retries
   */
  async score(question: string, golds: readonly string[], prediction: string): Promise<{ score: number; reason: string; cost: number }> {
    const key = this.key(question, golds, prediction);
    const hit = this.cache.get(key);
    if (hit !== undefined) {
      this.cacheHits++;
      return { ...hit, cost: 0 };
    }
    const inFlight = this.pending.get(key);
    if (inFlight !== undefined) {
      try {
        const { verdict } = await inFlight;
        this.cacheHits++;
        return { ...verdict, cost: 0 };
      } catch (e) {
        this.failures++;
        throw e;
      }
    }
    const p = this.callWithRetries(question, golds, prediction);
    this.pending.set(key, p);
    try {
      const { verdict, cost } = await p;
      this.cache.set(key, verdict);
      this.totalCost += cost;
      this.saveCache();
      return { ...verdict, cost };
    } catch (e) {
      this.failures++;
      throw e;
    } finally {
      this.pending.delete(key);
    }
  }

  private key(question: string, golds: readonly string[], prediction: string): string {
    const { model, rubric } = this.options;
    return createHash("sha256").update(JSON.stringify([model, rubric, question, golds, prediction])).digest("hex");
  }

  private async callWithRetries(question: string, golds: readonly string[], prediction: string): Promise<{ verdict: Verdict; cost: number }> {
    let last = "";
    for (let attempt = 0; attempt <= this.maxRetries; attempt++) {
      if (attempt > 0) {
        this.retries++;
        await sleep(JUDGE_BACKOFF_MS * 2 ** (attempt - 1));
      }
      try {
        return await this.callOnce(question, golds, prediction);
      } catch (e) {
        last = (e as Error).message;
      }
    }
    throw new Error(`judge failed after ${this.maxRetries + 1} attempts: ${last}`);
  }

  private async callOnce(question: string, golds: readonly string[], prediction: string): Promise<{ verdict: Verdict; cost: number }> {
    const { baseUrl, model, rubric, apiKeyEnv } = this.options;
    const headers: Record<string, string> = { "content-type": "application/json" };
    const key = apiKeyEnv === undefined ? undefined : process.env[apiKeyEnv];
    if (key !== undefined && key !== "") headers.authorization = `Bearer ${key}`;
    const body = JSON.stringify({
      model,
      messages: [
        { role: "system", content: rubric },
        { role: "user", content: judgeUserMessage(question, golds, prediction) },
      ],
      temperature: 0,
    });
    this.calls++;
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${baseUrl.replace(/\/+$/, "")}/chat/completions`, {
        method: "POST",
        headers,
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await res.text();
    } catch (e) {
      const err = e as Error;
      if (err.name === "TimeoutError" || err.name === "AbortError") throw new Error(`timeout after ${this.timeoutMs} ms`);
      // fetch hides the reason (ECONNREFUSED, ENOTFOUND…) in `cause`.
      const cause = (err as Error & { cause?: { code?: string; message?: string } }).cause;
      const why = cause?.code ?? cause?.message;
      throw new Error(`request failed: ${err.message}${why ? ` (${why})` : ""}`);
    }
    if (!res.ok) throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new Error(`reply is not JSON: ${JSON.stringify(text.slice(0, 100))}`);
    }
    const choices = isRecord(json) ? json.choices : undefined;
    const first: unknown = Array.isArray(choices) ? choices[0] : undefined;
    const message = isRecord(first) ? first.message : undefined;
    const content = isRecord(message) ? message.content : undefined;
    if (typeof content !== "string") throw new Error("reply has no choices[0].message.content");
    const score = parseJudgeScore(content);
    const usage = isRecord(json) && isRecord(json.usage) ? json.usage : {};
    const cost =
      finiteOr0(usage.prompt_tokens) * (this.options.pricePerInputToken ?? 0) +
      finiteOr0(usage.completion_tokens) * (this.options.pricePerOutputToken ?? 0);
    return { verdict: { score, reason: content.trim().slice(0, 500) }, cost };
  }

  private loadCache(file: string): void {
    let data: unknown;
    try {
      data = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      throw new Error(`judge cache ${file}: not valid JSON (${(e as Error).message})`);
    }
    if (!isRecord(data)) throw new Error(`judge cache ${file}: expected an object of {score, reason} by key`);
    for (const [k, v] of Object.entries(data)) {
      if (isRecord(v) && typeof v.score === "number" && v.score >= 0 && v.score <= 1 && typeof v.reason === "string") {
        this.cache.set(k, { score: v.score, reason: v.reason });
      } else {
        throw new Error(`judge cache ${file}: entry ${k} is not {score in [0, 1], reason}`);
      }
    }
  }

  private saveCache(): void {
    if (this.cacheFile === undefined) return;
    mkdirSync(dirname(this.cacheFile), { recursive: true });
    const tmp = `${this.cacheFile}.tmp-${process.pid}`;
    writeFileSync(tmp, `${JSON.stringify(Object.fromEntries(this.cache))}\n`);
    renameSync(tmp, this.cacheFile);
  }
}

/**
 * The judge for a reward config's options: an `OpenAIJudge` when `options.judge` is set, else `undefined`.
 * @throws Error from the `OpenAIJudge` constructor for invalid options
 */
export function makeJudge(options: { judge?: JudgeOptions } | undefined, cacheFile?: string): OpenAIJudge | undefined {
  return options?.judge === undefined ? undefined : new OpenAIJudge(options.judge, cacheFile);
}
