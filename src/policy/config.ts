/**
 * The `policy` section of the experiment config, beside the backends that read it: which backend runs the model
 * math (`embedded` or `tinker`), where the embedded model starts (`init`: from scratch or a pretrained base, read by
 * src/train/base.ts), its shape and micro-batching, its sampling engine, and the Tinker server's settings. What the
 * embedded shape needs in memory is estimated by src/policy/embedded/memory.ts.
 */
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { int, intIn, SIZE_BOUNDS } from "../core/configFields.ts";
import { ms } from "../env/config.ts";

/** `policy.tinker`: the Tinker-API server, model and wire settings (src/policy/tinker). */
export const TinkerSection = z
  .object({
    baseUrl: z.string().regex(/^https?:\/\/[^\s]+$/, "an http(s) URL").default("http://127.0.0.1:8000").describe("Tinker API server root (hosted Tinker, SkyRL's Tinker server, TuFT, verl-tinker, or `arl serve trainer`)."),
    baseModel: z.string().min(1).default("arl/init").describe("Base model to fine-tune (e.g. Qwen/Qwen3-8B; `arl serve trainer` offers arl/init and its checkpoints)."),
    loraRank: int(1, "LoRA rank sent with create_model (hosted Tinker trains LoRA; arl serve trainer trains all weights).").default(32),
    apiKeyEnv: z.string().default("TINKER_API_KEY").describe("Environment variable holding the API key (keys never go in config files)."),
    timeoutMs: ms(1000, "Per-request timeout (ms); failed requests are retried with the Tinker SDK's back-off (min(2ⁿ, 30) s, up to 5 min). Polls of a future have their own timeout (the server's hold + 15 s) and never give up.").default(60000),
    retryForMs: ms(0, "How long one request keeps retrying while the server is unreachable or answers 408/429/5xx (ms; default 300 000, the Tinker SDK's); then the run stops with the reason, resumable with --resume.").default(300000),
    sendStopStrings: z.boolean().optional().describe("Send multi-token stop strings (</search>) to the server (default: what the server family supports); false = stop ids only, the client cuts samples at the strings."),
    wire: z.enum(["auto", "json", "protobuf"]).default("auto").describe("Encoding of forward_backward and its results: protobuf (Tinker SDK 0.25, hosted Tinker, SkyRL, TuFT, arl serve trainer) or JSON (verl-tinker, older servers); auto = the detected server family's, switched once on a 415."),
    server: z.enum(["auto", "tinker", "skyrl", "tuft", "verl-tinker", "arl", "unknown"]).default("auto").describe("Server family, for its known differences (src/policy/tinker/families.ts); auto = detected from client/config, healthz and get_server_capabilities."),
    tokenizer: z.string().optional().describe("Folder with the model's tokenizer.json (+ tokenizer_config.json) for a real model; default the world's word tokenizer."),
  })
  .strict();

/**
 * The base model folder the package ships, `<package root>/base` (found from this module, as `data/` is), and the
 * default of `policy.base`. `arl pretrain` at its defaults reproduces it (README "Base model").
 */
export const PACKAGE_BASE_DIR = fileURLToPath(new URL("../../base", import.meta.url));

/** The `policy` section: backend, where the embedded model starts, its shape and micro-batching, sampler, Tinker settings. */
export const PolicyConfig = z
  .object({
    backend: z.enum(["embedded", "tinker"]).default("embedded").describe("Where the model math runs: `embedded` (in-process CPU GPT) or `tinker` (any Tinker-API server)."),
    sampler: z
      .enum(["jax", "onnx"])
      .default("onnx")
      .describe(
        "Sampling engine of the embedded backend: `onnx` (default; onnxruntime-node on an ONNX graph of the same model, rebuilt from the current weights after each update; logprobs match the trainer's to ~1e-5 nats; ~5× faster, BENCHMARKS.md) or `jax` (jax-js, the trainer's own runtime). Ignored by `tinker`.",
      ),
    trainer: z
      .enum(["onnx", "jax"])
      .default("onnx")
      .describe(
        "Training engine of the embedded backend: `onnx` (default; forward + backward as one onnxruntime-node graph with a hand-written backward, AdamW on the host; 4–5.6× jax-js's step, 1.6–1.8× PyTorch's on the base shape, BENCHMARKS.md) or `jax` (jit-compiled jax-js programs in a wasm heap). Gradients agree to ~1e-5. Ignored by `tinker`.",
      ),
    tinker: TinkerSection.default(TinkerSection.parse({})),
    init: z
      .enum(["scratch", "base"])
      .default("scratch")
      .describe(
        "Where the embedded model starts: `scratch` (fresh weights of the `policy.dModel`/`nLayers`/`nHeads`/`mlpRatio` shape, and a word tokenizer of the env's texts — or, for an env that lists no texts, the base's tokenizer) or `base` (the pretrained base model in `policy.base`, written by `arl pretrain`: its byte-level BPE tokenizer, its shape from base.json — the shape fields above are then ignored, and `policy.contextLength` may not exceed the base's — and its weights, with a fresh optimizer, before the warm start; a resumed run loads its own checkpoint). The schema's default is `scratch`; a recipe may default to `base` (travel and the own-env examples do: measured better), its smoke preset and quick lab still start from scratch. Ignored by `tinker`.",
      ),
    base: z.string().min(1).optional().describe("With `policy.init: base`: the base model folder (`arl pretrain`'s `<run.dir>/base/`: base.json, tokenizer.json, meta.json, tensors.bin, manifest.json); default the package's own `base/` folder."),
    fixedPrompts: z
      .enum(["token", "text"])
      .default("token")
      .describe(
        "With `policy.init: base`: how the env's constant system prompts (RecipeInstance.fixedPrompts: its instructions + the JSON schemas of its tools, the same text in every episode) are read. `token` (default): each is one added token of the base's tokenizer that decodes back to the exact text, its embedding a new row of the base's wte initialised to the mean of the embeddings of the prompt's base tokens and learned in the warm start — measured: travel's 609-token prompt otherwise fills most of the 1 024-token context. `text`: the prompt is read token by token, as the base read its pretraining corpus (a context long enough is the user's to set). With `policy.init: scratch` the word tokenizer's behaviour is unchanged (each fixed prompt is one word token). Ignored by `tinker`.",
      ),
    dModel: intIn(8, SIZE_BOUNDS.dModel, "Transformer width (with the embedded backend, what fits is checked at start: the jax-js trainer's 4 GiB wasm heap, or the onnx trainer's native memory against RAM; estimateEmbeddedMemory).").default(96),
    nLayers: intIn(1, SIZE_BOUNDS.nLayers, "Transformer blocks.").default(2),
    nHeads: intIn(1, SIZE_BOUNDS.nHeads, "Attention heads (must divide dModel).").default(4),
    mlpRatio: intIn(1, SIZE_BOUNDS.mlpRatio, "MLP hidden size / dModel.").default(4),
    contextLength: intIn(32, SIZE_BOUNDS.contextLength, "Context window (tokens).").default(256),
    microBatchTokens: intIn(64, SIZE_BOUNDS.contextLength, "Embedded backend: tokens per training micro-batch (rows × padded length). Smaller bounds the memory of long contexts (the jax-js trainer keeps one set of buffers per micro-batch shape; the onnx trainer frees them after each micro-batch).").default(3072),
    lengthBucket: intIn(8, SIZE_BOUNDS.contextLength, "Embedded backend: padded training lengths are multiples of this (tokens). Default: 16 with the onnx trainer (there it only sets padding), `policy.jaxLengthBucket` with jax-js.").optional(),
    jaxLengthBucket: intIn(8, SIZE_BOUNDS.contextLength, "Embedded backend, jax-js trainer: the length bucket when `policy.lengthBucket` is unset (tokens). Every padded shape is a compiled program with its own buffers in the 4 GiB wasm heap, so long-context recipes set it coarse (travel 128, research 192).").default(64),
  })
  .strict()
  .refine((p) => p.dModel % p.nHeads === 0, { message: "policy.nHeads must divide policy.dModel", path: ["nHeads"] });

/** The `policy` section as resolved (every field present but `lengthBucket`, which {@link trainLengthBucket} resolves, and `base`, which {@link baseDirOf} does). */
export type PolicySection = z.infer<typeof PolicyConfig>;

/** The base folder `policy.init: base` starts from: `policy.base`, else {@link PACKAGE_BASE_DIR}. */
export function baseDirOf(p: Pick<PolicySection, "base">): string {
  return p.base ?? PACKAGE_BASE_DIR;
}

/**
 * The embedded trainer's length bucket (tokens): `policy.lengthBucket` when set, else the trainer's default — 16 for
 * onnx ({@link ONNX_LENGTH_BUCKET}), `policy.jaxLengthBucket` for jax-js.
 */
export function trainLengthBucket(p: Pick<PolicySection, "lengthBucket" | "jaxLengthBucket" | "trainer">): number {
  return p.lengthBucket ?? (p.trainer === "jax" ? p.jaxLengthBucket : ONNX_LENGTH_BUCKET);
}

/**
 * The onnx trainer's default length bucket (tokens). Measured 2026-12-07 (2-core EPYC VM, quiet) on real warm-start
 * demonstrations, 300 SFT steps, same final loss to 1e-3: the default `arl train`'s (p50 19 tokens) 84 ms/step at
 * bucket 64, 50 at 16, 50 at 8; travel's (p50 417, context 768) at 8, 16, 32 and 128 within the VM's ±15 % noise.
 */
export const ONNX_LENGTH_BUCKET = 16;
