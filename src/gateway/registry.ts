/**
 * The rollouts a gateway serves and their lifecycle: opened (by the trainer, `POST /rollout/<id>/open`, or on first
 * use), their calls recorded as sampled, then resolved exactly once — `rewarded` (the agent's `POST
 * /rollout/<id>/reward`, or the trainer's `reward(id, …)` after grading the transcript) or `dropped` (no reward by
 * the deadline, the trainer's `drop(id, reason)`, the gateway closing). `wait(id)` resolves with the
 * `RolloutRecord` then; it never hangs past the rollout's deadline.
 *
 * States: `open` (calls accepted) → `finished` (`finish(id)`: the agent is done, calls get 409; a reward is still
 * accepted until the deadline) → `rewarded` | `dropped` (final; calls and rewards get 409). A call in flight when its
 * rollout resolves is not recorded (its answer is a 409: the record the trainer got does not hold it).
 * Resolved rollouts are kept (for `wait`, 409s and `snapshot`) up to `keepResolved`, oldest forgotten first.
 */
import type { GatewayCall, GatewayReward, RolloutRecord } from "./types.ts";
import { GatewayError } from "./errors.ts";
import { mergeCalls } from "./records.ts";
import { assistantKey, type ChatMsg } from "./render.ts";
import { quoteShort } from "../http/limits.ts";

/** Default time a rollout has to be rewarded (ms): 10 minutes. */
export const DEFAULT_DEADLINE_MS = 600_000;
/** Largest deadline (ms): Node's timer limit (about 24.8 days). */
export const MAX_DEADLINE_MS = 2 ** 31 - 1;
/**
 * Rollout ids: 1-256 of the characters a URL path segment carries as they are (RFC 3986 unreserved `A-Z a-z 0-9 - .
 * _ ~`, and `:` `@` `+` `=`), and not dots only: `.` and `..` are dot-segments, which URL clients (WHATWG URL, the
 * `openai` client, fetch) remove, so `/rollout/../v1/…` would reach another route and the call would never be
 * recorded. Letters, digits and `-` cover every id the trainer makes (`run0-s3-t1-g2`).
 */
export const ROLLOUT_ID_RE = /^(?!\.+$)[A-Za-z0-9._~:@+=-]{1,256}$/;

/** The rule of `ROLLOUT_ID_RE` in words (for error messages). */
export const ROLLOUT_ID_RULE = '1-256 characters of A-Z a-z 0-9 - . _ ~ : @ + =, not dots only ("." and ".." are path segments URL clients rewrite)';

/**
 * Checks a rollout id.
 * @returns the id
 * @throws GatewayError 400 (param `id`) naming the allowed characters, unless `id` matches `ROLLOUT_ID_RE`
 */
export function checkRolloutId(id: unknown): string {
  if (typeof id !== "string" || !ROLLOUT_ID_RE.test(id)) {
    throw new GatewayError(400, `rollout id: expected ${ROLLOUT_ID_RULE}, got ${typeof id === "string" ? quoteShort(id) : typeof id}`, "id", "invalid_value");
  }
  return id;
}

/** Options of `RolloutRegistry`. */
export interface RegistryOptions {
  /** Default deadline of a rollout, from its opening (ms; default 600 000). */
  deadlineMs?: number;
  /**
   * Resolved rollouts kept for `wait` / `snapshot` / 409s (default 1024; oldest forgotten first, after which their id
   * is unknown: 404, and may be opened again). Bounded because each holds its token arrays.
   */
  keepResolved?: number;
  /** Called once with every resolved record (e.g. to append it to a JSONL file); an exception it throws is logged. */
  onRecord?: (record: RolloutRecord) => void;
}

/** Options of `open`. */
export interface OpenOptions {
  /** Caller's metadata, copied into the record (e.g. `{task: "travel:train:17", group: 3}`). */
  meta?: Record<string, unknown>;
  /** Time to be rewarded, from now (ms; default the registry's). */
  deadlineMs?: number;
  /**
   * The drop reason when the deadline passes while the rollout is still open (its client never said it finished),
   * e.g. `the agent was still running at its deadline of 120000 ms (killed)`; default `no reward within its deadline
   * of <ms> ms`.
   */
  openAtDeadline?: string;
}

/** Where a rollout stands. */
export type RolloutStatus = "open" | "finished" | "rewarded" | "dropped";

/** A rollout's state so far (`snapshot`): what the trainer grades a finished transcript from. */
export interface RolloutSnapshot {
  id: string;
  meta: Record<string, unknown>;
  status: RolloutStatus;
  /** Recorded calls, `index` 0, 1, … in arrival order. */
  calls: GatewayCall[];
  segments: RolloutRecord["segments"];
  mismatches: number;
  /**
   * The conversation of the latest recorded call: its request's messages and the assistant turn it returned (content,
   * tool calls with `arguments` as JSON text) — what a trainer grades a finished transcript from.
   */
  messages: ChatMsg[];
  /** Calls in flight now. */
  inFlight: number;
  /** When the rollout is dropped unless rewarded (ms since the epoch). */
  deadlineAt: number;
}

/** A recorded call before the rollout's indices are assigned. */
interface PendingCall {
  seq: number;
  key: string;
  call: Omit<GatewayCall, "index">;
}

/** One rollout's mutable state. */
class Rollout {
  status: RolloutStatus = "open";
  calls: PendingCall[] = [];
  nextSeq = 0;
  inFlight = 0;
  record: RolloutRecord | undefined;
  /** The latest call's request messages plus the assistant turn it returned, and that call's arrival number. */
  messages: ChatMsg[] = [];
  messagesSeq = -1;
  timer: ReturnType<typeof setTimeout> | undefined;
  readonly done: Promise<RolloutRecord>;
  resolveDone!: (r: RolloutRecord) => void;

  constructor(
    readonly id: string,
    readonly meta: Record<string, unknown>,
    readonly deadlineMs: number,
    readonly deadlineAt: number,
  ) {
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
  }

  /** Calls with their indices, in arrival order. */
  indexedCalls(): GatewayCall[] {
    return [...this.calls].sort((a, b) => a.seq - b.seq).map((c, index) => ({ index, ...c.call }));
  }
}

/**
 * A ticket for one call in flight (from `beginCall`): hand it back to `completeCall` or `abandonCall`.
 * `seq` is the call's arrival number in its rollout (0, 1, …; also its default sampling seed's input).
 */
export interface CallTicket {
  readonly rolloutId: string;
  readonly seq: number;
  /** The latest time the call may finish and still be recorded (the rollout's deadline; ms since the epoch). */
  readonly deadlineAt: number;
}

/** Checks a deadline. @throws GatewayError 400 naming `field` unless an integer in [1, MAX_DEADLINE_MS] */
function checkDeadline(ms: number, field: string): number {
  if (!Number.isInteger(ms) || ms < 1 || ms > MAX_DEADLINE_MS) {
    throw new GatewayError(400, `${field}: expected an integer number of ms in [1, ${MAX_DEADLINE_MS}], got ${ms}`, field, "invalid_value");
  }
  return ms;
}

/**
 * Largest reward magnitude a rollout may report. Finite is not enough: a batch of rewards near ±1e308 overflows the
 * group mean and standard deviation (advantages, the step's `reward` metric) to ±Infinity; 1e6 leaves every sum of a
 * step far inside float range and is beyond any reward scale in use.
 */
export const MAX_REWARD_MAGNITUDE = 1e6;

/**
 * Checks a reward. @throws GatewayError 400 naming the field (`value`, `parts.<name>`) unless every number is finite,
 * and `value` at most `MAX_REWARD_MAGNITUDE` in magnitude
 */
export function checkReward(value: unknown, parts?: unknown): GatewayReward {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new GatewayError(400, `value: expected a finite number, got ${JSON.stringify(value) ?? String(value)}`, "value", "invalid_value");
  }
  if (Math.abs(value) > MAX_REWARD_MAGNITUDE) {
    throw new GatewayError(400, `value: expected a number in [-${MAX_REWARD_MAGNITUDE}, ${MAX_REWARD_MAGNITUDE}], got ${value}`, "value", "invalid_value");
  }
  if (parts === undefined) return { value };
  if (parts === null || typeof parts !== "object" || Array.isArray(parts)) {
    throw new GatewayError(400, "parts: expected an object of named finite numbers", "parts", "invalid_value");
  }
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(parts)) {
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw new GatewayError(400, `parts.${k}: expected a finite number, got ${JSON.stringify(v) ?? String(v)}`, `parts.${k}`, "invalid_value");
    }
    out[k] = v;
  }
  return { value, parts: out };
}

/** The rollouts of a gateway (see the module doc). */
export class RolloutRegistry {
  private readonly rollouts = new Map<string, Rollout>();
  /** Resolved ids, oldest first (forgotten past `keepResolved`). */
  private readonly resolved: string[] = [];
  private readonly deadlineMs: number;
  private readonly keepResolved: number;
  private readonly onRecord: ((record: RolloutRecord) => void) | undefined;

  /** @throws GatewayError 400 on a deadline outside [1, MAX_DEADLINE_MS] ms; Error on a negative `keepResolved` */
  constructor(options: RegistryOptions = {}) {
    this.deadlineMs = checkDeadline(options.deadlineMs ?? DEFAULT_DEADLINE_MS, "deadlineMs");
    this.keepResolved = options.keepResolved ?? 1024;
    if (!Number.isInteger(this.keepResolved) || this.keepResolved < 0) throw new Error(`RolloutRegistry: keepResolved must be an integer ≥ 0, got ${this.keepResolved}`);
    this.onRecord = options.onRecord;
  }

  /**
   * Opens a rollout; its deadline starts now.
   * @throws GatewayError 400 on an id outside `ROLLOUT_ID_RE` (`checkRolloutId`) or a bad deadline; 409 when the id is
   *   already open or known
   */
  open(id: string, options: OpenOptions = {}): void {
    checkRolloutId(id);
    if (this.rollouts.has(id)) throw new GatewayError(409, `rollout ${JSON.stringify(id)} already exists (${this.rollouts.get(id)!.status}); open each rollout once`, "id", "rollout_exists");
    const deadlineMs = checkDeadline(options.deadlineMs ?? this.deadlineMs, "deadlineMs");
    const r = new Rollout(id, { ...(options.meta ?? {}) }, deadlineMs, Date.now() + deadlineMs);
    // Unref'd: a deadline never keeps a process alive by itself (the server's socket does, while it listens).
    r.timer = setTimeout(() => {
      const reason = r.status === "finished" ? `finished but not rewarded within its deadline of ${deadlineMs} ms` : (options.openAtDeadline ?? `no reward within its deadline of ${deadlineMs} ms`);
      this.resolve(r, "dropped", undefined, reason);
    }, deadlineMs);
    r.timer.unref?.();
    this.rollouts.set(id, r);
  }

  /** Whether `id` is known (open, finished, or resolved and not yet forgotten). */
  has(id: string): boolean {
    return this.rollouts.has(id);
  }

  /** The status of `id`, or undefined when unknown. */
  status(id: string): RolloutStatus | undefined {
    return this.rollouts.get(id)?.status;
  }

  /** Ids of rollouts not yet resolved (open or finished). */
  pending(): string[] {
    return [...this.rollouts.values()].filter((r) => r.status === "open" || r.status === "finished").map((r) => r.id);
  }

  /**
   * Marks the agent done: later calls get 409; a reward is still accepted until the deadline.
   * @throws GatewayError 404 for an unknown id; 409 when already rewarded or dropped
   */
  finish(id: string): void {
    const r = this.get(id);
    if (r.status === "rewarded" || r.status === "dropped") throw this.resolvedError(r);
    r.status = "finished";
  }

  /**
   * Rewards a rollout (the agent's report or the trainer's grade) and resolves it.
   * @param value the scalar reward (finite)
   * @param parts optional named parts (finite numbers)
   * @returns the record
   * @throws GatewayError 400 naming the field on a non-finite number; 404 for an unknown id; 409 when already
   *   rewarded or dropped
   */
  reward(id: string, value: number, parts?: Record<string, number>): RolloutRecord {
    const reward = checkReward(value, parts);
    const r = this.get(id);
    if (r.status === "rewarded" || r.status === "dropped") throw this.resolvedError(r);
    return this.resolve(r, "rewarded", reward, undefined);
  }

  /**
   * Drops a rollout with a reason (the agent crashed, the trainer gave up) and resolves it.
   * @returns the record
   * @throws GatewayError 404 for an unknown id; 409 when already rewarded or dropped
   */
  drop(id: string, reason: string): RolloutRecord {
    const r = this.get(id);
    if (r.status === "rewarded" || r.status === "dropped") throw this.resolvedError(r);
    return this.resolve(r, "dropped", undefined, reason);
  }

  /**
   * The record of `id` once it is rewarded or dropped (at the latest at its deadline).
   * @throws GatewayError 404 (rejects) for an unknown id
   */
  wait(id: string): Promise<RolloutRecord> {
    const r = this.rollouts.get(id);
    if (r === undefined) return Promise.reject(new GatewayError(404, `rollout ${JSON.stringify(id)} does not exist`, "id", "rollout_not_found"));
    return r.done;
  }

  /**
   * The rollout so far: calls (indexed), merged segments, mismatches.
   * @throws GatewayError 404 for an unknown id
   */
  snapshot(id: string): RolloutSnapshot {
    const r = this.get(id);
    if (r.record !== undefined) {
      const { calls, segments, mismatches } = r.record;
      return { id, meta: r.meta, status: r.status, calls, segments, mismatches, messages: r.messages, inFlight: r.inFlight, deadlineAt: r.deadlineAt };
    }
    const calls = r.indexedCalls();
    return { id, meta: r.meta, status: r.status, calls, ...mergeCalls(calls), messages: r.messages, inFlight: r.inFlight, deadlineAt: r.deadlineAt };
  }

  /** Drops every unresolved rollout with `reason` (their `wait`s resolve) and stops every deadline timer. */
  close(reason = "the gateway closed before a reward"): void {
    for (const r of [...this.rollouts.values()]) if (r.status === "open" || r.status === "finished") this.resolve(r, "dropped", undefined, reason);
  }

  /**
   * Starts a call of rollout `id` (for the gateway). With `openOnDemand`, an unknown id is opened first (no meta,
   * the default deadline).
   * @throws GatewayError 404 for an unknown id (without `openOnDemand`); 409 when the rollout is finished or resolved
   */
  beginCall(id: string, openOnDemand = false): CallTicket {
    if (!this.rollouts.has(id) && openOnDemand) this.open(id);
    const r = this.get(id);
    if (r.status !== "open") throw this.resolvedError(r);
    r.inFlight++;
    return { rolloutId: id, seq: r.nextSeq++, deadlineAt: r.deadlineAt };
  }

  /**
   * Records a finished call (for the gateway).
   * @param call the call as sampled (its index is assigned from the ticket's arrival order); the assistant message it
   *   returned (`content`, `toolCalls` with `arguments` as `JSON.stringify` text) is remembered by `assistantKey`, so
   *   a later request that sends it back is rendered from these exact tokens
   * @param messages the request's messages (kept for `snapshot().messages`: the transcript a trainer grades)
   * @throws GatewayError 409 when the rollout was finished or resolved while the call ran (the call is not recorded)
   */
  completeCall(ticket: CallTicket, call: Omit<GatewayCall, "index">, messages: readonly ChatMsg[] = []): void {
    const r = this.rollouts.get(ticket.rolloutId);
    if (r === undefined) throw new GatewayError(409, `rollout ${JSON.stringify(ticket.rolloutId)} was forgotten while this call ran; it is not recorded`, null, "rollout_finished");
    r.inFlight = Math.max(0, r.inFlight - 1);
    if (r.status !== "open") {
      throw new GatewayError(409, `rollout ${JSON.stringify(r.id)} was ${r.status} while this call ran (${r.record?.dropReason ?? "no more calls"}); it is not recorded`, null, "rollout_finished");
    }
    const key = assistantKey(call.content, call.toolCalls.map((c) => ({ name: c.name, arguments: JSON.stringify(c.arguments) })));
    r.calls.push({ seq: ticket.seq, key, call });
    if (ticket.seq >= r.messagesSeq) {
      r.messagesSeq = ticket.seq;
      r.messages = [...messages, { role: "assistant", content: call.content, toolCalls: call.toolCalls.map((c) => ({ name: c.name, arguments: JSON.stringify(c.arguments) })) }];
    }
  }

  /** Ends a call that failed or timed out (for the gateway): nothing is recorded. */
  abandonCall(ticket: CallTicket): void {
    const r = this.rollouts.get(ticket.rolloutId);
    if (r !== undefined) r.inFlight = Math.max(0, r.inFlight - 1);
  }

  /**
   * A lookup of the sampled tokens of assistant turns this rollout returned, by `assistantKey` (for the renderer).
   * Successive lookups of one render walk the calls in order: each takes the first matching call after the one the
   * previous lookup took, else the latest match — so a conversation that repeats a turn reuses each copy in turn.
   */
  recaller(id: string): (key: string) => number[] | undefined {
    const r = this.rollouts.get(id);
    if (r === undefined) return () => undefined;
    const calls = [...r.calls].sort((a, b) => a.seq - b.seq);
    let after = -1;
    return (key) => {
      const matches = calls.filter((c) => c.key === key);
      if (matches.length === 0) return undefined;
      const next = matches.find((c) => c.seq > after) ?? matches[matches.length - 1];
      after = next.seq;
      return next.call.completionTokens;
    };
  }

  private get(id: string): Rollout {
    const r = this.rollouts.get(id);
    if (r === undefined) throw new GatewayError(404, `rollout ${JSON.stringify(id)} does not exist (open it first, or serve with open-on-demand)`, null, "rollout_not_found");
    return r;
  }

  private resolvedError(r: Rollout): GatewayError {
    const what = r.status === "dropped" ? `was dropped (${r.record?.dropReason ?? "no reason"})` : r.status === "rewarded" ? "is already rewarded" : "is finished";
    return new GatewayError(409, `rollout ${JSON.stringify(r.id)} ${what}; it takes no more calls or rewards`, null, "rollout_finished");
  }

  private resolve(r: Rollout, status: "rewarded" | "dropped", reward: GatewayReward | undefined, dropReason: string | undefined): RolloutRecord {
    if (r.timer !== undefined) clearTimeout(r.timer);
    r.timer = undefined;
    r.status = status;
    const calls = r.indexedCalls();
    const record: RolloutRecord = {
      id: r.id,
      meta: r.meta,
      calls,
      ...mergeCalls(calls),
      status,
      ...(reward !== undefined ? { reward } : {}),
      ...(dropReason !== undefined ? { dropReason } : {}),
    };
    r.record = record;
    r.resolveDone(record);
    this.resolved.push(r.id);
    while (this.resolved.length > this.keepResolved) this.rollouts.delete(this.resolved.shift()!);
    if (this.onRecord) {
      try {
        this.onRecord(record);
      } catch (e) {
        console.error(`gateway: onRecord failed for rollout ${r.id}: ${(e as Error).message}`);
      }
    }
    return record;
  }
}
