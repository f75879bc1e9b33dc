/**
 * A lab's fingerprint: a hash of everything a lab measured that a rerun must reproduce, so "same seed, same machine →
 * identical results" is checked by comparing one string (printed by `arl lab`, stored in `lab.json`) instead of
 * diffing two `lab.json` files by hand.
 *
 * What is hashed: the seed, the quick flag, the RL budget, the held-out size, the warm start's evaluation, and per
 * design its weights, overrides, every RL step's metrics, the detectors (at the end and during training), the
 * held-out evaluation after RL and the example trajectories; the claims (search lab) or loophole verdicts (env lab).
 * What is left out, because a rerun may differ there without any result differing: the lab's name and folder,
 * `warmStartFrom` (a path), and the wall times (`wallMs`, `rlWallMs`).
 */
import { createHash } from "node:crypto";
import type { EnvLabResult, LabResult } from "./types.ts";

/** Length of the fingerprint (hex characters of SHA-256): 64 bits, ample to tell two labs apart. */
export const FINGERPRINT_HEX_CHARS = 16;

/**
 * JSON with object keys sorted at every level, so the hash does not depend on the order fields were written in.
 * Numbers keep JSON's shortest round-trip form, so two runs that agree bit for bit give the same text.
 */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    const o = v as Record<string, unknown>;
    return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  });
}

/**
 * The fingerprint of a lab (search lab `LabResult` or env lab `EnvLabResult`): the first 16 hex characters of the
 * SHA-256 of the canonical JSON of its deterministic content (see the module comment; a stored `fingerprint` is
 * ignored). Two labs with the same seed, config and code on the same machine have the same fingerprint; any metric
 * of any step that differs changes it.
 * @returns 16 lowercase hex characters
 */
export function labFingerprint(lab: LabResult | EnvLabResult): string {
  const designs = lab.designs.map((d) => {
    const { wallMs: _w, rlWallMs: _r, ...rest } = d;
    return rest;
  });
  const { name: _n, wallMs: _w, warmStartFrom: _f, designs: _d, ...rest } = lab as LabResult & Partial<EnvLabResult>;
  const { fingerprint: _fp, ...content } = { ...rest, designs } as Record<string, unknown>;
  return createHash("sha256").update(canonicalJson(content)).digest("hex").slice(0, FINGERPRINT_HEX_CHARS);
}
