/**
 * Everything an experiment builds from its config and recipe before training: the recipe's instance (tasks, worlds,
 * tools, personas), the protocol and its stop conditions, the tokenizer (the env's words plus the protocol's tags, a
 * pretrained base's with `policy.init: base`, or a real model's `policy.tinker.tokenizer`), the token budgets and the
 * model shape — and the checks that need them (reward terms, the embedded model's memory). The recipe is the only
 * thing that knows the env.
 */
import { Rng } from "../core/rng.ts";
import type { Task, Trajectory } from "../core/types.ts";
import type { EnvRecipe, RecipeContext, RecipeInstance } from "../env/recipe.ts";
import { getProtocol } from "../protocol/index.ts";
import type { Protocol } from "../protocol/types.ts";
import { validateRewardConfig } from "../reward/compose.ts";
import { protocolStops } from "../rollout/agent.ts";
import type { GPTConfig } from "../policy/embedded/gpt.ts";
import { loadTokenizer } from "../policy/hf/index.ts";
import { WordTokenizer } from "../policy/tokenizer.ts";
import type { Tokenizer } from "../core/tokenizer.ts";
import { ConfigError, type ExperimentConfig } from "./config.ts";
import { embeddedMemoryProblem, embeddedMemoryShape, estimateEmbeddedMemory, type EmbeddedMemoryEstimate } from "../policy/embedded/memory.ts";
import { rewardConfigOf } from "../reward/config.ts";
import { policyBaseOf, readBase, withPromptTokens } from "./base.ts";
import { baseDirOf } from "../policy/config.ts";
import type { PolicySetup } from "./rlLoop.ts";

/** Everything built from the config and a recipe before training. */
export interface Setup extends PolicySetup {
  recipe: EnvRecipe;
  instance: RecipeInstance;
  protocol: Protocol;
  stops: { stop: number[]; stopStrings: string[] };
  /**
   * The pretrained base the policy starts from (`policy.init: base`, embedded backend), else undefined;
   * `promptTokens`: how many of the env's fixed prompts are learned tokens past the base's vocabulary
   * (`policy.fixedPrompts: token`), present only when some are.
   */
  base?: { dir: string; fingerprint: string; promptTokens?: number };
}

/**
 * Checks what the schema cannot: the reward's terms exist, and a weighted `judge` term has an endpoint.
 * @throws ConfigError naming the field
 */
export function checkReward(config: ExperimentConfig): void {
  const reward = rewardConfigOf(config);
  validateRewardConfig(reward);
  if (Object.hasOwn(reward.weights, "judge") && reward.options?.judge === undefined) {
    throw new ConfigError(["reward.options.judge: required when the `judge` term is weighted (an OpenAI-compatible baseUrl and model)"]);
  }
}

/** The embedded model's shape from the config's `policy` section and the tokenizer's vocabulary size. */
export function gptConfigOf(config: ExperimentConfig, vocabSize: number): GPTConfig {
  const p = config.policy;
  return { vocabSize, contextLength: p.contextLength, dModel: p.dModel, nLayers: p.nLayers, nHeads: p.nHeads, mlpRatio: p.mlpRatio };
}

/**
 * The recipe context of a config: seed, protocol (`env.protocol`, else the recipe's first), `env.options`,
 * `env.maxTurns`, `env.tools`, `env.faults` (when `rate > 0`).
 * @throws ConfigError when `env.protocol` is not one the recipe speaks
 */
export function recipeContext(config: ExperimentConfig, recipe: EnvRecipe): RecipeContext {
  if (recipe.protocols.length === 0) throw new ConfigError([`env.name: the ${recipe.name} env declares no protocols (EnvRecipe.protocols must name at least one of search-r1, hermes, react)`]);
  const protocol = config.env.protocol ?? recipe.protocols[0];
  if (!recipe.protocols.includes(protocol)) {
    throw new ConfigError([`env.protocol: the ${recipe.name} env speaks ${recipe.protocols.join(", ")}; got ${protocol}`]);
  }
  const { maxConcurrency, timeoutMs, retries, backoffMs, maxBackoffMs, maxOutputChars, maxResultBytes } = config.env.tools;
  return {
    seed: config.run.seed,
    protocol,
    options: config.env.options,
    maxTurns: config.env.maxTurns,
    call: { maxConcurrency, timeoutMs, retries, backoffMs, maxBackoffMs, maxOutputChars, maxResultBytes },
    ...(config.env.faults.rate > 0 ? { faults: config.env.faults } : {}),
  };
}

/**
 * Builds a recipe's instance for a config.
 * @throws ConfigError naming `env.options.<field>` on a bad option, or the hook a recipe's build() left out
 */
export function buildInstance(config: ExperimentConfig, recipe: EnvRecipe): RecipeInstance {
  let instance: RecipeInstance;
  try {
    instance = recipe.build(recipeContext(config, recipe));
  } catch (e) {
    // A recipe names its bad option (`env.options.<field>: …`): a config error like any other (exit 2).
    const message = e instanceof Error ? e.message : String(e);
    if (/^env\.options\b/.test(message)) throw new ConfigError(message.split("; "));
    throw e;
  }
  if (instance?.texts !== undefined && typeof instance.texts !== "function") throw new ConfigError([`env.name: the ${recipe.name} env's build() returned a texts that is not a function (see RecipeInstance in src/env/recipe.ts)`]);
  for (const k of ["makeEnv", "scriptedTurn", "breakdown", "describe"] as const) {
    if (typeof instance?.[k] !== "function") throw new ConfigError([`env.name: the ${recipe.name} env's build() returned no ${k}() (see RecipeInstance in src/env/recipe.ts)`]);
  }
  if (!Object.hasOwn(instance.personas ?? {}, instance.baselinePersona)) {
    throw new ConfigError([`env.name: the ${recipe.name} env's baselinePersona "${instance.baselinePersona}" is not one of its personas (${Object.keys(instance.personas ?? {}).join(", ")})`]);
  }
  return instance;
}

/**
 * Builds a recipe for a config: its instance, the tokenizer, the protocol's stop conditions, budgets
 * (`policy.contextLength` tokens of context) and the model shape. The tokenizer and shape: with `policy.init: base`
 * (embedded backend) the base's tokenizer and `base.json`'s shape exactly (`policy.dModel`, `nLayers`, `nHeads`,
 * `mlpRatio` ignored; the env's `texts()` unused), plus with `policy.fixedPrompts: token` one learned token (and `wte`
 * row) per fixed prompt of the env (`withPromptTokens`); with a Tinker backend and `policy.tinker.tokenizer` that model's
 * tokenizer; else the env's words plus the protocol's tags, and the shape of the `policy` fields.
 * @throws ConfigError on a bad reward or protocol; naming `policy.base`, `policy.contextLength`, `policy.sampler` or
 *   `policy.trainer` when the base is missing, malformed or does not fit the config (`policyBaseOf`); what
 *   `recipe.build` throws on bad `env.options`
 */
export function setupExperiment(config: ExperimentConfig, recipe: EnvRecipe): Setup {
  checkReward(config);
  const instance = buildInstance(config, recipe);
  personaMix(instance, config, recipe.name); // a persona the env lacks is refused before anything is written
  const protocol = getProtocol(config.env.protocol ?? recipe.protocols[0]);
  const policyBase = policyBaseOf(config);
  const prompts = config.policy.fixedPrompts === "token" ? (instance.fixedPrompts?.() ?? []) : [];
  const base = policyBase !== undefined ? { ...policyBase, ...withPromptTokens(policyBase, prompts) } : undefined;
  const tokenizer: Tokenizer =
    base !== undefined
      ? base.tokenizer
      : config.policy.backend === "tinker" && config.policy.tinker.tokenizer
        ? loadTokenizer(config.policy.tinker.tokenizer)
        : instance.texts !== undefined
          ? WordTokenizer.fromTexts(instance.texts(), [...protocol.specialTokens, ...(instance.fixedPrompts?.() ?? [])])
          : scratchBpe(config, instance.fixedPrompts?.() ?? [], recipe.name);
  // A base's context is at least policy.contextLength (policyBaseOf): its shape stays whole, the rollout samples within the config's.
  const limits = { contextLength: config.policy.contextLength, maxObservationTokens: config.env.maxObservationTokens };
  const gpt = base !== undefined ? base.gpt : gptConfigOf(config, tokenizer.vocabSize);
  const started = base !== undefined ? { base: { dir: base.dir, fingerprint: base.fingerprint, ...(base.promptTokens > 0 ? { promptTokens: base.promptTokens } : {}) } } : {};
  return { recipe, instance, protocol, tokenizer, limits, gpt, stops: protocolStops(tokenizer, protocol.stops), ...started };
}

/**
 * The tokenizer of a from-scratch run of an env that lists no `texts()`: the base's byte-level BPE (`policy.base`, else
 * the package's base folder) with each fixed prompt as one added token, as the word tokenizer keeps them.
 * @throws ConfigError naming `policy.init` and `policy.base` when no base folder is there to read the tokenizer from
 */
function scratchBpe(config: ExperimentConfig, prompts: readonly string[], env: string): Tokenizer {
  const dir = baseDirOf(config.policy);
  try {
    return withPromptTokens(readBase(dir), prompts).tokenizer;
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new ConfigError([`policy.init: the ${env} env lists no texts() for a word vocabulary, so a from-scratch run takes the base's tokenizer: ${e.problems.join("; ")}`]);
  }
}

/** `, +n learned prompt tokens (policy.fixedPrompts: token)` for a run line when `n` > 0, else "". */
export function promptTokensNote(n: number | undefined): string {
  return n !== undefined && n > 0 ? `, +${n} learned prompt token${n === 1 ? "" : "s"} (policy.fixedPrompts: token)` : "";
}

/**
 * The warm start's persona mix: the recipe's `personas` with `sft.personas` over them (a persona not named keeps the
 * recipe's weight), in the recipe's order.
 * @throws ConfigError naming `sft.personas.<name>` when the recipe has no such persona, with the allowed names
 */
export function personaMix(instance: Pick<RecipeInstance, "personas">, config: ExperimentConfig, env: string): Record<string, number> {
  const given = config.sft.personas ?? {};
  const unknown = Object.keys(given).filter((n) => !Object.hasOwn(instance.personas, n));
  if (unknown.length > 0) throw new ConfigError(unknown.map((n) => `sft.personas.${n}: not a persona of the ${env} env; allowed: ${Object.keys(instance.personas).join(", ")}`));
  return { ...instance.personas, ...given };
}

/** The held-out tasks evaluated: all of the recipe's test split, or the first `eval.maxTasks` of a seeded shuffle. */
export function evalTasks(s: Pick<Setup, "instance">, config: ExperimentConfig): Task[] {
  const tasks = s.instance.test;
  if (config.eval.maxTasks === 0 || config.eval.maxTasks >= tasks.length) return tasks;
  return new Rng(config.run.seed + 11).shuffle(tasks).slice(0, config.eval.maxTasks);
}

/**
 * Checks that the embedded model fits jax-js's 4 GiB wasm heap, before anything is built or written: a model too large
 * would otherwise die minutes in with an allocation error that names no field. The shape is the `policy` fields', or
 * with `policy.init: base` the base's (`s.gpt`).
 * @returns the estimate (bytes), or undefined for a remote policy (`policy.backend: tinker`)
 * @throws ConfigError naming the field that drives the estimate and the largest value that fits
 */
export function checkMemory(config: ExperimentConfig, s: Setup): EmbeddedMemoryEstimate | undefined {
  if (config.policy.backend !== "embedded") return undefined;
  const rows = evalTasks(s, config).length;
  // A base's shape is its own (base.json), not the policy fields'.
  const { contextLength, dModel, nLayers, nHeads, mlpRatio = 4 } = s.gpt;
  const shaped = s.base !== undefined ? { ...config, policy: { ...config.policy, contextLength, dModel, nLayers, nHeads, mlpRatio } } : config;
  const problem = embeddedMemoryProblem(shaped, s.tokenizer.vocabSize, rows);
  if (problem !== undefined) throw new ConfigError([problem]);
  return estimateEmbeddedMemory(embeddedMemoryShape(shaped, s.tokenizer.vocabSize, rows));
}

/**
 * A warning when the word vocabulary misses words the demonstrations use (their tokens became `[UNK]`: the
 * recipe's `texts()` does not cover everything its env shows or its personas write), or undefined.
 */
export function unknownTokenWarning(s: Setup, demos: readonly Trajectory[]): string | undefined {
  if (!(s.tokenizer instanceof WordTokenizer)) return undefined;
  const unk = s.tokenizer.id("[UNK]");
  let n = 0;
  let total = 0;
  let example: string | undefined;
  for (const d of demos) {
    total += d.tokens.length;
    const at = d.tokens.indexOf(unk);
    if (at < 0) continue;
    n += d.tokens.filter((t) => t === unk).length;
    example ??= s.tokenizer.decode(d.tokens.slice(Math.max(0, at - 6), at + 6));
  }
  if (n === 0) return undefined;
  return `${n} of ${total} demonstration tokens are [UNK]: the ${s.recipe.name} env's texts() misses words it shows or its personas write (e.g. "${example}")`;
}
