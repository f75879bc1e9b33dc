/**
 * Fixtures of the gateway tests: the tiny byte-level BPE tokenizer with the real Qwen2.5 chat template
 * (test/fixtures/qwen25-template, exact `decode(encode(s)) === s`), and a scripted `SamplingClient` that writes fixed
 * text by rule — so well-formed (and malformed) tool calls are forced deterministically where an untrained model
 * would emit noise — and remembers every sequence it returned, to compare with the gateway's records.
 */
import type { SampledSequence, SampleOptions, SamplingClient } from "../src/core/sampling.ts";
import type { Tokenizer } from "../src/core/tokenizer.ts";
import { loadTokenizer } from "../src/policy/hf/index.ts";

/** The Qwen2.5-template test tokenizer (488 ids; `<|im_end|>` is one token). */
export const qwenTokenizer = () => loadTokenizer("test/fixtures/qwen25-template");

/** A tool call in the Hermes format the model writes. */
export const hermesCall = (name: string, args: Record<string, unknown>) => `<tool_call>\n{"name": "${name}", "arguments": ${JSON.stringify(args)}}\n</tool_call><|im_end|>`;

/** The city a prompt asks about (the last "weather in X" of the decoded prompt). */
export function cityOf(prompt: string): string {
  const all = [...prompt.matchAll(/weather in ([A-Z][a-z]+)/g)];
  return all.length > 0 ? all[all.length - 1][1] : "Nowhere";
}

/**
 * The default script: no tool response after the last user message yet → call `get_weather` for the city asked
 * about; else answer from the response.
 */
export function weatherScript(prompt: string): string {
  // Tool responses are rendered in a user block: the last user block holds one once the tool has answered.
  const lastUser = prompt.slice(prompt.lastIndexOf("<|im_start|>user"));
  if (!lastUser.includes("<tool_response>")) return hermesCall("get_weather", { city: cityOf(prompt) });
  const m = /<tool_response>\n([^\n]*)\n<\/tool_response>/.exec(prompt.slice(prompt.lastIndexOf("<tool_response>")));
  return `The weather in ${cityOf(prompt)}: ${m ? m[1] : "unknown"}.<|im_end|>`;
}

/**
 * A sampler that writes `script(decodedPrompt, call)` as tokens, honours `stop` ids (included) and `maxTokens`, and
 * gives each token a distinct logprob that depends on the seed (so recorded logprobs can be checked one by one).
 */
export class ScriptedSampler implements SamplingClient {
  /** Every sequence returned, in order, with the prompt and options it was sampled for. */
  readonly returned: Array<{ prompt: number[]; options: SampleOptions; sample: SampledSequence }> = [];

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly script: (prompt: string, call: number) => string = weatherScript,
    private readonly delayMs = 0,
  ) {}

  async sample(promptTokens: number[], options: SampleOptions): Promise<SampledSequence[]> {
    const call = this.returned.length;
    const text = this.script(this.tokenizer.decode(promptTokens), call);
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
    const all = this.tokenizer.encode(text);
    let tokens = all.slice(0, options.maxTokens);
    let stopReason: SampledSequence["stopReason"] = tokens.length < all.length ? "length" : "stop";
    const at = tokens.findIndex((t) => options.stop?.includes(t));
    if (at >= 0) {
      tokens = tokens.slice(0, at + 1);
      stopReason = "stop";
    }
    const sample: SampledSequence = { tokens, logprobs: tokens.map((_, i) => -((options.seed % 89) + i + 1) / 1024), stopReason };
    this.returned.push({ prompt: promptTokens.slice(), options, sample });
    return [sample];
  }
}
