/**
 * The failure texts a multi-turn tool env can show a policy, for a recipe's `texts()` (the embedded word
 * tokenizer's vocabulary; see `RecipeInstance.texts`): the protocol's invalid observations of malformed turns, each
 * tool's schema errors, the generic call failures of `callTool` / `withFaults` and the env's own tool errors. One
 * list here instead of a copy per env, so a failure the call layer learns to report is added once.
 */
import type { ToolCallResult } from "../core/types.ts";
import type { Protocol } from "../protocol/types.ts";
import { toolJsonSchema, type Tool } from "./tool.ts";

/**
 * Generic failures of `callTool` and `withFaults` (timeouts, the concurrency slot, the episode deadline, output
 * checks, injected faults, retries), by case, as the text after `error: tool <name>: ` — the numbers are the defaults
 * the messages name.
 */
export const CALL_FAILURES = {
  timeout: "timed out after 10000 ms",
  "no-slot": "no free slot within 10000 ms (maxConcurrency 4)",
  deadline: "episode deadline reached",
  "not-json": "invalid output: not JSON-serialisable (undefined)",
  binary: "invalid output: binary data (a NUL or unpaired surrogate)",
  "over-cap": "output of 10000000 chars exceeds the cap of 100000 chars",
  "fault-retryable": "injected fault: fail (retryable), attempt 0",
  "fault-fail": "injected fault: fail, attempt 1",
  "fault-hang": "injected fault: hang (aborted)",
  retried: "(after 2 attempts)",
} as const;

/** A case of `CALL_FAILURES`. */
export type CallFailure = keyof typeof CALL_FAILURES;

/**
 * Malformed turns by case, hermes- then react-shaped (empty, unclosed or doubled tags, bad JSON, missing or unknown
 * names and arguments, text after a call, two markers), written around the env's tool `name`. `badArgument` is an
 * argument object with an unquoted value (`{"id": red}`), JSON no parser accepts.
 */
export function malformedTurns(name: string, badArgument: string) {
  const call = (body: string) => `<tool_call>\n${body}\n</tool_call>`;
  const empty = call(`{"name": "${name}", "arguments": {}}`);
  return {
    empty: "",
    prose: "hello",
    "open-tag": "<tool_call>",
    "close-tag": "</tool_call>",
    "open-think": "<think> x",
    "nested-tags": "<tool_call> <tool_call> </tool_call>",
    "not-object": call("[1]"),
    "empty-name": call('{"name": ""}'),
    "unknown-tool": call('{"name": "x", "arguments": {}}'),
    "no-arguments": call(`{"name": "${name}"}`),
    "string-arguments": call(`{"name": "${name}", "arguments": "x"}`),
    "array-arguments": call(`{"name": "${name}", "arguments": []}`),
    "text-after": `${empty} x`,
    "text-between": `${empty} x ${empty}`,
    "two-calls": `${empty}${empty}`,
    "unquoted-value": call(`{"name": "${name}", "arguments": ${badArgument}}`),
    "missing-comma": call(`{"name": "${name}" "arguments": {}}`),
    "unquoted-key": call("{name}"),
    "trailing-comma": call('{"a": 1,}'),
    "unclosed-string": call('{"a": "b'),
    "two-values": call('{"a": 0 1}'),
    "unclosed-object": call("{"),
    "react-no-input": `Action: ${name}`,
    "react-no-action": "Action Input: {}",
    "react-bad-input": `Action: ${name}\nAction Input: x`,
    "react-unclosed-input": `Action: ${name}\nAction Input: {"a"`,
    "react-trailing-comma": `Action: ${name}\nAction Input: {"a": 1,}`,
    "react-text-after": `Action: ${name}\nAction Input: {} tail`,
    "react-two-actions": "Action: a\nAction: b\nAction Input: {}",
    "react-empty-action": "Action:\nAction Input: {}",
    "react-input-first": `Action Input: {}\nAction: ${name}`,
    "react-unknown-tool": "Action: x\nAction Input: {}",
    "react-two-inputs": `Action: ${name}\nAction Input: {}\nAction Input: {}`,
    "react-empty-answer": "Final Answer:",
    "react-action-and-answer": "Action: x\nFinal Answer: y",
    "react-input-and-answer": "Action Input: {}\nFinal Answer: y",
  } as const;
}

/** A case of `malformedTurns`. */
export type MalformedTurn = keyof ReturnType<typeof malformedTurns>;

/** A failed call's result as a tool env shows it: `error: tool <name>: <message>`. */
export function toolError(name: string, message: string, errorKind: ToolCallResult["errorKind"] = "error"): ToolCallResult {
  return { name, ok: false, content: `error: tool ${name}: ${message}`, errorKind };
}

/** What `failureTexts` lists besides the schema errors and an unknown tool. */
export interface FailureTextOptions {
  /** The malformed turns (`malformedTurns(tool, badArgument)`), written around one of the env's tools. */
  malformed: { tool: string; badArgument: string };
  /** Error messages every tool can give (the env's own, e.g. `unknown product "x"`), before `CALL_FAILURES`. */
  toolErrors?: readonly string[];
  /** Further failed results, shown after every tool's (one tool's own errors). */
  extra?: readonly ToolCallResult[];
  /**
   * Cases left out. An env's vocabulary is every word its texts show, in order of first appearance, so a case with
   * a new word changes the embedded model's vocabulary (and every number measured with it): an env measured before a
   * case was listed leaves it out.
   */
  skip?: readonly (MalformedTurn | CallFailure)[];
}

/**
 * The texts of every failure a tool env can show: the protocol's invalid observation of each malformed turn that
 * parses as invalid; then per tool, in order, its schema errors (no arguments; every argument a number), `toolErrors`
 * and `CALL_FAILURES`; then `extra` and a call of an unknown tool `x` — each failed result as the protocol's
 * observation. Cases in `skip` are left out.
 */
export function failureTexts(protocol: Protocol, tools: readonly Tool[], options: FailureTextOptions): string[] {
  const kept = <K extends string>(cases: Readonly<Record<K, string>>) => (Object.entries(cases) as [K, string][]).filter(([k]) => !(options.skip as readonly string[] | undefined)?.includes(k)).map(([, text]) => text);
  const schemas = tools.map(toolJsonSchema);
  const out: string[] = [];
  for (const text of kept(malformedTurns(options.malformed.tool, options.malformed.badArgument))) {
    const a = protocol.parse(text, { tools: schemas, maxCallsPerTurn: 1 });
    if (a.type === "invalid") out.push(protocol.invalidObservation(a.reason));
  }
  const results: ToolCallResult[] = [];
  tools.forEach((t, i) => {
    const numbers = Object.fromEntries(Object.keys((schemas[i].parameters.properties ?? {}) as object).map((k) => [k, 4]));
    for (const bad of [{}, numbers]) {
      const r = t.inputSchema.safeParse(bad);
      if (!r.success) results.push(toolError(t.name, `invalid input: ${r.error.issues.map((x) => `${x.path.join(".")}: ${x.message}`).join("; ")}`, "invalid_input"));
    }
    for (const e of [...(options.toolErrors ?? []), ...kept(CALL_FAILURES)]) results.push(toolError(t.name, e));
  });
  results.push(...(options.extra ?? []), { name: "x", ok: false, content: "error: unknown tool x", errorKind: "unknown_tool" });
  return [...out, ...results.map((r) => protocol.observation([r]).text)];
}
