/**
 * The viewer's page script: `src/view/client/main.ts` (lit-html views, vega charts) bundled by esbuild into one
 * browser script with every library inlined — nothing is fetched from a CDN or anywhere else at run time. The charts'
 * Vega-Lite specs are compiled here, in Node (`curveTemplates.ts`), and put in as a constant: the page has no Vega-Lite.
 *
 * Built on demand and kept in memory: from the repository (TypeScript under tsx) it is bundled when the server starts
 * (~0.6–1.2 s on 2 cores) and kept on disk in `node_modules/.cache/arl-view/` with the size and mtime of every file
 * it was made from (esbuild's metafile inputs: our client files and the libraries'; `curveTemplates.ts` and Vega-Lite's
 * package.json), so the next `arl view` reads it back
 * (~10 ms) unless one of them changed; an installed package uses `dist/view/client.bundle.js`, which `npm run build`
 * writes (`src/view/build.ts`), so esbuild — a devDependency — is not needed there. Nothing generated is committed.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { fileStamp } from "./files.ts";

const here = dirname(fileURLToPath(import.meta.url));
/** Name of the prebuilt bundle next to the compiled `bundle.js` in `dist/view/`. */
export const PREBUILT_BUNDLE = "client.bundle.js";

let cached: Promise<string> | null = null;

/**
 * Bundles the client with esbuild (IIFE, minified, ES2020, licence comments kept at the end).
 * @param entry the client's entry file (default: `client/main.ts` beside this file)
 * @param minify false keeps names readable (for profiling the page)
 * @returns the script's text
 * @throws Error when esbuild is not installed or the client does not compile
 */
export async function buildClientBundle(entry: string = DEFAULT_ENTRY, minify = true): Promise<string> {
  return (await bundleWithInputs(entry, minify)).text;
}

const DEFAULT_ENTRY = join(here, "client", existsSync(join(here, "client", "main.ts")) ? "main.ts" : "main.js");

/**
 * Files the bundle depends on that esbuild does not read: the chart templates are compiled here, in Node, with
 * Vega-Lite (`curveTemplates.ts`), and put into the script as a constant.
 */
function extraInputs(): string[] {
  const out = [join(here, existsSync(join(here, "curveTemplates.ts")) ? "curveTemplates.ts" : "curveTemplates.js")];
  try {
    out.push(createRequire(import.meta.url).resolve("vega-lite/package.json"));
  } catch {
    // not installed: the build below fails and says so
  }
  return out;
}

/** The bundle and the files it was made from (absolute paths). */
async function bundleWithInputs(entry: string, minify: boolean): Promise<{ text: string; inputs: string[]; version: string }> {
  let esbuild: typeof import("esbuild");
  try {
    esbuild = await import("esbuild");
  } catch {
    throw new Error("arl view: the page script is not built (no dist/view/client.bundle.js) and esbuild is not installed; run `npm run build` in the agentic-rl folder");
  }
  const { curveTemplates } = await import("./curveTemplates.ts");
  const r = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: "es2020",
    minify,
    legalComments: "eof",
    logLevel: "silent",
    metafile: true,
    absWorkingDir: dirname(entry),
    define: { __ARL_CURVE_TEMPLATES__: JSON.stringify(curveTemplates()) },
  });
  const out = r.outputFiles[0];
  if (out === undefined) throw new Error("arl view: esbuild produced no output");
  const inputs = [...Object.keys(r.metafile.inputs).map((p) => (isAbsolute(p) ? p : resolve(dirname(entry), p))), ...extraInputs()];
  return { text: out.text, inputs, version: esbuild.version };
}

/** What a cached bundle was built from. */
interface BundleManifest {
  entry: string;
  minify: boolean;
  esbuild: string;
  /** Every input file → its `size:mtime` when bundled. */
  inputs: Record<string, string>;
}

/** The repository's cache folder for bundles (`node_modules/.cache/arl-view`, beside the installed libraries). */
export const DEFAULT_BUNDLE_CACHE = join(here, "..", "..", "node_modules", ".cache", "arl-view");

/**
 * The page script from the disk cache when every file it was built from is unchanged (same size and mtime, same
 * esbuild), else bundled now and cached (a cache that cannot be written is skipped: the bundle is still returned).
 * @param options `entry` / `minify` as `buildClientBundle`; `cacheDir` (default `DEFAULT_BUNDLE_CACHE`)
 * @returns the script and where it came from
 * @throws what `buildClientBundle` throws (only when it has to build)
 */
export async function cachedClientBundle(options: { entry?: string; minify?: boolean; cacheDir?: string } = {}): Promise<{ text: string; from: "cache" | "build" }> {
  const entry = options.entry ?? DEFAULT_ENTRY;
  const minify = options.minify ?? true;
  const dir = options.cacheDir ?? DEFAULT_BUNDLE_CACHE;
  const name = `client${minify ? "" : ".dev"}`;
  try {
    const m = JSON.parse(readFileSync(join(dir, `${name}.json`), "utf8")) as BundleManifest;
    if (m.entry === entry && m.minify === minify && Object.keys(m.inputs).length > 0 && Object.entries(m.inputs).every(([p, st]) => fileStamp(p) === st)) {
      const { version } = (await import("esbuild").catch(() => ({ version: m.esbuild }))) as { version: string };
      if (version === m.esbuild) return { text: readFileSync(join(dir, `${name}.js`), "utf8"), from: "cache" };
    }
  } catch {
    // no cache yet, or an unreadable one: bundled below
  }
  const stamps = new Map<string, string>();
  const started = Date.now();
  const built = await bundleWithInputs(entry, minify);
  let changedMeanwhile = false;
  for (const p of built.inputs) {
    stamps.set(p, fileStamp(p));
    if (Number(stamps.get(p)!.split(":")[1]) >= started - 1000) changedMeanwhile = true; // edited while bundling: not cached
  }
  if (changedMeanwhile) return { text: built.text, from: "build" };
  try {
    mkdirSync(dir, { recursive: true });
    const tmp = join(dir, `${name}.js.${process.pid}.tmp`);
    writeFileSync(tmp, built.text);
    renameSync(tmp, join(dir, `${name}.js`));
    const manifest: BundleManifest = { entry, minify, esbuild: built.version, inputs: Object.fromEntries(stamps) };
    writeFileSync(join(dir, `${name}.json.${process.pid}.tmp`), JSON.stringify(manifest));
    renameSync(join(dir, `${name}.json.${process.pid}.tmp`), join(dir, `${name}.json`));
  } catch {
    // a read-only tree: no cache, same bundle
  }
  return { text: built.text, from: "build" };
}

/**
 * The page script: the prebuilt bundle when running compiled from `dist/` and it exists, else the disk cache's
 * (`cachedClientBundle`) or bundled now — once per process.
 * @throws what `buildClientBundle` throws
 */
export function clientBundle(): Promise<string> {
  if (cached === null) {
    const prebuilt = join(here, PREBUILT_BUNDLE);
    const fromDist = import.meta.url.endsWith(".js");
    cached = fromDist && existsSync(prebuilt) ? Promise.resolve(readFileSync(prebuilt, "utf8")) : cachedClientBundle().then((b) => b.text);
    cached.catch(() => {
      cached = null; // a failed build is retried on the next call
    });
  }
  return cached;
}
