"""The float32 kernels, each with its NumPy twin: the products, fused attention, element-wise steps.

``kernels.c`` beside this file holds the encoder's matrix products (a blocked product on weights
packed once into column panels, bias and GELU applied tile by tile; a few-row product on float16
panels), the fused attention of one text's heads, the tiles of the online softmax, and the
element-wise steps (the exact GELU, LayerNorm with its residual, the masked softmax) each in one
pass over memory, where NumPy makes one pass per operation. It is compiled at install time
(``hatch_build.py``; or ``python -m qkv.kernels.build``) into the one library that
``qkv.kernels.cpu`` loads. Which weight goes to which product is decided in ``qkv.model.linear``;
BLAS runs what the kernels do not take.

Every function works without it: when the library is missing or not loaded (see
``qkv.kernels.cpu.STATUS``; ``QKV_KERNELS=0`` turns it off), the NumPy twin runs instead. The
tests (tests/kernels/test_float32.py) hold the two equal.
"""

from __future__ import annotations

import math

import numpy as np

from qkv.kernels import cpu


# --------------------------------------------------------------------------------------- GELU
# NumPy twin. Abramowitz & Stegun 7.1.26: 1 - erf(z) = P(t)·exp(-z²), t = 1/(1 + p·z), z ≥ 0, absolute
# error ≤ 1.5e-7, the resolution of float32 near 1. SciPy's erf evaluates element by element (about
# four times slower here); float64 keeps SciPy's exact erf.
_AS_P = 0.3275911
_AS_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def _erf_gelu_f32(x: np.ndarray, u=None, t=None, p=None) -> np.ndarray:
    """x·Φ(x) in place for float32; u, t, p: optional scratch arrays of x's shape.

    With z = |x|/√2, A&S gives Φ(|x|) - ½ = ½ - ½·P(t)·exp(-x²/2), and Φ(x) = ½ + copysign(Φ(|x|) - ½, x).
    The 1/√2 and the -½ are folded into the constants."""
    f = np.float32
    u = np.abs(x, out=u)
    np.minimum(u, f(8.5), out=u)  # Φ(8.5) is 1 in float32; keeps exp out of denormals
    t = np.multiply(u, f(_AS_P / math.sqrt(2)), out=t)
    t += 1
    np.reciprocal(t, out=t)
    u *= u
    u *= f(-0.5)
    np.exp(u, out=u)  # exp(-x²/2)
    p = np.multiply(t, f(-0.5 * _AS_A[0]), out=p)
    for a in _AS_A[1:]:
        p += f(-0.5 * a)
        p *= t  # -½·P(t)
    p *= u
    p += f(0.5)  # Φ(|x|) - ½
    np.copysign(p, x, out=p)
    p += f(0.5)  # Φ(x)
    x *= p
    return x


def gelu(x: np.ndarray, kind: str = "gelu") -> np.ndarray:
    """The activation, in place. "gelu" is the exact x·Φ(x) = x·½(1 + erf(x/√2)) BERT uses;
    "gelu_new" the tanh approximation; "relu"."""
    if kind == "relu":
        return np.maximum(x, 0, out=x)
    if kind == "gelu":
        if x.dtype == np.float32:
            return _erf_gelu_f32(x)
        from scipy.special import erf

        t = np.multiply(x, x.dtype.type(1 / math.sqrt(2)), dtype=x.dtype)
        erf(t, out=t)
    else:  # tanh approximation (gelu_new / gelu_pytorch_tanh)
        t = x * x
        t *= x.dtype.type(0.044715)
        t += 1
        t *= x
        t *= x.dtype.type(math.sqrt(2 / math.pi))
        np.tanh(t, out=t)
    t += 1
    t *= 0.5
    x *= t
    return x


def bias_gelu(h: np.ndarray, b: np.ndarray, kind: str = "gelu", rows: int = 32) -> np.ndarray:
    """h + b, then the activation, in place on [n, width].

    Compiled: one pass. NumPy: for float32 the ~20 element-wise passes run over blocks of ``rows``
    rows, so a block and its scratch stay in cache (about twice as fast as whole-array passes)."""
    if kind == "gelu" and h.ndim == 2 and cpu.native(h, b):
        cpu.lib.qkv_bias_gelu(cpu.ptr(h), cpu.ptr(b), h.shape[0], h.shape[1])
        return h
    if h.dtype != np.float32 or kind != "gelu" or h.ndim != 2:
        h += b
        return gelu(h, kind)
    scratch = np.empty((3, min(rows, h.shape[0]), h.shape[1]), dtype=np.float32)
    for r in range(0, h.shape[0], rows):
        hb = h[r:r + rows]
        n = hb.shape[0]
        hb += b
        _erf_gelu_f32(hb, scratch[0, :n], scratch[1, :n], scratch[2, :n])
    return h


# ---------------------------------------------------------------------------------- LayerNorm
def layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / √(var + eps) · g + b over the last axis, in place on ``x``."""
    return add_layer_norm(x, None, None, g, b, eps)


def add_layer_norm(x: np.ndarray, res: np.ndarray | None, bias: np.ndarray | None, g: np.ndarray,
                   b: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm(x + bias + res) in place on ``x`` [n, width] (bias and res optional): the
    residual step after attention and after the feed-forward block."""
    arrays = [a for a in (x, res, bias, g, b) if a is not None]
    if x.ndim == 2 and cpu.native(*arrays) and (res is None or res.shape == x.shape):
        cpu.lib.qkv_add_layernorm(cpu.ptr(x), cpu.ptr(res), cpu.ptr(bias), cpu.ptr(g), cpu.ptr(b), x.shape[0], x.shape[1], eps)
        return x
    if bias is not None:
        x += bias
    if res is not None:
        x += res
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("...i,...i->...", x, x)[..., None]
    var *= 1.0 / x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    x /= var
    x *= g
    x += b
    return x


# ------------------------------------------------------------------------------------ softmax
def softmax_rows(s: np.ndarray, scale: float, valid: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis of scale·s, in place, for s [G, ..., n]: the rows of group g see
    only their first ``valid[g]`` entries (later keys are padding: weight 0); ``valid`` [G] or None.
    A row with no valid entry becomes zeros."""
    if scale <= 0:
        raise ValueError("softmax_rows needs a positive scale")
    n = s.shape[-1]
    rows = s.size // n if n else 0
    groups = s.shape[0] if valid is not None else 1
    if valid is not None:
        valid = np.ascontiguousarray(valid, dtype=np.int64)
        if valid.shape != (groups,):
            raise ValueError(f"valid must have one length per leading index, shape ({groups},)")
    if rows and cpu.native(s):
        cpu.lib.qkv_softmax_rows(cpu.ptr(s), rows, n, scale, cpu.ptr(valid), rows // groups)
        return s
    s *= s.dtype.type(scale)
    if valid is not None:
        pad = np.arange(n) >= valid.reshape((-1,) + (1,) * (s.ndim - 1))
        s[np.broadcast_to(pad, s.shape)] = -np.inf
    m = s.max(axis=-1, keepdims=True)
    np.copyto(m, 0, where=~np.isfinite(m))
    s -= m
    np.exp(s, out=s)
    total = s.sum(axis=-1, keepdims=True)
    np.divide(s, total, out=s, where=total > 0)
    s[np.broadcast_to(total == 0, s.shape)] = 0
    return s


def online_softmax_tile(s: np.ndarray, m: np.ndarray, l: np.ndarray, corr: np.ndarray) -> bool:
    """One key tile of the online softmax, in place (see ``kernels.c``): s [rows, n] (row stride
    free, unit column stride), running max m [rows], running sum l [rows], corr [rows] receives
    exp(m_old - m_new). Returns False (and does nothing) when the compiled kernel cannot run it;
    ``qkv.attention.chunked_attention`` then runs its NumPy steps."""
    if cpu.lib is None or s.dtype != np.float32 or s.ndim != 2 or s.strides[1] != 4 or not cpu.native(m, l, corr):
        return False
    cpu.lib.qkv_online_softmax_tile(cpu.ptr(s), s.shape[0], s.shape[1], s.strides[0] // 4, cpu.ptr(m), cpu.ptr(l), cpu.ptr(corr))
    return True


def exp_tile(s: np.ndarray, l: np.ndarray) -> bool:
    """s = exp(s) in place and l += row sums, for a tile whose scores the caller has bounded (no
    shift needed; see ``qkv.attention.chunked_attention``). Same contract as ``online_softmax_tile``."""
    if cpu.lib is None or s.dtype != np.float32 or s.ndim != 2 or s.strides[1] != 4 or not cpu.native(l):
        return False
    cpu.lib.qkv_exp_tile(cpu.ptr(s), s.shape[0], s.shape[1], s.strides[0] // 4, cpu.ptr(l))
    return True


# ------------------------------------------------------------------- products for a few rows
PANEL = cpu.lib.qkv_panel_width() if cpu.lib is not None else 32  # columns per panel: the C file decides


ALIGN = 64  # bytes: a cache line, and the width of an AVX-512 load


def aligned_empty(shape, dtype=np.float32) -> np.ndarray:
    """np.empty whose data starts on a cache line. NumPy's own arrays start 16 or 32 bytes into
    one, so every 64-byte vector load or store of a panel row straddles two lines: aligning the
    panels and the products' outputs made qkv.kernels.float32.gemm 7% faster on the encoder's shapes."""
    dtype = np.dtype(dtype)
    n = math.prod(shape) if isinstance(shape, tuple) else int(shape)
    buf = np.empty(n * dtype.itemsize + ALIGN, dtype=np.uint8)
    start = -buf.ctypes.data % ALIGN
    return buf[start:start + n * dtype.itemsize].view(dtype).reshape(shape)


def pack_panels(w: np.ndarray, dtype=np.float32) -> np.ndarray | None:
    """W [K, N] in the layout of ``panel_matmul``: column panels [N / PANEL, K, PANEL], each panel's
    rows one after another so a product streams W sequentially; ``dtype`` float32 or float16
    (half the bytes to read, each weight rounded to 11 significant bits). None when the compiled
    kernels are not in use or N is not a multiple of PANEL (callers then use BLAS)."""
    dtype = np.dtype(dtype)
    if (cpu.lib is None or w.dtype != np.float32 or w.ndim != 2 or w.shape[1] % PANEL
            or dtype not in (np.float32, np.float16)):
        return None
    k, n = w.shape
    panels = aligned_empty((n // PANEL, k, PANEL), dtype)
    panels[:] = w.reshape(k, n // PANEL, PANEL).transpose(1, 0, 2)
    return panels


def unpack_panels(panels: np.ndarray) -> np.ndarray:
    """The inverse of ``pack_panels``: W [K, N] (float32)."""
    p, k, width = panels.shape
    return panels.transpose(1, 0, 2).reshape(k, p * width).astype(np.float32)


def panel_matmul(x: np.ndarray, panels: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> np.ndarray:
    """out [R, N] = x [R, K] · W + bias, W packed by ``pack_panels`` (float16 panels: half the
    bytes to read, sums in float32; float32 panels are handed to ``gemm``). Meant for a few rows
    (a lone query), where the product is bound by reading W; see ``kernels.c``. The NumPy twin
    unpacks W."""
    R, K = x.shape
    N = panels.shape[0] * panels.shape[2]
    if panels.ndim != 3 or panels.shape[1:] != (K, PANEL) or out.shape != (R, N):
        raise ValueError(f"panel_matmul: x {x.shape}, panels {panels.shape}, out {out.shape} do not fit")
    if panels.dtype == np.float32:  # the blocked product reads float32 panels as well, faster
        return gemm(x, panels, bias, out)
    arrays = [a for a in (x, bias, out) if a is not None]
    if cpu.native(*arrays) and panels.flags.c_contiguous and panels.dtype == np.float16:
        cpu.lib.qkv_panel_matmul_f16bits(cpu.ptr(x), R, K, cpu.ptr(panels), N, cpu.ptr(bias), cpu.ptr(out))
        return out
    np.matmul(x, unpack_panels(panels), out=out)
    if bias is not None:
        out += bias
    return out


def gemm(x: np.ndarray, panels: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
         gelu: bool = False) -> np.ndarray:
    """out [R, N] = x [R, K] · W + bias, then BERT's exact GELU if ``gelu``; W packed by
    ``pack_panels`` as float32. Any number of rows: blocked for the caches, the weights packed
    once, bias and GELU applied tile by tile while in cache (see ``kernels.c``).
    One thread. The NumPy twin unpacks W and runs the steps one after another."""
    R, K = x.shape
    N = panels.shape[0] * panels.shape[2]
    if panels.ndim != 3 or panels.shape[1:] != (K, PANEL) or out.shape != (R, N):
        raise ValueError(f"gemm: x {x.shape}, panels {panels.shape}, out {out.shape} do not fit")
    arrays = [a for a in (x, bias, out) if a is not None]
    if cpu.native(*arrays) and panels.flags.c_contiguous and panels.dtype == np.float32:
        cpu.lib.qkv_gemm(cpu.ptr(x), R, K, cpu.ptr(panels), N, cpu.ptr(bias), int(gelu), cpu.ptr(out))
        return out
    np.matmul(x, unpack_panels(panels), out=out)
    if gelu:
        return bias_gelu(out, np.zeros(N, out.dtype) if bias is None else bias)
    if bias is not None:
        out += bias
    return out


# ----------------------------------------------------------------------------- attention, fused
def attention_work(nk: int, d: int, dv: int) -> int:
    """Floats of scratch the fused attention needs for nk keys (Kᵀ and V of one head, one block), as
    the C file computes it; 0 without the compiled kernels (the NumPy steps need none)."""
    return int(cpu.lib.qkv_attention_work(nk, d, dv)) if cpu.lib is not None else 0


def _rows(a: np.ndarray) -> tuple[int, int] | None:
    """(head stride, row stride) in float32 elements of a [heads, n, width] array with adjacent
    columns, or None."""
    if a.dtype != np.float32 or a.ndim != 3:
        return None
    if a.size == 0:  # nothing is read or written (NumPy may give such arrays zero strides)
        return 0, 0
    if a.shape[2] > 1 and a.strides[2] != 4:
        return None
    if any(st % 4 for st in a.strides[:2]):
        return None
    return a.strides[0] // 4, a.strides[1] // 4


def fused_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, out: np.ndarray,
                    work: np.ndarray | None = None) -> bool:
    """softmax(scale·Q·Kᵀ)·V per head into ``out``, compiled and fused (see ``kernels.c``): no
    mask, no bias. q [heads, nq, d], k [heads, nk, d], v [heads, nk, dv], out [heads, nq, dv],
    float32, any head and row strides with adjacent columns; dv 16 or a multiple of 32. Extra
    memory: one head's Kᵀ and V plus a 16 kB block, whatever the lengths. Returns False (doing
    nothing) when it cannot run that; callers then take the NumPy steps."""
    if cpu.lib is None:
        return False
    layout = [_rows(a) for a in (q, k, v, out)]
    h, nq, d = q.shape if q.ndim == 3 else (0, 0, 0)
    if any(x is None for x in layout) or k.shape[:1] != (h,) or k.shape[2] != d or v.shape[:2] != k.shape[:2]:
        return False
    dv, nk = v.shape[2], k.shape[1]
    if out.shape != (h, nq, dv) or not (dv == 16 or (dv and dv % 32 == 0)):
        return False
    need = attention_work(nk, d, dv)
    if work is None or work.size < need or work.dtype != np.float32 or not work.flags.c_contiguous:
        work = aligned_empty(need, np.float32)
    (hq, lq), (hk, lk), (hv, lv), (ho, lo) = layout
    cpu.lib.qkv_attention_heads(cpu.ptr(q), cpu.ptr(k), cpu.ptr(v), h, hq, hk, hv, ho, lq, lk, lv, lo, nq, nk, d, dv,
                             scale, cpu.ptr(out), cpu.ptr(work))
    return True


def attention_text(qkv: np.ndarray, heads: int, scale: float, ctx: np.ndarray,
                   work: np.ndarray | None = None) -> np.ndarray:
    """Steps 2-5 of attention for every head of one text without padding: softmax(scale·Q·Kᵀ)·V.
    qkv [n, 3·H] holds Q | K | V per token (heads side by side in each, H = heads·d; rows may be
    further apart than 3·H, columns must be adjacent); ctx [n, H] receives the heads' outputs,
    merged. Compiled: ``fused_attention``; the NumPy twin runs the five steps on whole arrays.
    ``work``: optional float32 scratch of at least ``attention_work(n, d, d)`` elements."""
    n, width = qkv.shape
    H = width // 3
    d = H // heads
    if width != 3 * H or H != heads * d or ctx.shape != (n, H):
        raise ValueError(f"attention_text: qkv {qkv.shape}, ctx {ctx.shape} and {heads} heads do not fit")
    if n == 0:
        return ctx
    q, k, v = qkv.reshape(n, 3, heads, d).transpose(1, 2, 0, 3)  # views: [heads, n, d] each
    if fused_attention(q, k, v, scale, ctx.reshape(n, heads, d).transpose(1, 0, 2), work):
        return ctx
    s = np.ascontiguousarray(q @ k.transpose(0, 2, 1))
    softmax_rows(s, scale)
    ctx[:] = (s @ v).transpose(1, 0, 2).reshape(n, H)
    return ctx


def attention_texts(qkv: np.ndarray, spans, heads: int, scale: float, ctx: np.ndarray,
                    work: np.ndarray | None = None) -> np.ndarray:
    """``attention_text`` for several texts in one call: text i is rows s … s + n − 1 of qkv and of
    ctx for (s, n) = spans[i]. Compiled (``qkv_attention_texts``): each text runs exactly the
    kernel call ``attention_text`` makes for it (the same bits), without the Python around each.
    qkv [rows, 3·H] and ctx [rows, H] float32 with adjacent columns; ``work``: optional float32
    scratch of at least ``attention_work(longest, d, d)`` elements. Else text by text."""
    spans = [(int(s), int(n)) for s, n in spans]
    rows, width = qkv.shape
    H = width // 3
    d = H // heads if heads else 0
    if width != 3 * H or H != heads * d or ctx.shape != (rows, H):
        raise ValueError(f"attention_texts: qkv {qkv.shape}, ctx {ctx.shape} and {heads} heads do not fit")
    if any(s < 0 or n < 0 or s + n > rows for s, n in spans):
        raise ValueError(f"attention_texts: spans must lie within the {rows} rows")
    rowwise = all(a.dtype == np.float32 and a.strides[1] == 4 and a.strides[0] % 4 == 0 for a in (qkv, ctx))
    longest = max((n for _, n in spans), default=0)
    if cpu.lib is None or not rowwise or not (d == 16 or (d and d % 32 == 0)) or longest == 0:
        for s, n in spans:
            attention_text(qkv[s:s + n], heads, scale, ctx[s:s + n], work)
        return ctx
    need = attention_work(longest, d, d)
    if work is None or work.size < need or work.dtype != np.float32 or not work.flags.c_contiguous:
        work = aligned_empty(need, np.float32)
    starts = np.array([s for s, _ in spans], np.int64)
    lens = np.array([n for _, n in spans], np.int64)
    cpu.lib.qkv_attention_texts(cpu.ptr(qkv), qkv.strides[0] // 4, starts.ctypes.data, lens.ctypes.data, len(spans),
                                heads, d, scale, cpu.ptr(ctx), ctx.strides[0] // 4, cpu.ptr(work))
    return ctx

