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
import { parquetWriteBuffer } from "hyparquet-writer";
import { stringify as toYaml } from "yaml";
import type { Passage, Task } from "../core/types.ts";
import type { ExperimentConfig } from "../train/config.ts";
import { setup } from "../train/experiment.ts";

/** A veRL release the export can target: `current` (the newest release, `VERL_RELEASES.current`) or `0.5`. */
export type VerlTarget = "0.5" | "current";

/** The targets, in the order the CLI lists them. */
export const VERL_TARGETS: readonly VerlTarget[] = ["current", "0.5"];

/** The release behind each target: its tag and the commit the facts were read at (verl-project/verl). */
export const VERL_RELEASES: Readonly<Record<VerlTarget, { tag: string; commit: string; pip: string }>> = {
  current: { tag: "v0.9.0", commit: "483b8a009ba3a97563edee3a19887e4862b8094a", pip: "0.9.0" },
  "0.5": { tag: "v0.5.0", commit: "8fdc4d3f202f41461f4de9f42a637228e342668b", pip: "0.5.0" },
};

/** The target used when none is given. */
export const DEFAULT_VERL_TARGET: VerlTarget = "current";

/** The veRL release the default export targets (`VERL_RELEASES.current.tag`). */
export const VERL_VERSION = VERL_RELEASES[DEFAULT_VERL_TARGET].tag;

/** Parses a `--verl-version` value: `current`, `latest`, `0.9`, `0.9.0`, `v0.9.0` → `current`; `0.5`, `0.5.0`, `v0.5.0` → `0.5`. @throws Error naming the accepted values */
export function parseVerlTarget(value: string): VerlTarget {
  const v = value.trim().toLowerCase().replace(/^v/, "");
  if (v === "current" || v === "latest" || v === "0.9" || v === "0.9.0") return "current";
  if (v === "0.5" || v === "0.5.0") return "0.5";
  throw new Error(`export verl: --verl-version must be current (= ${VERL_RELEASES.current.tag}) or 0.5 (= ${VERL_RELEASES["0.5"].tag}), got ${JSON.stringify(value)}`);
}

/**
 * The agent loop the rows ask for: `ToolAgentLoop`'s registered name (`@register("tool_agent")` in
 * `verl/experimental/agent_loop/tool_agent_loop.py`, v0.5.0 and v0.9.0). veRL's async rollout reads it per row from
 * the `agent_name` column and falls back to `single_turn_agent` (no tools) without it.
 */
export const AGENT_NAME = "tool_agent";

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

/**
 * One dataset row, as veRL's Search-R1 preprocessing writes it, plus `agent_name` (the agent loop veRL's async
 * rollout runs for the row) and our task fields in `extra_info`.
 */
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
  /** `tool_agent` (`AGENT_NAME`): veRL's `ToolAgentLoop`, the loop that parses and runs tool calls. */
  agent_name: typeof AGENT_NAME;
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

/**
 * The dataset rows of a split: each task's prompt is the env's reset prompt (`SearchEnv.reset`, `question : …\n`),
 * preceded by veRL's system message and search instructions unless `barePrompt`; every row has
 * `agent_name: "tool_agent"`.
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
      agent_name: AGENT_NAME,
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

/**
 * The row schema: every field nullable (OPTIONAL), lists in the standard 3-level layout (`<name>.list.element`);
 * `agent_name` last (column order does not matter to veRL's `RLHFDataset`, which keeps every column of a row).
 */
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
  str("agent_name"),
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
 * strings, since veRL's `RLHFDataset` needs `prompt` as a list of messages. `target` only names the release in the
 * footer's `created_by`.
 * @throws Error from the writer when a row does not fit the schema
 */
export function verlParquet(rows: readonly VerlRow[], target: VerlTarget = DEFAULT_VERL_TARGET): ArrayBuffer {
  const schema: SchemaElement[] = [{ name: "root", num_children: ROW_FIELDS.length }, ...ROW_FIELDS.flatMap(schemaOf)];
  const columnData = ROW_FIELDS.map((f) => ({
    name: f.name,
    data: rows.map((r) => toColumnValue(f, (r as unknown as Record<string, unknown>)[f.name])),
  }));
  return parquetWriteBuffer({ columnData, schema, createdBy: `agentic-rl arl export verl (veRL ${VERL_RELEASES[target].tag})` });
}

// ───────────────────────────── schedule: batch sizes and epochs from the dataset ─────────────────────────────

/** GRPO group size: responses sampled per prompt (`actor_rollout_ref.rollout.n`, veRL's Search-R1 example). */
export const ROLLOUT_N = 5;

/** Fewest training steps (batches) an epoch should have; the automatic batch size is at most rows / this. */
export const MIN_STEPS_PER_EPOCH = 4;

/** Default least number of training steps of a run (`VerlScheduleOptions.minSteps`). */
export const DEFAULT_MIN_STEPS = 50;

/** Largest automatic `data.train_batch_size` (veRL's `search_multiturn_grpo.yaml` value). */
export const MAX_TRAIN_BATCH_SIZE = 256;

/**
 * The automatic batch size is a multiple of this: then batch × `ROLLOUT_N` responses split evenly over 1, 2, 4 or 8
 * GPUs, as veRL requires (`real_train_batch_size % n_gpus == 0`, v0.5.0 `ray_trainer.py` `_validate_config`,
 * v0.9.0 `verl/utils/config.py` `validate_config`).
 */
export const BATCH_QUANTUM = 8;

/** Options of `verlSchedule`. */
export interface VerlScheduleOptions {
  /** Least number of training steps (default `DEFAULT_MIN_STEPS`); epochs are added until it is reached. */
  minSteps?: number;
  /** Prompts per step instead of the automatic size (an integer in [1, rows]; run.sh checks it against the GPUs). */
  trainBatchSize?: number;
}

/**
 * How a veRL run over `rows` training prompts is sized. veRL's train dataloader uses `drop_last=True` with
 * `data.train_batch_size` (v0.5.0 `ray_trainer.py` `_create_dataloader`; v0.9.0 `verl/trainer/ppo/v1/trainer_base.py`:
 * `steps_per_epoch = len(train_dataset) // train_batch_size`), and runs `trainer.total_epochs` epochs, stopping early
 * at `trainer.total_training_steps` (which cannot add steps beyond the epochs).
 */
export interface VerlSchedule {
  /** Training rows (prompts) in train.parquet. */
  rows: number;
  /** `data.train_batch_size`: prompts per training step (each gets `ROLLOUT_N` responses). */
  trainBatchSize: number;
  /** `actor_rollout_ref.actor.ppo_mini_batch_size`: prompts per optimizer update (a divisor of `trainBatchSize`). */
  ppoMiniBatchSize: number;
  /** Steps per epoch: ⌊rows / trainBatchSize⌋ (the last partial batch is dropped). */
  stepsPerEpoch: number;
  /** `trainer.total_epochs`: ⌈minSteps / stepsPerEpoch⌉. */
  epochs: number;
  /** `trainer.total_training_steps` = stepsPerEpoch × epochs (≥ minSteps). */
  totalSteps: number;
  /** Optimizer updates of the actor over the run: totalSteps × trainBatchSize / ppoMiniBatchSize (`ppo_epochs` 1). */
  updates: number;
  /** `trainer.test_freq`: validation every ⌈totalSteps / 5⌉ steps (and after the last; before the first by veRL's default). */
  testFreq: number;
  /** `trainer.save_freq` = totalSteps: one checkpoint, after the last step. */
  saveFreq: number;
}

/**
 * Sizes a veRL run from the dataset so that it makes a real number of updates. Rule:
 * 1. batch B = the largest multiple of `BATCH_QUANTUM` (8) that is ≤ min(`MAX_TRAIN_BATCH_SIZE`, ⌊rows /
 *    `MIN_STEPS_PER_EPOCH`⌋) — at least 4 steps per epoch, and B × n divides over 1, 2, 4 or 8 GPUs
 *    (`trainBatchSize` replaces B when given);
 * 2. steps per epoch S = ⌊rows / B⌋ (veRL drops the last partial batch);
 * 3. epochs E = ⌈minSteps / S⌉, total steps T = S × E (≥ minSteps, default 50);
 * 4. mini-batch M = B / 2 when that is still a multiple of 8 (two optimizer updates per step, as veRL's example
 *    512 / 256), else B.
 * E.g. 280 rows → B 64, S 4, E 13, T 52, M 32; 40 rows → B 8, S 5, E 10, T 50, M 8.
 * @param rows training prompts (rows of train.parquet)
 * @throws Error when rows < 32 (no batch of ≥ 8 prompts fits 4 times), or an option is out of range
 */
export function verlSchedule(rows: number, options: VerlScheduleOptions = {}): VerlSchedule {
  const minSteps = options.minSteps ?? DEFAULT_MIN_STEPS;
  if (!Number.isInteger(minSteps) || minSteps < 1 || minSteps > 1_000_000) {
    throw new Error(`export verl: minSteps must be an integer in [1, 1000000], got ${minSteps}`);
  }
  if (!Number.isInteger(rows) || rows < 0) throw new Error(`export verl: rows must be a non-negative integer, got ${rows}`);
  let batch: number;
  if (options.trainBatchSize !== undefined) {
    batch = options.trainBatchSize;
    if (!Number.isInteger(batch) || batch < 1 || batch > rows) {
      throw new Error(
        `export verl: trainBatchSize must be an integer in [1, ${rows}] (the train split's rows; veRL drops a partial batch, so a larger one makes no step), got ${batch}`,
      );
    }
  } else {
    const least = MIN_STEPS_PER_EPOCH * BATCH_QUANTUM;
    if (rows < least) {
      throw new Error(
        `export verl: the train split has ${rows} rows; veRL needs at least ${least} (${MIN_STEPS_PER_EPOCH} steps per epoch of ≥ ${BATCH_QUANTUM} prompts, ` +
          `a multiple of ${BATCH_QUANTUM} so that batch × rollout.n ${ROLLOUT_N} splits over 1, 2, 4 or 8 GPUs) — raise env.world.numCountries ` +
          `(or lower env.world.testFraction), or pass trainBatchSize (--train-batch-size)`,
      );
    }
    batch = Math.floor(Math.min(MAX_TRAIN_BATCH_SIZE, Math.floor(rows / MIN_STEPS_PER_EPOCH)) / BATCH_QUANTUM) * BATCH_QUANTUM;
  }
  const stepsPerEpoch = Math.floor(rows / batch);
  const epochs = Math.ceil(minSteps / stepsPerEpoch);
  const totalSteps = stepsPerEpoch * epochs;
  const ppoMiniBatchSize = batch % (2 * BATCH_QUANTUM) === 0 ? batch / 2 : batch;
  return {
    rows,
    trainBatchSize: batch,
    ppoMiniBatchSize,
    stepsPerEpoch,
    epochs,
    totalSteps,
    updates: (totalSteps * batch) / ppoMiniBatchSize,
    testFreq: Math.max(1, Math.ceil(totalSteps / 5)),
    saveFreq: totalSteps,
  };
}

// ───────────────────────────── the search tool: tool_config.yaml (0.5) or search_tool.py (current) ─────────────────────────────

/**
 * The OpenAI function schema of `search(query_list: string[])`, as veRL's `search_tool_config.yaml` (v0.5.0) declares
 * it; used by both targets so the model sees the same tool.
 */
export const SEARCH_TOOL_SCHEMA = {
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
} as const;

/**
 * The v0.5 tool config veRL's `SearchTool` reads (`actor_rollout_ref.rollout.multi_turn.tool_config_path`), as
 * `search_tool_config.yaml`: `retrieval_service_url`, `topk` (passages per query), concurrency, and
 * `SEARCH_TOOL_SCHEMA`.
 */
export function toolConfig(retrievalUrl: string, topk: number): Record<string, unknown> {
  return {
    tools: [
      {
        class_name: "verl.tools.search_tool.SearchTool",
        config: { retrieval_service_url: retrievalUrl, topk, num_workers: 120, rate_limit: 120, timeout: 30, type: "native" },
        tool_schema: structuredClone(SEARCH_TOOL_SCHEMA) as unknown as Record<string, unknown>,
      },
    ],
  };
}

/**
 * `search_tool.py` for the current target: `search(query_list)` registered with veRL's `@function_tool("search",
 * schema=…)` (v0.9.0 `verl/tools/function_tool.py`; loaded from `multi_turn.function_tool_path`), POSTing
 * `{queries, topk, return_scores: true}` to `arl serve retrieval`. It answers what veRL's removed `SearchTool` answered
 * (v0.5.0 `verl/tools/utils/search_r1_like_utils.py`: per query `Doc 1 (Title: <first line of contents>)\n<rest>`
 * joined by blank lines, queries joined by `\n---\n`, all as JSON `{"result": …}`), so model, transcripts and our
 * reward server's parser (src/serve/solution.ts) see the same text on both targets. Errors come back as
 * `{"result": "Search error: …"}` text (veRL would otherwise report an exception string). Standard library only;
 * outside veRL the decorator is skipped and `search` is a plain function.
 */
export function searchToolPy(retrievalUrl: string, topk: number, target: VerlTarget = DEFAULT_VERL_TARGET): string {
  return `"""veRL function tool for agentic-rl (generated by \`arl export verl\`, veRL ${VERL_RELEASES[target].tag}).

veRL config:
    actor_rollout_ref.rollout.multi_turn.function_tool_path=<this file>
    actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent   # rows also carry agent_name=tool_agent

search(query_list) POSTs {"queries": query_list, "topk": TOPK, "return_scores": true} to \`arl serve retrieval\` and
returns the text veRL's former SearchTool returned: per query "Doc 1 (Title: <title>)\\n<text>\\n\\nDoc 2 ...", queries
separated by "\\n---\\n", as JSON {"result": "..."}. Standard library only. Environment: ARL_RETRIEVAL_URL (default
${retrievalUrl}), ARL_RETRIEVAL_TOPK (passages per query, default ${topk}), ARL_RETRIEVAL_TIMEOUT (seconds, default 30).
"""
import json
import os
import time
import urllib.error
import urllib.request

RETRIEVAL_URL = os.environ.get("ARL_RETRIEVAL_URL", ${JSON.stringify(retrievalUrl)})
TOPK = int(os.environ.get("ARL_RETRIEVAL_TOPK", "${topk}"))
TIMEOUT_S = float(os.environ.get("ARL_RETRIEVAL_TIMEOUT", "30"))
RETRIES = 3

# The OpenAI function schema veRL shows the model (the same as the v0.5 tool_config.yaml's tool_schema).
SCHEMA = json.loads(${JSON.stringify(JSON.stringify(SEARCH_TOOL_SCHEMA))})


def _retrieve(queries):
    """One list of hits per query, from POST /retrieve; retries connection errors and 5xx, a 4xx raises ValueError."""
    data = json.dumps({"queries": queries, "topk": TOPK, "return_scores": True}).encode("utf-8")
    request = urllib.request.Request(RETRIEVAL_URL, data=data, headers={"Content-Type": "application/json"}, method="POST")
    last_error = None
    for attempt in range(RETRIES):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read().decode("utf-8"))["result"]
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            if 400 <= e.code < 500:
                raise ValueError(f"retrieval server rejected the request ({e.code}): {body}") from None
            last_error = f"HTTP {e.code}: {body}"
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            last_error = str(e)
        time.sleep(0.5 * (attempt + 1))
    raise RuntimeError(f"retrieval server {RETRIEVAL_URL} failed after {RETRIES} tries: {last_error}")


def _passages(hits):
    """Hits of one query as "Doc i (Title: <first line>)\\n<other lines>", blank-line separated."""
    parts = []
    for i, hit in enumerate(hits):
        lines = hit.get("document", hit)["contents"].split("\\n")
        parts.append(f"Doc {i + 1} (Title: {lines[0]})\\n" + "\\n".join(lines[1:]))
    return "\\n\\n".join(parts).strip()


def search(query_list: list) -> str:
    """Searches the knowledge base for relevant passages based on the given queries.

    Args:
        query_list: A list of fully-formed search queries. The tool will return search results for each query.
    """
    if isinstance(query_list, str):
        query_list = [query_list]
    if not isinstance(query_list, list) or not query_list or not all(isinstance(q, str) and q.strip() for q in query_list):
        return json.dumps({"result": "Search error: query_list must be a non-empty list of non-empty strings."})
    try:
        results = _retrieve(query_list)
    except (ValueError, RuntimeError) as e:
        return json.dumps({"result": f"Search error: {e}"})
    if not results:
        return json.dumps({"result": "No search results found."})
    return json.dumps({"result": "\\n---\\n".join(_passages(hits) for hits in results)})


try:
    from verl.tools.function_tool import function_tool
except ImportError:  # outside veRL (e.g. trying the tool by hand): search stays a plain function
    function_tool = None
if function_tool is not None:
    search = function_tool("search", schema=SCHEMA)(search)
`;
}

/**
 * The longest text veRL's search tool can answer to one query of `topK` passages from `passages` (characters of
 * `{"result": "Doc 1 (Title: …)\n…"}`, the `search_tool.py` / v0.5.0 `SearchTool` format, JSON-escaped).
 */
function longestToolResponse(passages: readonly Passage[], topK: number): number {
  const docs = passages.map((p, i) => `Doc ${i + 1} (Title: "${p.title}")\n${p.text}`).map((d) => JSON.stringify(d).length);
  docs.sort((a, b) => b - a);
  return JSON.stringify({ result: "" }).length + docs.slice(0, topK).reduce((sum, n) => sum + n + 4, 0);
}

/**
 * `actor_rollout_ref.rollout.multi_turn.max_tool_response_length` (characters; veRL's default 256 cuts the middle out
 * of longer tool responses, `tool_agent_loop.py` `_call_tool`): twice the longest one-query response over the
 * exported passages, rounded up to a multiple of 256, at least 1024.
 */
export function maxToolResponseLength(passages: readonly Passage[], topK: number): number {
  return Math.max(1024, Math.ceil((2 * longestToolResponse(passages, topK)) / 256) * 256);
}

// ───────────────────────────── reward function, run script ─────────────────────────────

/**
 * `reward_fn.py`: veRL's custom `compute_score` (and a batch variant) calling `arl serve reward`; stdlib only. The
 * file is the same for both targets; its docstring gives the target's config keys.
 */
export function rewardFnPy(rewardUrl: string, target: VerlTarget = DEFAULT_VERL_TARGET): string {
  const keys =
    target === "0.5"
      ? `    custom_reward_function.path=<this file>
    custom_reward_function.name=compute_score          # reward_model.reward_manager=naive (default)
    # or custom_reward_function.name=compute_score_batch with reward_model.reward_manager=batch`
      : `    reward.custom_reward_function.path=<this file>
    reward.custom_reward_function.name=compute_score   # reward.reward_manager.name=naive (default)`;
  return `"""veRL custom reward function for agentic-rl (generated by \`arl export verl\`, veRL ${VERL_RELEASES[target].tag}).

veRL config:
${keys}

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

// ───────────────────────────── export ─────────────────────────────

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
  const s = setup(config);
  const schedule = verlSchedule(s.world.train.length, { minSteps: options.minSteps, trainBatchSize: options.trainBatchSize });
  const envPrompt = async (t: Task) => s.makeEnv().reset(t);
  const train = await verlRows(s.world.train, "train", envPrompt, options.barePrompt);
  const test = await verlRows(s.world.test, "test", envPrompt, options.barePrompt);
  const toolFile = files[0];

  mkdirSync(outDir, { recursive: true });
  if (target === "current") {
    writeFileSync(paths[toolFile], searchToolPy(retrievalUrl, config.env.topK, target));
  } else {
    writeFileSync(
      paths[toolFile],
      `# veRL ${VERL_RELEASES[target].tag} tool config (generated by \`arl export verl --verl-version 0.5\`): veRL's SearchTool calling \`arl serve retrieval\`.\n` +
        toYaml(toolConfig(retrievalUrl, config.env.topK), { lineWidth: 0 }),
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
      topK: config.env.topK,
      schedule,
      maxToolResponseLength: maxToolResponseLength(s.world.passages, config.env.topK),
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
