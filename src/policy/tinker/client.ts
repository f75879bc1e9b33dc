/**
 * A small HTTP client for the Tinker training API (hosted Tinker, SkyRL's Tinker server, TuFT, verl-tinker, or
 * `arl serve trainer`): JSON requests under `/api/v1/`, the API key as `X-API-Key` and `Authorization: Bearer`,
 * a timeout per request, retries with exponential back-off on connection errors, 408, 429 and 5xx, polling of
 * `retrieve_future` (long poll + `try_again`) with back-off, and session heartbeats. Mirrors the Tinker Python SDK's
 * `InternalClientHolder` behaviour. Wire encoding is JSON; the hosted service also speaks a protobuf encoding of the
 * same messages, which this client does not use (documented in docs/scale-out.md as the next step).
 */
import type { WireFuture, WireRequestFailed, WireTryAgain } from "./wire.ts";

/** Options of a `TinkerClient`. */
export interface TinkerClientOptions {
  /** Server root, e.g. `http://127.0.0.1:8000` (the `/api/v1/` prefix is added). */
  baseUrl: string;
  /** API key (hosted Tinker: `TINKER_API_KEY`); sent as `X-API-Key` and `Authorization: Bearer`. */
  apiKey?: string;
  /** Per-request timeout (ms; default 60 000). Long polls use their own, longer limit. */
  timeoutMs?: number;
  /** Attempts for a retryable failure (default 5). */
  retries?: number;
  /** First back-off delay (ms; default 200), doubled per attempt up to 10 s. */
  backoffMs?: number;
  /** Heartbeat period of an open session (ms; default 10 000; 0 = none). */
  heartbeatMs?: number;
  /** Most time to wait for one future (ms; default 2 h, as the Tinker cookbook waits for long steps). */
  futureTimeoutMs?: number;
}

/** An API error: the status, the server's reason, and whether the request was the caller's fault. */
export class TinkerApiError extends Error {
  /**
   * @param status HTTP status (0 = no response)
   * @param path the endpoint
   * @param reason the server's `error`/`detail` text
   */
  constructor(
    readonly status: number,
    readonly path: string,
    readonly reason: string,
  ) {
    super(`tinker ${path}: ${status === 0 ? "no response" : `HTTP ${status}`}: ${reason}`);
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const RETRYABLE = (status: number) => status === 0 || status === 408 || status === 429 || status >= 500;

/** Raw Tinker API calls. One instance per server; safe for concurrent use. */
export class TinkerClient {
  readonly baseUrl: string;
  private readonly opts: Required<Omit<TinkerClientOptions, "apiKey" | "baseUrl">> & { apiKey?: string };
  private heartbeat: NodeJS.Timeout | undefined;
  /** The session id after `createSession`. */
  sessionId: string | undefined;

  constructor(options: TinkerClientOptions) {
    // The server root: a URL copied with its `/api/v1` suffix (as `arl serve trainer` prints it) works too.
    this.baseUrl = options.baseUrl.replace(/\/+$/, "").replace(/\/api\/v1$/, "");
    if (!/^https?:\/\//.test(this.baseUrl)) throw new Error(`tinker: baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    this.opts = {
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs ?? 60_000,
      retries: options.retries ?? 5,
      backoffMs: options.backoffMs ?? 200,
      heartbeatMs: options.heartbeatMs ?? 10_000,
      futureTimeoutMs: options.futureTimeoutMs ?? 2 * 3600_000,
    };
  }

  /**
   * One JSON request with retries.
   * @param path endpoint under `/api/v1/`, e.g. `forward_backward`
   * @throws TinkerApiError on a 4xx (not retried) or when retries are exhausted
   */
  async call<T>(path: string, body?: unknown, method: "GET" | "POST" = "POST", timeoutMs = this.opts.timeoutMs): Promise<T> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.opts.apiKey) {
      headers["x-api-key"] = this.opts.apiKey;
      headers.authorization = `Bearer ${this.opts.apiKey}`;
    }
    let last: TinkerApiError | undefined;
    for (let attempt = 0; attempt < this.opts.retries; attempt++) {
      if (attempt > 0) await sleep(Math.min(10_000, this.opts.backoffMs * 2 ** (attempt - 1)));
      let res: Response;
      try {
        res = await fetch(`${this.baseUrl}/api/v1/${path}`, {
          method,
          headers,
          body: method === "POST" ? JSON.stringify(body ?? {}) : undefined,
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (e) {
        const err = e as Error & { cause?: { code?: string } };
        last = new TinkerApiError(0, path, `${err.name === "TimeoutError" ? `timed out after ${timeoutMs} ms` : err.message}${err.cause?.code ? ` (${err.cause.code})` : ""} — is a Tinker server running at ${this.baseUrl}?`);
        continue;
      }
      const text = await res.text();
      let json: unknown;
      try {
        json = text === "" ? {} : JSON.parse(text);
      } catch {
        json = { error: text.slice(0, 500) };
      }
      if (res.ok) return json as T;
      const o = json as { error?: unknown; detail?: unknown };
      const reason = typeof o.error === "string" ? o.error : typeof o.detail === "string" ? o.detail : JSON.stringify(json).slice(0, 500);
      const hint =
        res.status === 401 ? ` (set the key in the variable policy.tinker.apiKeyEnv names, default TINKER_API_KEY)` : res.status === 404 && /no route/.test(reason) ? ` (is ${this.baseUrl} a Tinker API server root?)` : "";
      last = new TinkerApiError(res.status, path, reason + hint);
      if (!RETRYABLE(res.status)) throw last;
    }
    throw last!;
  }

  /**
   * Waits for an asynchronous request's result: `retrieve_future` until it stops answering `try_again` (or 408),
   * backing off from 50 ms to 1 s between polls.
   * @throws TinkerApiError when the request failed (its `category` in the reason) or the wait exceeds the limit
   */
  async result<T>(future: WireFuture): Promise<T> {
    const start = Date.now();
    let delay = 50;
    for (;;) {
      let r: unknown;
      try {
        r = await this.call<unknown>("retrieve_future", { request_id: future.request_id }, "POST", this.opts.timeoutMs + 30_000);
      } catch (e) {
        if (!(e instanceof TinkerApiError) || e.status !== 408) {
          if (e instanceof TinkerApiError) {
            const failed = safeParse(e.reason) as WireRequestFailed | undefined;
            throw new TinkerApiError(e.status, `retrieve_future(${future.request_id})`, failed?.error ?? e.reason);
          }
          throw e;
        }
        r = { type: "try_again" };
      }
      if ((r as WireTryAgain).type !== "try_again") return r as T;
      if (Date.now() - start > this.opts.futureTimeoutMs) {
        throw new TinkerApiError(0, `retrieve_future(${future.request_id})`, `no result after ${this.opts.futureTimeoutMs} ms`);
      }
      await sleep(delay);
      delay = Math.min(1000, delay * 1.5);
    }
  }

  /** Submits an asynchronous request and waits for its result. @throws TinkerApiError */
  async submit<T>(path: string, body: unknown): Promise<T> {
    return this.result<T>(await this.call<WireFuture>(path, body));
  }

  /** Opens a session and starts its heartbeats (unref'd: they never keep the process alive). @throws TinkerApiError */
  async createSession(tags: string[] = ["agentic-rl"]): Promise<string> {
    const r = await this.call<{ session_id: string }>("create_session", { tags, sdk_version: "agentic-rl-0.1.0", type: "create_session" });
    this.sessionId = r.session_id;
    if (this.opts.heartbeatMs > 0) {
      this.heartbeat = setInterval(() => {
        void this.call("session_heartbeat", { session_id: r.session_id, type: "session_heartbeat" }).catch(() => {});
      }, this.opts.heartbeatMs);
      this.heartbeat.unref();
    }
    return r.session_id;
  }

  /** Stops the heartbeats. */
  close(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
  }
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
