/**
 * `arl view`'s HTTP server, on the shared HTTP layer (`src/http/server.ts`, fastify): loopback by default, an
 * optional bearer token, errors as `{error}` with a 4xx status. Routes:
 * - `GET /` — the page; `GET /app.js` — its script (neither holds data, so neither needs the token);
 * - `GET /api/index` — the sources and what files they have now (`ViewIndex`);
 * - `GET /api/metrics?id=<source>` — `metrics.jsonl` column-wise, detector firings, `summary.json`;
 * - `GET /api/samples?id=<source>&file=<stem>` — one `samples/<stem>.jsonl` with groups, outcomes, advantages;
 * - `GET /healthz`.
 * Every `/api/*` answer is read from disk at request time (JSON-lines files incrementally: only the lines appended
 * since the last request; other files only when they changed), so the page follows a run that is still training by
 * polling `/api/index`. Reads and answers are bounded (src/view/limits.ts): `/api/index` does not grow with a file's
 * line sizes or key counts, `/api/metrics` thins lines past `maxCells` values.
 */
import { isAbsolute } from "node:path";
import type { FastifyInstance } from "fastify";
import { HttpError, createApp, listen, type RunningServer, type ServeOptions } from "../http/server.ts";
import { sameSecret } from "../http/limits.ts"; // SHA-256 digests compared in constant time: the key length does not leak either
import { clientBundle } from "./bundle.ts";
import { SourceReader } from "./sourceReader.ts";
import { discoverSources, type SourceRef } from "./sources.ts";
import { servedPage } from "./page.ts";
import type { MetricsPayload, SamplesPayload, ViewBundleData, ViewIndex } from "./types.ts";

export { DEFAULT_POLL_MS, DEFAULT_VIEW_PORT } from "./defaults.ts";
import { DEFAULT_POLL_MS, DEFAULT_VIEW_PORT } from "./defaults.ts";

/** Options of the viewer's server. */
export interface ViewServerOptions extends ServeOptions {
  /** The page polls `/api/index` this often (ms; 0 = never). Default 2 000. */
  pollMs?: number;
}

/**
 * The sources of a set of paths, re-discovered on each call (a lab adds design folders while it runs), with one
 * cached reader per folder.
 */
export class ViewCatalog {
  private readonly readers = new Map<string, SourceReader>();

  /**
   * @param paths run folders, lab folders or folders of them (`discoverSources`)
   * @throws Error when a path holds no run or lab (checked once here, so the CLI fails before serving)
   */
  constructor(readonly paths: readonly string[]) {
    this.sources();
  }

  /** The readers of every source now, in discovery order. */
  sources(): SourceReader[] {
    let refs: SourceRef[];
    try {
      refs = discoverSources(this.paths);
    } catch (e) {
      if (this.readers.size === 0) throw e;
      return [...this.readers.values()]; // a folder vanished meanwhile: keep what was there
    }
    return refs.map((ref) => {
      const key = `${ref.id}\u0000${ref.path}`;
      let r = this.readers.get(key);
      if (r === undefined) {
        r = new SourceReader(ref);
        this.readers.set(key, r);
      }
      return r;
    });
  }

  /** @throws HttpError 404 naming an unknown source id */
  reader(id: string): SourceReader {
    const r = this.sources().find((s) => s.ref.id === id);
    if (r === undefined) throw new HttpError(404, `no source ${JSON.stringify(id)} (GET /api/index lists them)`);
    return r;
  }

  /**
   * The index the page starts from. While a long file is still being read (a budget per request), the page is told
   * to poll (every second when polling is off) so it gets the rest.
   */
  index(pollMs: number): ViewIndex {
    const readers = this.sources();
    const sources = readers.map((s) => s.info());
    return { sources, static: false, pollMs: pollMs === 0 && readers.some((r) => r.reading) ? 1000 : pollMs };
  }

  /** Every payload the page could ask for (what `--export` embeds); `static` set, no polling. */
  exportData(): ViewBundleData {
    const readers = this.sources();
    for (const r of readers) r.readAll();
    const metrics: Record<string, MetricsPayload> = {};
    const samples: Record<string, Record<string, SamplesPayload>> = {};
    for (const r of readers) {
      metrics[r.ref.id] = r.metrics();
      samples[r.ref.id] = Object.fromEntries(r.sampleFiles().map((f) => [f.name, r.samplesOf(f.name)]));
    }
    // an export is shared: each source's path is its id (relative to the viewed folders), and any string of the
    // payloads that names a source's folder (summary.json's `run`, …) names it by its id, not this machine's path
    const folders = readers.map((r) => [r.ref.path, r.ref.id] as const).sort((a, b) => b[0].length - a[0].length);
    const relative = (v: unknown): unknown => {
      if (typeof v === "string") {
        for (const [abs, id] of folders) if (v === abs || v.startsWith(`${abs}/`) || v.startsWith(`${abs}\\`)) return id + v.slice(abs.length);
        return v;
      }
      if (Array.isArray(v)) return v.map(relative);
      if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, relative(x)]));
      return v;
    };
    for (const id of Object.keys(metrics)) {
      const summary = relative(metrics[id].summary);
      // the run folder as it was when it was written (it may have moved since): its id
      if (summary !== null && typeof summary === "object" && typeof (summary as { run?: unknown }).run === "string" && isAbsolute((summary as { run: string }).run)) (summary as { run: string }).run = id;
      metrics[id] = { ...metrics[id], summary };
    }
    return { index: { sources: readers.map((r) => ({ ...r.info(), path: r.ref.id })), static: true, pollMs: 0 }, metrics, samples };
  }
}


/**
 * The viewer's fastify app (not listening).
 * @param catalog the folders to serve
 * @param options `apiKey`: `/api/*` requires `Authorization: Bearer <key>` (or `X-API-Key`); `pollMs` as above
 */
export function createViewApp(catalog: ViewCatalog, options: ViewServerOptions = {}): FastifyInstance {
  const { apiKey, ...rest } = options;
  const app = createApp(rest); // the shared layer's own check would also lock the page and script: checked here instead
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  if (apiKey !== undefined) {
    // Every route but the page, its script and the probes needs the key — decided by the matched route (the raw URL
    // could spell /api/ percent-encoded, `/%61pi/index`, and still reach it); unknown paths need it too.
    const open = new Set(["/", "/app.js", "/healthz", "/favicon.ico"]);
    app.addHook("onRequest", async (req, reply) => {
      if (req.method === "GET" && req.routeOptions.url !== undefined && open.has(req.routeOptions.url)) return;
      const auth = req.headers.authorization;
      const given = auth !== undefined && /^bearer /i.test(auth) ? auth.slice(7).trim() : req.headers["x-api-key"];
      if (typeof given !== "string" || !sameSecret(given, apiKey)) await reply.code(401).send({ error: "missing or wrong API key (Authorization: Bearer <key>; open the page as /?token=<key>)" });
    });
  }
  app.get("/healthz", async () => ({ ok: true }));
  app.get("/favicon.ico", async (_req, reply) => reply.code(204).send());
  app.get("/", async (_req, reply) => reply.type("text/html; charset=utf-8").header("cache-control", "no-store").send(servedPage()));
  app.get("/app.js", async (_req, reply) => reply.type("text/javascript; charset=utf-8").header("cache-control", "no-store").send(await clientBundle()));
  app.get("/api/index", async (_req, reply) => reply.header("cache-control", "no-store").send(catalog.index(pollMs)));
  const param = (query: unknown, name: string): string => {
    const v = (query as Record<string, unknown> | undefined)?.[name];
    if (typeof v !== "string" || v === "") throw new HttpError(400, `query parameter ${name} is required`);
    return v;
  };
  app.get("/api/metrics", async (req, reply) => reply.header("cache-control", "no-store").send(catalog.reader(param(req.query, "id")).metrics()));
  app.get("/api/samples", async (req, reply) => {
    const r = catalog.reader(param(req.query, "id"));
    const file = param(req.query, "file");
    if (!r.sampleFiles().some((f) => f.name === file)) throw new HttpError(404, `${r.ref.id} has no samples/${file}.jsonl`);
    return reply.header("cache-control", "no-store").send(r.samplesOf(file));
  });
  return app;
}

/**
 * Serves the viewer until closed; reads the folders' index data (not their samples) right after it starts listening.
 * @param paths folders to view (`discoverSources`)
 * @param options host (default 127.0.0.1), port (default 8600; 0 = any free port), apiKey, pollMs
 * @throws Error when a path holds no run or lab, or the port cannot be bound
 */
export async function startViewServer(paths: readonly string[], options: ViewServerOptions = {}): Promise<RunningServer & { catalog: ViewCatalog }> {
  const catalog = new ViewCatalog(paths);
  void clientBundle().catch(() => undefined); // bundle while the server starts; an error is reported by GET /app.js
  const app = createViewApp(catalog, options);
  const server = await listen(app, { ...options, port: options.port ?? DEFAULT_VIEW_PORT });
  // Read every folder's index data now, while the browser is still loading the page script (the page's first
  // request is the index): the files are then cached, and an error shows on the page's own request.
  setImmediate(() => {
    try {
      catalog.index(options.pollMs ?? DEFAULT_POLL_MS);
    } catch {
      // reported by GET /api/index
    }
  });
  return { ...server, catalog };
}
