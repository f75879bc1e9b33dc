/**
 * `arl eval` and `arl rollout`: their flags. What they do is in `evaluateRun.ts`, loaded only when one of them runs, so
 * `arl --help` and every other command start without it.
 */
import type { Command } from "commander";
import { ENV_ARG_HELP } from "./args.ts";
import type { EvalOptions, RolloutOptions } from "./evaluateRun.ts";

/** Registers `arl eval` and `arl rollout`; `overrides` gives the dotted config flags. */
export function registerEvaluate(program: Command, overrides: () => Record<string, string>): void {
  program
    .command("eval")
    .description("Evaluate a checkpoint (agent, Direct and RAG modes) and/or prompt-driven agents on an OpenAI-compatible server, on the world's held-out split or a real QA file")
    .option("--checkpoint <dir>", "checkpoint folder, e.g. runs/default/checkpoints/final (optional with --policy)")
    .option("--split <split>", "train | test (built-in world)", "test")
    .option("--modes <list>", "comma-separated: agent, direct, rag (checkpoint rows)", "agent,direct,rag")
    .option("--data <file>", "real QA file (FlashRAG, NQ-open or Bamboogle JSONL, detected per line) instead of the built-in world")
    .option("--corpus <file>", "wiki-18 JSONL passages to search (with --data)")
    .option("--limit <n>", "evaluate at most n questions")
    .option("--policy <spec>", "openai:MODEL — a model on an OpenAI-compatible server, driven by --agent (repeatable)", (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option("--base-url <url>", "OpenAI-compatible API of --policy, e.g. http://127.0.0.1:8300/v1 (default: env OPENAI_BASE_URL)")
    .option("--api-key <key>", "API key of --base-url (default: env OPENAI_API_KEY, else none)")
    .option("--agent <list>", "prompt-driven agents for --policy: prompt, function-calling, react (comma-separated) or all", "all")
    .option("--max-tokens <n>", "max_tokens of each --policy reply (the server's tokens)", "512")
    .option("--concurrency <n>", "--policy episodes in flight per agent", "4")
    .option("--env <name>", `env recipe (default search, or the checkpoint's run's env): ${ENV_ARG_HELP}`)
    .action(async (opts: EvalOptions) => (await import("./evaluateRun.ts")).runEval(opts, overrides()));

  program
    .command("rollout")
    .description("Run a few episodes and print them readably (a checkpoint's policy, or a scripted persona)")
    .option("--checkpoint <dir>", "checkpoint folder; without it a scripted persona acts")
    .option("--persona <name>", "scripted persona of the env (`arl envs` lists them; default its careful one)")
    .option("-n, --n <n>", "episodes", "3")
    .option("--split <split>", "train | test", "test")
    .option("--temperature <t>", "sampling temperature", "1")
    .option("--data <file>", "real QA file instead of the built-in world")
    .option("--corpus <file>", "wiki-18 JSONL passages (with --data)")
    .option("--env <name>", `env recipe (default search, or the checkpoint's run's env): ${ENV_ARG_HELP}`)
    .action(async (opts: RolloutOptions) => (await import("./evaluateRun.ts")).runRollout(opts, overrides()));
}
