/**
 * The critic of `rl.advantage: gae`: the backend's value head (the optional `TrainingBackend.valueHead` capability),
 * made at the first `gae` step and kept as long as the backend lives, and its state in checkpoints
 * (`value-head.json`), so a resumed run continues the head's fit.
 */
import type { CriticHooks, TrainingBackend } from "../../core/training.ts";
import type { RlContext } from "./context.ts";

/** The value head of each backend that has one (made at the first `gae` step; lives as long as the backend). */
const critics = new WeakMap<TrainingBackend, CriticHooks>();

/**
 * The critic of a step: the context's, else the backend's value head (made now from `rl.criticLearningRate`,
 * `rl.cliprangeValue`, `rl.criticUpdates` on first use), else undefined when the backend has none.
 */
export function criticOf(ctx: Pick<RlContext, "critic" | "backend" | "config">): CriticHooks | undefined {
  if (ctx.critic) return ctx.critic;
  const backend = ctx.backend;
  let c = critics.get(backend);
  if (!c && backend.valueHead) {
    const rl = ctx.config.rl;
    c = backend.valueHead({ learningRate: rl.criticLearningRate, cliprange: rl.cliprangeValue, updates: rl.criticUpdates });
    critics.set(backend, c);
  }
  return c;
}

/** File name of a critic's state in a checkpoint folder. */
export const CRITIC_STATE_FILE = "value-head.json";

/**
 * The files a checkpoint adds for the step's critic: `{ "value-head.json": state }` when `backend` has a critic that
 * was made (a `gae` run after its first step) and keeps a state, else `{}` (other runs' checkpoints are unchanged).
 */
export function criticFiles(backend: TrainingBackend): Record<string, string> {
  const text = critics.get(backend)?.stateText?.();
  return text === undefined ? {} : { [CRITIC_STATE_FILE]: text };
}

/**
 * Restores a checkpoint's critic state (`value-head.json`) into the critic of `ctx.backend` (made now if needed), so
 * a resumed `gae` run continues the value head's fit instead of refitting it from zero.
 * @throws Error when the backend has no value head or the state does not fit it (another `policy.dModel`)
 */
export function restoreCritic(ctx: Pick<RlContext, "backend" | "config">, text: string): void {
  const c = criticOf(ctx);
  if (!c?.restoreText) throw new Error(`${CRITIC_STATE_FILE}: this backend has no value head to restore it into`);
  c.restoreText(text);
}
