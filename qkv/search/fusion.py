"""Combining the dense and keyword result lists.

* ``rrf``: reciprocal rank fusion, score = Σ w_m / (k + rank_m) (Cormack, Clarke & Büttcher, SIGIR
  2009), k = 60. Rank-only, so it needs no calibration, but it gives a weak keyword match the same
  credit as a strong one.
* ``score``: a convex combination of the two scores after putting them on one scale: the cosine as
  is (it is bounded and comparable across queries) and BM25 divided by the query's best BM25 (its
  scale depends on the query's terms). Every candidate gets both scores: the exact cosine for
  keyword-only candidates is a dot product with its stored vector, and a product the keyword side
  did not return has BM25 0. Before scaling, each BM25 is multiplied by m^p, m = how many of the
  query's terms the title matches: OR-BM25 lets a title matching one rare query word outrank one
  matching all of them, while shoppers' queries mean all of them (Lucene's classic "coord" factor
  did the same). The weight α and p are tuned on half the Home Depot dev queries (docs/search.md).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

RRF_K = 60
ALPHA = 0.5  # weight of the dense cosine in score fusion (tuned on dev half a; see docs/search.md)
# … per model, where it differs: multilingual-e5-small's cosines sit in a narrow band (titles
# ~0.75–0.9 against a query), so its cosine needs more weight to break BM25's ties (half a sweep
# in docs/search.md, "Which model").
ALPHA_BY_MODEL = {"intfloat/multilingual-e5-small": 0.8}


def alpha_for(model: str | None, spread: float = 1.0) -> float:
    """The score-fusion weight of the dense cosine for an index of ``model``. ``spread``: how much
    wider a query adapter made the cosines' spread (``QueryAdapter.spread``): the weight is then
    α' = α / (α + spread · (1 − α)), so that α'·Δcos' : (1 − α')·ΔBM25 stays α·Δcos : (1 − α)·ΔBM25 —
    the cosine keeps the pull in fusion it was tuned with."""
    a = ALPHA_BY_MODEL.get(model or "", ALPHA)
    return a if spread == 1.0 else a / (a + spread * (1 - a))
COVERAGE_POWER = 2.0  # BM25 × (query terms matched)^p before fusion (tuned on dev half a)


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K, weights: Sequence[float] | None = None) -> dict[str, float]:
    weights = weights or [1.0] * len(rankings)
    out: dict[str, float] = {}
    for w, ranking in zip(weights, rankings):
        for r, pid in enumerate(ranking, 1):
            out[pid] = out.get(pid, 0.0) + w / (k + r)
    return out


def coverage_weighted(keyword: Mapping[str, float], matched: Mapping[str, int],
                      power: float = COVERAGE_POWER) -> dict[str, float]:
    """BM25 × (number of query terms the product matched)^power."""
    return {i: s * max(1, matched.get(i, 1)) ** power for i, s in keyword.items()}


def score_fusion(dense: Mapping[str, float], keyword: Mapping[str, float], alpha: float = ALPHA) -> dict[str, float]:
    """α·cosine + (1−α)·BM25/max BM25 over the union of candidates (see the module docstring)."""
    top = max(keyword.values(), default=0.0)
    kw_scale = 1.0 / top if top > 0 else 0.0
    ids = set(dense) | set(keyword)
    return {i: alpha * dense.get(i, 0.0) + (1 - alpha) * keyword.get(i, 0.0) * kw_scale for i in ids}


def score_fusion_arrays(cos: np.ndarray, keyword: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """``score_fusion`` over aligned float64 arrays (keyword 0 where the keyword side missed),
    with the same operations in the same order, so the fused scores are bit-for-bit equal."""
    top = float(keyword.max()) if len(keyword) else 0.0
    kw_scale = 1.0 / top if top > 0 else 0.0
    return alpha * cos + (1 - alpha) * keyword * kw_scale


def ranked(scores: Mapping[str, float], k: int) -> list[tuple[str, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
