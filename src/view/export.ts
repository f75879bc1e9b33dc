/**
 * `arl view --export FILE.html`: the viewer's page with its script and every payload inline — curves, every
 * samples file, detector firings — so one file opens anywhere, offline, with the same views (nothing updates).
 */
import { existsSync, openSync, readSync, closeSync, statSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { clientBundle } from "./bundle.ts";
import { EXPORT_GENERATOR, exportedPage } from "./page.ts";
import { ViewCatalog } from "./server.ts";

/** The first bytes of a file (where an exported page's `<meta name="generator">` is). */
function head(file: string, bytes = 4096): string {
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(bytes);
    return buf.subarray(0, readSync(fd, buf, 0, bytes, 0)).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes the self-contained page. Paths in it are relative (each source's `path` is its id), so a shared file does
 * not show the folders of the machine it was made on.
 * @param paths folders to include (`discoverSources`)
 * @param file the HTML file to write
 * @param options `force`: overwrite a file that is not an earlier export
 * @returns the number of sources and the file's size (bytes)
 * @throws Error when a path holds no run or lab, when `file` is inside a viewed run or lab folder (it would become part
 *   of the run), is a folder, is in a folder that does not exist, or exists and is not an earlier `arl view --export` page (without `force`), or the page
 *   script cannot be built
 */
export async function exportView(paths: readonly string[], file: string, options: { force?: boolean } = {}): Promise<{ sources: number; bytes: number }> {
  const catalog = new ViewCatalog(paths);
  const target = resolve(file);
  const readers = catalog.sources();
  for (const r of readers) {
    const rel = relative(r.ref.path, target);
    if (rel === "" || (!isAbsolute(rel) && rel.split(sep)[0] !== "..")) {
      throw new Error(`--export ${file}: the file is inside the viewed folder ${r.ref.path}; write it elsewhere (e.g. --export ${r.ref.label.replace(/[^\w.-]+/g, "-")}.html)`);
    }
  }
  if (!existsSync(dirname(target))) throw new Error(`--export ${file}: the folder ${dirname(file) || "."} does not exist; create it first or write elsewhere`);
  if (existsSync(target)) {
    if (statSync(target).isDirectory()) throw new Error(`--export ${file}: is a folder; give a file name (e.g. ${file.replace(/\/+$/, "")}/view.html)`);
    if (!options.force && !head(target).includes(`<meta name="generator" content="${EXPORT_GENERATOR}">`)) {
      throw new Error(`--export ${file}: the file exists and is not an earlier arl view export; remove it, choose another name, or pass --force to overwrite it`);
    }
  }
  const data = catalog.exportData();
  const html = exportedPage(await clientBundle(), data);
  writeFileSync(target, html);
  return { sources: data.index.sources.length, bytes: Buffer.byteLength(html) };
}
