/**
 * `arl export verl`: everything a veRL run needs to train on our search environment, with veRL as the distributed
 * engine and our services doing retrieval and reward.
 *
 * Pinned to veRL **v0.5.0** (volcengine/verl). Shapes follow these veRL files:
 * - `examples/sglang_multiturn/config/tool_config/search_tool_config.yaml` → `tool_config.yaml`
 *   (`verl.tools.search_tool.SearchTool` calling our `POST /retrieve`);
 * - `verl/utils/reward_score/__init__.py` `default_compute_score(data_source, solution_str, ground_truth,
 *   extra_info=None)` and `verl/workers/reward_manager/naive.py` (a dict with a `score` key is accepted) →
 *   `reward_fn.py`;
 * - `examples/data_preprocess/preprocess_search_r1_dataset.py` (columns `data_source`, `prompt`, `ability`,
 *   `reward_model`, `extra_info`) → `train.parquet` / `test.parquet`, written with nested parquet types (LIST of
 *   STRUCT for `prompt`, STRUCTs for `reward_model` / `extra_info`), the layout pandas/pyarrow write and
 *   `datasets` reads back as lists of dicts;
 * - `examples/sglang_multiturn/search_r1_like/run_qwen2.5-3b_instruct_search_multiturn.sh` → `run.sh`.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parquetWriteBuffer } from "hyparquet-writer";
import { stringify as toYaml } from "yaml";
import type { Task } from "../core/types.ts";
import type { ExperimentConfig } from "../train/config.ts";
import { setup } from "../train/experiment.ts";

/** The veRL release the exported files target. */
export const VERL_VERSION = "v0.5.0";

/** `data_source` of the exported rows (our `reward_fn.py` is used for it, whatever the name). */
export const DATA_SOURCE = "arl_world";

/** veRL's search_r1_like system message (`preprocess_search_r1_dataset.py`). */
export const SYSTEM_PROMPT = "You are a helpful and harmless assistant.";

/**
 * Instructions before the env's prompt: veRL's `search_r1_like_prompt.user_content_prefix`
 * (`examples/data_preprocess/config/search_r1_like_data.yaml`) without its trailing `Question: `, since the env's
 * prompt (`question : …`) follows.
 */
export const USER_INSTRUCTIONS =
  "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. " +
  "After reasoning, if you find you lack some knowledge, you can call a search engine by <tool_call> query </tool_call> and it will return " +
  "the top searched results between <tool_response> and </tool_response>. You can search as many times as your want. If you find no " +
  "further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed " +
  "illustrations. For example, <answer> Beijing </answer>.";

/** One chat message of a row's `prompt`. */
export interface VerlMessage {
  role: "system" | "user";
  content: string;
}

/** One dataset row, as veRL's Search-R1 preprocessing writes it (plus our task fields in `extra_info`). */
export interface VerlRow {
  data_source: string;
  /** The chat veRL's `RLHFDataset` applies the chat template to (`data.prompt_key`, default `prompt`). */
  prompt: VerlMessage[];
  ability: string;
  reward_model: { style: "rule"; ground_truth: { target: string[] } };
  extra_info: {
    /** Row index within its split. */
    index: number;
    split: "train" | "test";
    question: string;
    /** Our `Task.id`; the reward server rebuilds the task from these fields (src/serve/reward.ts `taskOf`). */
    task_id: string;
    kind: string;
    /** Whether the policy is expected to know the fact (null when the dataset does not say). */
    known: boolean | null;
    /** Passage ids holding the needed facts (evidence and necessity reward terms). */
    evidence_ids: string[];
    need_tools_kwargs: boolean;
    /** veRL's per-tool `create_kwargs` (`preprocess_search_r1_dataset.py`). */
    tools_kwargs: { search: { create_kwargs: { ground_truth: { target: string[] }; question: string; data_source: string } } };
  };
}

/** Options of `exportVerl`. */
export interface VerlExportOptions {
  /** Folder to write into (created if missing). */
  outDir: string;
  /** The experiment config: its world gives the tasks, `env.topK` / `env.maxTurns` the tool and turn limits. */
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
}

/** What `exportVerl` wrote (absolute or as-given paths) and how many rows each split has. */
export interface VerlExportResult {
  files: { toolConfig: string; rewardFn: string; train: string; test: string; runScript: string };
  rows: { train: number; test: number };
}

/** The file names `exportVerl` writes, in order. */
export const VERL_FILES = ["tool_config.yaml", "reward_fn.py", "train.parquet", "test.parquet", "run.sh"] as const;

/**
 * The dataset rows of a split: each task's prompt is the env's reset prompt (`SearchEnv.reset`, `question : …\n`),
 * preceded by veRL's system message and search instructions unless `barePrompt`.
 * @param tasks the split's tasks, in order (`index` = position)
 * @param envPrompt the env's reset prompt for a task
 */
export async function verlRows(
  tasks: readonly Task[],
  split: "train" | "test",
  envPrompt: (t: Task) => Promise<string>,
  barePrompt = false,
): Promise<VerlRow[]> {
  const rows: VerlRow[] = [];
  for (const [index, t] of tasks.entries()) {
    const text = await envPrompt(t);
    const prompt: VerlMessage[] = barePrompt
      ? [{ role: "user", content: text }]
      : [
          { role: "system", content: SYSTEM_PROMPT },
          { role: "user", content: `${USER_INSTRUCTIONS}\n${text}` },
        ];
    const target = [...t.answers];
    rows.push({
      data_source: DATA_SOURCE,
      prompt,
      ability: "fact-reasoning",
      reward_model: { style: "rule", ground_truth: { target } },
      extra_info: {
        index,
        split,
        question: t.question,
        task_id: t.id,
        kind: t.kind,
        known: t.known ?? null,
        evidence_ids: [...(t.evidenceIds ?? [])],
        need_tools_kwargs: true,
        tools_kwargs: { search: { create_kwargs: { ground_truth: { target: [...target] }, question: t.question, data_source: DATA_SOURCE } } },
      },
    });
  }
  return rows;
}

// ───────────────────────────── parquet ─────────────────────────────

/** A parquet schema element, as hyparquet-writer takes it. */
type SchemaElement = NonNullable<Parameters<typeof parquetWriteBuffer>[0]["schema"]>[number];

/** A column's logical type: a leaf, a LIST of one element type, or a STRUCT of named fields. */
type Field =
  | { name: string; leaf: "string" | "int64" | "boolean" }
  | { name: string; list: Field }
  | { name: string; struct: Field[] };

const str = (name: string): Field => ({ name, leaf: "string" });
const strList = (name: string): Field => ({ name, list: str("element") });

/** The row schema: every field nullable (OPTIONAL), lists in the standard 3-level layout (`<name>.list.element`). */
const ROW_FIELDS: Field[] = [
  str("data_source"),
  { name: "prompt", list: { name: "element", struct: [str("role"), str("content")] } },
  str("ability"),
  { name: "reward_model", struct: [str("style"), { name: "ground_truth", struct: [strList("target")] }] },
  {
    name: "extra_info",
    struct: [
      { name: "index", leaf: "int64" },
      str("split"),
      str("question"),
      str("task_id"),
      str("kind"),
      { name: "known", leaf: "boolean" },
      strList("evidence_ids"),
      { name: "need_tools_kwargs", leaf: "boolean" },
      {
        name: "tools_kwargs",
        struct: [
          {
            name: "search",
            struct: [{ name: "create_kwargs", struct: [{ name: "ground_truth", struct: [strList("target")] }, str("question"), str("data_source")] }],
          },
        ],
      },
    ],
  },
];

/** Flattens a field into parquet schema elements (depth-first, as the parquet footer lists them). */
function schemaOf(f: Field): SchemaElement[] {
  if ("leaf" in f) {
    if (f.leaf === "string") return [{ name: f.name, type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "OPTIONAL" }];
    if (f.leaf === "int64") return [{ name: f.name, type: "INT64", repetition_type: "OPTIONAL" }];
    return [{ name: f.name, type: "BOOLEAN", repetition_type: "OPTIONAL" }];
  }
  if ("list" in f) {
    return [
      { name: f.name, repetition_type: "OPTIONAL", converted_type: "LIST", num_children: 1 },
      { name: "list", repetition_type: "REPEATED", num_children: 1 },
      ...schemaOf(f.list),
    ];
  }
  return [{ name: f.name, repetition_type: "OPTIONAL", num_children: f.struct.length }, ...f.struct.flatMap(schemaOf)];
}

/** A value converted for the writer: int64 leaves become bigint (the writer's INT64 representation). */
function toColumnValue(f: Field, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if ("leaf" in f) return f.leaf === "int64" ? BigInt(v as number) : v;
  if ("list" in f) return (v as unknown[]).map((x) => toColumnValue(f.list, x));
  const obj = v as Record<string, unknown>;
  return Object.fromEntries(f.struct.map((c) => [c.name, toColumnValue(c, obj[c.name])]));
}

/**
 * Encodes rows as a parquet file (hyparquet-writer, SNAPPY) with native nested types: `prompt` is
 * LIST<STRUCT<role, content>>, `reward_model` and `extra_info` are STRUCTs, string lists are LIST<UTF8> — never JSON
 * strings, since veRL's `RLHFDataset` needs `prompt` as a list of messages.
 * @throws Error from the writer when a row does not fit the schema
 */
export function verlParquet(rows: readonly VerlRow[]): ArrayBuffer {
  const schema: SchemaElement[] = [{ name: "root", num_children: ROW_FIELDS.length }, ...ROW_FIELDS.flatMap(schemaOf)];
  const columnData = ROW_FIELDS.map((f) => ({
    name: f.name,
    data: rows.map((r) => toColumnValue(f, (r as unknown as Record<string, unknown>)[f.name])),
  }));
  return parquetWriteBuffer({ columnData, schema, createdBy: `agentic-rl arl export verl (veRL ${VERL_VERSION})` });
}

// ───────────────────────────── tool config, reward function, run script ─────────────────────────────

/**
 * The tool config veRL's `SearchTool` reads (`actor_rollout_ref.rollout.multi_turn.tool_config_path`), as
 * `search_tool_config.yaml`: `retrieval_service_url`, `topk` (passages per query), concurrency, and the OpenAI
 * function schema of `search(query_list)`.
 */
export function toolConfig(retrievalUrl: string, topk: number): Record<string, unknown> {
  return {
    tools: [
      {
        class_name: "verl.tools.search_tool.SearchTool",
        config: { retrieval_service_url: retrievalUrl, topk, num_workers: 120, rate_limit: 120, timeout: 30, type: "native" },
        tool_schema: {
          type: "function",
          function: {
            name: "search",
            description: "Searches the knowledge base for relevant passages based on the given queries.",
            parameters: {
              type: "object",
              properties: {
                query_list: {
                  type: "array",
                  items: { type: "string" },
                  description: "A list of fully-formed search queries. The tool will return search results for each query.",
                },
              },
              required: ["query_list"],
            },
          },
        },
      },
    ],
  };
}

/** `reward_fn.py`: veRL's custom `compute_score` (and a batch variant) calling `arl serve reward`; stdlib only. */
export function rewardFnPy(rewardUrl: string): string {
  return `"""veRL custom reward function for agentic-rl (generated by \`arl export verl\`, veRL ${VERL_VERSION}).

veRL config:
    custom_reward_function.path=<this file>
    custom_reward_function.name=compute_score          # reward_model.reward_manager=naive (default)
    # or custom_reward_function.name=compute_score_batch with reward_model.reward_manager=batch

Each call POSTs veRL's compute_score arguments (data_source, solution_str, ground_truth, extra_info) to
\`arl serve reward\` and returns {"score": total, "term_<name>": value, ..., "searches": n}; veRL uses "score" as the
reward and logs the other keys as metrics. Standard library only. Environment: ARL_REWARD_URL (default
${rewardUrl}), ARL_REWARD_TIMEOUT (seconds, default 30).
"""
import json
import os
import time
import urllib.error
import urllib.request

REWARD_URL = os.environ.get("ARL_REWARD_URL", ${JSON.stringify(rewardUrl)}).rstrip("/")
TIMEOUT_S = float(os.environ.get("ARL_REWARD_TIMEOUT", "30"))
RETRIES = 3


def _plain(value):
    """numpy arrays and scalars (what pandas / datasets give for parquet lists and ints) as plain Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _post(path, payload):
    data = json.dumps(payload, default=_plain).encode("utf-8")
    request = urllib.request.Request(REWARD_URL + path, data=data, headers={"Content-Type": "application/json"}, method="POST")
    last_error = None
    for attempt in range(RETRIES):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            if 400 <= e.code < 500:
                raise ValueError(f"reward server rejected the request ({e.code}): {body}") from None
            last_error = f"HTTP {e.code}: {body}"
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            last_error = str(e)
        time.sleep(0.5 * (attempt + 1))
    raise RuntimeError(f"reward server {REWARD_URL} failed after {RETRIES} tries: {last_error}")


def _flat(result):
    out = {"score": float(result["score"])}
    for name, value in result["terms"].items():
        out["term_" + name] = float(value)
    out["searches"] = float(result["searches"])
    return out


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """veRL's compute_score: the reward of one decoded response, as a dict with a "score" key."""
    body = {"data_source": data_source, "solution_str": solution_str, "ground_truth": ground_truth, "extra_info": extra_info}
    return _flat(_post("/reward", body))


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs):
    """veRL's BatchRewardManager form: lists in, one dict per item out (items of one prompt form a GRPO group)."""
    items = [
        {"data_source": d, "solution_str": s, "ground_truth": g, "extra_info": e}
        for d, s, g, e in zip(data_sources, solution_strs, ground_truths, extra_infos)
    ]
    return [_flat(r) for r in _post("/reward/batch", items)]
`;
}

/** Quotes a string for bash (single quotes). */
function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * `run.sh`: a veRL GRPO run over the exported files (Search-R1-like multi-turn with the search tool), after veRL's
 * `run_qwen2.5-3b_instruct_search_multiturn.sh`, with the reward from `reward_fn.py`. Extra hydra overrides pass
 * through (`bash run.sh trainer.total_epochs=2`); `MODEL`, `N_GPUS`, `ARL_REWARD_URL` come from the environment.
 */
export function runScript(opts: { model: string; rewardUrl: string; retrievalUrl: string; maxTurns: number; topK: number; configFile?: string }): string {
  const cfg = opts.configFile ? ` --config ${shq(opts.configFile)}` : "";
  const retrievalPort = /:(\d+)\//.exec(opts.retrievalUrl)?.[1] ?? "8000";
  const rewardPort = /:(\d+)\/?$/.exec(opts.rewardUrl)?.[1] ?? "8100";
  return `#!/usr/bin/env bash
# veRL ${VERL_VERSION} GRPO run on agentic-rl's search environment (generated by \`arl export verl\`).
# Needs: pip install "verl[sglang]==${VERL_VERSION.slice(1)}" on a GPU machine (veRL's own install guide).
#
# Start our two services first, from the agentic-rl checkout (same config as the export):
#   npx arl serve retrieval --port ${retrievalPort}${cfg}   # Search-R1 POST /retrieve for veRL's SearchTool (${opts.retrievalUrl})
#   npx arl serve reward --port ${rewardPort}${cfg}      # compute_score → POST /reward (${opts.rewardUrl})
# (add --host 0.0.0.0 when veRL runs on other machines, and point tool_config.yaml / ARL_REWARD_URL at them)
# Then: bash run.sh [extra hydra overrides, e.g. trainer.total_epochs=2]
set -euo pipefail
HERE="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
MODEL="\${MODEL:-${opts.model}}"
N_GPUS="\${N_GPUS:-8}"
export ARL_REWARD_URL="\${ARL_REWARD_URL:-${opts.rewardUrl}}"

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    algorithm.use_kl_in_reward=False \\
    data.train_files="$HERE/train.parquet" \\
    data.val_files="$HERE/test.parquet" \\
    data.train_batch_size=256 \\
    data.max_prompt_length=1024 \\
    data.max_response_length=1024 \\
    data.filter_overlong_prompts=True \\
    data.truncation=error \\
    data.return_raw_chat=True \\
    actor_rollout_ref.model.path="$MODEL" \\
    actor_rollout_ref.model.use_remove_padding=True \\
    actor_rollout_ref.model.enable_gradient_checkpointing=True \\
    actor_rollout_ref.actor.optim.lr=1e-6 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=128 \\
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.actor.kl_loss_coef=0.001 \\
    actor_rollout_ref.actor.kl_loss_type=low_var_kl \\
    actor_rollout_ref.actor.entropy_coeff=0 \\
    actor_rollout_ref.rollout.name=sglang \\
    actor_rollout_ref.rollout.n=5 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \\
    actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 \\
    actor_rollout_ref.rollout.multi_turn.enable=True \\
    actor_rollout_ref.rollout.multi_turn.max_assistant_turns=${opts.maxTurns} \\
    actor_rollout_ref.rollout.multi_turn.format=hermes \\
    actor_rollout_ref.rollout.multi_turn.tool_config_path="$HERE/tool_config.yaml" \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \\
    actor_rollout_ref.ref.fsdp_config.param_offload=True \\
    reward_model.reward_manager=naive \\
    custom_reward_function.path="$HERE/reward_fn.py" \\
    custom_reward_function.name=compute_score \\
    trainer.critic_warmup=0 \\
    trainer.logger='["console"]' \\
    trainer.project_name=agentic_rl \\
    trainer.experiment_name=search_grpo_topk${opts.topK} \\
    trainer.n_gpus_per_node="$N_GPUS" \\
    trainer.nnodes=1 \\
    trainer.save_freq=100 \\
    trainer.test_freq=50 \\
    trainer.total_epochs=1 \\
    "$@"
`;
}

/**
 * Writes `tool_config.yaml`, `reward_fn.py`, `train.parquet`, `test.parquet` and `run.sh` into `outDir` for the
 * config's world (train split → train.parquet, held-out split → test.parquet).
 * @throws Error naming the file when an output exists and `overwrite` is false; Error from the world build
 */
export async function exportVerl(options: VerlExportOptions): Promise<VerlExportResult> {
  const { outDir, config } = options;
  const rewardUrl = (options.rewardUrl ?? "http://127.0.0.1:8100").replace(/\/+$/, "");
  const retrievalUrl = options.retrievalUrl ?? "http://127.0.0.1:8000/retrieve";
  for (const [flag, url] of [["rewardUrl", rewardUrl], ["retrievalUrl", retrievalUrl]] as const) {
    // The URLs are written into run.sh and YAML: plain URL characters only (no quotes, `$`, backticks, spaces).
    if (!/^https?:\/\/[A-Za-z0-9._~:/?#[\]@!&()*+,;=%-]+$/.test(url) || /['"`$\\]/.test(url)) {
      throw new Error(`export verl: ${flag} must be an http(s) URL of plain URL characters, got ${JSON.stringify(url)}`);
    }
  }
  if (options.model !== undefined && !/^[A-Za-z0-9._\/-]+$/.test(options.model)) {
    throw new Error(`export verl: model must be a Hugging Face id or a path of [A-Za-z0-9._/-] (e.g. Qwen/Qwen2.5-3B-Instruct), got ${JSON.stringify(options.model)}`);
  }
  const paths = Object.fromEntries(VERL_FILES.map((f) => [f, join(outDir, f)])) as Record<(typeof VERL_FILES)[number], string>;
  if (!options.overwrite) {
    const taken = VERL_FILES.filter((f) => existsSync(paths[f]));
    if (taken.length > 0) throw new Error(`export verl: ${taken.map((f) => paths[f]).join(", ")} already exist(s); pass overwrite (--overwrite) to replace`);
  }
  const s = setup(config);
  const envPrompt = async (t: Task) => s.makeEnv().reset(t);
  const train = await verlRows(s.world.train, "train", envPrompt, options.barePrompt);
  const test = await verlRows(s.world.test, "test", envPrompt, options.barePrompt);

  mkdirSync(outDir, { recursive: true });
  writeFileSync(
    paths["tool_config.yaml"],
    `# veRL ${VERL_VERSION} tool config (generated by \`arl export verl\`): veRL's SearchTool calling \`arl serve retrieval\`.\n` +
      toYaml(toolConfig(retrievalUrl, config.env.topK), { lineWidth: 0 }),
  );
  writeFileSync(paths["reward_fn.py"], rewardFnPy(rewardUrl));
  writeFileSync(paths["train.parquet"], Buffer.from(verlParquet(train)));
  writeFileSync(paths["test.parquet"], Buffer.from(verlParquet(test)));
  writeFileSync(
    paths["run.sh"],
    runScript({ model: options.model ?? "Qwen/Qwen2.5-3B-Instruct", rewardUrl, retrievalUrl, maxTurns: config.env.maxTurns, topK: config.env.topK, configFile: options.configFile }),
    { mode: 0o755 },
  );
  return {
    files: { toolConfig: paths["tool_config.yaml"], rewardFn: paths["reward_fn.py"], train: paths["train.parquet"], test: paths["test.parquet"], runScript: paths["run.sh"] },
    rows: { train: train.length, test: test.length },
  };
}
