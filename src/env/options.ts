/**
 * What every env recipe does with `env.options` and its counterfactual worlds, in one place: parse the options
 * against the recipe's strict zod schema with errors that name `env.options.<field>` and the allowed fields, and
 * derive world `k`'s seed from the run's seed.
 */
import type { z } from "zod";

/**
 * `options` parsed by a strict zod object `schema`, over `defaults`.
 * @param messages a message per field that replaces zod's (e.g. an enum's allowed values)
 * @throws Error `env.options.<field>: <message>` (every bad field, `; `-joined); unknown fields are named with the
 *   allowed ones
 */
export function parseEnvOptions<S extends z.ZodObject, D extends object>(
  schema: S,
  options: Record<string, unknown>,
  defaults: D,
  messages: Readonly<Record<string, string>> = {},
): D & z.output<S> {
  const parsed = schema.safeParse(options);
  if (!parsed.success) {
    const allowed = Object.keys(schema.shape).join(", ");
    throw new Error(
      parsed.error.issues
        .map((i) => {
          if (i.code === "unrecognized_keys") return `env.options.${i.keys.join(", env.options.")}: unknown option; allowed: ${allowed}`;
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
