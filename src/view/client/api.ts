/**
 * The page's data: from `arl view`'s `/api/*` (with the bearer token from the page's own `?token=`), or — in an
 * exported file — from the payloads embedded as `window.__ARL_VIEW_DATA__`. Payloads are cached per source
 * version, so a poll that finds a source unchanged costs one small `/api/index` request.
 */
import type { MetricsPayload, SamplesPayload, SourceInfo, ViewBundleData, ViewIndex } from "../types.ts";

declare global {
  interface Window {
    __ARL_VIEW_DATA__?: ViewBundleData;
  }
}

/** Where the page's data comes from. */
/**
 * The bearer token of `/?token=KEY`: read once, kept in this tab's sessionStorage (a reload still has it) and taken
 * out of the address bar, so a URL copied to share a view does not carry the key.
 */
function takeToken(): string | null {
  const params = new URLSearchParams(location.search);
  const given = params.get("token");
  let stored: string | null = null;
  try {
    if (given !== null) sessionStorage.setItem("arl-view-token", given);
    stored = sessionStorage.getItem("arl-view-token");
  } catch {
    // no storage (an opaque origin): the URL's token for this page load only
  }
  if (given !== null) {
    params.delete("token");
    const search = params.toString();
    history.replaceState(null, "", `${location.pathname}${search ? `?${search}` : ""}${location.hash}`);
  }
  return given ?? stored;
}

export class ViewApi {
  private readonly embedded: ViewBundleData | undefined = window.__ARL_VIEW_DATA__;
  private readonly token: string | null = takeToken();
  private readonly metricsCache = new Map<string, { version: string; value: Promise<MetricsPayload> }>();
  private readonly samplesCache = new Map<string, { version: string; value: Promise<SamplesPayload> }>();
  private versions = new Map<string, string>();
  /** Metrics asked for before the index came (the sources in the page's URL), by source id. */
  private readonly early = new Map<string, Promise<MetricsPayload | null>>();

  /** True in an exported file. */
  get isStatic(): boolean {
    return this.embedded !== undefined;
  }

  private async get<T>(path: string): Promise<T> {
    const headers: Record<string, string> = this.token !== null ? { authorization: `Bearer ${this.token}` } : {};
    const r = await fetch(path, { headers, cache: "no-store" });
    if (!r.ok) {
      let reason = `${r.status}`;
      try {
        reason = ((await r.json()) as { error?: string }).error ?? reason;
      } catch {
        // not JSON
      }
      throw new Error(`${path}: ${reason}`);
    }
    return (await r.json()) as T;
  }

  /** The sources now; remembers their versions (a changed version invalidates that source's cached payloads). */
  async index(): Promise<ViewIndex> {
    const idx = this.embedded?.index ?? (await this.get<ViewIndex>("api/index"));
    this.versions = new Map(idx.sources.map((s: SourceInfo) => [s.id, s.version]));
    return idx;
  }

  /**
   * Asks for sources' metrics now, while the index is on its way (a cold server reads both; the page needs both
   * before it draws): `metrics()` takes such a payload when its `version` is the index's, else asks again.
   */
  prefetchMetrics(ids: readonly string[]): void {
    if (this.embedded !== undefined) return;
    for (const id of ids) if (!this.early.has(id)) this.early.set(id, this.get<MetricsPayload>(`api/metrics?id=${encodeURIComponent(id)}`).catch(() => null));
  }

  /** A source's metrics (cached while its version holds). */
  metrics(id: string): Promise<MetricsPayload> {
    if (this.embedded !== undefined) {
      const m = this.embedded.metrics[id];
      return m !== undefined ? Promise.resolve(m) : Promise.reject(new Error(`no metrics for ${id}`));
    }
    const version = this.versions.get(id) ?? "";
    const hit = this.metricsCache.get(id);
    if (hit !== undefined && hit.version === version) return hit.value;
    const url = `api/metrics?id=${encodeURIComponent(id)}`;
    const early = this.early.get(id);
    this.early.delete(id);
    const value = early !== undefined ? early.then((p) => (p !== null && p.version === version ? p : this.get<MetricsPayload>(url))) : this.get<MetricsPayload>(url);
    this.metricsCache.set(id, { version, value });
    value.catch(() => this.metricsCache.delete(id));
    return value;
  }

  /** One samples file of a source (cached while the source's version holds). */
  samples(id: string, file: string): Promise<SamplesPayload> {
    if (this.embedded !== undefined) {
      const s = this.embedded.samples[id]?.[file];
      return s !== undefined ? Promise.resolve(s) : Promise.reject(new Error(`no samples/${file}.jsonl for ${id}`));
    }
    const key = `${id}\u0000${file}`;
    const version = this.versions.get(id) ?? "";
    const hit = this.samplesCache.get(key);
    if (hit !== undefined && hit.version === version) return hit.value;
    const value = this.get<SamplesPayload>(`api/samples?id=${encodeURIComponent(id)}&file=${encodeURIComponent(file)}`);
    this.samplesCache.set(key, { version, value });
    value.catch(() => this.samplesCache.delete(key));
    return value;
  }
}
