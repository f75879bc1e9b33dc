/**
 * An env recipe: everything `arl train --env NAME` needs to train a policy on one environment — its tasks and splits,
 * its world (and counterfactual copies of it), its tools behind an env factory, the scripted imperfect personas that
 * write the warm-start demonstrations (there are no pretrained weights here), the texts its vocabulary needs, a
 * per-episode breakdown for the summary table and the config it trains with by default. `train/` knows recipes
 * only through this interface; `src/envs/index.ts` is the registry that names them.
 * Modelled on tinker-cookbook's `RLDatasetBuilder` / `EnvGroupBuilder` (`tinker_cookbook/rl/types.py`) and TRL's
 * `environment_factory`.
 */
import type { Tokenizer } from "../core/tokenizer.ts";
import type { Passage, Task, Trajectory } from "../core/types.ts";
import type { ProtocolName } from "../protocol/types.ts";
import type { ForcedText, RolloutLimits, TurnContext } from "./episode.ts";
import type { FaultOptions } from "./faults.ts";
import type { ToolCallSettings } from "./toolEnv.ts";
import type { EnvFactory } from "./types.ts";

/**
 * What a recipe is built with: the run's seed, the protocol chosen (the recipe's default unless `env.protocol`
 * says), the env's own options (`env.options` of the config, checked by the recipe's own schema — errors name
 * `env.options.<field>`), the turn budget and the tool-call settings and faults of the config's `env` section.
 */
export interface RecipeContext {
  seed: number;
  protocol: ProtocolName;
  options: Record<string, unknown>;
  maxTurns: number;
  call: ToolCallSettings;
  /** Fault injection for RL rollouts and evaluation (absent = off); warm-start demonstrations never see faults. */
  faults?: FaultOptions;
}

/** A built recipe: tasks, env factories and personas of one run. */
export interface RecipeInstance<D = unknown> {
  train: Task<D>[];
  test: Task<D>[];
  /**
   * The env factory of world `k`: 0 is the real world, `k ≥ 1` a counterfactual copy (prices, times, ratings…
   * re-drawn) so a tiny policy cannot memorise the training tasks' answers. `faults: false` turns off the
   * context's fault injection (warm-start demonstrations).
   */
  makeEnv(world: number, options?: { faults?: boolean }): EnvFactory;
  /**
   * Every text the env can show or a policy may write: the vocabulary of the embedded word tokenizer a from-scratch
   * run (`policy.init: scratch`) builds. Optional: without it a from-scratch run takes the base's byte-level BPE
   * tokenizer (`policy.base`, else the package's), which encodes any text, so an env written for a base lists nothing.
   */
  texts?(): string[];
  /**
   * The env's fixed system prompts (the same text in every episode, e.g. hermes' instructions + `# Tools` block),
   * which the embedded word tokenizer keeps as one token each (see `WordTokenizer.fromTexts`): the text the env
   * renders is unchanged, but a policy trained from scratch does not pay hundreds of constant tokens per episode.
   * A pretrained base (`policy.init: base`) does the same with `policy.fixedPrompts: token` (one learned token each,
   * added to the base's tokenizer: src/train/base.ts `withPromptTokens`). Optional; a real model's tokenizer ignores it.
   */
  fixedPrompts?(): string[];
  /** The personas and their weights in the warm-start mixture (each makes the env's mistakes at its own rate). */
  personas: Record<string, number>;
  /** The careful persona: the scripted "prompt-driven" baseline row of the summary. */
  baselinePersona: string;
  /** The text persona `persona` writes for the turn `ctx` (already in the protocol's format). */
  scriptedTurn(persona: string, ctx: TurnContext): string;
  /**
   * Per-episode breakdown for the summary table (e.g. `decision/i_context: 1`); a key absent from an episode means
   * the decision did not arise there, so a rate is averaged over the episodes that have the key. Values in [0, 1]
   * unless the name says otherwise (`calls`, counts).
   */
  breakdown(traj: Trajectory): Record<string, number>;
  /** Human labels of the breakdown keys, in table order (`{ "decision/i_context": "(i) keep the context" }`). */
  breakdownLabels: Record<string, string>;
  /** One line for the run log (world size, tasks, tools). */
  describe(): string;
  /**
   * The warm-start demonstrations, when the recipe writes its own instead of the default persona mixture
   * (`sft.demosPerTask` episodes per training task by `personas`, in the real and `sft.counterfactualWorlds` worlds).
   * The search recipe adds one answer per known fact and reading demonstrations in its counterfactual worlds.
   * @returns trajectories with loss mask 1 on the demonstrated tokens
   */
  demonstrations?(ctx: DemoContext): Promise<Trajectory[]>;
  /**
   * The demonstrations replayed with cross entropy in every RL update (`rl.ptxCoef`, InstructGPT's PPO-ptx), picked
   * from the warm start's; absent = none (the search recipe replays its known-fact answers).
   */
  replay?(demos: readonly Trajectory[]): Trajectory[];
  /** The training tasks of world `k` (default `train` for every world): a counterfactual world may change answers. */
  trainTasks?(world: number): Task<D>[];
  /**
   * The baseline rows evaluated beside the warm start (default: the `baselinePersona` scripted, "prompt-driven").
   * Each is a scripted persona, or the policy itself with text forced into its turns (Search-R1's Direct and RAG).
   */
  baselines?: readonly RecipeBaseline[];
  /** The documents the env's retrieval tool searches, for a retrieval server or an export (absent = no corpus). */
  corpus?(): readonly Passage[];
  /**
   * World `k` of a retrieval env, served to an agent outside this process (`arl train --agent`: its search tool calls
   * the world's retrieval, a scripted teacher stands in for the policy in the warm start). World 0 is the real one;
   * `k ≥ 1` a counterfactual copy — `"demo"` the warm start's (the worlds `demonstrations` draws for
   * `sft.counterfactualWorlds`), `"rl"` RL's (the world of `makeEnv(k)`). Absent for an env without a retrieval corpus.
   */
  retrievalWorld?(use: "demo" | "rl", k: number): RetrievalWorld<D>;
}

/** One world of a retrieval env as an agent outside this process uses it (`RecipeInstance.retrievalWorld`). */
export interface RetrievalWorld<D = unknown> {
  /** The world's training tasks (a counterfactual world's unknown answers differ from the real world's). */
  train: Task<D>[];
  /**
   * The training tasks whose answer only the retrieved passages hold (the search env's unknown-fact questions): the
   * warm start's reading demonstrations in a counterfactual world, and the `--dry-run` probe.
   */
  retrievalTasks: Task<D>[];
  /** The documents its retrieval serves. */
  passages: readonly Passage[];
  /** The world's own texts (passages, questions, answers) for a word tokenizer, without the env's prompt text. */
  texts(): string[];
  /**
   * The turn persona `persona` (a key of the instance's `personas`) writes for `ctx` in this world, as Search-R1 text
   * (`<search> … </search>` / `<answer> … </answer>`), which the `--agent` teacher rewrites as the agent's tool calls.
   * @throws Error for a persona the recipe does not have
   */
  scriptedTurn(persona: string, ctx: TurnContext): string;
}

/** What a recipe's own `demonstrations` hook is given. */
export interface DemoContext {
  tokenizer: Tokenizer;
  /** The token budgets of an episode (`policy.contextLength`, `env.maxObservationTokens`). */
  limits: RolloutLimits;
  /** Episodes per training task (`sft.demosPerTask`). */
  demosPerTask: number;
  /** Counterfactual worlds that get demonstrations besides the real one (`sft.counterfactualWorlds`). */
  counterfactualWorlds: number;
  /** The persona mix (persona → weight): the recipe's `personas` with the config's `sft.personas` over them. */
  personas: Readonly<Record<string, number>>;
}

/**
 * A baseline row of the summary: `persona` (a scripted persona of the recipe), or `forced` (the policy under
 * evaluation with text forced into its turns: `complete` replaces the turn, otherwise it is a prefix).
 */
export type RecipeBaseline =
  | { label: string; persona: string }
  | { label: string; forced: (ctx: TurnContext) => ForcedText | undefined };

/** An env recipe (see the file doc). */
export interface EnvRecipe<D = unknown> {
  /** Registry name (`arl train --env NAME`). */
  name: string;
  /** One line for `arl envs`. */
  description: string;
  /** Protocols the recipe supports; the first is its default. */
  protocols: readonly ProtocolName[];
  /** Tool names, for `arl envs`. */
  tools: readonly string[];
  /**
   * Config fields this env trains with by default, as dotted paths and flag strings (`{"rl.steps": "60"}`), applied
   * under the user's config file and flags (a user's value wins).
   */
  defaults: Record<string, string>;
  /** Config fields of its `--smoke` run, applied over `defaults` (a user's flags still win). */
  smoke: Record<string, string>;
  /**
   * Config fields applied over `defaults` (and the runner's own base-start defaults, src/train/base.ts
   * `BASE_START_DEFAULTS`) when the policy starts from a pretrained base (`policy.init: base`): a model that already
   * reads needs fewer warm-start steps than one trained from scratch. Optional.
   */
  baseDefaults?: Record<string, string>;
  /**
   * Reward designs `arl lab --env NAME` trains for this env (issue 17 part 4), by name: each pays what one reward
   * design pays (a preset, extra weights, and dotted config overrides such as `env.options.<field>` or `reward.*`) and
   * says which loophole it opens or closes. Optional: an env without designs has none in the lab.
   */
  labDesigns?: Readonly<Record<string, RecipeLabDesign>>;
  /**
   * How `arl lab` judges the designs: `loopholes` (default: each design's expected detectors against what fired) or
   * `qa` (a QA env whose tasks say whether the fact is `known`: EM, searches and guess rate by known vs unknown facts,
   * and the lab's claims about guessing and needless search).
   */
  labReport?: "loopholes" | "qa";
  /** @throws ConfigError/Error naming `env.options.<field>` and the allowed values on a bad option */
  build(ctx: RecipeContext): RecipeInstance<D>;
}

/** One reward design of an env recipe for `arl lab --env NAME` (the shape of the lab's own `LabDesign`, less its name). */
export interface RecipeLabDesign {
  /** One sentence: what the design pays and the loophole it opens (or the fix it is). */
  description: string;
  /** Reward preset the weights start from (`REWARD_PRESETS`, e.g. `tool-env`). */
  preset: string;
  /** Reward-term weights added to or overriding the preset's. */
  weights: Record<string, number>;
  /** Dotted config overrides (`env.options.<field>`, `rl.*`, `reward.*`, `detectors.*`) → flag text. */
  overrides: Record<string, string>;
  /** The detector names (`detectors.jsonl`'s `detector`) this design is expected to fire, for the lab's report. */
  expectedDetectors?: readonly string[];
  /** Trained only when `lab.designs` names it, not in the env's default lab. */
  optional?: boolean;
}
