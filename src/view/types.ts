/**
 * What `arl view`'s server sends its page (and what `arl view --export` embeds in one HTML file): run and lab
 * folders as they are on disk (README "A run on disk"), read by `src/view/sourceReader.ts`. Shared by the server (Node) and
 * the page (`src/view/client/`); this file imports nothing, so the client bundle stays free of Node modules.
 *
 * Units: steps are 0-based as in `metrics.jsonl`; logprobs are natural-log probabilities (nats); rewards and
 * advantages are in the run's reward units (GRPO advantages in reward-std units).
 */

/** What one viewed folder is: a training run, a lab's shared warm start, or one design of a lab. */
export type SourceKind = "run" | "warm-start" | "design";

/** One `samples/<name>.jsonl` file of a source. */
export interface SampleFileInfo {
  /** File stem, e.g. `step-3`, `eval-rl-grpo`. */
  name: string;
  /** `step`: episodes sampled in RL step `step`; `eval`: the held-out evaluation of one policy. */
  type: "step" | "eval";
  /** The RL step (0-based) of a `step-<n>` file. */
  step?: number;
  /** The policy of an `eval-<policy>` file (the file stem without `eval-`). */
  policy?: string;
  /**
   * Where the episodes come from: `samples` (default: `samples/<name>.jsonl`) or `rollouts` — an `arl train --agent`
   * run's evaluation, which is written only as `rollouts.jsonl` lines of stage `<name>` (`eval-warm`, `eval-after`:
   * status and reward per held-out rollout, no transcript).
   */
  from?: "samples" | "rollouts";
}

/** A viewed folder: its identity and what files it has now. */
export interface SourceInfo {
  /** Stable id within one viewer: the folder's path relative to the common root of the given paths, `/`-separated. */
  id: string;
  /** Shown name: the run's folder name, or `<lab>/<design>`. */
  label: string;
  kind: SourceKind;
  /** The lab's id for a design or a lab's warm start. */
  lab?: string;
  /** Absolute path of the folder. */
  path: string;
  /** True while a process holds the folder's `.lock` (a run still training): the page polls it for new lines. */
  live: boolean;
  /** Stages present in `metrics.jsonl`, in order of first appearance (`sft`, `rl`). */
  stages: string[];
  /** Number of `metrics.jsonl` lines per stage. */
  stepsByStage: Record<string, number>;
  /** Every numeric metric key in `metrics.jsonl`, sorted. */
  metricKeys: string[];
  /** Per stage, the metric keys with at least one value in that stage, sorted (SFT lines have `loss`, RL lines the rest). */
  metricKeysByStage: Record<string, string[]>;
  /**
   * Lines the viewer could not read, per file (`metrics.jsonl`, `detectors.jsonl`, `rollouts.jsonl`,
   * `samples/step-3.jsonl`, …): not JSON objects (a damaged or hand-edited file), or longer than the viewer's line
   * limit (src/view/limits.ts; skipped unread); a whole file over its size limit (`summary.json`, `config.yaml`, …)
   * counts as one. A run's last line while it is being written is not counted (unless already over the limit). Only
   * files with at least one such line are listed; the page shows them.
   */
  damagedLines: Record<string, number>;
  /**
   * Lines the viewer kept only in part, or dropped, because they pass its limits (src/view/limits.ts: metric keys
   * per line, distinct metric keys, stages, lines, firings), per file. Absent when none; the page shows them.
   */
  cutLines?: Record<string, number>;
  sampleFiles: SampleFileInfo[];
  /** Firings in `detectors.jsonl`. */
  detectorCount: number;
  /** Changes whenever a file the viewer reads changes (sizes and mtimes), and as a long file is read over several polls: the page refetches on a new value. */
  version: string;
  /** The lab design's description (from `lab.json`), when known. */
  description?: string;
}

/** The list of sources. */
export interface ViewIndex {
  sources: SourceInfo[];
  /** True in an exported file (no server: nothing updates). */
  static: boolean;
  /** Milliseconds between the page's polls for changes (0 = never). */
  pollMs: number;
}

/** One line of `detectors.jsonl` (src/reward/detectors.ts `DetectorFiring`). */
export interface DetectorFiring {
  detector: string;
  /** The metric key the detector watches (also a `metrics.jsonl` key). */
  metric: string;
  /** RL step the firing is about (0-based). */
  step: number;
  /** First step of the current firing streak. */
  since?: number;
  /** The smoothed metric value that crossed the threshold. */
  value: number;
  baseline?: number;
  threshold?: number;
  message: string;
}

/**
 * A source's `metrics.jsonl`, column-wise (one entry per line, in file order): `stage[i]`, `step[i]` and, per metric
 * key, `columns[key][i]` (null where line i lacks the key or it is not a finite number).
 */
export interface MetricsPayload {
  id: string;
  stage: string[];
  step: number[];
  columns: Record<string, (number | null)[]>;
  detectors: DetectorFiring[];
  /**
   * RL steps at which each detector was firing: the trainer's `DetectorMonitor` replayed over these lines with the
   * run's `detectors` config, plus the onsets of `detectors.jsonl`.
   */
  detectorSteps: Record<string, number[]>;
  /** `summary.json` as written (an `--agent` run's `agent-summary.json`; null while a run trains). */
  summary: unknown;
  /** The source's `SourceInfo.version` when this was read (the page uses a payload fetched before the index only when they agree). */
  version?: string;
  /**
   * Set when the lines × metric keys passed the viewer's `maxCells` (src/view/limits.ts): `stage`, `step` and
   * `columns` hold `sent` of the file's `rows` lines — every n-th line of each stage and its last.
   */
  thinned?: { rows: number; sent: number };
}

/** One reward term (src/core/types.ts `RewardTerm`). */
export interface ViewRewardTerm {
  name: string;
  value: number;
  weight: number;
  explanation: string;
  error?: string;
}

/** One turn of an episode as `samples/*.jsonl` keeps it. */
export interface ViewTurn {
  /** The policy's text for the turn. */
  action: string;
  /** What the env appended after it ('' for the last turn). */
  observation: string;
  /** The turn's tool calls and whether each succeeded (tool envs; absent in older files). */
  tools?: { name: string; ok: boolean; error?: string }[];
  /** An agent rollout's call (`arl train --agent`): the tool calls the completion made, `arguments` as JSON text. */
  toolCalls?: { name: string; arguments: string }[];
  /**
   * An agent rollout's call: what the agent sent back after it — each `<tool_response>` block of the next prompt
   * (read from the segment's loss-mask-0 tokens; never trained).
   */
  toolResults?: string[];
  /** An agent rollout's call: `stop`, `length` or `tool_calls`, and whether the completion was malformed. */
  finishReason?: string;
  invalid?: boolean;
}

/** What only an `arl train --agent` rollout has (`writeAgentSamples`, src/train/agentExperiment.ts). */
export interface ViewAgentInfo {
  /** `rewarded`, or `dropped` (no reward: not trained; why in `dropReason`). */
  status: string;
  dropReason: string | null;
  /** Calls whose prompt did not extend the previous prompt + completion: kept as separate segments. */
  mismatches: number;
  /** The system message of the first prompt (the agent's instructions and the template's tools section). */
  system: string;
  /** The reward's named parts (`reward.parts`; an agent that reports its own reward may send them): not weighted terms. */
  parts: Record<string, number>;
  /** Model calls of a rollout known only from `rollouts.jsonl` (an evaluation rollout: no transcript). */
  calls?: number;
}

/** How an episode ended, for filtering: graded 1 / EM 1 = `success`; an answer otherwise = `fail`; none = `no-answer`. */
export type Outcome = "success" | "fail" | "no-answer";

/**
 * The token books of an episode, all `[seq]`: token ids (their text is in `SamplesPayload.vocab`), the loss mask
 * (1 = sampled by the policy and trained on; 0 = prompt, observation or forced text, never trained), the sampler's
 * logprobs (nats; 0 where the mask is 0).
 */
export interface ViewTokens {
  ids: number[];
  lossMask: number[];
  logprobs: number[];
  /** Tokens of the prompt (tokens). */
  promptLength: number;
  /**
   * Token ranges `[start, end)` inside this sequence that are tool results (an agent rollout's `<tool_response>`
   * blocks, located in the tokens' text): loss mask 0, shown as tool results rather than template text.
   */
  toolResults?: [number, number][];
}

/** One episode of a samples file, with what the viewer derives from its neighbours (group, advantage). */
export interface ViewEpisode {
  /** Line index in the file (0-based). */
  index: number;
  task: string;
  /** Task kind (`single-hop`, `bridge`, …); older files lack it: the task id's prefix before `:`. */
  kind: string;
  question: string;
  gold: string[];
  known?: boolean;
  /** Member index within its group (from the file, else the position within its run of lines with the same task). */
  member: number;
  /** Group index within the file: consecutive lines with the same task id (GRPO's group). */
  group: number;
  turns: ViewTurn[];
  answer: string | null;
  reward: { total: number; terms: ViewRewardTerm[] } | null;
  grade?: { score: number; parts: Record<string, number>; explanation?: string };
  outcome: Outcome;
  toolCalls: Record<string, number>;
  /**
   * The episode's advantage (GRPO: reward-std units; Dr.GRPO: reward units), or null when it cannot be known. From
   * the trainer: the line's `advantage`, else the mean of `reward.turnAdvantages`.
   */
  advantage: number | null;
  /** What the trainer credited each turn: mean advantage of the turn's policy tokens `[turn]` (`reward.turnAdvantages`). */
  turnAdvantages?: number[];
  /** Per-turn step rewards `[turn]` the advantage stage used (`reward.turnRewards`, `rl.turnRewards`). */
  turnRewards?: number[];
  /**
   * Where `advantage` comes from: `file` (written by the trainer: `advantage` or `reward.turnAdvantages`), `recomputed` (the run's `rl.advantage` estimator,
   * `src/algo/advantages.ts`, on the rewards of a group written whole), `none` (why in `advantageNote`).
   */
  advantageSource: "file" | "recomputed" | "none";
  advantageNote?: string;
  /** The token books (absent in files written before they were kept). An agent rollout's first segment. */
  tokens?: ViewTokens;
  /** Every segment of an agent rollout (one unless a call rewrote the history: `agent.mismatches`), `tokens` first. */
  segments?: ViewTokens[];
  /** Set on `arl train --agent` rollouts. */
  agent?: ViewAgentInfo;
}

/** One samples file of one source. */
export interface SamplesPayload {
  id: string;
  file: string;
  episodes: ViewEpisode[];
  /**
   * Text of every token id the file's episodes use, from the run's `tokenizer.json` (id → text; empty when no
   * tokenizer is on disk: the page shows `[id]`). Only the ids used, so a 150 k-token vocabulary is not sent whole.
   */
  vocab: Record<string, string>;
  /** RL steps at which each detector was firing (from `detectors.jsonl`), for the detector filter. */
  detectorSteps: Record<string, number[]>;
  /** What the page should say about the file (e.g. an agent run's held-out EM from `eval-warm.json` / `agent-summary.json`). */
  note?: string;
  /** Lines of the file that are not JSON objects or over the viewer's line limit (skipped; the page says how many). Absent when none. */
  damagedLines?: number;
  /** Bytes at the file's end not read: past the viewer's size limit for one samples file (the page says so). Absent when none. */
  unreadBytes?: number;
}

/** Everything an exported file holds: the index and every payload the page could ask for. */
export interface ViewBundleData {
  index: ViewIndex;
  metrics: Record<string, MetricsPayload>;
  /** `samples[sourceId][fileName]`. */
  samples: Record<string, Record<string, SamplesPayload>>;
}
