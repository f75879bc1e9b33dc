/**
 * The `env` section of the experiment config, beside the env layer that reads it: which recipe, how the policy
 * writes tool calls, the recipe's own options, episode limits, tool-call limits (timeouts, retries, concurrency,
 * output caps) and fault injection. A recipe's own fields (the search env's `world` and `topK`, for now) are passed
 * to {@link envSection}, which places them after `options` — the order `--print-config` and `config.yaml` show.
 */
import { z } from "zod";
import { commaList, int, intIn, SIZE_BOUNDS } from "../core/configFields.ts";
import { MAX_TIMER_MS } from "./tool.ts";

/**
 * A duration in ms, at most `MAX_TIMER_MS` (2³¹−1): Node's `setTimeout` / `AbortSignal.timeout` silently clamp a
 * longer delay to 1 ms, so a 3e9 ms timeout would fire at once. `headroom` (ms) is subtracted for fields a caller
 * adds to before it sets a timer.
 */
export const ms = (min: number, desc: string, headroom = 0) => z.number().int().min(min).max(MAX_TIMER_MS - headroom).describe(desc);

/** `env.tools`: limits of every tool call (timeout, retries with back-off, concurrency, output caps). */
export const ToolsSection = z
  .object({
    timeoutMs: ms(1, "Limit of one tool-call attempt (ms, ≤ 2³¹−1); past it the call is aborted and observes an error.").default(10000),
    retries: intIn(0, 1_000, "Retries of a tool call that failed with an error the tool marks retryable (RetryableToolError / retryable: true); timeouts are not retried.").default(0),
    backoffMs: ms(0, "Wait before the first retry (ms, ≤ 2³¹−1), doubled before each further retry, capped at maxBackoffMs.").default(100),
    maxBackoffMs: ms(0, "Cap on the wait between retries (ms, ≤ 2³¹−1).").default(5000),
    maxConcurrency: int(0, "Calls of one tool running at once across all episodes (0 = unlimited); a queued call waits up to timeoutMs for a slot, not counted in its own timeout.").default(0),
    maxOutputChars: intIn(1, SIZE_BOUNDS.chars, "Cap on a tool's output (characters of the string or its JSON, ≤ V8's longest string); longer output is an error observation.").default(100000),
    maxResultBytes: intIn(1, 3 * SIZE_BOUNDS.chars, "Hard limit on a tool's output (UTF-8 bytes of the string or its JSON): larger output is an error observation naming the tool and its size, with no head kept; far above maxOutputChars.").default(16 * 1024 * 1024),
  })
  .strict();

/** `env.faults`: deterministic fault injection into the env's tools (src/env/faults.ts). */
export const FaultsSection = z
  .object({
    rate: z.number().min(0).max(1).default(0).describe("Share of tool-call attempts that fault, in [0, 1] (0 = off); for hardening runs and tests (src/env/faults.ts)."),
    kinds: z
      .preprocess(
        // `--env.faults.kinds hang` or `hang,slow` as well as a YAML list.
        (v) => (typeof v === "string" ? commaList(v) : v),
        z.array(z.enum(["fail", "hang", "slow", "garbage", "huge"])).min(1),
      )
      .default(["fail", "hang", "slow", "garbage", "huge"])
      .describe("Faults drawn uniformly: fail, hang, slow, garbage, huge (a list, or a comma-separated string)."),
    seed: int(0, "Seed of the fault draws (same seed → same faulting calls).").default(0),
    slowMs: ms(0, "Delay of a `slow` fault (ms, ≤ 2³¹−1).").default(2000),
    hugeChars: intIn(1, SIZE_BOUNDS.chars, "Length of a `huge` output (characters, ≤ V8's longest string; 10 000 000 = 10 MB).").default(10000000),
    retryableShare: z.number().min(0).max(1).default(0.5).describe("Share of `fail` faults marked retryable, in [0, 1]."),
  })
  .strict();

/** The env section's first fields: which recipe, its tool-call protocol and its own options. */
const ENV_RECIPE_FIELDS = {
  name: z
    .string()
    .regex(/^[a-z][a-z0-9-]*$/, "an env name (lower-case letters, digits, -)")
    .default("search")
    .describe("The env recipe to train on (`arl envs` lists them: search, travel, …); its defaults apply under the config file."),
  protocol: z
    .enum(["search-r1", "hermes", "react"])
    .optional()
    .describe("How the policy writes tool calls: search-r1, hermes (Qwen2.5/Qwen3 <tool_call> JSON) or react; default the env's own."),
  options: z.record(z.string(), z.unknown()).default({}).describe("The env's own options (see its README; checked by the env, errors name env.options.<field>)."),
};

/** The env section's episode and tool-call limits, shared by every recipe. */
const ENV_EPISODE_FIELDS = {
  maxTurns: intIn(1, 1_000, "Turns per episode before it is cut off.").default(4),
  maxObservationTokens: intIn(8, SIZE_BOUNDS.contextLength, "Cap on the tokens of one observation (a tool result, an <information> block).").default(96),
  tools: ToolsSection.default(ToolsSection.parse({})).describe("Tool calls: timeout, retries with back-off, concurrency limit, output cap."),
  faults: FaultsSection.default(FaultsSection.parse({})).describe("Deterministic fault injection into the env's tools (off by default)."),
  episodeDeadlineMs: ms(0, "Wall-clock limit of one episode (ms, ≤ 2³¹−1; 0 = none). Past it the episode ends truncated; its tool calls are bounded by it. Non-zero values make rollouts depend on machine speed.").default(0),
  lanes: intIn(0, 4_096, "Sampling lanes of the RL rollout (0 = off: a batch is whatever episodes ask together). K ≥ 1 splits each step's episodes into K fixed lanes; every sampling batch is one turn of one lane, so batches do not depend on tool timing (slow or remote tools stay deterministic) and with K ≥ 2 one lane decodes while the others wait on tools (src/rollout/lanes.ts).").default(0),
};

/**
 * The `env` section's schema with a recipe's own fields placed after `options` (name, protocol, options, then
 * `recipeFields`, then maxTurns … lanes); strict, so an unknown field is an error naming it.
 * @param recipeFields zod fields of the recipe's own (e.g. the search env's `world`, `topK`); `{}` for none
 */
export function envSection<F extends z.ZodRawShape>(recipeFields: F) {
  return z.object({ ...ENV_RECIPE_FIELDS, ...recipeFields, ...ENV_EPISODE_FIELDS }).strict();
}
