// The `search` tool both example agents offer the model: one call of a Search-R1 retrieval server. Plain `fetch`, no
// dependencies — copy it beside your own agent, or write the same few lines in yours.

/**
 * The top 3 passages for `query` from the retrieval server at `url` (`POST {url}/retrieve`, Search-R1's shape), as
 * Search-R1 writes them: `Doc 1(Title: T) text`, one per line. `"No results."` when none match; an HTTP error comes
 * back as text (`search failed: HTTP <status> <first 200 characters of the body>`) for the model to read, not thrown.
 * `signal` (optional) aborts the request.
 */
export async function retrieve(url, query, signal) {
  const res = await fetch(`${url.replace(/\/+$/, "")}/retrieve`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ queries: [query], topk: 3, return_scores: true }),
    signal,
  });
  if (!res.ok) return `search failed: HTTP ${res.status} ${(await res.text()).slice(0, 200)}`;
  const { result } = await res.json();
  const hits = result[0] ?? [];
  if (hits.length === 0) return "No results.";
  return hits
    .map(({ document }, i) => {
      const [title, ...text] = document.contents.split("\n");
      return `Doc ${i + 1}(Title: ${title.replace(/^"|"$/g, "")}) ${text.join(" ")}`;
    })
    .join("\n");
}
