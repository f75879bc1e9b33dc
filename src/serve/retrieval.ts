/**
 * `arl serve retrieval`: BM25 retrieval over HTTP with the request and response shapes of Search-R1's retrieval
 * server (PeterGriffinJin/Search-R1 `search_r1/search/retrieval_server.py`, `POST /retrieve`), which veRL's search
 * tool calls (volcengine/verl `verl/tools/utils/search_r1_like_utils.py` `call_search_api`, always with
 * `return_scores: true`).
 *
 * Request `{queries: string[], topk?: int ≥ 1 | null, return_scores?: boolean}`;
 * response `{result: [[{document: {id, contents}, score}, …] per query]}` when `return_scores` is true, and
 * `{result: [[{id, contents}, …] per query]}` (documents bare, no score) when it is false or absent — exactly as
 * Search-R1's `retrieve_endpoint`. `contents` is the wiki-18 form `"Title"\ntext` (quoted title, newline, text),
 * which both Search-R1's and veRL's `_passages2string` split into title and text.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Passage } from "../core/types.ts";
import type { BM25Index } from "../retrieval/bm25.ts";
import { createApp, parseBody, type ServeOptions } from "../http/server.ts";
import { SMALL_BODY_LIMIT } from "../http/limits.ts";

/** Largest `topk` one request may ask for (a guard against accidental full-corpus dumps). */
export const MAX_TOPK = 100;
/** Most queries in one request (veRL sends one tool call's `query_list`; Search-R1 one batch of rollouts). */
export const MAX_QUERIES = 1024;
/** Most query characters in one request, all queries together (bounds one request's BM25 work to about a second). */
export const MAX_REQUEST_QUERY_CHARS = 65_536;
/** Longest query accepted (characters). */
export const MAX_QUERY_CHARS = 4096;

/** A retrieved document as Search-R1 serves it: wiki-18's `{id, contents}` with `contents = "Title"\ntext`. */
export interface RetrievalDocument {
  id: string;
  contents: string;
}

/** One hit with its score (`return_scores: true`); `score` is the BM25 score (higher is better). */
export interface ScoredDocument {
  document: RetrievalDocument;
  score: number;
}

/** Response of `POST /retrieve`: one list per query, best first (scored or bare, by `return_scores`). */
export interface RetrieveResponse {
  result: ScoredDocument[][] | RetrievalDocument[][];
}

/** Options of `createRetrievalApp`: the HTTP options plus the default `topk` (Search-R1 `--topk`, default 3). */
export interface RetrievalAppOptions extends ServeOptions {
  /** `topk` used when a request omits it or sends null/0 (Search-R1 falls back on `if not request.topk`); default 3. */
  defaultTopk?: number;
}

/** Body schema of `POST /retrieve` (Search-R1 `QueryRequest`: `queries`, `topk: Optional[int]`, `return_scores: bool = False`). */
export const RetrieveRequest = z
  .object({
    queries: z
      .array(z.string().max(MAX_QUERY_CHARS, `a query is at most ${MAX_QUERY_CHARS} characters`), {
        error: "expected a list of query strings",
      })
      .min(1, "expected at least one query")
      .max(MAX_QUERIES, `at most ${MAX_QUERIES} queries per request`)
      .refine((qs) => qs.reduce((n, q) => n + q.length, 0) <= MAX_REQUEST_QUERY_CHARS, {
        message: `at most ${MAX_REQUEST_QUERY_CHARS} query characters per request in all (split the batch)`,
      }),
    // Search-R1 treats a missing, null or 0 topk as "use the server default"; negatives and fractions are errors here.
    topk: z
      .number({ error: "expected an integer ≥ 1 (or null for the default)" })
      .int("expected an integer ≥ 1")
      .min(0, "expected an integer ≥ 1")
      .max(MAX_TOPK, `expected an integer ≤ ${MAX_TOPK}`)
      .nullable()
      .optional(),
    return_scores: z.boolean({ error: "expected true or false" }).optional(),
  });
// Unknown keys are ignored, as pydantic's BaseModel (Search-R1's QueryRequest) ignores them.

/** A passage as wiki-18 `contents`: `"Title"\ntext` (the inverse of `splitContents` in src/retrieval/corpus.ts). */
export function passageContents(p: Pick<Passage, "title" | "text">): string {
  return `"${p.title}"\n${p.text}`;
}

/**
 * Answers one retrieval request (no HTTP): each query's `topk` best passages by BM25.
 * A query without word tokens (e.g. `""` or `"?!"`) gets an empty list, as a Lucene search with no hits does.
 * @param index the BM25 index to search
 * @param request a parsed `RetrieveRequest`
 * @param defaultTopk the `topk` used when the request gives none (or 0)
 */
export async function retrieve(index: BM25Index, request: z.output<typeof RetrieveRequest>, defaultTopk = 3): Promise<RetrieveResponse> {
  return retrieveResponse(await retrieveHits(index, request, defaultTopk), request.return_scores === true);
}

/** Each query's `topk` best passages (`[query][hit]`, best first), as `retrieve` answers them. */
async function retrieveHits(index: BM25Index, request: z.output<typeof RetrieveRequest>, defaultTopk: number): Promise<Passage[][]> {
  const topk = request.topk ? request.topk : defaultTopk;
  const hits: Passage[][] = [];
  for (const q of request.queries) {
    hits.push(index.search(q, topk));
    // BM25 runs on the event loop: yield between queries so health checks and other clients are served meanwhile.
    await new Promise<void>((r) => setImmediate(r));
  }
  return hits;
}

/** Search-R1's response body for `hits` (`[query][hit]`): scored documents, or bare ones. */
function retrieveResponse(hits: readonly Passage[][], returnScores: boolean): RetrieveResponse {
  const doc = (p: Passage): RetrievalDocument => ({ id: p.id, contents: passageContents(p) });
  if (returnScores) {
    return { result: hits.map((list) => list.map((p) => ({ document: doc(p), score: p.score ?? 0 }))) };
  }
  return { result: hits.map((list) => list.map(doc)) };
}

/**
 * A fastify app serving `POST /retrieve` over `index` and `GET /healthz` (`{status: "ok", passages}`).
 * Malformed bodies answer 400 `{error}` naming the field (e.g. `topk: expected an integer ≥ 1`), never 500.
 * @throws Error when `defaultTopk` is not an integer in [1, MAX_TOPK]
 */
export function createRetrievalApp(index: BM25Index, options: RetrievalAppOptions = {}): FastifyInstance {
  const defaultTopk = options.defaultTopk ?? 3;
  if (!Number.isInteger(defaultTopk) || defaultTopk < 1 || defaultTopk > MAX_TOPK) {
    throw new Error(`retrieval: defaultTopk must be an integer in [1, ${MAX_TOPK}], got ${defaultTopk}`);
  }
  const app = createApp({ ...options, bodyLimit: options.bodyLimit ?? SMALL_BODY_LIMIT });
  app.get("/healthz", async () => ({ status: "ok", passages: index.size }));
  app.post("/retrieve", async (req) => retrieve(index, parseBody(RetrieveRequest, req.body), defaultTopk));
  return app;
}

/** Options of `createWorldsRetrievalApp`. */
export interface WorldsRetrievalOptions extends RetrievalAppOptions {
  /**
   * Called with what each request to `/worlds/<k>/rollouts/<id>/retrieve` returned (`hits` `[query][hit]`, the
   * passages as served), before the response is sent: how a trainer knows which passages a black-box agent's search
   * tool saw, without parsing the agent's messages.
   */
  onRetrieve?: (rolloutId: string, world: number, queries: readonly string[], hits: readonly Passage[][]) => void;
}

/**
 * One server for several worlds' corpora (the real world and counterfactual copies whose facts are permuted): world
 * `k` answers at `<url>/worlds/<k>/retrieve` and `/worlds/<k>/healthz`, exactly as `createRetrievalApp` does at the
 * root, so an agent given `ARL_RETRIEVAL_URL=<url>/worlds/<k>` is unchanged code. The root serves world 0.
 * `<url>/worlds/<k>/rollouts/<id>/retrieve` (and `/healthz`) is the same, and reports each request to `onRetrieve`
 * under the rollout's id (an agent given `ARL_RETRIEVAL_URL=<url>/worlds/<k>/rollouts/<id>`).
 * @param indexes `[world]` BM25 indexes
 * @throws Error when `indexes` is empty or `defaultTopk` is not an integer in [1, MAX_TOPK]
 */
export function createWorldsRetrievalApp(indexes: readonly BM25Index[], options: WorldsRetrievalOptions = {}): FastifyInstance {
  if (indexes.length === 0) throw new Error("retrieval: createWorldsRetrievalApp needs at least one index");
  const app = createRetrievalApp(indexes[0], options);
  const defaultTopk = options.defaultTopk ?? 3;
  const worldOf = (raw: string): number => {
    const k = /^\d+$/.test(raw) ? Number(raw) : -1;
    if (k < 0 || k >= indexes.length) throw Object.assign(new Error(`world ${JSON.stringify(raw)}: expected 0 … ${indexes.length - 1}`), { statusCode: 404 });
    return k;
  };
  app.get<{ Params: { k: string } }>("/worlds/:k/healthz", async (req) => ({ status: "ok", passages: indexes[worldOf(req.params.k)].size }));
  app.post<{ Params: { k: string } }>("/worlds/:k/retrieve", async (req) => retrieve(indexes[worldOf(req.params.k)], parseBody(RetrieveRequest, req.body), defaultTopk));
  app.get<{ Params: { k: string; id: string } }>("/worlds/:k/rollouts/:id/healthz", async (req) => ({ status: "ok", passages: indexes[worldOf(req.params.k)].size }));
  app.post<{ Params: { k: string; id: string } }>("/worlds/:k/rollouts/:id/retrieve", async (req) => {
    const k = worldOf(req.params.k);
    const request = parseBody(RetrieveRequest, req.body);
    const hits = await retrieveHits(indexes[k], request, defaultTopk);
    options.onRetrieve?.(req.params.id, k, request.queries, hits);
    return retrieveResponse(hits, request.return_scores === true);
  });
  return app;
}
