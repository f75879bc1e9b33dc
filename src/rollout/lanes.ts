/**
 * Sampling lanes: deterministic sampling batches that overlap model time with tool time.
 *
 * Without lanes, the sampler forms a batch of whatever `sample()` calls arrived before its next event-loop turn
 * (`EmbeddedSampler`), so with a tool whose latency varies (a real retriever, an HTTP service) which episodes share
 * a batch depends on timing — and batch composition changes the float noise of the logits (padding, row count).
 * And when every episode samples together, then waits for its tool together, model time and tool time add up.
 *
 * A `LaneGate` fixes both. The episodes of a batch are split into `K` lanes by index (`member % K`, fixed before
 * anything runs). A lane's *round* is one turn of each of its live episodes: the gate holds each episode's turn
 * until every live member of its lane has asked for one (or ended), then hands them to the generator in member
 * order, all in one synchronous pass, so the sampler sees them as one batch. Rounds run one at a time, lanes in the
 * order they became ready; the next round starts only when every call of the previous one has settled. So each
 * sampling batch is exactly one lane's round — its composition depends only on which episodes are still running
 * at that turn, never on timing — and while lane A's round decodes, lane B's episodes wait on their tools.
 *
 * Costs: a round waits for its slowest member's tool call (the barrier); with `K` lanes the sampler's batches are
 * `K`× smaller, which costs model time where a batch's time does not scale with its rows (small models, decode
 * steps). `K = 1` keeps one batch per turn of all episodes (today's lock-step) with the composition made
 * deterministic. Every episode must be running from the start (no concurrency limit below the batch size): an
 * episode that has not started yet would hold its lane's first round forever.
 */
import { describeValue } from "../core/values.ts";
import type { GeneratedTurn, TurnGenerator } from "./agent.ts";
import type { TurnContext } from "../env/episode.ts";

interface Pending {
  member: number;
  context: number[];
  ctx: TurnContext;
  resolve: (g: GeneratedTurn) => void;
  reject: (e: unknown) => void;
}

interface Lane {
  /** Members whose episode is still running. */
  live: Set<number>;
  /** Turns asked for and not yet handed on, by member. */
  pending: Map<number, Pending>;
  /** In the ready queue or running now. */
  queued: boolean;
}

/** Statistics of a gate: rounds run and their sizes (turns per round), in the order they ran. */
export interface LaneStats {
  rounds: number;
  /** `[lane, turns]` of each round, in run order. */
  sizes: Array<[number, number]>;
}

/** Holds the turns of each lane's episodes until the lane's round is complete, and runs one round at a time. */
export class LaneGate {
  private readonly lanes: Lane[];
  private readonly ready: number[] = [];
  private running = false;
  /** Rounds so far (see `LaneStats`). */
  readonly stats: LaneStats = { rounds: 0, sizes: [] };

  /**
   * @param inner the turn generator every round's turns go to (e.g. a `PolicyAgent` over a batching sampler)
   * @param laneCount lanes (integer ≥ 1)
   * @param members episodes, indexed 0 … members − 1; member `i` belongs to lane `i % laneCount` and counts as live
   *   until `leave(i)`
   * @throws Error when laneCount is not an integer ≥ 1 or members not an integer ≥ 0
   */
  constructor(
    private readonly inner: TurnGenerator,
    readonly laneCount: number,
    members: number,
  ) {
    if (!Number.isInteger(laneCount) || laneCount < 1) throw new Error(`LaneGate: lanes must be an integer ≥ 1, got ${describeValue(laneCount)}`);
    if (!Number.isInteger(members) || members < 0) throw new Error(`LaneGate: members must be an integer ≥ 0, got ${describeValue(members)}`);
    this.lanes = Array.from({ length: laneCount }, () => ({ live: new Set<number>(), pending: new Map<number, Pending>(), queued: false }));
    for (let i = 0; i < members; i++) this.lanes[i % laneCount].live.add(i);
  }

  /** The turn generator of member `member`: its turns go through the gate. */
  generator(member: number): TurnGenerator {
    return { generate: (context, ctx) => this.submit(member, context, ctx) };
  }

  /** Member `member`'s episode ended (finished, dropped or threw): its lane stops waiting for it. Idempotent. */
  leave(member: number): void {
    const lane = this.lanes[member % this.laneCount];
    if (!lane.live.delete(member)) return;
    this.check(member % this.laneCount);
  }

  private submit(member: number, context: number[], ctx: TurnContext): Promise<GeneratedTurn> {
    const k = member % this.laneCount;
    const lane = this.lanes[k];
    if (!lane.live.has(member)) return Promise.reject(new Error(`LaneGate: member ${member} asked for a turn after leaving`));
    if (lane.pending.has(member)) return Promise.reject(new Error(`LaneGate: member ${member} asked for a second turn before the first returned`));
    return new Promise((resolve, reject) => {
      lane.pending.set(member, { member, context, ctx, resolve, reject });
      this.check(k);
    });
  }

  /** Queues lane k when every live member is waiting for its turn. */
  private check(k: number): void {
    const lane = this.lanes[k];
    if (lane.queued || lane.pending.size === 0 || lane.pending.size < lane.live.size) return;
    lane.queued = true;
    this.ready.push(k);
    this.pump();
  }

  /** Runs the next ready round when none is running. */
  private pump(): void {
    if (this.running) return;
    const k = this.ready.shift();
    if (k === undefined) return;
    this.running = true;
    const lane = this.lanes[k];
    const turns = [...lane.pending.values()].sort((a, b) => a.member - b.member);
    lane.pending.clear();
    this.stats.rounds++;
    this.stats.sizes.push([k, turns.length]);
    // One synchronous pass: a batching sampler receives the whole round before its next event-loop turn.
    const calls = turns.map((p) => {
      let out: Promise<GeneratedTurn>;
      try {
        out = this.inner.generate(p.context, p.ctx);
      } catch (e) {
        out = Promise.reject(e);
      }
      out.then(p.resolve, p.reject);
      return out;
    });
    void Promise.allSettled(calls).then(() => {
      lane.queued = false;
      this.running = false;
      this.check(k); // members may already have asked for their next turn (an instant env step)
      this.pump();
    });
  }
}
