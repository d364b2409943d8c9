"""Sentence importance as attention received, and redundancy control.

Sentences attend to each other the way tokens do in a transformer, with the sentence embeddings as
queries and keys: P = softmax(E·Eᵀ/τ) row by row, a sentence never attending to itself. Row i says
how sentence i spreads its attention over the others. A sentence's importance is the attention it
receives in the long run: the stationary distribution π = π·P of the Markov chain P (the idea of
LexRank, Erkan & Radev 2004, with softmax attention in place of a thresholded cosine graph).

Because the kernel K = exp(E·Eᵀ/τ) is symmetric, P = D⁻¹K is a reversible chain and its stationary
distribution has a closed form: π_j ∝ d_j = Σ_{i≠j} K_ij (detailed balance: d_i·P_ij = K_ij = K_ji
= d_j·P_ji). So π is the softmax normaliser of each row, a soft count of the sentences that say
nearly the same thing, and needs one pass over the pairs instead of a power iteration. The tests
check it against power iteration on P itself. ``mass`` lets one vector stand for several sentences
(a cluster): key j then counts mass_j times, query i mass_i times.

The pass is done in row blocks, so memory is O(block × n), never n × n; past ``sample`` rows the
queries are a fixed random sample (an unbiased estimate of d up to a constant factor).
"""

from __future__ import annotations

import numpy as np

from qkv.attention import softmax


def attention_matrix(vectors: np.ndarray, tau: float) -> np.ndarray:
    """The full sentence-to-sentence attention P = softmax(E·Eᵀ/τ), diagonal excluded. [n, n]."""
    e = np.asarray(vectors, dtype=np.float64)
    n = len(e)
    mask = ~np.eye(n, dtype=bool)
    if n == 1:
        mask[:] = True  # a lone sentence can only attend to itself
    return softmax(e @ e.T / tau, axis=-1, mask=mask)


def stationary_power(p: np.ndarray, iters: int = 1000, tol: float = 1e-12) -> np.ndarray:
    """π with π = π·P by power iteration (the slow way; used to check ``importance``)."""
    pi = np.full(len(p), 1.0 / len(p))
    for _ in range(iters):
        nxt = pi @ p
        nxt /= nxt.sum()
        if np.abs(nxt - pi).sum() < tol:
            return nxt
        pi = nxt
    return pi


def importance(vectors: np.ndarray, tau: float, *, mass: np.ndarray | None = None, block: int = 1024,
               sample: int | None = None, seed: int = 0) -> np.ndarray:
    """Stationary attention π over sentences (sums to 1), in row blocks of ``block`` queries.

    With ``sample`` and n > sample, only that many queries (chosen with ``seed``) are used."""
    e = np.asarray(vectors, dtype=np.float32)
    n = len(e)
    if n == 0:
        return np.zeros(0)
    if n == 1:
        return np.ones(1)
    w = np.ones(n) if mass is None else np.asarray(mass, dtype=np.float64)
    # exp((s - c)/τ) with c ≥ every s_ij keeps the kernel ≤ 1; c cancels in the normalisation.
    norms = np.einsum("ij,ij->i", e, e)
    c = float(norms.max())
    rows = np.arange(n)
    if sample is not None and n > sample:
        rows = np.sort(np.random.default_rng(seed).choice(n, size=sample, replace=False))
    d = np.zeros(n)
    inv_tau = np.float32(1.0 / tau)
    for s in range(0, len(rows), block):
        r = rows[s:s + block]
        k = e[r] @ e.T  # [b, n]
        k -= c
        k *= inv_tau
        np.exp(k, out=k)
        k[np.arange(len(r)), r] = 0.0  # no attention to itself
        d += w[r].astype(np.float32) @ k
    d *= w  # key j stands for mass_j sentences
    total = d.sum()
    if not np.isfinite(total) or total <= 0:  # every pair underflowed (tiny τ): fall back to uniform
        return np.full(n, 1.0 / n)
    return d / total


def received(vectors: np.ndarray, tau: float, *, mass: np.ndarray | None = None) -> np.ndarray:
    """One step of attention from a uniform start: column sums of P, Σ_i P_ij (in-degree).
    Unlike π, every sentence hands out the same total attention, so isolated sentences vote as
    loudly as those in dense groups. Kept for comparison; dense [n, n]."""
    e = np.asarray(vectors, dtype=np.float64)
    n = len(e)
    if n <= 1:
        return np.ones(n)
    w = np.ones(n) if mass is None else np.asarray(mass, dtype=np.float64)
    s = (e @ e.T - (e * e).sum(1).max()) / tau
    k = np.exp(s)
    np.fill_diagonal(k, 0.0)
    k *= w[None, :]  # key j counts mass_j times
    p = k / np.maximum(k.sum(axis=1, keepdims=True), 1e-300)
    r = w @ p
    return r / r.sum()


def kmeans(x: np.ndarray, k: int, iters: int = 10, seed: int = 0, block: int = 4096, fit_sample: int = 8192):
    """Spherical k-means (cosine) on unit rows: (centroids [k, d], labels [n]).

    Lloyd iterations on a random sample of at most ``fit_sample`` rows (seeded with random rows),
    then one assignment of every row, so the cost grows with n only through that last pass;
    memory O(block × k)."""
    x = np.asarray(x, dtype=np.float32)
    n = len(x)
    k = min(k, n)
    rng = np.random.default_rng(seed)
    fit = x if n <= fit_sample else x[np.sort(rng.choice(n, size=fit_sample, replace=False))]
    cent = fit[rng.choice(len(fit), size=k, replace=False)].copy()

    def assign(rows):
        out = np.empty(len(rows), dtype=np.int64)
        for s in range(0, len(rows), block):
            out[s:s + block] = np.argmax(rows[s:s + block] @ cent.T, axis=1)
        return out

    for _ in range(iters):
        labels = assign(fit)
        sums = np.zeros_like(cent)
        np.add.at(sums, labels, fit)
        counts = np.bincount(labels, minlength=k)
        empty = counts == 0
        sums[empty] = fit[rng.choice(len(fit), size=int(empty.sum()), replace=False)]  # reseed empty ones
        cent = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return cent, assign(x)
