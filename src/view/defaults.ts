/** `arl view`'s defaults, apart from `server.ts` so the CLI can show them without loading the server. */

/** Default port of `arl view`. */
export const DEFAULT_VIEW_PORT = 8600;
/** Default interval of the page's polls for new lines (ms). */
export const DEFAULT_POLL_MS = 2000;
