/**
 * What one RL step (`rlStep`, src/train/rl.ts) reads besides its tasks: the policy's backend and tokenizer, the env,
 * the config, and the optional pieces (reference policy, judge, PTX replay, DAPO's extra tasks, a critic).
 */
import type { Datum, Task, Trajectory } from "../../core/types.ts";
import type { EnvFactory } from "../../env/types.ts";
import type { Tokenizer } from "../../core/tokenizer.ts";
import type { CriticHooks, TrainingBackend } from "../../core/training.ts";
import type { Judge } from "../../reward/types.ts";
import type { RolloutLimits } from "../../env/episode.ts";
import type { ExperimentConfig } from "../config.ts";

/** What an RL step needs besides its tasks. */
export interface RlContext {
  backend: TrainingBackend;
  /**
   * Frozen reference policy (the warm start): the k3 KL term when `rl.klCoef > 0`, and the `hack/kl_ref` monitor
   * (k1 KL of the sampled tokens) whenever present.
   */
  reference?: TrainingBackend;
  /** LLM judge for the `judge` reward term. */
  judge?: Judge;
  tokenizer: Tokenizer;
  makeEnv: EnvFactory;
  limits: RolloutLimits;
  config: ExperimentConfig;
  /**
   * Warm-start demonstrations replayed with cross entropy in every update (`rl.ptxCoef`; InstructGPT's PPO-ptx,
   * Ouyang et al. 2022 §3.5), so RL on the training questions does not erase what warm start taught.
   */
  replay?: { datums: Datum[]; next: () => number };
  onEpisode?: (traj: Trajectory) => void;
  /** Stop conditions of a turn (the env protocol's, `protocolStops(tokenizer, protocol.stops)`); default Search-R1's. */
  stops?: { stop: number[]; stopStrings: string[] };
  /**
   * DAPO dynamic sampling (`rl.filterGroups`): `n` more tasks for the next rollout batch of a step whose informative
   * groups are too few. Default: the step's own tasks again (new sampling seed).
   */
  moreTasks?: (n: number) => Task[];
  /**
   * Critic values V(s_t) of each datum's targets `[batch][seq-1]` (reward units) and the critic's update on the
   * returns, for `rl.advantage: gae`. Default: the backend's value head (`TrainingBackend.valueHead`), when it has one.
   */
  critic?: CriticHooks;
  /**
   * Called for each optimizer step of the update that was skipped because its loss or gradient norm was NaN/Inf
   * (its gradients discarded, weights and Adam state untouched), with what was not finite (e.g. `loss NaN`).
   */
  onSkippedUpdate?: (reason: string) => void;
}
