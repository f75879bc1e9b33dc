/**
 * The `rl` section of the experiment config, beside the algorithms that read it: the RL budget (steps, tasks,
 * group size), the advantage estimator, the policy loss and its clips, TIS, DAPO's dynamic sampling and overlong
 * shaping, GAE's critic, GiGPO, PPO-ptx replay. Its cross-field rules live here too — those within the section
 * (in the schema) and those checked on the whole config (`rlCrossSectionIssues`: TIS with dro, `env.maxTurns`) — with
 * the start-of-run warning for fields the chosen algorithm never reads (`unusedAlgorithmWarning`).
 */
import { z } from "zod";
import { int, intIn, SIZE_BOUNDS } from "../core/configFields.ts";
import { MAX_REWARD_WEIGHT } from "../reward/compose.ts";
import { ADVANTAGE_ESTIMATORS } from "./estimators.ts";
import { LOSS_AGG_MODES } from "./losses.ts";
import { RL_LOSS_FNS } from "./policyLoss.ts";

/** Most episodes one RL step may run (`rl.tasksPerStep × rl.groupSize`; the default is 128). */
export const MAX_EPISODES_PER_STEP = 1_048_576;

/** The `rl` section: budget, estimator, loss and the algorithm variants' fields (docs/algorithms.md). */
export const RlConfig = z
  .object({
    steps: int(0, "RL steps (rollout → reward → advantage → update).").default(100),
    tasksPerStep: intIn(1, SIZE_BOUNDS.batch, "Questions per RL step.").default(16),
    groupSize: intIn(2, SIZE_BOUNDS.groupSize, "Episodes per question (GRPO's G).").default(8),
    temperature: z.number().min(0).default(1).describe("Sampling temperature of rollouts."),
    maxTokensPerTurn: intIn(1, SIZE_BOUNDS.contextLength, "Sampled tokens per turn.").default(16),
    learningRate: z.number().positive().default(1e-3).describe("Adam learning rate of RL."),
    lossFn: z.enum(RL_LOSS_FNS).default("ppo").describe("Policy loss: ppo (clipped; Tinker/veRL vanilla), importance_sampling, cispo (clipped detached IS weight), dro (Tinker's quadratic-penalty loss), gspo (PPO clip on the sequence-level length-normalised ratio). docs/algorithms.md."),
    clipLow: z.number().min(0).lt(1).default(0.2).describe("PPO clip: ratio ≥ 1 − clipLow (veRL clip_ratio_low); below 1, so the lower ratio bound stays positive."),
    clipHigh: z.number().gt(0).default(0.2).describe("PPO clip: ratio ≤ 1 + clipHigh (veRL clip_ratio_high; DAPO clip-higher uses 0.28)."),
    clipRatioC: z.number().gt(1).optional().describe("Dual-clip PPO bound c > 1 (veRL clip_ratio_c, whose default is 3.0): for negative advantages the loss is capped at −c·A. Unset = off (ppo only)."),
    droBeta: z.number().min(0).default(0.05).describe("dro: the quadratic penalty β on (lp − q)² (Tinker loss_fn_config.beta)."),
    lossAggMode: z.enum(["auto", ...LOSS_AGG_MODES]).default("auto").describe("Loss aggregation (veRL loss_agg_mode): token-mean, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm (Dr.GRPO; ÷ maxTokensPerTurn × env.maxTurns); auto = the estimator's (drgrpo: seq-mean-token-sum-norm; gspo: seq-mean-token-mean; else token-mean)."),
    klCoef: z.number().min(0).default(0).describe("k3 KL-to-reference coefficient (0 = off)."),
    advantage: z.enum(ADVANTAGE_ESTIMATORS).default("grpo").describe("Advantage estimator (veRL algorithm.adv_estimator names): grpo, drgrpo, rloo, opo, grpo_passk, reinforce_plus_plus, reinforce_plus_plus_baseline, gae (needs a value head), gigpo (turn-level, GiGPO). docs/algorithms.md."),
    gamma: z.number().min(0).max(1).default(1).describe("Discount per policy token for reinforce_plus_plus and gae, per turn for gigpo and per-turn rewards (veRL algorithm.gamma)."),
    lam: z.number().min(0).max(1).default(1).describe("GAE λ (veRL algorithm.lam)."),
    turnRewards: z
      .object({
        toolError: z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT).default(0).describe("Step reward of a turn whose tool call failed (e.g. -0.1)."),
        invalidAction: z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT).default(0).describe("Step reward of a turn with an invalid action."),
        evidence: z.number().min(-MAX_REWARD_WEIGHT).max(MAX_REWARD_WEIGHT).default(0).describe("Step reward of the first turn that retrieved a gold answer (information gain)."),
      })
      .strict()
      .default({ toolError: 0, invalidAction: 0, evidence: 0 })
      .describe("Per-turn rewards at the end of each turn (turn-level credit; read by reinforce_plus_plus, gae and gigpo, discounted by rl.gamma)."),
    gigpoStepWeight: z.number().min(0).default(1).describe("gigpo: ω, the weight of the step-level advantage (GiGPO step_advantage_w)."),
    gigpoNormStd: z.boolean().default(false).describe("gigpo: divide episode and step advantages by their group std (GiGPO mode mean_std_norm; default mean_norm)."),
    criticLearningRate: z.number().positive().default(0.01).describe("gae: Adam learning rate of the embedded value head (a linear head on the policy trunk's features)."),
    criticUpdates: intIn(1, 1_000, "gae: value-head Adam steps per RL step, on that step's returns.").default(4),
    cliprangeValue: z.number().positive().default(0.5).describe("gae: value clipping around the old values (veRL critic.cliprange_value)."),
    tis: z.boolean().default(false).describe("Truncated importance sampling for the sampler/trainer logprob mismatch: the PPO ratio uses the trainer's pre-update logprobs and each token's loss is weighted by min(π_trainer/π_sampler, tisCap) (veRL rollout_is: token)."),
    tisCap: z.number().positive().default(2).describe("TIS truncation (veRL rollout_is_threshold)."),
    filterGroups: z.boolean().default(false).describe("DAPO dynamic sampling: drop groups whose rewards are all equal and sample more tasks until rl.tasksPerStep groups remain (veRL algorithm.filter_groups.enable)."),
    maxGenBatches: intIn(1, 100, "DAPO dynamic sampling: most rollout batches per step (veRL filter_groups.max_num_gen_batches); the step trains on what it has after that.").default(4),
    overlongBuffer: int(0, "DAPO overlong shaping: length penalty over the last N tokens of the episode's token budget (maxTokensPerTurn × env.maxTurns); 0 = off (veRL overlong_buffer.len).").default(0),
    overlongPenalty: z.number().min(0).default(1).describe("DAPO overlong shaping: the penalty at the budget (veRL overlong_buffer.penalty_factor)."),
    counterfactualWorlds: intIn(0, 1_000, "RL also samples questions from this many copies of the world with permuted unknown facts (0 = the real world only).").default(8),
    ptxCoef: z.number().min(0).default(1).describe("Weight of warm-start replay (cross entropy on the known-fact demonstrations) in each update; 0 = off (PPO-ptx, InstructGPT §3.5)."),
    ptxBatchSize: intIn(1, SIZE_BOUNDS.batch, "Demonstrations replayed per update when ptxCoef > 0.").default(16),
    minibatches: intIn(1, SIZE_BOUNDS.batch, "Optimizer steps per RL step (the batch is split; later ones are off-policy and clipped).").default(2),
    gradClip: z.number().min(0).default(1).describe("Global gradient-norm clip (0 = off)."),
    maskObservations: z.boolean().default(true).describe("Mask retrieved <information> tokens from the policy loss (Search-R1 §3.1); false trains on them too (Search-R1 Table 4 ablation)."),
    maxNonFiniteSteps: int(1, "Training stops after this many steps in a row whose loss or gradient norm is NaN/Inf (each such update is skipped and logged as train/skipped_nonfinite; applies to SFT steps too).").default(3),
  })
  .strict()
  // Each bound alone allows 2^28 episodes a step; the product is what a step holds in memory.
  .superRefine((r, ctx) => {
    const turnLevel = ["reinforce_plus_plus", "gae", "gigpo"];
    const t = r.turnRewards;
    if ((t.toolError !== 0 || t.invalidAction !== 0 || t.evidence !== 0) && !turnLevel.includes(r.advantage)) {
      ctx.addIssue({ code: "custom", path: ["turnRewards"], message: `per-turn rewards need a turn-level estimator (rl.advantage ${turnLevel.join(", ")}), not "${r.advantage}"` });
    }
    if (r.clipRatioC !== undefined && r.lossFn !== "ppo") {
      ctx.addIssue({ code: "custom", path: ["clipRatioC"], message: `dual clip applies to rl.lossFn "ppo" only (veRL vanilla), not "${r.lossFn}"; unset it` });
    }
    const episodes = r.tasksPerStep * r.groupSize;
    if (episodes > MAX_EPISODES_PER_STEP) {
      const message = `rl.tasksPerStep × rl.groupSize = ${r.tasksPerStep} × ${r.groupSize} = ${episodes} episodes per RL step; at most ${MAX_EPISODES_PER_STEP}`;
      ctx.addIssue({ code: "custom", path: ["groupSize"], params: { keyIssue: true }, message });
    }
  });

/** The `rl` section as resolved (every field present). */
export type RlSection = z.infer<typeof RlConfig>;

/** The `rl` section's defaults, what `unusedAlgorithmFields` compares against. */
const RL_DEFAULTS: RlSection = RlConfig.parse({});

/**
 * The `rl` fields that conflict with each other or with `env.maxTurns` beyond what the section's schema checks,
 * checked once the whole config has parsed (src/train/config.ts, after the backend's algorithm check of
 * src/train/backendAlgorithm.ts), in the order they are reported: TIS with dro, an overlong buffer past the
 * episode's token budget.
 * @param env the `env` section (its `maxTurns`: turns per episode)
 * @returns one `{ field, message }` per problem (`field` under `rl`); empty when none
 */
export function rlCrossSectionIssues(rl: RlSection, env: { maxTurns: number }): Array<{ field: string; message: string }> {
  const issues: Array<{ field: string; message: string }> = [];
  if (rl.tis && rl.lossFn === "dro") {
    issues.push({ field: "tis", message: 'TIS folds its weight into the advantage, and dro\'s β penalty carries no advantage (it would stay unweighted); use rl.lossFn ppo, cispo, gspo or importance_sampling with rl.tis, or rl.tis false' });
  }
  const budget = rl.maxTokensPerTurn * env.maxTurns;
  if (rl.overlongBuffer > budget) {
    issues.push({ field: "overlongBuffer", message: `expected at most the episode's token budget rl.maxTokensPerTurn × env.maxTurns = ${budget} (veRL asserts max_resp_len ≥ overlong_buffer.len)` });
  }
  return issues;
}

/**
 * `rl.*` fields set away from their defaults that the configured algorithm never reads (e.g. `rl.lam` without
 * `gae`, `rl.droBeta` without `dro`, `rl.tisCap` without `rl.tis`), each with the setting that would read it; empty
 * when none. A typo'd combination then says so at start instead of training something else silently.
 */
export function unusedAlgorithmFields(config: { rl: RlSection }): string[] {
  const rl = config.rl;
  const defaults = RL_DEFAULTS;
  const discounted = rl.advantage === "reinforce_plus_plus" || rl.advantage === "gae" || rl.advantage === "gigpo";
  const readers: Array<[keyof RlSection, boolean, string]> = [
    ["gamma", discounted, "rl.advantage reinforce_plus_plus, gae or gigpo"],
    ["lam", rl.advantage === "gae", "rl.advantage gae"],
    ["criticLearningRate", rl.advantage === "gae", "rl.advantage gae"],
    ["criticUpdates", rl.advantage === "gae", "rl.advantage gae"],
    ["cliprangeValue", rl.advantage === "gae", "rl.advantage gae"],
    ["gigpoStepWeight", rl.advantage === "gigpo", "rl.advantage gigpo"],
    ["gigpoNormStd", rl.advantage === "gigpo", "rl.advantage gigpo"],
    ["droBeta", rl.lossFn === "dro", "rl.lossFn dro"],
    ["tisCap", rl.tis, "rl.tis true"],
    ["maxGenBatches", rl.filterGroups, "rl.filterGroups true"],
    ["overlongPenalty", rl.overlongBuffer > 0, "rl.overlongBuffer > 0"],
  ];
  return readers
    .filter(([k, read]) => !read && JSON.stringify(rl[k]) !== JSON.stringify(defaults[k]))
    .map(([k, , by]) => `rl.${k} ${JSON.stringify(rl[k])} (read only with ${by})`);
}

/** {@link unusedAlgorithmFields} as one warning line, or undefined when every set field is read. */
export function unusedAlgorithmWarning(config: { rl: RlSection }): string | undefined {
  const unused = unusedAlgorithmFields(config);
  return unused.length === 0 ? undefined : `the algorithm (rl.advantage ${config.rl.advantage}, rl.lossFn ${config.rl.lossFn}) does not read ${unused.join(", ")}`;
}
