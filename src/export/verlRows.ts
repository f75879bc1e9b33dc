/**
 * The dataset rows of `arl export verl`: as veRL's Search-R1 preprocessing writes them
 * (`examples/data_preprocess/preprocess_search_r1_dataset.py`: `data_source`, `prompt`, `ability`, `reward_model`,
 * `extra_info`) plus `agent_name` (v0.9.0 `examples/data_preprocess/gsm8k_tool_agent_loop.py`).
 */
import type { Task } from "../core/types.ts";

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
