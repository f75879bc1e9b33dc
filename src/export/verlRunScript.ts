/**
 * `run.sh` of `arl export verl`: veRL's GRPO trainer over the exported files, after veRL's
 * `examples/sglang_multiturn/search_r1_like/run_qwen2.5-3b_instruct_search_multiturn.sh` (v0.5.0), with the hydra
 * keys of the targeted release.
 */
import { AGENT_NAME } from "./verlRows.ts";
import { ROLLOUT_N, type VerlSchedule } from "./verlSchedule.ts";
import { DEFAULT_VERL_TARGET, VERL_RELEASES, type VerlTarget } from "./verlTarget.ts";

/** Quotes a string for bash (single quotes). */
function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Options of `runScript` / `runScriptOverrides`. */
export interface RunScriptOptions {
  /** The veRL release targeted (default `current`). */
  target?: VerlTarget;
  /** Hugging Face model id or path (the default of `$MODEL`). */
  model: string;
  /** Base URL of `arl serve reward` (the default of `$ARL_REWARD_URL`). */
  rewardUrl: string;
  /** URL of `arl serve retrieval`'s endpoint (the default of `$ARL_RETRIEVAL_URL`, current target). */
  retrievalUrl: string;
  /** `multi_turn.max_assistant_turns` (the env's `maxTurns`). */
  maxTurns: number;
  /** Passages per search (named in the experiment name). */
  topK: number;
  /** Batch sizes and epochs (`verlSchedule`). */
  schedule: VerlSchedule;
  /** `multi_turn.max_tool_response_length` in characters (default 1024). */
  maxToolResponseLength?: number;
  /** The config file of the export, quoted in the comments so the servers start with the same one. */
  configFile?: string;
}

/**
 * The hydra overrides `run.sh` passes to `python3 -m verl.trainer.main_ppo`, as `[key, value]` in order; values are
 * bash words (`$HERE/…` paths in double quotes, shell variables such as `$MODEL`, `$N_GPUS`,
 * `$PPO_MICRO_BATCH_SIZE_PER_GPU`). Keys that differ by target (see docs/scale-out.md "key × version"):
 * - tool: `multi_turn.tool_config_path` (0.5, `tool_config.yaml`) / `multi_turn.function_tool_path` (current,
 *   `search_tool.py`);
 * - rollout: `rollout.mode=sync` (0.5: SGLang runs the tools) / `rollout.mode=async` plus
 *   `rollout.agent.default_agent_loop=tool_agent` (current; the key exists from v0.6.0);
 * - reward: `reward_model.reward_manager`, `custom_reward_function.{path,name}` (0.5) /
 *   `reward.reward_manager.name`, `reward.custom_reward_function.{path,name}` (current, from v0.8.0).
 */
export function runScriptOverrides(opts: RunScriptOptions): [string, string][] {
  const target = opts.target ?? DEFAULT_VERL_TARGET;
  const s = opts.schedule;
  const current = target === "current";
  const o: [string, string][] = [
    ["algorithm.adv_estimator", "grpo"],
    ["algorithm.use_kl_in_reward", "False"],
    ["data.train_files", '"$HERE/train.parquet"'],
    ["data.val_files", '"$HERE/test.parquet"'],
    ["data.train_batch_size", "$TRAIN_BATCH_SIZE"],
    ["data.max_prompt_length", "1024"],
    ["data.max_response_length", "1024"],
    ["data.filter_overlong_prompts", "True"],
    ["data.truncation", "error"],
    ["data.return_raw_chat", "True"],
    ["actor_rollout_ref.model.path", '"$MODEL"'],
    ["actor_rollout_ref.model.use_remove_padding", "True"],
    ["actor_rollout_ref.model.enable_gradient_checkpointing", "True"],
    ["actor_rollout_ref.actor.optim.lr", "1e-6"],
    ["actor_rollout_ref.actor.ppo_mini_batch_size", "$PPO_MINI_BATCH_SIZE"],
    ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "$PPO_MICRO_BATCH_SIZE_PER_GPU"],
    ["actor_rollout_ref.actor.use_kl_loss", "True"],
    ["actor_rollout_ref.actor.kl_loss_coef", "0.001"],
    ["actor_rollout_ref.actor.kl_loss_type", "low_var_kl"],
    ["actor_rollout_ref.actor.entropy_coeff", "0"],
    ["actor_rollout_ref.rollout.name", "sglang"],
    ["actor_rollout_ref.rollout.mode", current ? "async" : "sync"],
    ["actor_rollout_ref.rollout.n", "$ROLLOUT_N"],
    ["actor_rollout_ref.rollout.tensor_model_parallel_size", "1"],
    ["actor_rollout_ref.rollout.gpu_memory_utilization", "0.5"],
    ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "8"],
    ["actor_rollout_ref.rollout.multi_turn.enable", "True"],
    ["actor_rollout_ref.rollout.multi_turn.max_assistant_turns", String(opts.maxTurns)],
    ["actor_rollout_ref.rollout.multi_turn.max_tool_response_length", String(opts.maxToolResponseLength ?? 1024)],
    ["actor_rollout_ref.rollout.multi_turn.format", "hermes"],
    current
      ? ["actor_rollout_ref.rollout.multi_turn.function_tool_path", '"$HERE/search_tool.py"']
      : ["actor_rollout_ref.rollout.multi_turn.tool_config_path", '"$HERE/tool_config.yaml"'],
    ...(current ? ([["actor_rollout_ref.rollout.agent.default_agent_loop", AGENT_NAME]] as [string, string][]) : []),
    ["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "8"],
    ["actor_rollout_ref.ref.fsdp_config.param_offload", "True"],
    ...((current
      ? [
          ["reward.reward_manager.name", "naive"],
          ["reward.custom_reward_function.path", '"$HERE/reward_fn.py"'],
          ["reward.custom_reward_function.name", "compute_score"],
        ]
      : [
          ["reward_model.reward_manager", "naive"],
          ["custom_reward_function.path", '"$HERE/reward_fn.py"'],
          ["custom_reward_function.name", "compute_score"],
        ]) as [string, string][]),
    ["trainer.critic_warmup", "0"],
    ["trainer.logger", `'["console"]'`],
    ["trainer.project_name", "agentic_rl"],
    ["trainer.experiment_name", `search_grpo_topk${opts.topK}`],
    ["trainer.n_gpus_per_node", '"$N_GPUS"'],
    ["trainer.nnodes", "1"],
    ["trainer.total_epochs", "$TOTAL_EPOCHS"],
    ["trainer.total_training_steps", "$TOTAL_TRAINING_STEPS"],
    ["trainer.test_freq", String(s.testFreq)],
    ["trainer.save_freq", String(s.saveFreq)],
  ];
  return o;
}

/**
 * `run.sh`: a veRL GRPO run over the exported files (Search-R1-like multi-turn with the search tool), after veRL's
 * `run_qwen2.5-3b_instruct_search_multiturn.sh`, with the reward from `reward_fn.py`, the overrides of
 * `runScriptOverrides` and the batch sizes / epochs of `opts.schedule` as shell variables. Before starting veRL it
 * checks `N_GPUS` (a positive integer dividing batch × n and mini-batch × n responses; exit 2 with the reason
 * otherwise) and sets `PPO_MICRO_BATCH_SIZE_PER_GPU` to the largest of 8, 4, 2, 1 dividing one GPU's share of a
 * mini-batch (veRL asserts `ppo_mini_batch_size × n / n_gpus % ppo_micro_batch_size_per_gpu == 0`, v0.5.0
 * `verl/workers/fsdp_workers.py`). Extra hydra overrides pass through (`bash run.sh trainer.test_freq=5`);
 * `MODEL`, `N_GPUS`, `ARL_REWARD_URL` (and `ARL_RETRIEVAL_URL`, current target) come from the environment.
 */
export function runScript(opts: RunScriptOptions): string {
  const target = opts.target ?? DEFAULT_VERL_TARGET;
  const rel = VERL_RELEASES[target];
  const s = opts.schedule;
  const cfg = opts.configFile ? ` --config ${shq(opts.configFile)}` : "";
  const retrievalPort = /:(\d+)\//.exec(opts.retrievalUrl)?.[1] ?? "8000";
  const rewardPort = /:(\d+)\/?$/.exec(opts.rewardUrl)?.[1] ?? "8100";
  const tool = target === "current" ? "search_tool.py (@function_tool)" : "tool_config.yaml (SearchTool)";
  const overrides = runScriptOverrides({ ...opts, target })
    .map(([k, v]) => `    ${k}=${v} \\`)
    .join("\n");
  return `#!/usr/bin/env bash
# veRL ${rel.tag} GRPO run on agentic-rl's search environment (generated by \`arl export verl --verl-version ${target}\`).
# Needs: pip install "verl[sglang]==${rel.pip}" on a GPU machine (veRL's own install guide).
#
# Start our two services first, from the agentic-rl checkout (same config as the export):
#   npx arl serve retrieval --port ${retrievalPort}${cfg}   # Search-R1 POST /retrieve for ${tool} (${opts.retrievalUrl})
#   npx arl serve reward --port ${rewardPort}${cfg}      # compute_score → POST /reward (${opts.rewardUrl})
# (add --host 0.0.0.0 when veRL runs on other machines, and point ${target === "current" ? "ARL_RETRIEVAL_URL" : "tool_config.yaml"} / ARL_REWARD_URL at them)
# Then: bash run.sh [extra hydra overrides, e.g. trainer.test_freq=5]
set -euo pipefail
HERE="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
MODEL="\${MODEL:-${opts.model}}"
N_GPUS="\${N_GPUS:-8}"
export ARL_REWARD_URL="\${ARL_REWARD_URL:-${opts.rewardUrl}}"
${target === "current" ? `export ARL_RETRIEVAL_URL="\${ARL_RETRIEVAL_URL:-${opts.retrievalUrl}}"\n` : ""}
# Sized from the dataset (arl export verl, verlSchedule): ${s.rows} train rows, ${s.trainBatchSize} prompts per step
# → ${s.stepsPerEpoch} steps per epoch (veRL drops the last partial batch) × ${s.epochs} epochs = ${s.totalSteps} steps,
# ${s.trainBatchSize / s.ppoMiniBatchSize} optimizer update(s) per step (mini-batch ${s.ppoMiniBatchSize} prompts) = ${s.updates} updates.
# Re-export with --train-batch-size / --min-steps to change them (a hydra override here skips the checks below).
TRAIN_ROWS=${s.rows}
TRAIN_BATCH_SIZE=${s.trainBatchSize}
PPO_MINI_BATCH_SIZE=${s.ppoMiniBatchSize}
ROLLOUT_N=${ROLLOUT_N}
TOTAL_EPOCHS=${s.epochs}
TOTAL_TRAINING_STEPS=${s.totalSteps}

if ! [[ "$N_GPUS" =~ ^[1-9][0-9]*$ ]]; then
    echo "run.sh: N_GPUS must be a positive integer, got '$N_GPUS'" >&2
    exit 2
fi
if (( TRAIN_BATCH_SIZE * ROLLOUT_N % N_GPUS != 0 || PPO_MINI_BATCH_SIZE * ROLLOUT_N % N_GPUS != 0 )); then
    echo "run.sh: $N_GPUS GPUs do not evenly split a batch of $(( TRAIN_BATCH_SIZE * ROLLOUT_N )) responses (mini-batch $(( PPO_MINI_BATCH_SIZE * ROLLOUT_N ))) of $TRAIN_ROWS-row data; use N_GPUS=1, 2, 4 or 8, or re-export with --train-batch-size" >&2
    exit 2
fi
# veRL gives each GPU mini-batch × n / N_GPUS responses per update; the micro-batch must divide that share.
PER_GPU=$(( PPO_MINI_BATCH_SIZE * ROLLOUT_N / N_GPUS ))
PPO_MICRO_BATCH_SIZE_PER_GPU=8
while (( PER_GPU % PPO_MICRO_BATCH_SIZE_PER_GPU != 0 )); do PPO_MICRO_BATCH_SIZE_PER_GPU=$(( PPO_MICRO_BATCH_SIZE_PER_GPU / 2 )); done

python3 -m verl.trainer.main_ppo \\
${overrides}
    "$@"
`;
}
