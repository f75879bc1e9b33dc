/**
 * The HTTP layer every server shares — `arl serve …`, the training gateway, `arl view` (fastify): loopback bind by default, optional bearer token
 * (compared in constant time), request-size limit, JSON bodies at most `MAX_JSON_DEPTH` levels deep and checked with
 * zod, and errors as `{error: reason}` with a 4xx status and a bounded message (`./limits.ts`) — a bad request never
 * becomes a 500.
 */
import { createServer, STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { z } from "zod";
import { DEFAULT_BODY_LIMIT, MAX_JSON_DEPTH, capMessage, cutKey, issueMessage, jsonTextTooDeepPath, listProblems, pathName, quoteShort, sameSecret, tooDeepPath } from "./limits.ts";

export { DEFAULT_BODY_LIMIT } from "./limits.ts";

/** Options every server takes. */
export interface ServeOptions {
  /** Interface to bind (default `127.0.0.1`; `0.0.0.0` to serve other machines). */
  host?: string;
  /** TCP port; 0 picks a free one (default 0). */
  port?: number;
  /** When set, every request must carry `Authorization: Bearer <apiKey>` (or Tinker's `X-API-Key: <apiKey>`). */
  apiKey?: string;
  /** Largest accepted request body (bytes; default 16 MiB; `serve retrieval` / `serve mcp` 1 MiB). */
  bodyLimit?: number;
  /**
   * Most time to receive a whole request, headers and body (ms; default 30 000): a client that sends slowly
   * (slowloris) is answered 408 and disconnected.
   */
  requestTimeoutMs?: number;
  /** Most time a handler may take before the server answers 503 itself (ms; default 0 = no limit; long polls need it off or long). */
  handlerTimeoutMs?: number;
}

/** An error with the HTTP status to answer (4xx for the client's mistakes). */
export class HttpError extends Error {
  /**
   * @param status HTTP status code
   * @param message the reason, sent as `{error: message}`
   */
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A request body nested deeper than `MAX_JSON_DEPTH` levels of arrays and objects (400), refused before any route
 * code walks it. `path` leads to the first container past the limit; `field` is its first four steps (e.g.
 * `tools[0].function.parameters`), the request field to fix.
 */
export class NestingError extends HttpError {
  readonly field: string | null;
  /** @param path keys and indices to the first array or object past the limit */
  constructor(
    readonly path: ReadonlyArray<string | number>,
    maxDepth = MAX_JSON_DEPTH,
  ) {
    const shown = pathName(path.slice(0, 8)) ?? "body";
    super(400, `${shown}${path.length > 8 ? "…" : ""}: JSON nested deeper than ${maxDepth} levels of arrays and objects; flatten it (e.g. a tool's parameters schema)`);
    this.field = pathName(path.slice(0, 4));
  }
}

/** @throws NestingError when `value` is nested deeper than `maxDepth` levels (default `MAX_JSON_DEPTH`) */
export function checkJsonDepth(value: unknown, maxDepth = MAX_JSON_DEPTH): void {
  const path = tooDeepPath(value, maxDepth);
  if (path !== undefined) throw new NestingError(path, maxDepth);
}

/**
 * Parses a request body with a zod schema.
 * @returns the parsed value
 * @throws HttpError 400 naming the invalid fields (`forward_backward_input.data.0.model_input: Required`): the first
 *   few, then how many more, each with the value it refused (`issueMessage`: cut, with its type); keys from the client (path steps, unrecognized keys) cut to 80 characters each
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const r = schema.safeParse(body, { reportInput: true });
  if (r.success) return r.data;
  const reasons = r.error.issues.map((i) => {
    // zod's own unrecognized-keys message quotes every key in full: quote the first few, cut.
    const message =
      i.code === "unrecognized_keys" && i.message.startsWith("Unrecognized key")
        ? `Unrecognized key${i.keys.length === 1 ? "" : "s"}: ${i.keys.slice(0, 5).map((k) => quoteShort(k)).join(", ")}${i.keys.length > 5 ? ` … and ${i.keys.length - 5} more` : ""}`
        : issueMessage(i);
    return `${i.path.length > 0 ? i.path.map((p) => cutKey(String(p))).join(".") : "body"}: ${message}`;
  });
  throw new HttpError(400, listProblems(reasons));
}

/** The body of an error answered outside a route (`createApp`'s `errorBody`): `{error: message}` unless a server says otherwise. */
export type ErrorBody = (status: number, message: string) => unknown;

/** Longest path parameter (characters) any server takes: a rollout id's 256 with room for percent-encoding. */
export const MAX_PATH_PARAM = 1024;

/**
 * A fastify instance with the shared behaviour: bearer-token check (except `GET …/healthz`; constant-time), `{error}`
 * bodies with messages of at most `MAX_ERROR_MESSAGE_CHARS`, JSON parse errors and oversized bodies as 400/413, bodies
 * nested deeper than `MAX_JSON_DEPTH` as 400 (`NestingError`, before any route code), unknown routes as 404; errors before routing (a path parameter
 * over `MAX_PATH_PARAM` characters: 414, a malformed URL: 400) and on the connection (a request not received within
 * `requestTimeoutMs`: 408, a malformed request: 400) answered with `errorBody` too, never fastify's own shapes.
 * @param errorBody the body of an error sent on the raw connection (fastify's hooks do not run there); default
 *   `{error: message}` (the gateway gives OpenAI's error object)
 */
export function createApp(options: ServeOptions = {}, errorBody: ErrorBody = (_status, message) => ({ error: message })): FastifyInstance {
  const requestTimeout = options.requestTimeoutMs ?? 30_000;
  const app = Fastify({
    logger: false,
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // Path parameters up to MAX_PATH_PARAM characters: the gateway's rollout ids may be 256 (ROLLOUT_ID_RULE), and
    // fastify's default of 100 refused ids the header accepts (issue 29's outside probe).
    routerOptions: { maxParamLength: MAX_PATH_PARAM },
    // Before routing (no route, so no route's hooks): the body is `errorBody`'s.
    frameworkErrors: (err, _req, reply) => {
      const e = err as Error & { statusCode?: number; code?: string };
      const status = e.statusCode !== undefined && e.statusCode >= 400 && e.statusCode < 500 ? e.statusCode : 400;
      const message = e.code === "FST_ERR_MAX_PARAM_LENGTH" ? `a path parameter (e.g. a rollout id) is longer than ${MAX_PATH_PARAM} characters` : capMessage(e.message, 300);
      void (reply as FastifyReply).code(status).send(errorBody(status, message));
    },
    // On the connection, before a request exists (no reply, no hooks): written to the socket, then closed.
    clientErrorHandler: (err: Error & { code?: string }, socket: Socket) => {
      if (err.code === "ECONNRESET" || !socket.writable) {
        socket.destroy();
        return;
      }
      const status = err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400;
      const message = status === 408 ? `the request was not received within ${requestTimeout} ms` : `malformed request (${err.code ?? err.message})`;
      const body = JSON.stringify(errorBody(status, message));
      socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    },
    // Idle keep-alive sockets are closed at shutdown; in-flight requests finish first (graceful SIGTERM).
    forceCloseConnections: "idle",
    // Node checks request timeouts every `connectionsCheckingInterval` (30 s by default): check often enough that a
    // slow client is cut near its limit.
    serverFactory: (handler) =>
      createServer(
        {
          requestTimeout,
          headersTimeout: requestTimeout > 0 ? Math.min(requestTimeout, 60_000) : 60_000,
          connectionsCheckingInterval: Math.max(100, Math.min(1000, requestTimeout > 0 ? requestTimeout / 4 : 1000)),
        },
        handler,
      ),
  });
  // Shutting down: answers sent from now on close their connection, so close() does not wait for keep-alive timeouts.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onSend", async (_req, reply, payload) => {
    if (closing) void reply.header("connection", "close");
    return payload;
  });
  const handlerTimeout = options.handlerTimeoutMs ?? 0;
  if (handlerTimeout > 0) {
    app.addHook("onRequest", async (req, reply) => {
      const timer = setTimeout(() => {
        if (!reply.sent && !reply.raw.headersSent) void reply.code(503).send({ error: `request took longer than ${handlerTimeout} ms` });
      }, handlerTimeout);
      timer.unref();
      reply.raw.on("close", () => clearTimeout(timer));
    });
  }
  if (options.apiKey) {
    const key = options.apiKey;
    app.addHook("onRequest", async (req: FastifyRequest, reply: FastifyReply) => {
      // the matched route, not the raw URL: `/v1/models?x=/healthz` or a percent-encoded path must not pass
      if (req.method === "GET" && req.routeOptions.url !== undefined && /(^|\/)healthz$/.test(req.routeOptions.url)) return;
      const auth = req.headers.authorization;
      const given = auth && /^bearer /i.test(auth) ? auth.slice(7).trim() : req.headers["x-api-key"];
      if (!sameSecret(given, key)) await reply.code(401).send({ error: "missing or wrong API key (Authorization: Bearer <key>)" });
    });
  }
  // JSON bodies: the depth is read off the text before JSON.parse (jsonTextTooDeepPath, linear and cheap), since V8
  // spends seconds building a body of millions of `[` and the event loop (`/healthz`, other requests) waits meanwhile
  // (issue 29); then fastify's own parser (secure-json-parse: `__proto__` keys refused).
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    const path = jsonTextTooDeepPath(body as string, MAX_JSON_DEPTH);
    if (path !== undefined) done(new NestingError(path), undefined);
    else parseJson(req, body as string, done);
  });
  // Before any route code: JSON.stringify, template printers and schema walkers recurse, and overflow the stack on
  // bodies nested ~10⁴ deep (a 500); a depth limit makes that a 400 naming the field. (A JSON body is checked as text
  // above; this catches any other parser's.)
  app.addHook("preValidation", async (req) => {
    if (req.body !== null && typeof req.body === "object") checkJsonDepth(req.body);
  });
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    if (err instanceof HttpError) return reply.code(err.status).send({ error: capMessage(err.message) });
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    return reply.code(status).send({ error: capMessage(status === 500 ? `internal error: ${err.message}` : err.message) });
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ error: capMessage(`no route ${req.method} ${req.url}`, 300) }));
  return app;
}

/** A listening server. */
export interface RunningServer {
  /** Base URL, e.g. `http://127.0.0.1:8000`. */
  url: string;
  app: FastifyInstance;
  /** Stops accepting connections and resolves when in-flight requests are done. */
  close(): Promise<void>;
}

/**
 * Starts listening.
 * @throws Error when the port is taken or the host cannot be bound
 */
export async function listen(app: FastifyInstance, options: ServeOptions = {}): Promise<RunningServer> {
  const host = options.host ?? "127.0.0.1";
  if (host.trim() === "") throw new Error('serve: --host is empty (give an address such as 127.0.0.1 or 0.0.0.0)');
  await app.listen({ host, port: options.port ?? 0 });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : options.port ?? 0;
  const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  return { url: `http://${shown}:${port}`, app, close: () => app.close() };
}

/** Resolves when the process gets SIGINT or SIGTERM, after closing `server` (in-flight requests finish first). */
export function untilSignal(server: RunningServer): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      void server.close().then(resolve, resolve);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}
