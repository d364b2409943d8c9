"""Value-norm-weighted attention (Kobayashi et al., 2020, "Attention is Not Only a Weight").

A head's output for token i is Σ_j α_ij · f(x_j) with f(x) = (x·W_v + b_v)·W_o, where W_o is the
rows of the output projection that belong to this head. A large α_ij on a token whose f(x_j) is
tiny moves nothing, which is how BERT-family models park attention on [SEP]/[CLS]. So the amount
token j really contributes to token i is ‖α_ij f(x_j)‖ = α_ij ‖f(x_j)‖; summed over the heads of a
layer it is ‖Σ_h α^h_ij f_h(x_j)‖. Everything is derived from the weights and traced values.
"""

from __future__ import annotations

import numpy as np


def transformed_values(enc, layer: int, v: np.ndarray) -> np.ndarray:
    """f_h(x_j) = v^h_j · W_o^h for every head: v [heads, n, d] (the trace's attn.v) -> [heads, n, H]."""
    nh, d = enc.config.num_heads, enc.config.head_dim
    w_o = enc.weights.layers[layer].dense().w_o.reshape(nh, d, -1)  # rows of W_o per head
    return np.einsum("hnd,hdo->hno", v, w_o)


def head_norms(enc, layer: int, weights: np.ndarray, v: np.ndarray) -> np.ndarray:
    """‖α^h_ij f_h(x_j)‖ for every head: [heads, n, n]."""
    fx = np.linalg.norm(transformed_values(enc, layer, v), axis=-1)  # [heads, n]
    return weights * fx[:, None, :]


def layer_norms(enc, layer: int, weights: np.ndarray, v: np.ndarray, chunk: int = 32) -> np.ndarray:
    """‖Σ_h α^h_ij f_h(x_j)‖: heads combined, [n, n]. Rows are done ``chunk`` at a time so memory
    stays at chunk·n·H floats even for 512-token texts."""
    fx = transformed_values(enc, layer, v)  # [heads, n, H]
    n = weights.shape[-1]
    out = np.empty((n, n), dtype=np.float32)
    for lo in range(0, n, chunk):
        mix = np.einsum("hij,hjo->ijo", weights[:, lo:lo + chunk], fx)
        out[lo:lo + chunk] = np.linalg.norm(mix, axis=-1)
    return out


def row_share(m: np.ndarray) -> np.ndarray:
    """Rows rescaled to sum to 1, so norm maps can sit beside attention maps on the same scale."""
    m = np.asarray(m, dtype=np.float64)
    return m / np.maximum(m.sum(axis=-1, keepdims=True), 1e-12)
