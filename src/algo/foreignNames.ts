/**
 * Other frameworks' names for what `rl.advantage`, `rl.lossFn` and `rl.lossAggMode` offer here, so a name copied
 * from a TRL, OpenRLHF or veRL config gets told what it is called in this repository (or that it is not
 * implemented) instead of only "expected one of …". Our own names are veRL's (`algorithm.adv_estimator`,
 * `policy_loss.loss_mode`, `loss_agg_mode`; docs/algorithms.md).
 *
 * Sources: TRL `GRPOConfig.loss_type` / `scale_rewards` / `importance_sampling_level`
 * (huggingface/trl @ 006d32c9bf5da698815726ebd0de78b404e8163d `trl/trainer/grpo_config.py`, the class docstring);
 * OpenRLHF `--advantage_estimator` (`openrlhf/trainer/ppo_utils/experience_maker.py`: `rloo`, `reinforce_baseline`,
 * `dr_grpo`, `group_norm`, `reinforce`, `gae`); veRL `policy_loss.loss_mode` `vanilla`.
 */

/** A foreign algorithm name → what to set here (or why it is not here). Keys are lower-case. */
export const FOREIGN_ALGORITHM_NAMES: Readonly<Record<string, string>> = {
  // TRL loss_type: each names an aggregation (and for dr_grpo the unscaled advantage), not an estimator.
  dr_grpo: 'TRL\'s loss_type / OpenRLHF\'s advantage_estimator "dr_grpo" is rl.advantage drgrpo here (its rl.lossAggMode auto is seq-mean-token-sum-norm, TRL\'s global-constant normaliser)',
  dapo: 'TRL\'s loss_type "dapo" is rl.lossAggMode token-mean here; the DAPO recipe is the lab\'s dapo design (rl.clipHigh 0.28, rl.filterGroups true, rl.lossAggMode token-mean, rl.overlongBuffer)',
  bnpo: 'TRL\'s loss_type "bnpo" is rl.lossAggMode token-mean here',
  grpo: 'TRL\'s loss_type "grpo" (per-sequence length normalisation) is rl.lossAggMode seq-mean-token-mean here; the estimator is rl.advantage grpo',
  cispo: 'CISPO is a policy loss here: rl.lossFn cispo',
  gspo: 'GSPO (TRL importance_sampling_level "sequence") is a policy loss here: rl.lossFn gspo',
  sapo: '"sapo" (TRL loss_type) is not implemented here; rl.lossFn offers ppo, importance_sampling, cispo, dro, gspo',
  luspo: '"luspo" (TRL loss_type) is not implemented here; rl.lossFn offers ppo, importance_sampling, cispo, dro, gspo',
  // OpenRLHF advantage_estimator names.
  reinforce: 'OpenRLHF\'s advantage_estimator "reinforce" (REINFORCE++) is rl.advantage reinforce_plus_plus here (veRL\'s name)',
  "reinforce++": 'REINFORCE++ is rl.advantage reinforce_plus_plus here (veRL\'s name)',
  reinforce_baseline: 'OpenRLHF\'s advantage_estimator "reinforce_baseline" is rl.advantage reinforce_plus_plus_baseline here (veRL\'s name)',
  "reinforce++-baseline": 'REINFORCE++-baseline is rl.advantage reinforce_plus_plus_baseline here (veRL\'s name)',
  group_norm: 'OpenRLHF\'s advantage_estimator "group_norm" is rl.advantage grpo here',
  // veRL's own loss mode name for PPO's clipped objective.
  vanilla: 'veRL\'s policy_loss.loss_mode "vanilla" is rl.lossFn ppo here',
  ppo: 'PPO is rl.lossFn ppo with an estimator: rl.advantage gae for PPO with a critic, grpo without one',
};

/** The hint for `value` given to an `rl` algorithm field, or undefined when it is no known foreign name. */
export function foreignNameHint(value: unknown): string | undefined {
  return typeof value === "string" ? FOREIGN_ALGORITHM_NAMES[value.toLowerCase()] : undefined;
}
