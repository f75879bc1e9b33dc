/**
 * `arl view --export FILE.html`: the viewer's page with its script and every payload inline — curves, every
 * samples file, detector firings — so one file opens anywhere, offline, with the same views (nothing updates).
 */
import { writeFileSync } from "node:fs";
import { clientBundle } from "./bundle.ts";
import { exportedPage } from "./page.ts";
import { ViewCatalog } from "./server.ts";

/**
 * Writes the self-contained page.
 * @param paths folders to include (`discoverSources`)
 * @param file the HTML file to write
 * @returns the number of sources and the file's size (bytes)
 * @throws Error when a path holds no run or lab, or the page script cannot be built
 */
export async function exportView(paths: readonly string[], file: string): Promise<{ sources: number; bytes: number }> {
  const catalog = new ViewCatalog(paths);
  const data = catalog.exportData();
  const html = exportedPage(await clientBundle(), data);
  writeFileSync(file, html);
  return { sources: data.index.sources.length, bytes: Buffer.byteLength(html) };
}
