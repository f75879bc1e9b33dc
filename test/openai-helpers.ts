/**
 * Shared fixtures of the OpenAI-compatible tests: a tiny world (smoke configuration) with its tokenizer and env, a
 * randomly initialised embedded policy (served over HTTP by `serveTinyPolicy`), and a scripted `SamplingClient` that writes Search-R1 turns by rule (so the
 * HTTP conversions are tested on known text).
 */
import { afterAll, beforeAll } from "vitest";
import type { Task } from "../src/core/types.ts";
import type { SampledSequence, SampleOptions, SamplingClient } from "../src/core/sampling.ts";
import type { Tokenizer } from "../src/core/tokenizer.ts";
import { resolveConfig, type ExperimentConfig } from "../src/train/config.ts";
import { SMOKE_OVERRIDES, searchRecipe } from "../src/envs/index.ts";
import { applyOverrides } from "../src/train/configFile.ts";
import { evalTasks, setupExperiment, type Setup } from "../src/train/setup.ts";
import { EmbeddedBackend } from "../src/policy/embedded/backend.ts";
import type { RunningServer } from "../src/http/server.ts";
import { serveOpenAI } from "../src/serve/openai.ts";

/** The smoke configuration with a longer context (episodes end by the turn budget, not the window). */
export function tinyConfig(extra: Record<string, string> = {}): ExperimentConfig {
  return resolveConfig(applyOverrides({}, { ...SMOKE_OVERRIDES, "policy.contextLength": "512", ...extra }));
}

/** The tiny world and its held-out tasks. */
export function tinySetup(): { config: ExperimentConfig; s: Setup; tasks: Task[] } {
  const config = tinyConfig();
  const s = setupExperiment(config, searchRecipe);
  return { config, s, tasks: evalTasks(s, config) };
}

/** The tiny setup's embedded policy and the server that serves it. */
export interface ServedTinyPolicy {
  /** The randomly initialised embedded backend (set in `beforeAll`). */
  readonly be: EmbeddedBackend;
  /** `arl serve openai` over `be`'s sampler, model name "tiny" (set in `beforeAll`). */
  readonly server: RunningServer;
}

/**
 * Serves `s`'s randomly initialised embedded policy (seed `seed`) as `arl serve openai` does, model "tiny", for the
 * calling test file: started by a `beforeAll` registered now (so it runs before the file's own later ones), closed
 * and disposed by an `afterAll`. Read `.be` and `.server` in hooks and tests, not at import time.
 */
export function serveTinyPolicy(s: Setup, seed: number): ServedTinyPolicy {
  let be: EmbeddedBackend | undefined;
  let server: RunningServer | undefined;
  beforeAll(async () => {
    be = await EmbeddedBackend.create(s.gpt, seed);
    server = await serveOpenAI({ name: "tiny", sampler: be.samplingClient(), tokenizer: s.tokenizer, contextLength: s.gpt.contextLength });
  });
  afterAll(async () => {
    await server?.close();
    be?.dispose();
  });
  const started = <T>(x: T | undefined): T => {
    if (x === undefined) throw new Error("serveTinyPolicy: read before its beforeAll ran");
    return x;
  };
  return {
    get be() {
      return started(be);
    },
    get server() {
      return started(server);
    },
  };
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
