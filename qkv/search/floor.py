"""Which search results are weak: nothing in the catalog is close to the query, and the results
are only the least far (耳机 under a price no headphones meet lists headlamps and camp chairs).

A cosine alone cannot tell: E5's cosines are bunched (on the sample catalog a query for a product
it lacks, 沙发, reaches 0.903 while one it holds, "tent", reaches 0.854: one floor misjudged 16 of
78 queries, bench/search_floor.py). What does tell is how far a result stands above the query's
background — the cosine of the catalog's ``BACKGROUND_RANK``-th nearest title, unfiltered: a
product the catalog holds stands out from it, the nearest of many unrelated titles does not. A
result is weak when its cosine is less than ``MARGIN`` above the background and no query word
matched it (a keyword match is evidence of its own).

``MARGIN`` per encoder is measured by bench/search_floor.py on the sample catalog (40 queries for
products it holds, 38 for products it lacks or that a price filter excludes, English and Chinese);
an encoder not listed has no floor and no result is marked.
"""

from __future__ import annotations

BACKGROUND_RANK = 30  # 0-based: the 31st nearest title of the whole catalog
# bench/search_floor.py, 2026-12-02, with the compiled kernels (queries in bfloat16 on AMX); without
# them (float32 queries) the same margins within 0.0004, E5 misjudging 3 instead of 2
MARGIN = {
    "intfloat/multilingual-e5-small": 0.0466,  # misjudges 2 of 78 queries (a cosine floor alone: 16)
    "sentence-transformers/all-MiniLM-L6-v2": 0.2716,  # misjudges 2 of 78 (a cosine floor alone: 4)
}


def weak_results(index, query: str, results) -> tuple[list[bool], float | None]:
    """(weak or not for each result, the cosine below which a result without a keyword match is
    weak); no result is weak (and the floor is None) when the encoder has no measured margin or
    the catalog is too small to have a background."""
    margin = MARGIN.get(getattr(index.encoder, "name", ""))
    ad = index.adapter(query=query) if margin is not None and hasattr(index, "adapter") else None
    if ad is not None:  # a query adapter rescales the cosines: the margin in its units
        margin *= ad.spread
    none = [False] * len(results)
    if margin is None or not results or all(r.keyword_score is not None for r in results):
        return none, None
    # ids and cosines only: the background's rows are never shown, so none are fetched; the
    # search's own query vector when it has one (another pass cost a served search half again)
    background = index.retrieve(query, k=BACKGROUND_RANK + 1, mode="dense", vector=getattr(results, "vector", None))
    if len(background) <= BACKGROUND_RANK or background[BACKGROUND_RANK][2].get("dense_score") is None:
        return none, None
    floor = float(background[BACKGROUND_RANK][2]["dense_score"]) + margin
    return [r.keyword_score is None and r.dense_score is not None and r.dense_score < floor for r in results], floor
