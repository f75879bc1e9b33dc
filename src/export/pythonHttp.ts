/**
 * The request loop both generated Python files (`search_tool.py`, `reward_fn.py`) use to call our servers: standard
 * library only, connection errors and 5xx retried `RETRIES` times with a growing pause, a 4xx raised at once as
 * `ValueError` (retrying a refused request cannot help).
 */

/** What differs between the callers of `pythonPostWithRetries`. */
export interface PythonPostOptions {
  /** The server's name in error messages (`retrieval` → "retrieval server rejected the request …"). */
  server: string;
  /** The Python constant holding the URL, named in the final error (`RETRIEVAL_URL`). */
  urlConstant: string;
  /** Python applied to the decoded JSON answer before it is returned (`["result"]`, or "" for the whole answer). */
  pick: string;
}

/**
 * The body of a Python function (4-space indented lines, ending in a newline) that sends the already built
 * `request` (a `urllib.request.Request`) and returns its JSON answer; it expects `json`, `time`, `urllib.error`,
 * `urllib.request` imported and `RETRIES` / `TIMEOUT_S` defined.
 */
export function pythonPostWithRetries(o: PythonPostOptions): string {
  return `    last_error = None
    for attempt in range(RETRIES):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read().decode("utf-8"))${o.pick}
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            if 400 <= e.code < 500:
                raise ValueError(f"${o.server} server rejected the request ({e.code}): {body}") from None
            last_error = f"HTTP {e.code}: {body}"
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            last_error = str(e)
        time.sleep(0.5 * (attempt + 1))
    raise RuntimeError(f"${o.server} server {${o.urlConstant}} failed after {RETRIES} tries: {last_error}")
`;
}
