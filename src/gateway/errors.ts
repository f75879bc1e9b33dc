/**
 * The gateway's errors, in the OpenAI API's error shape `{error: {message, type, param, code}}` (OpenAI API
 * reference, "Error codes"; the `openai` npm client reads `error.message`, `error.type`, `error.param` and
 * `error.code` into its `APIError`, see `node_modules/openai/core/error.d.ts`; the AI SDK's openai-compatible
 * provider parses the same shape, `node_modules/@ai-sdk/openai-compatible/dist/index.mjs`
 * `openaiCompatibleErrorDataSchema`). A client's mistake is always a 4xx, never a 500. A message is at most
 * `MAX_ERROR_MESSAGE_CHARS` long and lists at most `MAX_LISTED_PROBLEMS` problems (src/http/limits.ts), so a body of
 * 10⁴ invalid messages gets a short answer.
 */
import type { FastifyReply } from "fastify";
import type { z } from "zod";
import { HttpError, NestingError } from "../http/server.ts";
import { capMessage, issueMessage, listProblems, pathName } from "../http/limits.ts";

/** The body of every gateway error response (OpenAI's). */
export interface OpenAIErrorBody {
  error: {
    /** A sentence saying what was wrong and, where it helps, what to send instead. */
    message: string;
    /** `invalid_request_error` for 4xx (as OpenAI, 401 included), `server_error` for 5xx. */
    type: string;
    /** The request field at fault (`messages[1].content`, `tool_choice`), or null. */
    param: string | null;
    /** A machine-readable code (`context_length_exceeded`, `rollout_not_found`, `invalid_api_key`, …), or null. */
    code: string | null;
  };
}

/**
 * An error with its HTTP status and OpenAI error fields. Extends `HttpError` (src/http/server.ts), so code that
 * handles the project's HTTP errors handles these too.
 */
export class GatewayError extends HttpError {
  /**
   * @param status HTTP status (4xx for the client's mistakes)
   * @param message the `error.message` sent
   * @param param the request field at fault, or null
   * @param code a machine-readable code, or null (a default per status is used: see `defaultCode`)
   */
  constructor(
    status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(status, message);
  }

  /** This error as the response body. */
  body(): OpenAIErrorBody {
    return openAIError(this.status, this.message, this.param, this.code);
  }
}

/** The code an error of `status` gets when none is given (OpenAI's where it has one). */
export function defaultCode(status: number): string | null {
  switch (status) {
    case 401:
      return "invalid_api_key";
    case 404:
      return "not_found";
    case 408:
      return "request_timeout";
    case 409:
      return "conflict";
    case 413:
      return "request_too_large";
    case 415:
      return "unsupported_media_type";
    default:
      return null;
  }
}

/**
 * An OpenAI error body.
 * @param status HTTP status: < 500 gives `type: "invalid_request_error"` (OpenAI uses it for 401 and 404 too), else
 *   `server_error`
 * @param message cut to `MAX_ERROR_MESSAGE_CHARS` characters (saying how many were left out)
 */
export function openAIError(status: number, message: string, param: string | null = null, code: string | null = null): OpenAIErrorBody {
  return { error: { message: capMessage(message), type: status < 500 ? "invalid_request_error" : "server_error", param: param === null ? null : capMessage(param, 200), code: code ?? defaultCode(status) } };
}

/** A zod issue path as a field name: `["messages", 1, "content"]` → `messages[1].content`; `[]` → null. */
export function fieldName(path: readonly PropertyKey[]): string | null {
  return pathName(path);
}

/**
 * Parses a request body with a zod schema.
 * @returns the parsed value
 * @throws GatewayError 400 whose message names the invalid fields and the values refused (`max_tokens: expected an
 *   integer ≥ 1, got "5" (a string)`; `issueMessage`) —
 *   the first `MAX_LISTED_PROBLEMS`, then how many more — and whose `param` is the first one
 */
export function parseRequest<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  if (body === undefined || body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new GatewayError(400, "expected a JSON object as the request body (Content-Type: application/json)", null, "invalid_body");
  }
  const r = schema.safeParse(body, { reportInput: true });
  if (r.success) return r.data;
  const issues = r.error.issues;
  const reasons = issues.map((i) => `${fieldName(i.path) ?? "body"}: ${issueMessage(i)}`);
  return fail(listProblems(reasons), fieldName(issues[0]?.path ?? []));
}

function fail(message: string, param: string | null): never {
  throw new GatewayError(400, message, param, "invalid_value");
}

/** An error thrown inside a route → the OpenAI error body and status (`bodyLimit`: bytes, named in a 413). */
export function errorReply(err: Error & { statusCode?: number; code?: string }, reply: FastifyReply, bodyLimit: number): FastifyReply {
  if (err instanceof GatewayError) {
    if (err.status === 409) void reply.header("x-should-retry", "false"); // the openai client retries 409 otherwise
    return reply.code(err.status).send(err.body());
  }
  if (err instanceof NestingError) return reply.code(400).send(openAIError(400, err.message, err.field, "invalid_value"));
  if (err instanceof HttpError) return reply.code(err.status).send(openAIError(err.status, err.message));
  const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
  if (err.code === "FST_ERR_CTP_INVALID_JSON_BODY" || (status === 400 && err instanceof SyntaxError)) {
    return reply.code(400).send(openAIError(400, `the request body is not valid JSON (${err.message})`, null, "invalid_json"));
  }
  if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
    return reply.code(413).send(openAIError(413, `the request body is over this gateway's limit of ${bodyLimit} bytes (for its context; serve with a larger bodyLimit / --max-body to raise it)`, null, "request_too_large"));
  }
  if (err.code === "FST_ERR_CTP_EMPTY_JSON_BODY") return reply.code(400).send(openAIError(400, "the request body is empty; expected a JSON object", null, "invalid_json"));
  return reply.code(status).send(openAIError(status, status === 500 ? `internal error: ${err.message}` : err.message));
}
