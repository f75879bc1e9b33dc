/**
 * Typed tools in the style of the Vercel AI SDK (`tool({ description, inputSchema, execute })`, package `ai`),
 * with a zod input schema, a JSON Schema export for prompts/APIs, and a call wrapper that validates, times out and
 * never throws, so a failing tool becomes an observation rather than a crashed rollout.
 */
import { z } from "zod";

/** Context passed to `execute`: `signal` aborts when the call times out. */
export interface ToolCallContext {
  signal: AbortSignal;
}

/**
 * A tool: `name` (identifier shown to the model), `description` (one line for the model), `inputSchema` (zod schema
 * of the arguments object), `execute(input, ctx)` returning the result or a promise of it.
 */
export interface Tool<S extends z.ZodType = z.ZodType, R = unknown> {
  name: string;
  description: string;
  inputSchema: S;
  execute: (input: z.output<S>, ctx: ToolCallContext) => R | Promise<R>;
}

/**
 * Defines a tool. An identity function that exists for type inference of `execute`'s input from the schema
 * (as the AI SDK's `tool()`).
 * @throws Error when `name` is empty or not an identifier (`[A-Za-z_][A-Za-z0-9_-]*`)
 */
export function tool<S extends z.ZodType, R>(def: Tool<S, R>): Tool<S, R> {
  if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(def.name)) {
    throw new Error(`tool: name must match [A-Za-z_][A-Za-z0-9_-]*, got ${JSON.stringify(def.name)}`);
  }
  return def;
}

/** A tool described for a model or an API: the name, description and JSON Schema (draft 2020-12) of its input. */
export interface ToolJsonSchema {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** The JSON Schema of a tool's input, via zod's `z.toJSONSchema` (draft 2020-12). */
export function toolJsonSchema(t: Tool): ToolJsonSchema {
  const parameters = z.toJSONSchema(t.inputSchema) as Record<string, unknown>;
  return { name: t.name, description: t.description, parameters };
}

/** Result of `callTool`: the value, or an error string (never an exception). */
export type ToolResult<R> = { ok: true; value: R } | { ok: false; error: string };

/** Options of `callTool`. `timeoutMs`: wall-clock limit in milliseconds (default 10 000; must be > 0). */
export interface CallToolOptions {
  timeoutMs?: number;
}

/** Formats zod issues as `field: message; …` (`(input)` for the root). */
function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .map((i) => `${i.path.length > 0 ? i.path.map(String).join(".") : "(input)"}: ${i.message}`)
    .join("; ");
}

/**
 * Validates `rawArgs` against the tool's schema and runs `execute` under a timeout. Never throws.
 * Errors (as `{ok:false, error}`): `tool <name>: invalid input: <field>: <message>; …`,
 * `tool <name>: timed out after <ms> ms` (the `signal` given to execute is aborted),
 * `tool <name>: <message of the thrown error>`.
 */
export async function callTool<S extends z.ZodType, R>(
  t: Tool<S, R>,
  rawArgs: unknown,
  options: CallToolOptions = {},
): Promise<ToolResult<R>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!(timeoutMs > 0)) return { ok: false, error: `tool ${t.name}: timeoutMs must be > 0, got ${timeoutMs}` };
  const parsed = t.inputSchema.safeParse(rawArgs);
  if (!parsed.success) return { ok: false, error: `tool ${t.name}: invalid input: ${formatIssues(parsed.error.issues)}` };

  const controller = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<ToolResult<R>>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve({ ok: false, error: `tool ${t.name}: timed out after ${timeoutMs} ms` });
    }, timeoutMs);
  });
  const run = (async (): Promise<ToolResult<R>> => {
    try {
      // Inside the async wrapper so a synchronous throw from execute is caught too.
      return { ok: true, value: await t.execute(parsed.data, { signal: controller.signal }) };
    } catch (e) {
      return { ok: false, error: `tool ${t.name}: ${e instanceof Error ? e.message : String(e)}` };
    }
  })();
  try {
    return await Promise.race([run, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
