/**
 * Idempotency keys for a fastify app (`X-Idempotency-Key`, which the Tinker SDK sends on every non-GET request and
 * keeps across the retries of one request: `src/tinker/_client.py:107`, `_base_client.py:744, 969-971` @ d595dc2).
 *
 * A POST sent again with the same key and the same request — method, URL and body (JSON compared in a canonical form:
 * key order and spacing do not count; other bodies byte for byte) — gets the first answer back instead of running
 * twice. The same key with a different request is refused with 422 and a reason, as the IETF draft
 * `draft-ietf-httpapi-idempotency-key-header` (section "Error Scenarios": a key reused with a different payload → 422)
 * and Stripe (`idempotency_error`: "a key re-used on a request that does not match the first request's API endpoint
 * and parameters") do. A repeat that arrives while the first is still being handled waits for its answer. Only 200
 * answers are kept: after a failure the key is free again, so a corrected request (or the same one) runs afresh.
 */
import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { HttpError } from "../http/server.ts";
import { quoteShort } from "../http/limits.ts";

/** Options of `installIdempotency`. */
export interface IdempotencyOptions {
  /** Request header carrying the key (lower case; default `x-idempotency-key`). */
  header?: string;
  /** Routes (fastify route URLs, e.g. `/api/v1/retrieve_future`) never replayed: polls must see fresh state. */
  exclude?: readonly string[];
  /** Most keys remembered; the oldest are forgotten first (default 10 000). */
  maxEntries?: number;
}

interface Entry {
  fingerprint: string;
  method: string;
  url: string;
  /** The 200 answer's body, once sent. */
  payload?: string;
  /** Settles when the first request's answer is sent (or it ends without one). */
  settled: Promise<void>;
  settle: () => void;
}

/**
 * A digest of what a request asks: method, URL and body (parsed JSON in canonical form — object keys sorted —, a
 * Buffer or string as its bytes).
 * @returns hex SHA-256
 */
export function requestFingerprint(method: string, url: string, body: unknown): string {
  const h = createHash("sha256").update(`${method}\n${url}\n`);
  if (Buffer.isBuffer(body) || body instanceof Uint8Array) h.update("bytes\n").update(body);
  else if (typeof body === "string") h.update("text\n").update(body);
  else if (body !== undefined) h.update("json\n").update(canonicalJson(body));
  return h.digest("hex");
}

/**
 * JSON with every object's keys sorted, so two encodings of one value compare equal. Objects are copied with sorted
 * keys and the copy is written by the native `JSON.stringify` (a replacer function would be called once per array
 * element: seconds for a 16 MB forward_backward body); arrays of plain values are used as they are. Recursive:
 * bodies reach it after `createApp`'s depth limit (`MAX_JSON_DEPTH`).
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(withSortedKeys(value)) ?? "undefined";
}

function withSortedKeys(v: unknown): unknown {
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return v.some((x) => x !== null && typeof x === "object") ? v.map(withSortedKeys) : v;
  const out: Record<string, unknown> = {};
  // defineProperty: a key like `__proto__` stays an own property of the copy.
  for (const k of Object.keys(v).sort()) Object.defineProperty(out, k, { value: withSortedKeys((v as Record<string, unknown>)[k]), enumerable: true });
  return out;
}

/** Hex SHA-256 of `value`'s canonical JSON: a digest of what a request asks, key order aside. */
export function jsonDigest(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

/**
 * Adds idempotency-key handling to `app` (hooks `preHandler` and `onSend`): see the module comment. Requests without
 * the header, other methods than POST, unmatched routes and `exclude`d routes are untouched.
 */
export function installIdempotency(app: FastifyInstance, options: IdempotencyOptions = {}): void {
  const header = options.header ?? "x-idempotency-key";
  const exclude = new Set(options.exclude ?? []);
  const maxEntries = options.maxEntries ?? 10_000;
  const entries = new Map<string, Entry>();
  /** The entry a request created (it answers for its key). */
  const owners = new WeakMap<FastifyRequest, { key: string; entry: Entry }>();

  const keyOf = (req: FastifyRequest): string | undefined => {
    const key = req.headers[header];
    const route = req.routeOptions.url;
    if (req.method !== "POST" || typeof key !== "string" || key === "" || route === undefined || exclude.has(route)) return undefined;
    return key;
  };
  /** Ends the owner's pending state: keeps a 200 answer, else frees the key. */
  const finish = (key: string, entry: Entry, payload: string | undefined): void => {
    if (entries.get(key) === entry) {
      if (payload !== undefined) entry.payload = payload;
      else if (entry.payload === undefined) entries.delete(key);
    }
    entry.settle();
  };

  app.addHook("preHandler", async (req: FastifyRequest, reply: FastifyReply) => {
    const key = keyOf(req);
    if (key === undefined) return;
    const fingerprint = requestFingerprint(req.method, req.url, req.body);
    for (;;) {
      const seen = entries.get(key);
      if (!seen) break;
      if (seen.fingerprint !== fingerprint) {
        const what = seen.method === req.method && seen.url === req.url ? `${seen.method} ${seen.url} with a different body` : `${seen.method} ${seen.url}`;
        return reply.code(422).send({
          error: `${header} ${quoteShort(key)} was already used for another request (${what}): a retry must repeat its request exactly; send a new key for a new request`,
        });
      }
      if (seen.payload !== undefined) return reply.code(200).header("content-type", "application/json; charset=utf-8").send(seen.payload);
      await seen.settled; // the same request is still being handled: its answer is this one's
    }
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const entry: Entry = { fingerprint, method: req.method, url: req.url, settled, settle };
    entries.set(key, entry);
    while (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
    owners.set(req, { key, entry });
    // A request that ends without an answer (the connection dropped) frees its key too.
    reply.raw.once("close", () => finish(key, entry, undefined));
  });
  app.addHook("onSend", async (req, reply, payload) => {
    const own = owners.get(req);
    if (own) {
      owners.delete(req);
      finish(own.key, own.entry, reply.statusCode === 200 && typeof payload === "string" ? payload : undefined);
    }
    return payload;
  });
}

/**
 * Answers kept under request sequence ids (a training request's `seq_id`, create_model's `model_seq_id`,
 * create_sampling_session's `sampling_session_seq_id`), which Tinker clients resend unchanged when they retry with a
 * new idempotency key. SkyRL's rule (`skyrl/tinker/api.py:362-408`, `db_models.py:93-98`): the same request under a
 * used id gets the first answer; another request under it is a 409 ("Training request sequence number was reused").
 */
export class SeqLedger<T> {
  private readonly kept = new Map<string, { answer: T; digest: string; what: string }>();

  /**
   * The answer kept under `id` when `request` is the one it was given for; undefined when `id` is unused.
   * @param request what the request asks (compared as canonical JSON)
   * @param label how a message names the id (e.g. `seq_id 3 of model model_…`)
   * @throws HttpError 409 when `id` was used for another request, naming that request
   */
  repeat(id: string, request: unknown, label: string): T | undefined {
    const seen = this.kept.get(id);
    if (!seen) return undefined;
    if (seen.digest !== jsonDigest(request)) {
      throw new HttpError(409, `${label} was already used for another request (${seen.what}): a retry must repeat its request exactly; a new request takes the next id`);
    }
    return seen.answer;
  }

  /** Keeps `answer` under `id` for `request`, described as `what` in conflict messages (e.g. `optim_step`). */
  keep(id: string, request: unknown, answer: T, what: string): void {
    this.kept.set(id, { answer, digest: jsonDigest(request), what });
  }
}
