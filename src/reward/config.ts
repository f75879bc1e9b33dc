/**
 * The `reward` and `detectors` sections of the experiment config, beside the reward layer that reads them: the
 * preset and term weights (checked against `REWARD_TERMS` and `REWARD_PRESETS`), the terms' options and the judge
 * endpoint, and the thresholds of the reward-hacking detectors. `rewardConfigOf` turns the section into the
 * `RewardConfig` spec of src/reward/compose.ts (the zod schema here shares that name: it is the config section).
 */
import { z } from "zod";
import { didYouMean } from "../core/suggest.ts";
import { int, intIn } from "../core/configFields.ts";
import { ms } from "../env/config.ts";
import { REWARD_TERMS } from "./terms.ts";
import { REWARD_PRESETS } from "./presets.ts";
import { DEFAULT_REWARD_OPTIONS, MAX_REWARD_WEIGHT, type RewardConfig as RewardSpec } from "./compose.ts";
import { DEFAULT_DETECTOR_THRESHOLDS as D } from "./detectors.ts";

/** A term-weight map; unknown term names are errors that name the term and the allowed ones. */
export const termWeights = (desc: string) =>
  z
    .record(z.string(), z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT))
    .superRefine((weights, ctx) => {
      for (const name of Object.keys(weights)) {
        if (!Object.hasOwn(REWARD_TERMS, name)) {
          ctx.addIssue({ code: "custom", path: [name], params: { keyIssue: true }, message: `unknown reward term${didYouMean(name, Object.keys(REWARD_TERMS))}; allowed: ${Object.keys(REWARD_TERMS).join(", ")}` });
        }
      }
    })
    .describe(desc);

/** A preset name of `REWARD_PRESETS`. */
export const presetName = z
  .string()
  .refine((p) => Object.hasOwn(REWARD_PRESETS, p), { message: `unknown preset; allowed: ${Object.keys(REWARD_PRESETS).join(", ")}` });

/** `reward.options.judge`: the OpenAI-compatible endpoint of the `judge` term. */
export const JudgeSection = z
  .object({
    baseUrl: z.string().url().describe("OpenAI-compatible base URL, e.g. http://localhost:8000/v1."),
    model: z.string().min(1).describe("Judge model name."),
    rubric: z.string().trim().min(1).default("Reply 1 if the prediction means the same as one of the gold answers, otherwise 0. Reply with the number only.").describe("Judge instructions."),
    apiKeyEnv: z.string().optional().describe("Environment variable holding the API key."),
    // Retry i waits 50·2^i ms: 20 retries keep that far below the timer limit.
    maxRetries: intIn(0, 20, "Retries after a failed judge call.").default(2),
    timeoutMs: ms(1, "Limit of one judge call (ms, ≤ 2³¹−1).").default(30000),
    pricePerInputToken: z.number().min(0).default(0).describe("Price per prompt token."),
    pricePerOutputToken: z.number().min(0).default(0).describe("Price per completion token."),
  })
  .strict();

/** The `reward` section: preset, weights and term options (the spec it resolves to is `rewardConfigOf`'s). */
export const RewardConfig = z
  .object({
    preset: presetName.default("default").describe("Named weight set (see docs/rewards.md): default, tool-env, outcome-only, per-call-bonus, search-cost-only, composite, finance, medical, insurance, customer-service, research."),
    weights: termWeights("Weights added to or overriding the preset's (0 silences a term); total = Σ weight × value.").default({}),
    options: z
      .object({
        requireThink: z.boolean().default(DEFAULT_REWARD_OPTIONS.requireThink).describe("format_sm: require <think> before each action (Search-R1)."),
        otcC: z.number().positive().default(DEFAULT_REWARD_OPTIONS.otcC).describe("otc: OTC's smoothing constant c."),
        abstentions: z.array(z.string()).default([...DEFAULT_REWARD_OPTIONS.abstentions]).describe("Answers that count as abstaining (normalised)."),
        judge: JudgeSection.optional().describe("LLM judge endpoint for the `judge` term."),
      })
      .strict()
      .default({ requireThink: DEFAULT_REWARD_OPTIONS.requireThink, otcC: DEFAULT_REWARD_OPTIONS.otcC, abstentions: [...DEFAULT_REWARD_OPTIONS.abstentions] }),
  })
  .strict();

const riseRule = ({ rise, min, ceiling }: { rise: number; min: number; ceiling: number }, what: string) =>
  z
    .object({
      rise: z.number().min(0).default(rise).describe(`Fires when the smoothed ${what} exceeds its baseline by more than this…`),
      ceiling: z.number().min(0).default(ceiling).describe("…or exceeds this level whatever the baseline…"),
      min: z.number().min(0).default(min).describe("…and is above this."),
    })
    .strict()
    .default({ rise, min, ceiling });

/** The `detectors` section: thresholds of the reward-hacking detectors (src/reward/detectors.ts). */
export const DetectorsConfig = z
  .object({
    enabled: z.boolean().default(true).describe("Run the reward-hacking detectors every RL step (logged; warned on the console)."),
    referenceKl: z.boolean().default(true).describe("Measure the KL to the warm-start policy every step (hack/kl_ref, on the first two episodes of each group; one extra forward pass on them)."),
    baselineSteps: int(1, "RL steps averaged into each metric's baseline.").default(D.baselineSteps),
    window: int(1, "RL steps averaged into the smoothed value compared with the baseline.").default(D.window),
    guessUnknown: riseRule(D.guessUnknown, "guess rate on unknown facts"),
    toolSpam: riseRule(D.toolSpam, "searches above the task's need per episode"),
    searchThenIgnore: riseRule(D.searchThenIgnore, "search-then-ignore rate"),
    fabricatedCitation: riseRule(D.fabricatedCitation, "fabricated-citation rate"),
    answerAvoidance: riseRule(D.answerAvoidance, "no-answer rate"),
    lengthCollapse: z.object({ ratio: z.number().min(0).max(1).default(D.lengthCollapse.ratio).describe("Fires when response length falls below this × baseline.") }).strict().default({ ...D.lengthCollapse }),
    entropyCollapse: z.object({ ratio: z.number().min(0).max(1).default(D.entropyCollapse.ratio).describe("Fires when the policy entropy falls below this × baseline.") }).strict().default({ ...D.entropyCollapse }),
    klAcceleration: z
      .object({
        factor: z.number().positive().default(D.klAcceleration.factor).describe("Fires when the windowed KL grew this many times faster over the last window than over the one before…"),
        min: z.number().min(0).default(D.klAcceleration.min).describe("…and the KL is at least this (nats/token)…"),
        minGrowth: z.number().min(0).default(D.klAcceleration.minGrowth).describe("…and grew by more than factor × this (nats/token per window)."),
      })
      .strict()
      .default({ ...D.klAcceleration }),
  })
  .strict();

/** The `reward` section as resolved (every field present). */
export type RewardSection = z.infer<typeof RewardConfig>;

/**
 * The reward a config asks for: its preset's weights overridden by `reward.weights`, and the term options.
 * @param config any object with a resolved `reward` section (an `ExperimentConfig`)
 */
export function rewardConfigOf(config: { reward: RewardSection }): RewardSpec {
  return {
    weights: { ...REWARD_PRESETS[config.reward.preset].weights, ...config.reward.weights },
    options: config.reward.options,
  };
}
