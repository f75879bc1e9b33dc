/**
 * Picks the tokenizer of a policy that runs a real model. The embedded policy builds its own `WordTokenizer` from its
 * world's texts; a remote model (Tinker, an OpenAI-compatible server) brings its tokenizer folder instead.
 *
 * How the Tinker client uses it (the `policy.tokenizer: path/to/model-dir` config field comes later, from the lead):
 * the RL loop calls `loadTokenizer(config.policy.tokenizer)` once, then tokenises on the client — the first prompt with
 * `promptTokens` (the model's chat template, generation prompt included), observations with `encode` — and sends
 * token ids to Tinker's `sample` / `forward_backward`; sampled ids come back and are decoded with `decode` for the env.
 * Turns end on `eosTokenIds` (Qwen: `<|im_end|>`) and on stop strings such as `</search>` / `</answer>`, which are
 * several tokens for Qwen (`singleTokenId` says when a string is one token). See docs/_scale-out-tokenizer.md.
 */
import { HfTokenizer, type HfTokenizerOptions } from "./tokenizer.ts";

export { HfTokenizer } from "./tokenizer.ts";
export type { ChatMessage, ChatTemplateOptions, ChatToolCall, ChatToolSpec, HfTokenizerFiles, HfTokenizerOptions } from "./tokenizer.ts";

/**
 * Loads the tokenizer of the model folder `dir` (`tokenizer.json` required; `tokenizer_config.json`,
 * `chat_template.jinja`, `generation_config.json` optional), e.g. a Hugging Face download of `Qwen/Qwen3-8B`.
 * @throws Error naming the path when `tokenizer.json` is missing, or the file and field when a file is malformed
 */
export function loadTokenizer(dir: string, options: HfTokenizerOptions = {}): HfTokenizer {
  return HfTokenizer.fromDir(dir, options);
}
