/**
 * Finds the runs and labs `arl view` shows: run folders, lab folders (their warm start and designs) and folders of
 * them (README "A run on disk").
 */
import { existsSync, readdirSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { CachedFile, isDir } from "./files.ts";
import { DEFAULT_VIEW_LIMITS, ownText, parseRunJson } from "./limits.ts";
import type { SourceKind } from "./types.ts";

/** A folder to view, before reading it. */
export interface SourceRef {
  id: string;
  label: string;
  kind: SourceKind;
  lab?: string;
  path: string;
  /** Folder holding the lab's shared warm start (its `checkpoints/sft/tokenizer.json` serves the designs too). */
  labPath?: string;
  description?: string;
}

const isRunFolder = (p: string): boolean => ["metrics.jsonl", "config.yaml", "summary.json"].some((f) => existsSync(join(p, f)));
const isLabFolder = (p: string): boolean => existsSync(join(p, "lab.json")) || isDir(join(p, "designs"));

/** `labDescriptions` by `lab.json` path, with the file's stamp: the sources are found again on every poll. */
const descriptionsCache = new Map<string, { stamp: string; descriptions: Record<string, string> }>();

/**
 * Descriptions of a lab's designs from its `lab.json` (empty while the lab runs: it is written at the end; empty when
 * the file is over `maxJsonFileBytes`), each cut to `maxTextChars`; re-read only when the file changed.
 */
function labDescriptions(labPath: string): Record<string, string> {
  const file = new CachedFile(join(labPath, "lab.json"), DEFAULT_VIEW_LIMITS.maxJsonFileBytes);
  const stamp = file.stamp();
  const hit = descriptionsCache.get(file.path);
  if (hit?.stamp === stamp) return hit.descriptions;
  let descriptions: Record<string, string> = {};
  try {
    const lab = parseRunJson(file.read() ?? "{}") as { designs?: { name?: unknown; description?: unknown }[] };
    if (Array.isArray(lab.designs)) {
      const named = lab.designs.filter((d): d is { name: string; description?: unknown } => typeof d?.name === "string");
      descriptions = Object.fromEntries(named.map((d) => [d.name, ownText(typeof d.description === "string" ? d.description : "", DEFAULT_VIEW_LIMITS.maxTextChars)]));
    }
  } catch {
    descriptions = {};
  }
  descriptionsCache.set(file.path, { stamp, descriptions });
  return descriptions;
}

/**
 * Finds the runs and labs to view. Each path is a run folder (`metrics.jsonl`, `config.yaml` or `summary.json`), a
 * lab folder (`lab.json` or `designs/`: its warm start and every design), or a folder of those (e.g. `runs/`,
 * looked into one level deep).
 * @param paths folders (relative to the working directory or absolute)
 * @returns the sources, ids unique (`<run>`, `<lab>`, `<lab>/<design>`)
 * @throws Error naming a path that does not exist or holds no run or lab
 */
export function discoverSources(paths: readonly string[]): SourceRef[] {
  const out: SourceRef[] = [];
  const used = new Set<string>();
  const unique = (id: string): string => {
    let name = id;
    for (let n = 2; used.has(name); n++) name = `${id}~${n}`;
    used.add(name);
    return name;
  };
  // a folder given twice (runs/a runs/a ./runs/a, or a run and the folder holding it) is one source
  const seen = new Set<string>();
  const addLab = (labPath: string): void => {
    if (seen.has(labPath)) return;
    seen.add(labPath);
    const labName = unique(basename(labPath));
    const descriptions = labDescriptions(labPath);
    if (existsSync(join(labPath, "metrics.jsonl"))) out.push({ id: labName, label: `${labName} (warm start)`, kind: "warm-start", lab: labName, path: labPath, labPath });
    const designs = isDir(join(labPath, "designs")) ? readdirSync(join(labPath, "designs")).sort() : [];
    for (const d of designs) {
      const p = join(labPath, "designs", d);
      if (!isDir(p) || !isRunFolder(p)) continue;
      const id = unique(`${labName}/${d}`);
      out.push({ id, label: id, kind: "design", lab: labName, path: p, labPath, description: descriptions[d] });
    }
  };
  const addRun = (p: string): void => {
    if (seen.has(p)) return;
    seen.add(p);
    const id = unique(basename(p));
    out.push({ id, label: id, kind: "run", path: p });
  };
  for (const given of paths) {
    const p = resolve(given);
    if (!isDir(p)) {
      const what = existsSync(p) ? `a file, not a folder${isRunFolder(dirname(p)) ? ` (its run folder is ${dirname(given) || "."})` : ""}` : "no such folder";
      throw new Error(`arl view: ${given}: ${what} (give a run folder such as runs/default, a lab such as runs/lab, or a folder of them)`);
    }
    if (isLabFolder(p)) addLab(p);
    else if (isRunFolder(p)) addRun(p);
    else {
      const children = readdirSync(p)
        .sort()
        .map((c) => join(p, c))
        .filter(isDir);
      const before = seen.size;
      for (const c of children) {
        if (isLabFolder(c)) addLab(c);
        else if (isRunFolder(c)) addRun(c);
      }
      if (seen.size === before && !children.some((c) => seen.has(c))) throw new Error(`arl view: ${given} holds no run or lab (a run folder has metrics.jsonl or config.yaml; a lab has lab.json or designs/)`);
    }
  }
  return out;
}
