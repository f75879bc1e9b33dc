/**
 * The viewer's HTML: one page whose script (`bundle.ts`) draws every view. Served by `arl view` (the script from
 * `/app.js`, data from `/api/*`) or written whole by `arl view --export` (script and data inline: no network).
 */
import type { ViewBundleData } from "./types.ts";

/** The page's stylesheet (inline in both forms). */
export const VIEW_CSS = `
*{box-sizing:border-box}
body{margin:0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f6f7f9}
header{display:flex;align-items:center;gap:16px;padding:8px 16px;background:#1d2330;color:#fff}
header h1{font-size:15px;margin:0;font-weight:600}
header nav a{color:#c9d1e0;text-decoration:none;padding:4px 10px;border-radius:4px}
header nav a.active{background:#3b4a66;color:#fff}
header .status{margin-left:auto;font-size:12px;color:#c9d1e0}
main{display:flex;min-height:calc(100vh - 40px)}
aside{width:280px;flex:none;padding:12px;border-right:1px solid #dde1e8;background:#fff;overflow:auto;max-height:calc(100vh - 40px)}
section.content{flex:1;padding:12px 16px;overflow:auto;max-height:calc(100vh - 40px)}
h2{font-size:14px;margin:12px 0 6px}
h3{font-size:13px;margin:10px 0 4px}
label{display:block;margin:3px 0}
select,input[type=text]{width:100%;padding:3px 4px;font:inherit}
input[type=range]{width:100%}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:12px}
.chart{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:6px}
.chart h3{margin:2px 4px 4px;font-family:ui-monospace,monospace;font-weight:500}
.metric-list{max-height:320px;overflow:auto;border:1px solid #eee;padding:4px}
.metric-list label{font-family:ui-monospace,monospace;font-size:12px;white-space:nowrap}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border-bottom:1px solid #e6e9ef;padding:3px 6px;text-align:left;vertical-align:top}
th{font-weight:600;background:#f0f2f6}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.episode{cursor:pointer}
tr.episode:hover{background:#eef3ff}
tr.episode.selected{background:#dde8ff}
tr.group-start td{border-top:2px solid #b9c2d3}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;font-weight:600}
.badge.success{background:#d8f3dc;color:#1b5e20}
.badge.fail{background:#fde2e1;color:#8a1c16}
.badge.no-answer{background:#eee;color:#555}
.badge.firing{background:#ffe9c2;color:#8a4b00}
.episode-detail{margin-top:12px;background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:10px}
.tabs button{font:inherit;padding:3px 10px;margin-right:4px;border:1px solid #c4cbd8;background:#f5f6f8;border-radius:4px;cursor:pointer}
.tabs button.active{background:#3b4a66;color:#fff;border-color:#3b4a66}
.turn{border-left:3px solid #6b8cce;margin:8px 0;padding:4px 8px;background:#fafbfd}
.turn pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:12px/1.45 ui-monospace,monospace}
.turn .obs{color:#555;background:#f0f0f0;border-radius:3px;padding:3px}
.turn .who{font-size:11px;color:#667;text-transform:uppercase;letter-spacing:.04em}
.calls span{display:inline-block;margin-right:6px;font-family:ui-monospace,monospace;font-size:12px}
.calls .ok{color:#1b5e20}.calls .err{color:#8a1c16}
.tokens{font:12px/1.9 ui-monospace,monospace;word-break:break-word}
.tok{padding:1px 2px;margin:0 1px;border-radius:2px;white-space:pre-wrap}
.tok.masked{background:repeating-linear-gradient(45deg,#eceff3,#eceff3 3px,#f7f8fa 3px,#f7f8fa 6px);color:#7a8290}
.tok.trained{outline:1px solid #6b8cce}
.tok.masked.tool{background:repeating-linear-gradient(45deg,#fff1d6,#fff1d6 3px,#fffaf0 3px,#fffaf0 6px);color:#7a5a20}
.turn .obs[data-tool-result]{background:#fff4e0}
details.turn summary{cursor:pointer}
.tokens h4,.episode-detail h4{font-size:12px;margin:8px 0 2px}
.legend span{margin-right:10px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
.curves-legend{margin:0 0 8px}
.traj{display:grid;grid-template-columns:minmax(420px,5fr) 6fr;gap:12px;align-items:start}
.traj .episode-detail{margin-top:0}
.traj>div{min-width:0;overflow-x:auto}
.legend select{width:auto}
td.q{max-width:160px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.task-list{max-height:260px;overflow:auto;margin-bottom:10px;border:1px solid #e6e9ef}
.compare{display:grid;grid-template-columns:1fr 1fr;gap:12px}
.muted{color:#778}
.warn{color:#8a5a00;background:#fff6e0;border:1px solid #f0d9a0;padding:4px 8px;border-radius:4px}
.empty{padding:24px;color:#778}
.scrubber{display:flex;gap:8px;align-items:center}
.scrubber input{flex:1}
.two{display:flex;gap:6px}.two>*{flex:1}
`;

/** Escapes JSON for a `<script>` element: no `</script>`, `<!--` or U+2028/2029 can end or break it. */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

/**
 * The served page: the script from `/app.js`. Neither holds data, so both are served without the bearer token; the
 * page reads the token from its own URL (`/?token=…`) and sends it with every `/api/*` call.
 */
export function servedPage(): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>arl view</title><style>${VIEW_CSS}</style></head><body><div id="app"><p class="empty">loading…</p></div><script src="app.js"></script></body></html>\n`;
}

/** The `<meta name="generator">` of an exported page: `arl view --export` overwrites only files that carry it. */
export const EXPORT_GENERATOR = "arl view --export";

/**
 * The exported page: script and every payload inline (opens from a file, no network).
 * @param script the bundled page script (`clientBundle()`)
 * @param data the index and all payloads (`exportData`)
 */
export function exportedPage(script: string, data: ViewBundleData): string {
  const safeScript = script.replace(/<\/script/gi, "<\\/script");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="generator" content="${EXPORT_GENERATOR}"><title>arl view (export)</title><style>${VIEW_CSS}</style><script>window.__ARL_VIEW_DATA__=${scriptJson(data)}</script></head><body><div id="app"><p class="empty">loading…</p></div><script>${safeScript}</script></body></html>\n`;
}
