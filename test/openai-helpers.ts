/**
 * Shared fixtures of the OpenAI-compatible tests: a tiny world (smoke configuration) with its tokenizer and env, a
 * randomly initialised embedded policy, and a scripted `SamplingClient` that writes Search-R1 turns by rule (so the
 * HTTP conversions are tested on known text).
 */
import type { Task } from "../src/core/types.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../src/policy/types.ts";
import type { Tokenizer } from "../src/policy/tokenizer.ts";
import { applyOverrides, resolveConfig, SMOKE_OVERRIDES, type ExperimentConfig } from "../src/train/config.ts";
import { evalTasks, setup, type Setup } from "../src/train/experiment.ts";

/** The smoke configuration with a longer context (episodes end by the turn budget, not the window). */
export function tinyConfig(extra: Record<string, string> = {}): ExperimentConfig {
  return resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "policy.contextLength": "512", ...extra }));
}

/** The tiny world and its held-out tasks. */
export function tinySetup(): { config: ExperimentConfig; s: Setup; tasks: Task[] } {
  const config = tinyConfig();
  const s = setup(config);
  return { config, s, tasks: evalTasks(s.world, config) };
}

/**
 * A sampler that searches once (`<search> {question} </search>`) and then answers the task's first gold answer —
 * decided from the decoded prompt (an `<information>` block means "already searched"). Logprobs are −0.5 per token.
 * Honours `stop` (stop token included) and `maxTokens`.
 */
export class ScriptedSampler implements SamplingClient {
  calls = 0;
  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly tasks: readonly Task[],
    private readonly script?: (prompt: string) => string,
  ) {}

  async sample(promptTokens: number[], options: SampleOptions): Promise<SampledSequence[]> {
    this.calls++;
    const prompt = this.tokenizer.decode(promptTokens);
    const text = this.script ? this.script(prompt) : this.defaultScript(prompt);
    const all = this.tokenizer.encode(text);
    let tokens = all.slice(0, options.maxTokens);
    let stopReason: SampledSequence["stopReason"] = "length";
    const at = tokens.findIndex((t) => options.stop?.includes(t));
    if (at >= 0) {
      tokens = tokens.slice(0, at + 1);
      stopReason = "stop";
    } else if (tokens.length === all.length) {
      stopReason = "length";
    }
    return Array.from({ length: options.n }, () => ({ tokens, logprobs: tokens.map(() => -0.5), stopReason }));
  }

  private defaultScript(prompt: string): string {
    const task = this.tasks.find((t) => prompt.includes(this.tokenizer.decode(this.tokenizer.encode(t.question))));
    if (!prompt.includes("<information>")) return `<search> ${task?.question ?? "capital"} </search>`;
    return `<answer> ${task?.answers[0] ?? "unknown"} </answer>`;
  }
}
