"""One encoder layer recomputed from its weights, so an explanation can change something inside it.

The engine's forward pass is fast and closed; value zeroing (Mohebbi et al. 2023) must zero one
token's value vector *inside* a layer and see what comes out. So this module runs a layer again from
``enc.weights.layers[i]`` and the layer's input taken from a trace, with the tutorial's steps from
``qkv.attention`` (project, scores, scale, softmax, weighted sum, heads split and merged) and the
model's own ``layer_norm``/``gelu``. A test checks it reproduces the engine's trace.
"""

from __future__ import annotations

import numpy as np

from qkv.attention import merge_heads, project, scale_scores, scores, softmax, split_heads, weighted_sum
from qkv.kernels import gelu, layer_norm


def layer_input_name(layer: int) -> str:
    """Trace name of the vectors X entering ``layer``: the embeddings, or the previous layer's output."""
    return "embeddings" if layer == 0 else f"layers.{layer - 1}.out"


def head_slices(enc, head: int) -> tuple[slice, slice, slice]:
    """Columns of the fused ``w_qkv`` [H, 3H] that hold head ``head``'s Wq, Wk and Wv."""
    H, d = enc.config.hidden_size, enc.config.head_dim
    lo = head * d
    return slice(lo, lo + d), slice(H + lo, H + lo + d), slice(2 * H + lo, 2 * H + lo + d)


def run_layer(enc, layer: int, x: np.ndarray, mask: np.ndarray | None = None, *,
              value_scale: np.ndarray | None = None, full: bool = True) -> dict[str, np.ndarray]:
    """Recompute ``layer`` on inputs x [B, L, H] (mask [B, L], True = real token).

    float32 inputs run in float32 like the engine; float64 inputs run in float64 (the weights are
    promoted), which value zeroing uses so tiny cosine distances are not rounding noise.
    ``value_scale`` [B, L] multiplies each token's value vector in every head (0 zeroes it: value
    zeroing). Returns arrays under the engine's names without the ``layers.{i}.`` prefix: attn.q,
    attn.k, attn.v, attn.scores, attn.scaled_scores, attn.weights, attn.context, attn.out, and with
    ``full`` also attn.norm, ffn.hidden, ffn.out, out.
    """
    cfg, lw = enc.config, enc.weights.layers[layer]
    H, nh, d = cfg.hidden_size, cfg.num_heads, cfg.head_dim
    x = np.asarray(x)
    x = x if x.dtype == np.float64 else x.astype(np.float32)  # float64 in, float64 through (value zeroing)
    qkv = project(x, lw.w_qkv, lw.b_qkv)
    q, k, v = (split_heads(qkv[..., j * H:(j + 1) * H], nh) for j in range(3))  # [B, nh, L, d]
    if value_scale is not None:
        v = v * np.asarray(value_scale, dtype=x.dtype)[:, None, :, None]
    s = scores(q, k)
    ss = scale_scores(s, d)
    allowed = None if mask is None else np.asarray(mask, bool)[:, None, None, :]
    if allowed is not None:
        ss = np.where(allowed, ss, x.dtype.type(-np.inf))
    w = softmax(ss, axis=-1, mask=allowed).astype(x.dtype, copy=False)
    ctx = weighted_sum(w, v)
    out = project(merge_heads(ctx), lw.w_o, lw.b_o)
    res = {"attn.q": q, "attn.k": k, "attn.v": v, "attn.scores": s, "attn.scaled_scores": ss,
           "attn.weights": w, "attn.context": ctx, "attn.out": out}
    if full:
        a = layer_norm(x + out, lw.ln1_g, lw.ln1_b, cfg.layer_norm_eps)  # x + out is a new array
        h = gelu(project(a, lw.w_in, lw.b_in), cfg.hidden_act)
        f = project(h, lw.w_out, lw.b_out)
        y = layer_norm(f + a, lw.ln2_g, lw.ln2_b, cfg.layer_norm_eps)
        res.update({"attn.norm": a, "ffn.hidden": h, "ffn.out": f, "out": y})
    return res


def run_from(enc, layer: int, x: np.ndarray, mask: np.ndarray | None = None, *,
             value_scale: np.ndarray | None = None, zero_all_layers: bool = False) -> np.ndarray:
    """Hidden states after the last layer, starting from x entering ``layer``.

    ``value_scale`` applies to ``layer`` only, or to every layer from it on with ``zero_all_layers``.
    """
    for i in range(layer, enc.config.num_layers):
        vs = value_scale if (i == layer or zero_all_layers) else None
        x = run_layer(enc, i, x, mask, value_scale=vs)["out"]
    return x


def pool(enc, hidden: np.ndarray, mask: np.ndarray, normalize: bool | None = None) -> np.ndarray:
    """Sentence vectors [B, H] by the model's pooling rule (as ``Encoder.encode``), from hidden [B, L, H]."""
    m = np.asarray(mask, dtype=np.float32)
    if enc.config.pooling == "cls":
        out = hidden[:, 0].copy()
    elif enc.config.pooling == "max":
        out = np.where(m[..., None] > 0, hidden, -np.inf).max(axis=1)
    else:
        out = np.einsum("bl,blh->bh", m, hidden) / np.maximum(m.sum(axis=1, keepdims=True), 1e-9)
    if enc.config.normalize if normalize is None else normalize:
        out = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out
