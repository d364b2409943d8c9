"""BM25 as SQLite FTS5's ``bm25()`` computes it (sqlite/ext/fts5/fts5_aux.c; Robertson &
Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009): k1 = 1.2, b = 0.75,
idf = ln((N − df + 0.5) / (df + 0.5)) floored at 1e-6, avgdl = all tokens / N — and, for a keyword
side written with learned term weights (``qkv.search.termweights``), the same formula over
real-valued term frequencies with the index's own k1 and b (``Scoring``). The one home of the
formula: the keyword plans score postings with it and the tests hold it equal to FTS5's own."""

from __future__ import annotations

import math
from dataclasses import dataclass

K1, B = 1.2, 0.75


@dataclass(frozen=True)
class Scoring:
    """How a generation's postings are scored. ``unit``: occurrences per unit of term frequency —
    a term-weighted keyword document repeats a word round(weight · unit) times, so tf = repeats /
    unit is the learned weight itself, to 1/unit (DeepCT-Index's tf = round(ŷ · scale), Dai & Callan
    2019, §3.2, read back as the real value). Row lengths are in the same units, so dl / avgdl is
    unchanged. The default is FTS5's: raw counts, k1 = 1.2, b = 0.75."""

    k1: float = K1
    b: float = B
    unit: float = 1.0

    @property
    def is_fts5(self) -> bool:
        """Whether FTS5's own bm25() ranks exactly the same (its fallback plan agrees to the digit)."""
        return (self.k1, self.b, self.unit) == (K1, B, 1.0)


FTS5 = Scoring()


def idf(n: int, df: int) -> float:
    """Inverse document frequency of a term in ``df`` of ``n`` rows (FTS5's floor: never ≤ 0)."""
    return max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)


def weight(idf_: float, tf, dl, avgdl: float, scoring: Scoring = FTS5):
    """A term's BM25 share on rows where it occurs ``tf`` times in ``dl`` tokens (scalars or
    arrays; both in occurrences, read as ``tf / scoring.unit``)."""
    k1 = scoring.k1
    if scoring.unit != 1.0:
        tf = tf / scoring.unit
    return idf_ * tf * (k1 + 1) / (tf + k1 * (1 - scoring.b + scoring.b * dl / avgdl))


def max_weight(idf_: float, scoring: Scoring = FTS5) -> float:
    """The most a term can add to any row's score (``weight`` as tf → ∞): MaxScore's bound."""
    return idf_ * (scoring.k1 + 1)
