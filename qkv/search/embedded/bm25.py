"""BM25 exactly as SQLite FTS5's ``bm25()`` computes it (sqlite/ext/fts5/fts5_aux.c; Robertson &
Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009): k1 = 1.2, b = 0.75,
idf = ln((N − df + 0.5) / (df + 0.5)) floored at 1e-6, avgdl = all tokens / N. The one home of the
formula: the keyword plans score postings with it and the tests hold it equal to FTS5's own."""

from __future__ import annotations

import math

K1, B = 1.2, 0.75


def idf(n: int, df: int) -> float:
    """Inverse document frequency of a term in ``df`` of ``n`` rows (FTS5's floor: never ≤ 0)."""
    return max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)


def weight(idf_: float, tf, dl, avgdl: float):
    """A term's BM25 share on rows where it occurs ``tf`` times in ``dl`` tokens (scalars or arrays)."""
    return idf_ * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))


def max_weight(idf_: float) -> float:
    """The most a term can add to any row's score (``weight`` as tf → ∞): MaxScore's bound."""
    return idf_ * (K1 + 1)
