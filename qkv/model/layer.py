"""One encoder layer (post-LayerNorm, as BERT), twice: the reference and the fast path beside it.

    A = LayerNorm(X + MultiHead(X)·Wo)
    Y = LayerNorm(A + GELU(A·W1)·W2)

``reference_layer`` is the tutorial's steps as written, on whole arrays, returning every
intermediate under its trace name. Traced runs of the encoder use it (for the layers whose
attention is looked into), and so do the explain views that re-run a layer with something changed
inside (value zeroing). ``fast_layer`` computes the same thing for an untraced pass: each product
through a packed weight (``qkv.model.linear``), steps 2-5 by the route ``qkv.model.attend.choose``
picked, element-wise steps fused and in place, padding rows skipped when the batch is packed.
tests/model/test_layer.py holds the two equal within float32 rounding, route by route.
"""

from __future__ import annotations

import numpy as np

from qkv.attention import merge_heads, scale_scores, scores, softmax, split_heads, weighted_sum
from qkv.kernels.float32 import add_layer_norm, bias_gelu, layer_norm
from qkv.kernels.bfloat16 import add_layer_norm_bf16, rows_padded
from qkv.model import attend as attention
from qkv.model.layer_q4 import fused_layer
from qkv.model.linear import dense

# Names the reference layer gives (the trace's names without "layers.{i}."); those inside
# attention only the reference layer can give.
INSIDE = ("attn.q", "attn.k", "attn.v", "attn.scores", "attn.scaled_scores", "attn.weights", "attn.context")
ROW_WISE = ("attn.out", "attn.norm", "ffn.hidden", "ffn.out", "out")


def reference_layer(p, cfg, x: np.ndarray, mask: np.ndarray | None = None, *,
                    value_scale: np.ndarray | None = None, full: bool = True,
                    linear=None) -> dict[str, np.ndarray]:
    """The layer with parameters ``p`` (a ``LayerParameters``) of a model with config ``cfg``, on
    x [B, L, H] with mask [B, L] (True = real token; None: all real).

    float64 inputs run in float64 (the weights are promoted), others in float32.
    ``value_scale`` [B, L] multiplies each token's value vector in every head (0 zeroes it: value
    zeroing, Mohebbi et al. 2023). ``linear(w, rows)``: the packed products to use for float32
    (the encoder passes its own, each tested equal to x·W + b); None: NumPy's x·W. Returns every
    intermediate by its trace name without the ``layers.{i}.`` prefix; ``full=False`` stops after
    attn.out."""
    H, nh, d = cfg.hidden_size, cfg.num_heads, cfg.head_dim
    x = np.asarray(x)
    x = x if x.dtype == np.float64 else x.astype(np.float32, copy=False)

    def times(a, w, b, act=None):
        """act(a·W + b) over the last axis of a [..., K]."""
        rows = a.reshape(-1, a.shape[-1])
        if linear is None or a.dtype != np.float32:
            y = rows @ dense(w)
            y = bias_gelu(y, b, act) if act else np.add(y, b, out=y)
        else:
            y = linear(w, len(rows))(rows, np.empty((len(rows), b.shape[0]), np.float32), bias=b, act=act)
        return y.reshape(*a.shape[:-1], -1)

    def norm(a, g, b):
        """LayerNorm over the last axis, in place on a (a new array)."""
        return layer_norm(a.reshape(-1, H), g, b, cfg.layer_norm_eps).reshape(a.shape)

    # 1. project: Q, K, V for every token (one fused product), split into heads [B, nh, L, d]
    qkv = times(x, p.w_qkv, p.b_qkv)
    q, k, v = (split_heads(qkv[..., j * H:(j + 1) * H], nh) for j in range(3))
    if value_scale is not None:
        v = v * np.asarray(value_scale, dtype=x.dtype)[:, None, :, None]
    # 2. score: Q·Kᵀ
    s = scores(q, k)
    # 3. scale by 1/√d; padding keys get -inf, so their weight is exactly 0
    ss = scale_scores(s, d)
    allowed = None if mask is None or np.all(mask) else np.asarray(mask, bool)[:, None, None, :]
    if allowed is not None:
        ss = np.where(allowed, ss, x.dtype.type(-np.inf))
    # 4. softmax each row
    w = softmax(ss, axis=-1, mask=allowed).astype(x.dtype, copy=False)
    # 5. weighted sum of V
    ctx = weighted_sum(w, v)
    # heads concatenated, projected
    out = times(merge_heads(ctx), p.w_o, p.b_o)
    res = {"attn.q": q, "attn.k": k, "attn.v": v, "attn.scores": s, "attn.scaled_scores": ss,
           "attn.weights": w, "attn.context": ctx, "attn.out": out}
    if full:
        # added to the input, normalised; then the feed-forward block, added and normalised
        a = norm(x + out, p.ln1_g, p.ln1_b)
        h = times(a, p.w_in, p.b_in, cfg.hidden_act)
        f = times(h, p.w_out, p.b_out)
        y = norm(f + a, p.ln2_g, p.ln2_b)
        res.update({"attn.norm": a, "ffn.hidden": h, "ffn.out": f, "out": y})
    return res


def fast_layer(p, cfg, x: np.ndarray, batch: "attention.Batch", route: str, linear, ws, workers,
               scale, want=None, emit=None) -> np.ndarray:
    """The same layer for x [rows, H] in ``batch``'s row layout, without the intermediates inside
    attention. ``linear(w, rows)`` gives the packed product for a weight (precision is the packed
    weight's business); ``want(name)`` / ``emit(name, rows)``: the row-wise names a trace keeps.
    Returns the output rows (in a workspace array: copy before the next call reuses it)."""
    if want is None:  # nothing kept: one compiled call where the layer allows it (qkv.model.layer_q4)
        y = fused_layer(p, cfg, x, batch, route, ws, scale)
        if y is not None:
            ws.keep_bits(None)  # no bfloat16 copy of this output
            return y
    R, H = x.shape
    dt = x.dtype
    want = want or (lambda name: False)
    w_qkv, w_o, w_in, w_out = (linear(w, R) for w in (p.w_qkv, p.w_o, p.w_in, p.w_out))
    I, Rp = cfg.intermediate_size, rows_padded(R)
    # bfloat16 products hand each other bfloat16 activations (Q | K | V, the heads' outputs, the
    # LayerNorms' results, the hidden layer): half the bytes, no rounding pass. Float32 stays
    # the residual stream and whatever a trace keeps (ffn.hidden).
    bits = all(getattr(w, "bf16_bits", False) for w in (w_qkv, w_o, w_in, w_out)) and H % 32 == 0
    xb = ws.bits_of(x) if bits else None  # the last layer's output in bfloat16, when it made one
    # 1. project: one fused product gives Q | K | V for every token
    if bits and route in ("tiles", "dots"):  # bfloat16 attention reads and writes bits
        qkv = ws.get("qkv_bf16", (R, 3 * H), np.uint16)
        ctx = ws.get("ctx_bf16", (Rp, H), np.uint16)  # rows past R: read by the last tile, never used
    else:
        qkv, ctx = ws.get("qkv", (R, 3 * H), dt), ws.get("ctx", (R, H), dt)
    w_qkv(x if xb is None else xb, qkv, bias=p.b_qkv, workers=workers)
    # 2-5. score, scale, softmax, weighted sum: by the dispatcher's route
    attention.attend(route, qkv, ctx[:R], batch, cfg.num_heads, scale, ws, workers)
    # heads concatenated, projected, added to the input, normalised
    # (x never lives in "a" when it is written: x is the embeddings or the last layer's "f")
    a = w_o(ctx, ws.get("a", (R, H), dt), workers=workers)
    xb = ws.get("x_bf16", (Rp, H), np.uint16) if bits else None
    x = _add_norm(a, x, p.b_o, p.ln1_g, p.ln1_b, cfg.layer_norm_eps, "attn.out", "attn.norm", want, emit, xb)
    # feed-forward; the hidden layer stays in bfloat16 between the two products unless a trace keeps
    # it, or in int8 blocks inside one call where 4-bit products quantise x (Q4Panels.feed_forward)
    fused = getattr(w_in, "feed_forward", None)
    f = None
    if fused is not None and not bits and not want("ffn.hidden") and cfg.hidden_act == "gelu":
        f = fused(w_out, x, ws.get("f", (R, H), dt), bias=p.b_in, workers=workers)
    if f is None:
        if bits and not want("ffn.hidden") and cfg.hidden_act in (None, "gelu"):
            h = ws.get("h_bf16", (Rp, I), np.uint16)
            w_in(xb, h[:R], bias=p.b_in, act=cfg.hidden_act, workers=workers)
        else:
            h = w_in(x if xb is None else xb, ws.get("h", (R, I), dt), bias=p.b_in, act=cfg.hidden_act,
                     workers=workers)
            if want("ffn.hidden"):
                emit("ffn.hidden", h)
        f = w_out(h, ws.get("f", (R, H), dt), workers=workers)
    x = _add_norm(f, x, p.b_out, p.ln2_g, p.ln2_b, cfg.layer_norm_eps, "ffn.out", "out", want, emit, xb)
    ws.keep_bits(x, xb)  # for the next layer's first product (None when there are no bits)
    return x


def _add_norm(y, x, b, g, beta, eps, y_name, out_name, want, emit, bits=None):
    """LayerNorm(y + b + x), in place in y; the bias goes into the fused kernel unless the trace
    keeps y (named ``y_name``) with its bias; the result is emitted as ``out_name`` if kept.
    ``bits`` [≥ rows, width] uint16: also receives the result rounded to bfloat16."""
    if want(y_name):
        y += b
        emit(y_name, y)
        b = None
    if bits is None:
        x = add_layer_norm(y, x, b, g, beta, eps)
    else:
        x = add_layer_norm_bf16(y, x, b, g, beta, eps, bits[:len(y)])
    if want(out_name):
        emit(out_name, x)
    return x
