/**
 * `arl export verl`: everything a veRL run needs to train on our search environment, with veRL as the distributed
 * engine and our services doing retrieval and reward.
 *
 * Two targets (`VerlExportOptions.verlVersion`), facts read in verl-project/verl (formerly volcengine/verl):
 * - `current` (default) = **v0.9.0** (commit 483b8a009ba3a97563edee3a19887e4862b8094a; the keys used are the same in
 *   v0.8.0, 7aed6b230776f963fa09509c10d9c3a767d1102c). veRL's `SearchTool` and MCP tools are gone (removed in
 *   5a506cc58c4c "remove … tool examples" and 4f8f4c01b093 "removes MCP tool support", both before v0.8.0), so the
 *   search tool is `search_tool.py`, a `@function_tool` (`verl/tools/function_tool.py`) loaded through
 *   `actor_rollout_ref.rollout.multi_turn.function_tool_path`; rollout is the async agent loop (the only mode since
 *   v0.7.0, `verl/workers/config/rollout.py` refuses `sync`) and the rows' `agent_name: tool_agent` picks
 *   `ToolAgentLoop` (`@register("tool_agent")`, `verl/experimental/agent_loop/tool_agent_loop.py`; rows without it
 *   get `rollout.agent.default_agent_loop`, default `single_turn_agent`, which never calls a tool —
 *   `agent_loop.py` `generate_sequences`); the reward keys live under `reward.*`.
 * - `0.5` = **v0.5.0** (commit 8fdc4d3f202f41461f4de9f42a637228e342668b): `tool_config.yaml` with
 *   `verl.tools.search_tool.SearchTool` (`examples/sglang_multiturn/config/tool_config/search_tool_config.yaml`)
 *   calling our `POST /retrieve`, `rollout.mode=sync` (its default: SGLang runs the tools), top-level
 *   `reward_model.reward_manager` / `custom_reward_function.*`.
 *
 * Shared by both: `verl/utils/reward_score/__init__.py` `default_compute_score(data_source, solution_str,
 * ground_truth, extra_info=None)` and the reward managers' "a dict with a `score` key" (v0.5.0
 * `verl/workers/reward_manager/naive.py`, v0.9.0 `verl/experimental/reward_loop/reward_manager/naive.py`) →
 * `reward_fn.py`; `examples/data_preprocess/preprocess_search_r1_dataset.py` (columns `data_source`, `prompt`,
 * `ability`, `reward_model`, `extra_info`) plus `agent_name` (v0.9.0 `examples/data_preprocess/
 * gsm8k_tool_agent_loop.py`) → `train.parquet` / `test.parquet`, written with nested parquet types (LIST of STRUCT
 * for `prompt`, STRUCTs for `reward_model` / `extra_info`), the layout pandas/pyarrow write and `datasets` reads back
 * as lists of dicts; `examples/sglang_multiturn/search_r1_like/run_qwen2.5-3b_instruct_search_multiturn.sh` (v0.5.0)
 * → `run.sh`, whose batch sizes and epochs come from the dataset (`verlSchedule`).
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import type { Task } from "../core/types.ts";
import type { ExperimentConfig } from "../train/config.ts";
import { DEFAULT_ENV, getRecipe, searchOptions } from "../envs/index.ts";
import { buildInstance } from "../train/setup.ts";
import { verlParquet } from "./verlParquet.ts";
import { rewardFnPy } from "./verlRewardFn.ts";
import { verlRows } from "./verlRows.ts";
import { runScript } from "./verlRunScript.ts";
import { verlSchedule, type VerlSchedule } from "./verlSchedule.ts";
import { maxToolResponseLength, searchToolPy, toolConfig } from "./verlSearchTool.ts";
import { DEFAULT_VERL_TARGET, VERL_RELEASES, VERL_TARGETS, type VerlTarget } from "./verlTarget.ts";

/** Options of `exportVerl`. */
export interface VerlExportOptions {
  /** Folder to write into (created if missing). */
  outDir: string;
  /** The experiment config: the search world (`env.options`) gives the tasks and `env.options.topK`, `env.maxTurns` the tool and turn limits. */
  config: ExperimentConfig;
  /** Base URL of `arl serve reward` (default `http://127.0.0.1:8100`). */
  rewardUrl?: string;
  /** Full URL of `arl serve retrieval`'s endpoint (default `http://127.0.0.1:8000/retrieve`). */
  retrievalUrl?: string;
  /** Hugging Face model id in `run.sh` (default `Qwen/Qwen2.5-3B-Instruct`, veRL's example). */
  model?: string;
  /** Prompts are the env's prompt only, one user message, without veRL's system message and instructions. */
  barePrompt?: boolean;
  /** Replace existing files (default false: an existing output file is an error). */
  overwrite?: boolean;
  /** The config file the user passed, quoted in `run.sh` comments so the servers start with the same one. */
  configFile?: string;
  /** The veRL release to target (default `current`, `VERL_RELEASES.current`); keys and the tool file differ. */
  verlVersion?: VerlTarget;
  /** Least number of training steps in run.sh (default `DEFAULT_MIN_STEPS`, 50; see `verlSchedule`). */
  minSteps?: number;
  /** Prompts per step instead of the automatic size (see `verlSchedule`). */
  trainBatchSize?: number;
}

/** What `exportVerl` wrote (paths as joined from `outDir`), how many rows each split has, and how run.sh is sized. */
export interface VerlExportResult {
  /** The target written for. */
  target: VerlTarget;
  /** Its release tag (`v0.9.0`, `v0.5.0`). */
  release: string;
  /** `tool`: `search_tool.py` (current) or `tool_config.yaml` (0.5). */
  files: { tool: string; rewardFn: string; train: string; test: string; runScript: string };
  rows: { train: number; test: number };
  /** Batch sizes, steps and epochs of run.sh (`verlSchedule` of the train rows). */
  schedule: VerlSchedule;
}

/** The file names `exportVerl` writes for a target, in order (the tool file first). */
export function verlFiles(target: VerlTarget = DEFAULT_VERL_TARGET): readonly string[] {
  return [target === "current" ? "search_tool.py" : "tool_config.yaml", "reward_fn.py", "train.parquet", "test.parquet", "run.sh"];
}

/** The file names the default (current) export writes, in order. */
export const VERL_FILES: readonly string[] = verlFiles(DEFAULT_VERL_TARGET);

/**
 * Writes the tool file (`search_tool.py` for current, `tool_config.yaml` for 0.5), `reward_fn.py`, `train.parquet`,
 * `test.parquet` and `run.sh` into `outDir` for the config's world (train split → train.parquet, held-out split →
 * test.parquet), with run.sh sized from the train split (`verlSchedule`).
 * @throws Error naming the option for a bad URL / model / schedule option; Error when the train split is too small
 *   (`verlSchedule`) — all before anything is written; Error naming the file when an output exists and `overwrite`
 *   is false; Error from the world build
 */
export async function exportVerl(options: VerlExportOptions): Promise<VerlExportResult> {
  const { outDir, config } = options;
  const target = options.verlVersion ?? DEFAULT_VERL_TARGET;
  if (!VERL_TARGETS.includes(target)) throw new Error(`export verl: verlVersion must be one of ${VERL_TARGETS.join(", ")}, got ${JSON.stringify(target)}`);
  const rewardUrl = (options.rewardUrl ?? "http://127.0.0.1:8100").replace(/\/+$/, "");
  const retrievalUrl = options.retrievalUrl ?? "http://127.0.0.1:8000/retrieve";
  for (const [flag, url] of [["rewardUrl", rewardUrl], ["retrievalUrl", retrievalUrl]] as const) {
    // The URLs are written into run.sh, YAML and Python: plain URL characters only (no quotes, `$`, backticks, spaces).
    if (!/^https?:\/\/[A-Za-z0-9._~:/?#[\]@!&()*+,;=%-]+$/.test(url) || /['"`$\\]/.test(url)) {
      throw new Error(`export verl: ${flag} must be an http(s) URL of plain URL characters, got ${JSON.stringify(url)}`);
    }
  }
  if (options.model !== undefined && !/^[A-Za-z0-9._\/-]+$/.test(options.model)) {
    throw new Error(`export verl: model must be a Hugging Face id or a path of [A-Za-z0-9._/-] (e.g. Qwen/Qwen2.5-3B-Instruct), got ${JSON.stringify(options.model)}`);
  }
  const files = verlFiles(target);
  const paths = Object.fromEntries(files.map((f) => [f, join(outDir, f)])) as Record<string, string>;
  if (!options.overwrite) {
    const taken = files.filter((f) => existsSync(paths[f]));
    if (taken.length > 0) throw new Error(`export verl: ${taken.map((f) => paths[f]).join(", ")} already exist(s); pass overwrite (--overwrite) to replace`);
  }
  // veRL trains the Search-R1 setting: the default env's tasks, its search tool and its corpus.
  const instance = buildInstance(config, getRecipe(DEFAULT_ENV));
  const topK = searchOptions(config.env.options).topK;
  const schedule = verlSchedule(instance.train.length, { minSteps: options.minSteps, trainBatchSize: options.trainBatchSize });
  const makeEnv = instance.makeEnv(0);
  const envPrompt = async (t: Task) => makeEnv().reset(t);
  const train = await verlRows(instance.train, "train", envPrompt, options.barePrompt);
  const test = await verlRows(instance.test, "test", envPrompt, options.barePrompt);
  const toolFile = files[0];

  mkdirSync(outDir, { recursive: true });
  if (target === "current") {
    writeFileSync(paths[toolFile], searchToolPy(retrievalUrl, topK, target));
  } else {
    writeFileSync(
      paths[toolFile],
      `# veRL ${VERL_RELEASES[target].tag} tool config (generated by \`arl export verl --verl-version 0.5\`): veRL's SearchTool calling \`arl serve retrieval\`.\n` +
        toYaml(toolConfig(retrievalUrl, topK), { lineWidth: 0 }),
    );
  }
  writeFileSync(paths["reward_fn.py"], rewardFnPy(rewardUrl, target));
  writeFileSync(paths["train.parquet"], Buffer.from(verlParquet(train, target)));
  writeFileSync(paths["test.parquet"], Buffer.from(verlParquet(test, target)));
  writeFileSync(
    paths["run.sh"],
    runScript({
      target,
      model: options.model ?? "Qwen/Qwen2.5-3B-Instruct",
      rewardUrl,
      retrievalUrl,
      maxTurns: config.env.maxTurns,
      topK,
      schedule,
      maxToolResponseLength: maxToolResponseLength(instance.corpus?.() ?? [], topK),
      configFile: options.configFile,
    }),
    { mode: 0o755 },
  );
  return {
    target,
    release: VERL_RELEASES[target].tag,
    files: { tool: paths[toolFile], rewardFn: paths["reward_fn.py"], train: paths["train.parquet"], test: paths["test.parquet"], runScript: paths["run.sh"] },
    rows: { train: train.length, test: test.length },
    schedule,
  };
}
