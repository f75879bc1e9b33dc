/**
 * `arl train --agent`'s sizes, in a module of their own so the CLI reads them without loading the trainer.
 */

/** The smallest context (tokens) `--agent` accepts: one search round of the example agents is ~300 tokens. */
export const MIN_AGENT_CONTEXT = 512;

/**
 * `arl train --agent`'s defaults, applied under the config file and flags (`withDefaults`), so the one command
 * `arl train --agent "node examples/agents/openai-search.mjs"` is the run measured in the README: a 512-token context
 * (`MIN_AGENT_CONTEXT`), with the jax-js trainer training lengths padded to 256 or 512 tokens
 * (`policy.jaxLengthBucket` 256: with its default 64, SFT's and RL's many micro-batch shapes exceeded the embedded
 * model's 4 GiB wasm heap at the first RL step — "Allocation exceeds the 4 GiB memory32 limit" — because jax-js keeps
 * buffers per shape; the default onnx trainer pads to multiples of 16), 1000 SFT steps (the search
 * recipe's default; with 300 the warm start reached 3–5 % held-out EM — its queries named the wrong country — and RL
 * could not raise it; with 1000, 20.8 % → 39.2 % after RL: README "Train your own agent"), 40 RL steps
 * × 8 tasks × 8 rollouts, every held-out question (the world's held-out split has 120), and the `outcome-only`
 * reward preset (EM alone; `--reward.preset composite` scores the transcript with the search env's necessity and
 * evidence terms instead: `gradeTranscript`).
 */
export const AGENT_DEFAULTS: Readonly<Record<string, string>> = {
  "run.name": "agent",
  "policy.contextLength": String(MIN_AGENT_CONTEXT),
  "policy.jaxLengthBucket": "256",
  "sft.steps": "1000",
  "rl.steps": "40",
  "rl.tasksPerStep": "8",
  "rl.groupSize": "8",
  "eval.maxTasks": "200",
  "reward.preset": "outcome-only",
};
