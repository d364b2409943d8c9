"""Why a title matched a query: the query-token × title-token grid.

For a mean-pooled model with cosine similarity the grid is an exact decomposition of the score.
With Q [n_q, H] and T [n_t, H] the last layer's token vectors (special tokens included, as
sentence-transformers pools them), q̄ = mean(Q), t̄ = mean(T):

    cos(q̄, t̄) = q̄·t̄ / (|q̄||t̄|) = Σ_i Σ_j Q_i·T_j / (n_q · n_t · |q̄| · |t̄|)

because q̄·t̄ = (1/n_q)(1/n_t) Σ_i Σ_j Q_i·T_j (the dot product is bilinear). So
G_ij = Q_i·T_j / (n_q n_t |q̄||t̄|) are the parts, and ΣG = the dense score. Summing G over the
tokens of a title word gives that word's share of the score; the query token with the largest
entry in a title token's column is the one it "answers" (the query attends to the title, as in
late-interaction models such as ColBERT, Khattab & Zaharia 2020). For other poolings (CLS, max)
there is no such identity: the grid then holds token-token cosines and ``exact`` is False.

Cost: one forward pass over the query and the shown titles (not stored for the catalog).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WordShare:
    text: str
    start: int
    end: int
    share: float  # sum of the grid over this word's tokens (all query tokens)
    best_query_word: str  # the query word contributing most to this title word
    special: bool = False


@dataclass(frozen=True)
class MatchExplanation:
    query_tokens: tuple[str, ...]
    title_tokens: tuple[str, ...]
    grid: np.ndarray  # [n_q, n_t]; exact parts of the cosine when ``exact``
    exact: bool
    cosine: float  # the cosine of the pooled vectors, recomputed here
    parts_sum: float  # grid.sum(): equals ``cosine`` when exact
    query_norm: float  # |q̄| (un-normalised mean vector)
    title_norm: float
    title_words: tuple[WordShare, ...]
    keyword_terms: tuple[tuple[str, float], ...] = ()  # matched term → BM25 share

    def to_json(self) -> dict:
        return {"query_tokens": list(self.query_tokens), "title_tokens": list(self.title_tokens),
                "grid": self.grid.round(6).tolist(), "exact": self.exact, "cosine": self.cosine,
                "parts_sum": self.parts_sum, "query_norm": self.query_norm, "title_norm": self.title_norm,
                "title_words": [w.__dict__ for w in self.title_words],
                "keyword_terms": [{"term": t, "bm25": s} for t, s in self.keyword_terms]}


def _words(tokens):
    return [w for w in tokens.words()]


def explain_titles(encoder, query: str, titles: list[str],
                   keyword_terms: list[list[tuple[str, float]]] | None = None) -> list[MatchExplanation]:
    """One explanation per title (see the module docstring)."""
    tv = encoder.token_vectors([query] + list(titles), truncate=True)
    (qt, Q), rest = tv[0], tv[1:]
    mean = encoder.config.pooling == "mean"
    qbar = Q.mean(axis=0)
    qn = float(np.linalg.norm(qbar))
    qwords = [w for w in _words(qt) if not w.special]
    out = []
    for n, (tt, T) in enumerate(rest):
        tbar = T.mean(axis=0)
        tn = float(np.linalg.norm(tbar))
        Q64, T64 = Q.astype(np.float64), T.astype(np.float64)
        if mean:
            grid = (Q64 @ T64.T) / (len(Q) * len(T) * qn * tn)
        else:
            grid = (Q64 / np.linalg.norm(Q64, axis=1, keepdims=True)) @ (
                T64 / np.linalg.norm(T64, axis=1, keepdims=True)).T
        cos = float(qbar.astype(np.float64) @ tbar.astype(np.float64) / (qn * tn))
        shares = []
        for w in _words(tt):
            cols = list(w.tokens)
            share = float(grid[:, cols].sum()) if mean else float(grid[:, cols].max())
            best = ""
            if qwords and not w.special:
                scores = [grid[np.ix_(list(qw.tokens), cols)].sum() for qw in qwords]
                best = qwords[int(np.argmax(scores))].text
            shares.append(WordShare(w.text, w.start, w.end, share, best, w.special))
        out.append(MatchExplanation(qt.tokens, tt.tokens, grid.astype(np.float32), mean, cos,
                                    float(grid.sum()) if mean else float("nan"), qn, tn, tuple(shares),
                                    tuple(keyword_terms[n]) if keyword_terms else ()))
    return out
