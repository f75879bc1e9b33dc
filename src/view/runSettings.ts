/** The fields of a run's `config.yaml` that `arl view` uses: group size, advantage, samples per step, detectors. */
import { DEFAULT_DETECTOR_THRESHOLDS, type DetectorThresholds } from "../reward/detectors.ts";
import { parseBoundedYaml } from "../train/configGuards.ts";
import { num } from "./fields.ts";

/** The fields of `config.yaml` the viewer uses. */
export interface RunSettings {
  groupSize?: number;
  advantage?: string;
  samplesPerStep?: number;
  detectors?: DetectorThresholds & { enabled: boolean };
}

/**
 * The run's detector thresholds: `config.yaml`'s `detectors` section (the resolved config holds every field) over
 * `DEFAULT_DETECTOR_THRESHOLDS`, rule by rule; undefined when a field has the wrong type (nothing is replayed then).
 */
function detectorSettings(section: Record<string, unknown> | undefined): (DetectorThresholds & { enabled: boolean }) | undefined {
  const s = section ?? {};
  const out: Record<string, unknown> = { enabled: s.enabled !== false };
  for (const [k, def] of Object.entries(DEFAULT_DETECTOR_THRESHOLDS) as [string, unknown][]) {
    const v = s[k];
    if (typeof def === "number") {
      if (v !== undefined && num(v) === undefined) return undefined;
      out[k] = num(v) ?? def;
    } else {
      if (v !== undefined && (v === null || typeof v !== "object")) return undefined;
      const rule: Record<string, number> = { ...(def as Record<string, number>) };
      for (const [rk, rv] of Object.entries((v ?? {}) as Record<string, unknown>)) {
        if (num(rv) === undefined) return undefined;
        rule[rk] = num(rv)!;
      }
      out[k] = rule;
    }
  }
  if (!((out.baselineSteps as number) >= 1 && (out.window as number) >= 1)) return undefined;
  return out as unknown as DetectorThresholds & { enabled: boolean };
}

/**
 * The viewer's settings from `config.yaml`'s text: empty when the file is missing, over its limit (null) or not
 * YAML; a field of the wrong type is left out.
 */
export function runSettingsOf(text: string | null): RunSettings {
  if (text === null) return {};
  let cfg: Record<string, Record<string, unknown> | undefined>;
  try {
    cfg = (parseBoundedYaml(text) ?? {}) as Record<string, Record<string, unknown> | undefined>;
  } catch {
    return {};
  }
  const out: RunSettings = {
    groupSize: num(cfg.rl?.groupSize),
    advantage: typeof cfg.rl?.advantage === "string" ? cfg.rl.advantage : undefined,
    samplesPerStep: num(cfg.run?.samplesPerStep),
  };
  out.detectors = detectorSettings(cfg.detectors);
  return out;
}
