/**
 * What every env recipe does with `env.options` and its counterfactual worlds, in one place: parse the options
 * against the recipe's strict zod schema with errors that name `env.options.<field>` and the allowed fields, and
 * derive world `k`'s seed from the run's seed.
 */
import type { z } from "zod";
import { didYouMean, nearestNames } from "../core/suggest.ts";

/**
 * `options` parsed by a strict zod object `schema`, over `defaults`.
 * @param messages a message per field that replaces zod's (e.g. an enum's allowed values)
 * @throws Error `env.options.<field>: <message>` (every bad field, `; `-joined); unknown fields are named with the
 *   nearest allowed ones (`env.options.failurerate: unknown option (did you mean failureRate?)`) and all the allowed ones
 */
export function parseEnvOptions<S extends z.ZodObject, D extends object>(
  schema: S,
  options: Record<string, unknown>,
  defaults: D,
  messages: Readonly<Record<string, string>> = {},
): D & z.output<S> {
  const parsed = schema.safeParse(options);
  if (!parsed.success) {
    const allowed = Object.keys(schema.shape);
    throw new Error(
      parsed.error.issues
        .map((i) => {
          if (i.code === "unrecognized_keys") {
            // `env.options.failurerate: unknown option (did you mean failureRate?); allowed: …`
            const near = i.keys.map((k) => [k, nearestNames(k, allowed)] as const).filter(([, n]) => n.length > 0);
            const hint = i.keys.length === 1 ? didYouMean(i.keys[0], allowed) : near.length > 0 ? ` (did you mean ${near.map(([k, n]) => `${n.join(" or ")} for ${k}`).join(", ")}?)` : "";
            return `env.options.${i.keys.join(", env.options.")}: unknown option${hint}; allowed: ${allowed.join(", ")}`;
          }
          const field = String(i.path[0]);
          return `env.options.${messages[field] !== undefined ? field : i.path.join(".")}: ${messages[field] ?? i.message}`;
        })
        .join("; "),
    );
  }
  return { ...defaults, ...parsed.data };
}

/**
 * Seed of counterfactual world `k` (k ≥ 1) of a run: `runSeed` mixed with `k` and the env's own `salt`, so two envs'
 * worlds of one run differ.
 */
export function counterfactualWorldSeed(runSeed: number, k: number, salt: number): number {
  return (Math.imul(runSeed >>> 0, 1000003) + 7919 * k + salt) | 0;
}
