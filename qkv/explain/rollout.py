"""Attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in Transformers").

Each layer mixes tokens with its attention and also keeps its input through the residual
connection. Rollout models one layer as Â = ½·(mean of the heads' weights) + ½·I, rows renormalised,
and follows the mixing from the embeddings up by multiplying the layers' matrices:

    R_0 = Â_0,   R_l = Â_l · R_{l-1}

so R_l[i, j] estimates how much of token i's vector after layer l comes from input token j.
Every Â is row-stochastic, hence every R_l is too (rows sum to 1).
"""

from __future__ import annotations

import numpy as np


def layer_matrices(weights: np.ndarray, residual: bool = True, head_reduce: str = "mean") -> np.ndarray:
    """[layers, heads, n, n] attention -> [layers, n, n] per-layer mixing matrices Â."""
    w = np.asarray(weights, dtype=np.float64)
    a = w.mean(axis=1) if head_reduce == "mean" else w.max(axis=1)
    if residual:
        a = 0.5 * a + 0.5 * np.eye(a.shape[-1])
    return a / a.sum(axis=-1, keepdims=True)


def rollout(weights: np.ndarray, residual: bool = True, head_reduce: str = "mean") -> np.ndarray:
    """Cumulative rollout after each layer, [layers, n, n] (float64, rows sum to 1).

    ``weights``: [layers, heads, n, n] (heads averaged) or already per-layer [layers, n, n]
    (e.g. value-zeroing maps, which include the residual themselves: pass ``residual=False``).
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 4:
        a = layer_matrices(w, residual, head_reduce)
    else:
        a = 0.5 * w + 0.5 * np.eye(w.shape[-1]) if residual else w
        a = a / a.sum(axis=-1, keepdims=True)
    out = np.empty_like(a)
    r = np.eye(a.shape[-1])
    for layer in range(a.shape[0]):
        r = a[layer] @ r
        out[layer] = r
    return out
