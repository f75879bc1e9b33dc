/**
 * The HTTP client of the Tinker training API (hosted Tinker, SkyRL's Tinker server, TuFT, verl-tinker, or
 * `arl serve trainer`), with the Tinker Python SDK 0.25's transport rules — read in thinking-machines-lab/tinker @
 * d595dc2ba62a1494aa0f452fe1d0dbb7b321b870:
 * - key as `X-API-Key` (exchanged for a JWT first when `client/config` says `pjwt_auth_enabled`); every POST but `retrieve_future` / heartbeats carries an
 *   `X-Idempotency-Key` that stays the same across the retries of one request (`src/tinker/_client.py`,
 *   `_base_client.py`), and training requests a `seq_id` (the backend numbers them);
 * - a submit is retried on connection errors, timeouts, 408, 409, 429 and 5xx with back-off `min(2ⁿ, 30)` s for up to
 *   5 min (`lib/internal_client_holder.py` `execute_with_retries`, `_is_retryable_status_code`); other 4xx fail at
 *   once with the server's reason;
 * - a future is polled with `retrieve_future` until it resolves, with no overall limit (`lib/api_future_impl.py`):
 *   `{"type": "try_again"}` and 408 poll again, 5xx polls again, 429 and connection errors (a poll cut by its own
 *   45 s timeout is one) back off `min(2ⁿ, 30)` s, a bare 400 is retried 3 times, 410 ("promise expired") re-submits
 *   the original request, any other status fails; a 200 body `{"error", "category"}` (`RequestFailedResponse`) is
 *   a failed request, never a result;
 * - results of `forward_backward` and `asample` come back as protobuf when asked for (`Accept:
 *   application/x-protobuf`, `src/policy/tinker/proto.ts`); the others are JSON.
 */
import { randomUUID } from "node:crypto";
import type { WireFuture } from "./wire.ts";

/** Options of a `TinkerClient`. */
export interface TinkerClientOptions {
  /** Server root, e.g. `http://127.0.0.1:8000` (the `/api/v1/` prefix is added). */
  baseUrl: string;
  /** API key (hosted Tinker: `TINKER_API_KEY`); sent as `X-API-Key`, as the SDK does. */
  apiKey?: string;
  /** Timeout of one request (ms; default 60 000, the SDK's). */
  timeoutMs?: number;
  /** Timeout of one `retrieve_future` poll (ms; default 45 000, the SDK's); a cut poll is retried, never a failure. */
  pollTimeoutMs?: number;
  /** How long a submit keeps retrying retryable failures (ms; default 300 000, the SDK's `MAX_WAIT_TIME`). */
  retryForMs?: number;
  /** Most attempts of one submit (default unlimited within `retryForMs`). */
  retries?: number;
  /** First back-off delay (ms; default 1 000 = the SDK's 2⁰ s), doubled per attempt up to 30×. */
  backoffMs?: number;
  /** Heartbeat period of an open session (ms; default 10 000, the SDK's; 0 = none). */
  heartbeatMs?: number;
  /** Most time to wait for one future (ms; default 0 = no limit, as the SDK). */
  futureTimeoutMs?: number;
}

/** An API error: the status, the server's reason, and (for failed futures) the `RequestFailedResponse` category. */
export class TinkerApiError extends Error {
  /**
   * @param status HTTP status (0 = no response; 200 = a future that resolved to `{"error", "category"}`)
   * @param path the endpoint
   * @param reason the server's `error`/`detail` text
   * @param category `user` (fix the request), `server` or `unknown` — for failed futures
   */
  constructor(
    readonly status: number,
    readonly path: string,
    readonly reason: string,
    readonly category?: "user" | "server" | "unknown",
  ) {
    super(`tinker ${path}: ${status === 0 ? "no response" : status === 200 ? `request failed (${category ?? "unknown"} error)` : `HTTP ${status}`}: ${reason}`);
  }
}

/** A raw response: status, content type and body bytes. */
export interface RawResponse {
  status: number;
  contentType: string;
  body: Uint8Array;
}

/** What one request sends. */
export interface RequestSpec {
  method?: "GET" | "POST";
  /** A JSON body, or raw bytes with their `contentType`. */
  body?: unknown;
  bytes?: Uint8Array;
  contentType?: string;
  accept?: string;
  /** Per-request timeout (ms). */
  timeoutMs?: number;
  /** Extra headers. */
  headers?: Record<string, string>;
  /** Send an `X-Idempotency-Key` (default: every POST). */
  idempotent?: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
// The SDK also retries 409; every server family uses 409 for a conflict a retry cannot fix (SkyRL: a seq_id reused
// with another payload; TuFT: a seq_id out of order; SkyRL: a checkpoint name taken), so it fails here at once.
const RETRYABLE = (status: number) => status === 0 || status === 408 || status === 429 || status >= 500;
const decoder = new TextDecoder();

/** Raw Tinker API calls. One instance per server; safe for concurrent use. */
export class TinkerClient {
  readonly baseUrl: string;
  private readonly opts: Required<Omit<TinkerClientOptions, "apiKey" | "baseUrl">> & { apiKey?: string };
  private heartbeat: NodeJS.Timeout | undefined;
  /** The session id after `createSession`. */
  sessionId: string | undefined;
  private jwt: string | undefined;
  private jwtRefresh: Promise<void> | undefined;

  constructor(options: TinkerClientOptions) {
    // The server root: a URL copied with its `/api/v1` suffix (as `arl serve trainer` prints it) works too.
    this.baseUrl = options.baseUrl.replace(/\/+$/, "").replace(/\/api\/v1$/, "");
    if (!/^https?:\/\//.test(this.baseUrl)) throw new Error(`tinker: baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    this.opts = {
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs ?? 60_000,
      pollTimeoutMs: options.pollTimeoutMs ?? 45_000,
      retryForMs: options.retryForMs ?? 300_000,
      retries: options.retries ?? Number.POSITIVE_INFINITY,
      backoffMs: options.backoffMs ?? 1_000,
      heartbeatMs: options.heartbeatMs ?? 10_000,
      futureTimeoutMs: options.futureTimeoutMs ?? 0,
    };
  }

  private backoff(attempt: number): number {
    return Math.min(30, 2 ** attempt) * this.opts.backoffMs;
  }

  /**
   * One HTTP exchange, no retries. A connection error or timeout is status 0.
   * @param path endpoint under `/api/v1/`
   */
  async raw(path: string, spec: RequestSpec = {}, idempotencyKey?: string): Promise<RawResponse & { error?: string; timedOut?: boolean }> {
    const method = spec.method ?? "POST";
    const headers: Record<string, string> = { ...(spec.headers ?? {}) };
    if (method === "POST") headers["content-type"] = spec.contentType ?? "application/json";
    if (spec.accept) headers.accept = spec.accept;
    if (idempotencyKey) headers["x-idempotency-key"] = idempotencyKey;
    // The SDK sends the key (or the JWT it was exchanged for) as X-API-Key only (lib/_auth_token_provider.py).
    if (this.jwt && path !== "auth/token") {
      if (jwtSecondsLeft(this.jwt) <= 60) await this.refreshJwt();
      headers["x-api-key"] = this.jwt;
    } else if (this.opts.apiKey) headers["x-api-key"] = this.opts.apiKey;
    const timeoutMs = spec.timeoutMs ?? this.opts.timeoutMs;
    try {
      const res = await fetch(`${this.baseUrl}/api/v1/${path}`, {
        method,
        headers,
        body: method === "POST" ? (spec.bytes ? new Blob([spec.bytes as Uint8Array<ArrayBuffer>]) : JSON.stringify(spec.body ?? {})) : undefined,
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: res.status, contentType: res.headers.get("content-type") ?? "", body: new Uint8Array(await res.arrayBuffer()) };
    } catch (e) {
      const err = e as Error & { cause?: { code?: string } };
      // Our own abort, or undici's header/body timeouts (Node's fetch gives up on a response after 300 s).
      const timedOut = err.name === "TimeoutError" || /UND_ERR_(HEADERS|BODY)_TIMEOUT/.test(err.cause?.code ?? "");
      const why = timedOut ? `timed out after ${timeoutMs} ms` : `${err.message}${err.cause?.code ? ` (${err.cause.code})` : ""}`;
      return { status: 0, contentType: "", body: new Uint8Array(), timedOut, error: `${why} — is a Tinker server running at ${this.baseUrl}?` };
    }
  }

  /**
   * One request with the SDK's retry rules; returns the 2xx response.
   * @throws TinkerApiError on a non-retryable status (its reason shown) or when the retry budget is spent
   */
  async send(path: string, spec: RequestSpec = {}): Promise<RawResponse> {
    const key = (spec.idempotent ?? (spec.method ?? "POST") === "POST") ? `arl-${randomUUID()}` : undefined;
    const start = Date.now();
    let billingSince = 0;
    for (let attempt = 0; ; attempt++) {
      const res = await this.raw(path, spec, key);
      if (res.status >= 200 && res.status < 300) return res;
      if (res.status === 402 && (await this.billingPause((billingSince ||= Date.now())))) {
        attempt--;
        continue;
      }
      const spent = Date.now() - start;
      const giveUp = !RETRYABLE(res.status) || attempt + 1 >= this.opts.retries || spent >= this.opts.retryForMs;
      const retried = RETRYABLE(res.status) && attempt > 0 ? ` (retried ${attempt}× over ${Math.round(spent / 1000)} s: policy.tinker.retryForMs; a run stopped here continues with --resume)` : "";
      const err = new TinkerApiError(res.status, path, (res.error ?? reasonOf(res, this.baseUrl)) + retried);
      if (giveUp) throw err;
      await sleep(Math.min(this.backoff(attempt), Math.max(0, this.opts.retryForMs - spent)));
    }
  }

  /**
   * A JSON request with retries (`send`), its JSON answer parsed.
   * @throws TinkerApiError as `send`, or when a 2xx body is not JSON
   */
  async call<T>(path: string, body?: unknown, method: "GET" | "POST" = "POST", timeoutMs = this.opts.timeoutMs): Promise<T> {
    const res = await this.send(path, { method, body, timeoutMs });
    return parseJson<T>(res, path);
  }

  /**
   * Waits for an asynchronous request's result by the SDK's polling rules (module doc). `decode` turns a binary
   * (protobuf) answer into the result; `resubmit` sends the original request again when the server says the
   * promise expired (410).
   * @throws TinkerApiError for a failed request (`category` set), a fatal status, or past `futureTimeoutMs`
   */
  async result<T>(
    future: WireFuture,
    how: { type?: string; accept?: string; decode?: (bytes: Uint8Array) => T; resubmit?: () => Promise<WireFuture> } = {},
  ): Promise<T> {
    const start = Date.now();
    let requestId = future.request_id;
    let backoffs = 0;
    let badRequests = 0;
    let quickPolls = 0;
    let serverErrorsSince = 0;
    let billingSince = 0;
    for (let iteration = 0; ; iteration++) {
      if (this.opts.futureTimeoutMs > 0 && Date.now() - start > this.opts.futureTimeoutMs) {
        throw new TinkerApiError(0, `retrieve_future(${requestId})`, `no result after ${this.opts.futureTimeoutMs} ms`);
      }
      const polled = Date.now();
      const res = await this.raw("retrieve_future", {
        body: { request_id: requestId, allow_metadata_only: false },
        accept: how.accept,
        timeoutMs: this.opts.pollTimeoutMs,
        headers: { "x-tinker-request-iteration": String(iteration), ...(how.type ? { "x-tinker-request-type": how.type } : {}) },
      });
      const where = `retrieve_future(${requestId})`;
      if (res.status === 200) {
        backoffs = 0;
        serverErrorsSince = 0;
        if (how.decode && res.contentType.includes("application/x-protobuf")) return how.decode(res.body);
        const json = parseJson<Record<string, unknown>>(res, where);
        if (json.type === "try_again" || json.status === "complete_metadata") {
          // A server that answers try_again at once (no long poll) would be polled in a busy loop: pace it.
          quickPolls = Date.now() - polled < 100 ? quickPolls + 1 : 0;
          if (quickPolls > 0) await sleep(Math.min(1000, 25 * 2 ** Math.min(quickPolls, 6)));
          continue;
        }
        if ("error" in json) {
          const category = json.category === "user" || json.category === "server" ? json.category : "unknown";
          throw new TinkerApiError(200, where, String(json.error), category);
        }
        return json as T;
      }
      if (res.status !== 0 || res.timedOut) backoffs = 0;
      // A poll cut by its own timeout is a slow future, not a failure: poll again at once (SkyRL holds 300 s).
      if (res.timedOut || res.status === 408) {
        serverErrorsSince = 0;
        continue;
      }
      if (res.status >= 500) {
        // The SDK retries 5xx forever; SkyRL answers a failed request's malformed row with 500 — give up after the
        // submit retry budget of consecutive 5xx.
        serverErrorsSince ||= Date.now();
        if (Date.now() - serverErrorsSince > this.opts.retryForMs) throw new TinkerApiError(res.status, where, reasonOf(res, this.baseUrl));
        await sleep(Math.min(this.opts.backoffMs, 1000));
        continue;
      }
      serverErrorsSince = 0;
      if (res.status === 0 || res.status === 429) {
        await sleep(this.backoff(backoffs++));
        continue;
      }
      if (res.status === 402 && (await this.billingPause((billingSince ||= Date.now())))) continue;
      if (res.status === 410 && how.resubmit) {
        requestId = (await how.resubmit()).request_id;
        continue;
      }
      if (res.status === 400 && badRequests < 3) {
        badRequests++;
        continue;
      }
      throw new TinkerApiError(res.status, where, reasonOf(res, this.baseUrl));
    }
  }

  /**
   * A 402 (billing) pauses the request as the SDK does: 5 s waits for up to `billingPauseMs` (the SDK's
   * `billing_exception_max_pause_duration_sec`, 3 600 s). @returns whether to try again
   */
  private async billingPause(since: number): Promise<boolean> {
    if (Date.now() - since > this.billingPauseMs) return false;
    await sleep(Math.min(5_000, this.opts.backoffMs * 5));
    return true;
  }

  /** How long a 402 may pause a request (ms); set from `client/config`. */
  billingPauseMs = 3_600_000;

  /**
   * Exchanges the API key for a short-lived JWT (`POST auth/token {}` → `{jwt}`), sent as X-API-Key from then on and
   * renewed when ≤ 60 s of it are left — what the SDK does when `client/config` says `pjwt_auth_enabled`
   * (lib/internal_client_holder.py, lib/_jwt_auth.py).
   * @throws TinkerApiError when the exchange fails
   */
  async useJwt(): Promise<void> {
    await this.refreshJwt();
  }

  private refreshJwt(): Promise<void> {
    this.jwtRefresh ??= (async () => {
      try {
        const saved = this.jwt;
        this.jwt = undefined; // the exchange itself authenticates with the API key
        const r = await this.call<{ jwt?: unknown }>("auth/token", {}).catch((e: unknown) => {
          this.jwt = saved;
          throw e;
        });
        if (typeof r.jwt !== "string") throw new TinkerApiError(200, "auth/token", `expected {jwt}, got ${JSON.stringify(r).slice(0, 200)}`);
        this.jwt = r.jwt;
      } finally {
        this.jwtRefresh = undefined;
      }
    })();
    return this.jwtRefresh;
  }

  /** Submits an asynchronous JSON request and waits for its (JSON) result. @throws TinkerApiError */
  async submit<T>(path: string, body: unknown, type?: string): Promise<T> {
    const spec: RequestSpec = { body };
    const send = async () => parseJson<WireFuture>(await this.send(path, spec), path);
    return this.result<T>(await send(), { type, resubmit: send });
  }

  /**
   * Fetches `/api/v1/client/config` (the SDK's first call; its flags say how to speak to the server), or null when
   * the server has no such endpoint (404/405: a server that predates it, e.g. one that speaks JSON only).
   * @throws TinkerApiError on any other failure
   */
  async clientConfig(sdkVersion: string): Promise<Record<string, unknown> | null> {
    try {
      // Retried like any request (a restarting server); a 404/405 is an answer: no such endpoint.
      return parseJson<Record<string, unknown>>(await this.send("client/config", { body: { sdk_version: sdkVersion }, idempotent: false }), "client/config");
    } catch (e) {
      if (e instanceof TinkerApiError && (e.status === 404 || e.status === 405)) return null;
      throw e;
    }
  }

  /**
   * Opens a session (`create_session` with the SDK's required fields: `tags`, `user_metadata`, `sdk_version`) and
   * starts its heartbeats (unref'd: they never keep the process alive).
   * @throws TinkerApiError
   */
  async createSession(options: { tags?: string[]; userMetadata?: Record<string, string>; sdkVersion: string }): Promise<string> {
    const r = await this.call<{ session_id: string }>("create_session", {
      tags: options.tags ?? ["agentic-rl"],
      user_metadata: options.userMetadata ?? {},
      sdk_version: options.sdkVersion,
      type: "create_session",
    });
    this.sessionId = r.session_id;
    if (this.opts.heartbeatMs > 0) {
      this.heartbeat = setInterval(() => {
        void this.raw("session_heartbeat", { body: { session_id: r.session_id, type: "session_heartbeat" }, timeoutMs: 10_000 }).catch(() => {});
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

/** Seconds until a JWT's `exp` claim (0 when it cannot be read). */
function jwtSecondsLeft(jwt: string): number {
  try {
    const payload = JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8")) as { exp?: unknown };
    // A token without a readable expiry is used until the server refuses it (no refresh loop).
    return typeof payload.exp === "number" ? payload.exp - Date.now() / 1000 : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

function parseJson<T>(res: RawResponse, path: string): T {
  const text = decoder.decode(res.body);
  try {
    return (text === "" ? {} : JSON.parse(text)) as T;
  } catch {
    throw new TinkerApiError(res.status, path, `expected JSON, got ${res.contentType || "no content type"}: ${text.slice(0, 200)}`);
  }
}

/** The server's reason for an error response, with a hint for the usual mistakes. */
function reasonOf(res: RawResponse, baseUrl: string): string {
  const text = decoder.decode(res.body);
  let reason = text.slice(0, 500);
  try {
    const o = JSON.parse(text) as { error?: unknown; detail?: unknown };
    reason = typeof o.error === "string" ? o.error : typeof o.detail === "string" ? o.detail : o.detail !== undefined ? JSON.stringify(o.detail).slice(0, 500) : reason;
  } catch {
    // not JSON: the text itself
  }
  if (res.status === 401) reason += " (set the key in the variable policy.tinker.apiKeyEnv names, default TINKER_API_KEY)";
  if (res.status === 404 && /no route|not found/i.test(reason)) reason += ` (is ${baseUrl} a Tinker API server root?)`;
  if (res.status === 415) reason += " (the server wants another body encoding: set policy.tinker.wire)";
  return reason;
}
