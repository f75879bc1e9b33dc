/**
 * `arl serve reward`: our reward terms behind veRL's `compute_score` interface, over HTTP.
 *
 * `POST /reward` takes the arguments veRL's reward managers pass to a custom `compute_score`
 * (volcengine/verl `verl/utils/reward_score/__init__.py` `default_compute_score(data_source, solution_str,
 * ground_truth, extra_info=None)`; `verl/workers/reward_manager/naive.py`) and returns
 * `{score, terms: {name: value}, breakdown, answer, searches}`. veRL accepts a dict from `compute_score` when it has a
 * `score` key (the other keys become reward metrics), so the exported `reward_fn.py` can pass the numbers on.
 * `POST /reward/batch` takes a list of the same bodies (veRL's `BatchRewardManager` shape) and scores items of the
 * same prompt as one GRPO group (group-relative terms such as `needless_search` and `otc` then see their group).
 *
 * `solution_str` is read by `trajectoryFromText` (src/protocol/transcript.ts): Search-R1 `<search>`/`<information>`
 * transcripts and veRL `<tool_call>`/`<tool_response>` transcripts; the answer is the last `<answer>` block the env
 * did not answer (veRL's `search_r1_like_qa_em.py` takes the last one anywhere — inside retrieved passages too;
 * observations are data here, never the model's answer). Parsing is linear in the text and bounded in turns, and a
 * batch yields to the event loop as it goes, so one request never stalls the others.
 */
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import type { Passage, RewardBreakdown, Task, Trajectory } from "../core/types.ts";
import { computeReward, validateRewardConfig, type RewardConfig } from "../reward/compose.ts";
import type { Judge } from "../reward/types.ts";
import { createApp, HttpError, parseBody, type ServeOptions } from "../http/server.ts";
import { trajectoryFromText } from "../protocol/transcript.ts";

/** Most items in one `POST /reward/batch` request. */
export const MAX_BATCH = 4096;
/**
 * Longest `solution_str` accepted (characters; veRL responses are a few thousand tokens). `trajectoryFromText` reads
 * it in linear time (~10 ms per million characters) and at most `MAX_TRANSCRIPT_TURNS` (src/protocol/transcript.ts)
 * turns of it.
 */
export const MAX_SOLUTION_CHARS = 1_000_000;
/** Most milliseconds `POST /reward/batch` scores before letting the event loop answer other requests. */
export const BATCH_YIELD_MS = 10;

/** Resolves on the event loop's next check phase, after pending I/O callbacks (so other requests get served). */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

const GROUND_TRUTH_SHAPES = '{"target": [answers]} (Search-R1 / veRL data), a string, or a list of strings';

/** Gold answers from veRL's `reward_model.ground_truth`: `{target: [...]}` / `{target: str}`, a string, or a list. */
function answersOf(v: unknown): string[] | null {
  const raw = v !== null && typeof v === "object" && !Array.isArray(v) && "target" in v ? (v as { target: unknown }).target : v;
  const items = Array.isArray(raw) ? raw : [raw];
  const out: string[] = [];
  for (const a of items) {
    if (typeof a === "number" && Number.isFinite(a)) out.push(String(a));
    else if (typeof a === "string" && a.trim() !== "") out.push(a);
    else return null;
  }
  return out.length > 0 ? out : null;
}

/** The `extra_info` fields this server reads (all optional; other keys are accepted and ignored). */
export const ExtraInfo = z.looseObject({
  index: z.union([z.number(), z.string()], { error: "expected a number or string" }).optional(),
  split: z.string({ error: "expected a string" }).optional(),
  question: z.string({ error: "expected a string" }).optional(),
  task_id: z.string({ error: "expected a string" }).optional(),
  kind: z.string({ error: "expected a string" }).optional(),
  known: z.boolean({ error: "expected true, false or null" }).nullable().optional(),
  evidence_ids: z.array(z.string(), { error: "expected a list of passage ids" }).nullable().optional(),
  risk: z.enum(["high", "normal"], { error: 'expected "high" or "normal"' }).nullable().optional(),
  forbidden_tools: z.array(z.string(), { error: "expected a list of tool names" }).nullable().optional(),
});

/** Body of `POST /reward`: veRL's `compute_score` keyword arguments. */
export const RewardRequest = z
  .object({
    data_source: z.string({ error: "expected a string (the dataset's data_source)" }),
    solution_str: z.string({ error: "expected a string (the decoded response)" }).max(MAX_SOLUTION_CHARS, `at most ${MAX_SOLUTION_CHARS} characters`),
    ground_truth: z.unknown().transform((v, ctx) => {
      const answers = answersOf(v);
      if (answers === null) {
        ctx.addIssue({ code: "custom", message: `expected ${GROUND_TRUTH_SHAPES}, each answer a non-empty string` });
        return z.NEVER;
      }
      return answers;
    }),
    extra_info: ExtraInfo.nullable().optional(),
  })
  .strict();

/** Body of `POST /reward/batch`: a list of `RewardRequest` bodies. */
export const RewardBatchRequest = z.array(RewardRequest, { error: "expected a list of {data_source, solution_str, ground_truth, extra_info}" }).min(1, "expected at least one item").max(MAX_BATCH, `at most ${MAX_BATCH} items`);

/** A parsed `RewardRequest`. */
export type RewardRequestBody = z.output<typeof RewardRequest>;

/** Response of `POST /reward` (and each item of `POST /reward/batch`). */
export interface RewardResponse {
  /** The total reward `Σ value × weight` (what veRL reads as the score). */
  score: number;
  /** Raw value of each term, by name (unweighted; the weights are in `breakdown`). */
  terms: Record<string, number>;
  /** Every term with its weight and explanation (src/core/types.ts `RewardBreakdown`). */
  breakdown: RewardBreakdown;
  /** The extracted answer (last `<answer>` block), or null. */
  answer: string | null;
  /** Search actions found in the solution. */
  searches: number;
}

/** Options of `createRewardApp`. */
export interface RewardAppOptions extends ServeOptions {
  /** Term weights and options (a preset's, or `rewardConfigOf(config)`). */
  reward: RewardConfig;
  /**
   * The corpus the retrieval server serves; parsed passages are matched to it by title and text so they regain
   * their `id` / `fact` / `source` (evidence terms compare ids with `extra_info.evidence_ids`). Optional.
   */
  passages?: readonly Passage[];
  /** The LLM judge for a weighted `judge` term (`makeJudge(reward.options)`); without it the term records an error. */
  judge?: Judge;
}

/** Key of a passage for matching: title and text, whitespace collapsed. */
function passageKey(title: string, text: string): string {
  return `${title.replace(/\s+/g, " ").trim()}\u0000${text.replace(/\s+/g, " ").trim()}`;
}

/** The task a request describes: answers from `ground_truth`, the rest from `extra_info` when given. */
export function taskOf(body: RewardRequestBody): Task {
  const x = body.extra_info ?? {};
  const task: Task = {
    id: x.task_id ?? `${body.data_source}:${x.split ?? "?"}:${x.index ?? "?"}`,
    question: x.question ?? "",
    answers: body.ground_truth,
    kind: x.kind ?? body.data_source,
    evidenceIds: x.evidence_ids ?? [],
  };
  if (typeof x.known === "boolean") task.known = x.known;
  if (x.risk) task.risk = x.risk;
  if (x.forbidden_tools) task.forbiddenTools = x.forbidden_tools;
  return task;
}

/** The scorer behind the HTTP routes (usable without HTTP). */
export class RewardScorer {
  private readonly byKey = new Map<string, Passage>();

  /** @throws Error from `validateRewardConfig` (unknown term, non-finite weight) */
  constructor(
    private readonly reward: RewardConfig,
    passages: readonly Passage[] = [],
    private readonly judge?: Judge,
  ) {
    validateRewardConfig(reward);
    for (const p of passages) this.byKey.set(passageKey(p.title, p.text), p);
  }

  /** The trajectory a request describes (passages matched to the corpus when possible). */
  trajectory(body: RewardRequestBody): Trajectory {
    return trajectoryFromText(taskOf(body), body.solution_str, {
      resolve: (p) => {
        const hit = this.byKey.get(passageKey(p.title, p.text));
        return hit === undefined ? undefined : { ...hit };
      },
    });
  }

  /** Scores one request (no group context). */
  async score(body: RewardRequestBody): Promise<RewardResponse> {
    return this.respond(this.trajectory(body), undefined);
  }

  /**
   * Scores a batch; items with the same `data_source`, `extra_info.split` and `extra_info.index` (else `task_id`,
   * else `question`) form one group, the context of group-relative terms. Items without any of those stand alone.
   * The work is synchronous per item, so the scorer yields to the event loop (`setImmediate`) whenever
   * `BATCH_YIELD_MS` of it have run: other requests (`/healthz`, other clients) are answered while a large batch
   * is scored.
   */
  async scoreBatch(bodies: readonly RewardRequestBody[]): Promise<RewardResponse[]> {
    let since = performance.now();
    const breathe = async (): Promise<void> => {
      if (performance.now() - since < BATCH_YIELD_MS) return;
      await yieldToEventLoop();
      since = performance.now();
    };
    const trajs: Trajectory[] = [];
    for (const b of bodies) {
      trajs.push(this.trajectory(b));
      await breathe();
    }
    const groups = new Map<string, Trajectory[]>();
    bodies.forEach((b, i) => {
      const x = b.extra_info ?? {};
      const id = x.index ?? x.task_id ?? x.question;
      if (id === undefined) return;
      const key = JSON.stringify([b.data_source, x.split ?? null, id]);
      const g = groups.get(key) ?? [];
      g.push(trajs[i]);
      groups.set(key, g);
    });
    const groupOf = new Map<Trajectory, Trajectory[]>();
    for (const g of groups.values()) for (const t of g) groupOf.set(t, g);
    const scored: Promise<RewardResponse>[] = [];
    for (const t of trajs) {
      const p = this.respond(t, groupOf.get(t));
      p.catch(() => undefined); // handled by Promise.all below; never an unhandled rejection while yielding
      scored.push(p);
      await breathe();
    }
    return Promise.all(scored);
  }

  private async respond(traj: Trajectory, group: readonly Trajectory[] | undefined): Promise<RewardResponse> {
    const breakdown = await computeReward(traj, this.reward, { group, judge: this.judge });
    const terms: Record<string, number> = {};
    for (const t of breakdown.terms) terms[t.name] = t.value;
    return { score: breakdown.total, terms, breakdown, answer: traj.answer, searches: traj.searches };
  }
}

/**
 * A fastify app serving `POST /reward`, `POST /reward/batch` and `GET /healthz` (`{status, terms: {name: weight}}`).
 * Malformed bodies answer 400 `{error}` naming the field (`ground_truth: expected {"target": [answers]} …`).
 * @throws Error from `validateRewardConfig` for an unknown term or non-finite weight
 */
export function createRewardApp(options: RewardAppOptions): FastifyInstance {
  const scorer = new RewardScorer(options.reward, options.passages, options.judge);
  const app = createApp(options);
  app.get("/healthz", async () => ({ status: "ok", terms: { ...options.reward.weights } }));
  app.post("/reward", async (req) => scorer.score(parseBody(RewardRequest, req.body)));
  app.post("/reward/batch", async (req) => {
    if (!Array.isArray(req.body)) throw new HttpError(400, "body: expected a list of {data_source, solution_str, ground_truth, extra_info}");
    // Before zod, which would check (and report) every one of millions of small items first.
    if (req.body.length > MAX_BATCH) throw new HttpError(400, `body: at most ${MAX_BATCH} items (got ${req.body.length}); split the batch`);
    return scorer.scoreBatch(parseBody(RewardBatchRequest, req.body));
  });
  return app;
}
