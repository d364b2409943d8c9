"""Attention, written as the five steps of the tutorial.

    1. project   Q = X·Wq,  K = X·Wk,  V = X·Wv
    2. score     S = Q·Kᵀ
    3. scale     S / √d_k
    4. softmax   each row of S turned into weights that sum to 1
    5. mix       output = weights·V

then heads: split the model dimension into h heads, attend in each, concatenate, project.

Every function takes arrays with any number of leading batch dimensions; the last two axes are
(length, features). Masks are booleans where True means "may attend". Nothing here knows about
models or tokens: that is ``qkv.model``'s job.

Beside the plain path lives a key-chunked path with an online softmax (running max and running
sum, the trick behind FlashAttention, Dao et al. 2022, and Milakov & Gimelshein 2018): it never holds
the whole Lq×Lk score matrix, so memory grows with Lq×chunk. It is tested equal to the plain path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qkv.kernels import cpu, float32
from qkv.kernels.blas import blas_threads

__all__ = [
    "softmax",
    "project",
    "scores",
    "scale_scores",
    "weighted_sum",
    "causal_mask",
    "scaled_dot_product_attention",
    "chunked_attention",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "TILED_FROM",
]

# Sequence length from which attention runs tile by tile (per text and head, cache-resident) when
# its weights are not asked for; below it one batched pass over all heads and texts has less
# overhead. scaled_dot_product_attention compares the score matrix's size (Lq·Lk) with its square;
# the encoder's dispatcher (qkv.model.attend) its sequence length.
TILED_FROM = 64
DEFAULT_CHUNK = 512


def softmax(x: np.ndarray, axis: int = -1, mask: np.ndarray | None = None) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    ``mask`` (boolean, broadcastable to ``x``) marks entries that take part; the others get weight 0.
    A row with no allowed finite entry (all masked, or all -inf) gives all zeros, never NaN.
    +inf entries share the row's weight equally; values like ±1e30 are fine.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    if mask is None:
        row_max = x.max(axis=axis, keepdims=True)
        if np.isfinite(row_max).all():  # the common case: nothing masked, nothing infinite
            e = np.subtract(x, row_max)
            np.exp(e, out=e)
            e /= e.sum(axis=axis, keepdims=True)
            return e
    allowed = np.ones(x.shape, dtype=bool) if mask is None else np.broadcast_to(mask, x.shape)
    posinf = np.isposinf(x) & allowed
    if posinf.any():
        # The limit of softmax as some entries grow without bound: they split the weight evenly.
        has_inf = posinf.any(axis=axis, keepdims=True)
        allowed = np.where(has_inf, posinf, allowed)
        x = np.where(has_inf, np.where(posinf, 0.0, -np.inf), x).astype(x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        masked = np.where(allowed, x, -np.inf)
        row_max = masked.max(axis=axis, keepdims=True)
        # A row with nothing to attend to has max -inf; shift by 0 instead so no inf - inf appears.
        row_max = np.where(np.isfinite(row_max), row_max, 0.0)
        e = np.exp(masked - row_max)
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def project(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Step 1: a linear projection ``x·W + b`` (W is [in, out])."""
    y = x @ w
    if b is not None:
        y += b
    return y


def scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Step 2: raw scores Q·Kᵀ, [..., Lq, Lk]. Entry (i, j) says how well query i matches key j."""
    return q @ np.swapaxes(k, -1, -2)


def scale_scores(s: np.ndarray, d_k: int, scale: float | None = None) -> np.ndarray:
    """Step 3: divide by √d_k, so the spread of scores does not grow with the head size.

    Without it, dot products of d_k-dimensional vectors have variance ~d_k, softmax saturates to a
    one-hot row and its gradients vanish (Vaswani et al. 2017, section 3.2.1).
    """
    return s * (1.0 / math.sqrt(d_k) if scale is None else scale)


def weighted_sum(weights: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Step 5: each output row is the weights-weighted average of the value rows."""
    return weights @ v


def causal_mask(lq: int, lk: int) -> np.ndarray:
    """Boolean [lq, lk] mask where query i sees keys up to its own position.

    When lq != lk the queries are aligned to the *end* of the keys (query i is at key position
    lk - lq + i), as torch's ``is_causal`` does for cached decoding.
    """
    offset = lk - lq
    return np.arange(lk)[None, :] <= (np.arange(lq)[:, None] + offset)


def _combined_mask(lq: int, lk: int, mask, causal: bool) -> np.ndarray | None:
    m = None if mask is None else np.asarray(mask, dtype=bool)
    if causal:
        c = causal_mask(lq, lk)
        m = c if m is None else (m & c)
    return m


def _check_qkv(q, k, v):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"queries and keys need the same feature size, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"keys and values need the same length, got {k.shape[-2]} and {v.shape[-2]}")


def scaled_dot_product_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    causal: bool = False,
    bias: np.ndarray | None = None,
    scale: float | None = None,
    return_weights: bool = False,
    chunk_size: int | None = None,
):
    """softmax(Q·Kᵀ/√d + bias, masked)·V over arrays [..., L, d].

    q: [..., Lq, d_k]; k: [..., Lk, d_k]; v: [..., Lk, d_v]. Leading dimensions broadcast.
    mask: boolean, broadcastable to [..., Lq, Lk]; True = may attend. A key-padding mask of shape
    [batch, Lk] should be given as [batch, 1, 1, Lk] (or [batch, 1, Lk] without heads).
    causal: query i sees keys ≤ i (end-aligned when Lq != Lk). bias: added to the scaled scores.
    Returns the output [..., Lq, d_v], and the weights [..., Lq, Lk] when ``return_weights``.

    With ``return_weights`` the five steps run as written, on whole arrays. Without, and when the
    score matrices are large enough for it to pay (Lq·Lk ≥ TILED_FROM², or ``chunk_size`` given), the
    tiled online-softmax path (``chunked_attention``) runs instead: same result, memory
    O(tile) instead of O(Lq·Lk), and faster because each tile stays in cache.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    _check_qkv(q, k, v)
    lq, lk = q.shape[-2], k.shape[-2]
    if not return_weights and (chunk_size is not None or lq * lk >= TILED_FROM * TILED_FROM):
        return chunked_attention(q, k, v, mask=mask, causal=causal, bias=bias, scale=scale,
                                 chunk_size=chunk_size or DEFAULT_CHUNK)
    s = scale_scores(scores(q, k), q.shape[-1], scale)
    if bias is not None:
        s = s + bias
    w = softmax(s, axis=-1, mask=_combined_mask(lq, lk, mask, causal))
    out = weighted_sum(w.astype(v.dtype, copy=False), v)
    return (out, w) if return_weights else out


def _lead_view(a: np.ndarray | None, lead: tuple, last2: tuple):
    """``a`` broadcast (as a view, no copy) to lead + last2, or None."""
    if a is None:
        return None
    a = np.asarray(a)
    if a.ndim == 1:
        a = a[None, :]
    return np.broadcast_to(a, lead + last2)


def chunked_attention(q, k, v, *, mask=None, causal=False, bias=None, scale=None,
                      chunk_size: int = DEFAULT_CHUNK, q_chunk: int = DEFAULT_CHUNK, out=None,
                      threads: int = 1):
    """The same result as the plain path, computed tile by tile.

    For each leading index (batch, head) and each block of ``q_chunk`` queries, keys are visited
    ``chunk_size`` at a time with an online softmax: per query row the running max m, the running
    sum of exp(s - m) and the running weighted sum of V; a new tile rescales them by
    exp(m_old - m_new), and the division by the sum happens once at the end, on [rows, d_v] rather
    than on the scores. One q_chunk×chunk_size score buffer is reused throughout, so extra memory
    is O(tile), independent of length, and the tile stays in cache. Rows with no allowed key are
    zeros. ``out`` (optional, shape [..., Lq, d_v], any strides) receives the result.
    ``threads`` > 1 spreads the leading indices over that many threads (one tile each).

    Without mask, bias or causality, float32 runs compiled (``qkv.kernels.float32.fused_attention``): the
    same online softmax over 512-key chunks for blocks of 8 queries, the products register-blocked,
    a block's scores in L1; extra memory one head's Kᵀ (d × Lk) per thread plus 16 kB, and the
    chunk sizes given here do not apply.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    _check_qkv(q, k, v)
    if chunk_size < 1 or q_chunk < 1:
        raise ValueError("chunk sizes must be at least 1")
    lq, lk, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    c = 1.0 / math.sqrt(d) if scale is None else scale
    dtype = np.result_type(q.dtype, k.dtype, v.dtype, np.float32)
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    for extra in (mask, bias):
        if extra is not None and np.ndim(extra) > 2:
            shapes.append(np.shape(extra)[:-2])
    lead = np.broadcast_shapes(*shapes)
    Q, K, V = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
    M = _lead_view(None if mask is None else np.asarray(mask, dtype=bool), lead, (lq, lk))
    Bias = _lead_view(bias, lead, (lq, lk))
    if out is None:
        out = np.zeros(lead + (lq, dv), dtype=dtype)
    pos = np.arange(lq) + (lk - lq)  # each query's position among the keys (causal, end-aligned)
    qc, kc = min(q_chunk, lq), min(chunk_size, lk)
    cval = dtype.type(c)
    # exp(x) neither overflows nor underflows to 0 for |x| ≤ this (float32: e^±88.7 is the range).
    exp_safe = 80.0 if dtype == np.float32 else 700.0
    fused = cpu.available() and dtype == np.float32  # the compiled tile step (qkv/kernels/float32/kernels.c)
    # Without mask, bias or causality the whole of steps 2-5 runs compiled, blocks of 8 queries
    # against 512-key chunks with the same online softmax (float32.fused_attention); it declines
    # what it cannot take (strides it cannot express, odd d_v), which then runs tile by tile below.
    whole = fused and M is None and Bias is None and not causal and lq and all(
        a.dtype == np.float32 for a in (Q, K, V, out))

    def attend_whole(part) -> None:
        work = np.empty(float32.attention_work(lk, d, dv), dtype=np.float32)
        for idx in part:
            if not float32.fused_attention(Q[idx][None], K[idx][None], V[idx][None], c, out[idx][None], work):
                attend([idx])  # declined (layout, d_v): tile by tile

    def attend(part) -> None:
        s_buf = np.empty((qc, kc), dtype=dtype)  # one tile per worker, reused
        pv_buf = np.empty((qc, dv), dtype=dtype)
        for idx in part:
            qi, kt, vi, oi = Q[idx], K[idx].T, V[idx], out[idx]
            k_norm = float(np.sqrt(np.einsum("ij,ij->j", kt, kt).max())) if lk else 0.0
            for qs in range(0, lq, qc):
                qe = min(qs + qc, lq)
                nb = qe - qs
                qb = qi[qs:qe] * cval
                # Cauchy-Schwarz: |q·k| ≤ |q|·|k|. When that bound is small, exp(s) is safe as it
                # stands and the running max (one pass to find, one to subtract, and the rescaling)
                # can be skipped: softmax is the same for any shift. BERT heads are almost always so.
                q_norm = float(np.sqrt(np.einsum("ij,ij->i", qb, qb).max()))
                shift_free = Bias is None and q_norm * k_norm <= exp_safe
                m_run = np.zeros((nb, 1), dtype=dtype) if shift_free else np.full((nb, 1), -np.inf, dtype=dtype)
                l_run = np.zeros((nb, 1), dtype=dtype)
                corr = np.empty((nb, 1), dtype=dtype)
                acc = np.zeros((nb, dv), dtype=dtype)
                # keys after the block's last query are in every row's future
                k_end = min(lk, int(pos[qe - 1]) + 1) if causal else lk
                for ks in range(0, k_end, kc):
                    ke = min(ks + kc, lk)
                    s = s_buf[:nb, :ke - ks]
                    np.matmul(qb, kt[:, ks:ke], out=s)
                    if Bias is not None:
                        s += Bias[idx][qs:qe, ks:ke]
                    allowed = None if M is None else M[idx][qs:qe, ks:ke]
                    if causal:
                        cm = np.arange(ks, ke)[None, :] <= pos[qs:qe, None]
                        allowed = cm if allowed is None else (allowed & cm)
                    if allowed is not None:
                        np.copyto(s, -np.inf, where=~allowed)
                    if fused and shift_free:  # exp and the row sums in one pass
                        float32.exp_tile(s, l_run)
                    elif fused:  # max, exp, sum and the correction in one pass
                        float32.online_softmax_tile(s, m_run, l_run, corr)
                        if ks:
                            acc *= corr
                    else:
                        if not shift_free:
                            m_new = np.maximum(m_run, s.max(axis=-1, keepdims=True))
                            safe = np.where(np.isfinite(m_new), m_new, 0).astype(dtype, copy=False)
                            with np.errstate(invalid="ignore"):
                                np.exp(m_run - safe, out=corr)  # exp(-inf) = 0 on the first tile
                            s -= safe
                            l_run *= corr
                            acc *= corr
                            m_run = m_new
                        np.exp(s, out=s)
                        l_run += s.sum(axis=-1, keepdims=True)
                    pv = pv_buf[:nb]
                    np.matmul(s, vi[ks:ke], out=pv)
                    acc += pv
                empty = l_run[:, 0] == 0
                np.divide(acc, l_run, out=acc, where=~empty[:, None])
                acc[empty] = 0
                oi[qs:qe] = acc

    parts = list(np.ndindex(*lead))
    run = attend_whole if whole else attend
    if threads > 1 and len(parts) > 1:
        # (text, head) pairs spread over threads: the products and the compiled steps release the
        # GIL, and BLAS is held to one thread inside so the two levels do not oversubscribe.
        from concurrent.futures import ThreadPoolExecutor

        n = min(threads, len(parts))
        with blas_threads(1), ThreadPoolExecutor(n) as pool:
            list(pool.map(run, [parts[w::n] for w in range(n)]))
    elif parts:
        run(parts)
    return out


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """[..., L, h·d] -> [..., h, L, d], as a view (no copy per head)."""
    *lead, length, width = x.shape
    if width % n_heads:
        raise ValueError(f"width {width} is not divisible by {n_heads} heads")
    return np.swapaxes(x.reshape(*lead, length, n_heads, width // n_heads), -2, -3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """[..., h, L, d] -> [..., L, h·d]: concatenate the heads' outputs."""
    *lead, h, length, d = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, length, h * d)


@dataclass
class MultiHeadAttention:
    """Multi-head attention with Q/K/V/output projections and biases.

    Weights are [in, out] (x·W). Self-attention runs one fused QKV product; cross-attention
    projects the query from ``x`` and keys/values from ``context``. Heads are split and merged as
    array views, with no Python loop over heads.
    """

    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    n_heads: int
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None

    def __post_init__(self):
        d_model = self.wq.shape[1]
        if d_model % self.n_heads:
            raise ValueError(f"model width {d_model} is not divisible by {self.n_heads} heads")
        if self.wk.shape[1] != d_model:
            raise ValueError("queries and keys must project to the same width")
        zeros = lambda n: np.zeros(n, dtype=self.wq.dtype)  # noqa: E731
        self.bq = zeros(self.wq.shape[1]) if self.bq is None else self.bq
        self.bk = zeros(self.wk.shape[1]) if self.bk is None else self.bk
        self.bv = zeros(self.wv.shape[1]) if self.bv is None else self.bv
        self.bo = zeros(self.wo.shape[1]) if self.bo is None else self.bo
        if self.wq.shape[0] == self.wk.shape[0] == self.wv.shape[0]:
            self._w_qkv = np.concatenate([self.wq, self.wk, self.wv], axis=1)
            self._b_qkv = np.concatenate([self.bq, self.bk, self.bv])
        else:
            self._w_qkv = None

    @classmethod
    def init(cls, d_model: int, n_heads: int, seed: int = 0, dtype=np.float32) -> "MultiHeadAttention":
        """Random weights (Xavier-uniform), for experiments and the tutorial examples."""
        rng = np.random.default_rng(seed)
        lim = math.sqrt(6.0 / (2 * d_model))
        w = lambda: rng.uniform(-lim, lim, (d_model, d_model)).astype(dtype)  # noqa: E731
        return cls(w(), w(), w(), w(), n_heads)

    def __call__(self, x: np.ndarray, context: np.ndarray | None = None, *, mask=None, causal=False,
                 return_weights: bool = False):
        """x: [..., Lq, d_model]; context (cross-attention): [..., Lk, d_in]. Returns [..., Lq, d_model]."""
        x = np.asarray(x)
        if context is None and self._w_qkv is not None:
            qkv = project(x, self._w_qkv, self._b_qkv)
            d = self.wq.shape[1]
            q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
        else:
            src = x if context is None else np.asarray(context)
            q = project(x, self.wq, self.bq)
            k = project(src, self.wk, self.bk)
            v = project(src, self.wv, self.bv)
        h = self.n_heads
        res = scaled_dot_product_attention(split_heads(q, h), split_heads(k, h), split_heads(v, h),
                                           mask=mask, causal=causal, return_weights=return_weights)
        out, w = res if return_weights else (res, None)
        y = project(merge_heads(out), self.wo, self.bo)
        return (y, w) if return_weights else y
