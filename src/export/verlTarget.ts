/**
 * The veRL releases `arl export verl` can write for (`current` = v0.9.0, `0.5` = v0.5.0), and the commit each one's
 * facts were read at (verl-project/verl; see src/export/verl.ts for what differs between them).
 */

/** A veRL release the export can target: `current` (the newest release, `VERL_RELEASES.current`) or `0.5`. */
export type VerlTarget = "0.5" | "current";

/** The targets, in the order the CLI lists them. */
export const VERL_TARGETS: readonly VerlTarget[] = ["current", "0.5"];

/** The release behind each target: its tag and the commit the facts were read at (verl-project/verl). */
export const VERL_RELEASES: Readonly<Record<VerlTarget, { tag: string; commit: string; pip: string }>> = {
  current: { tag: "v0.9.0", commit: "483b8a009ba3a97563edee3a19887e4862b8094a", pip: "0.9.0" },
  "0.5": { tag: "v0.5.0", commit: "8fdc4d3f202f41461f4de9f42a637228e342668b", pip: "0.5.0" },
};

/** The target used when none is given. */
export const DEFAULT_VERL_TARGET: VerlTarget = "current";

/** The veRL release the default export targets (`VERL_RELEASES.current.tag`). */
export const VERL_VERSION = VERL_RELEASES[DEFAULT_VERL_TARGET].tag;

/** Parses a `--verl-version` value: `current`, `latest`, `0.9`, `0.9.0`, `v0.9.0` → `current`; `0.5`, `0.5.0`, `v0.5.0` → `0.5`. @throws Error naming the accepted values */
export function parseVerlTarget(value: string): VerlTarget {
  const v = value.trim().toLowerCase().replace(/^v/, "");
  if (v === "current" || v === "latest" || v === "0.9" || v === "0.9.0") return "current";
  if (v === "0.5" || v === "0.5.0") return "0.5";
  throw new Error(`export verl: --verl-version must be current (= ${VERL_RELEASES.current.tag}) or 0.5 (= ${VERL_RELEASES["0.5"].tag}), got ${JSON.stringify(value)}`);
}
