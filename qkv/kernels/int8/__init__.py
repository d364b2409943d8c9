"""int8 products for float32 weights: W quantised once per output column and block of 64 inputs,
x per row and block of 64 inputs with a zero point as each call starts, integer dot products with
exact int32 sums, one scale multiply-add per (row, block, column).

``pack_int8(W)`` turns W [K, N] (float32) into ``Int8Weights``: per column n and block b of BLOCK (64)
inputs a scale s_w[b, n] = max_{k∈b} |W[k, n]| / 127 and the weights wq = round(W / s_w) ∈
[−127, 127] (symmetric int8, ggml's Q8_0 blocks), laid out for the kernel (``int8/kernels.c``):
groups of 16 columns, four consecutive inputs of a column in one 32-bit lane (the operand order of
VPDPBUSD and of VPMADDUBSW + VPMADDWD), K padded to whole blocks with zeros; and the column sums
per block Σ_{k∈b} wq[k, n] (float32: small integers), with which the units take back x's zero
point (and the VNNI unit its +128).

``int8_matmul(x, packed, bias, out, gelu=)``: each row of x is quantised per block b of 64 inputs,
asymmetrically: lo = min(min x, 0), hi = max(max x, 0), s_x[r, b] = (hi − lo) / 255, zero point
z = −128 − rint(lo / s_x), xq = rint(x / s_x) + z ∈ [−128, 127] (float32, ties to even), so that
x ≈ s_x·(xq − z) on all 256 levels (ONNX Runtime's uint8 activations have a zero point too, per
tensor). The integer sums T[r, b, n] = Σ_{k∈b} (xq − z)·wq are exact (|T| ≤ 255·127·64 < 2^24,
so float32 holds them exactly too); then acc = Σ_b T·(s_x[r, b]·s_w[b, n]) (float32 fused
multiply-adds, block by block) and out = acc + bias, then BERT's exact GELU if asked.

Why (measured on all-MiniLM-L6-v2, embeddings' cosine to float32, worst on the sample catalogue's
276 titles; each choice first in a float64 model of it, one product kind at a time). The first
scheme (symmetric x per block of 64, W per column: 0.9983) lost most on the feed-forward's second
product's weights — a few of its input rows are up to 55× the median row, and with one scale a
column they set every weight's step (0.99915 with only those weights quantised) — and on the QKV
product (inputs and weights). Per block of W (as ggml's Q8_0) and a zero point for x (post-GELU
inputs lie in [−0.17, max]; a LayerNorm's output block is often lopsided by one outlier feature):
either alone 0.9990 / 0.9987 at blocks of 64, both 0.9994 at 64, 0.9996 at 32. Blocks of 64, not
32: the float work per block (four operations, per 16 VPDPBUSD instead of 8) is what the units pay
for the blocks, and at 32 it cost qkv its margin over ONNX Runtime's int8 on titles (1.14× against
1.30× at 64, Zen 4 stand-in), for 0.9997 against 0.9994 worst; at 128 neither faster nor good
enough (0.9991). Blocks keep every
row's numbers its own (LLM.int8()'s split of outlier columns, Dettmers et al. 2022, would make a
text's vector depend on its batch; SmoothQuant, Xiao et al. 2022, needs calibration statistics of
x: scales guessed from the LayerNorm weights instead made things worse here). docs/engine.md has
the figures.

The error bound of one product is stated in ``kernels.c`` and docs/engine.md, and
tests/kernels/test_int8.py holds each unit to it and to this module's NumPy twin (the same
integers, the same float32 operations in the same order: equal but for the rare double rounding of
the twin's float64 emulation of a fused multiply-add).

Units (``unit()``; ``cpu.I8`` is the one chosen at import, ``QKV_INT8=vnni|avx2|numpy`` forces one,
``QKV_ISA`` caps it as for the other products): "vnni" (AVX-512 VNNI, VPDPBUSD: Zen 4, Intel since
Cascade Lake; ``QKV_ISA=avx512bf16`` on an AMX Xeon stands in for Zen 4), "avx2" (VPMADDUBSW +
VPMADDWD: any x86-64-v3 CPU; ``QKV_ISA=float32`` stands in for one), else "numpy" (this twin).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv.kernels import cpu, float32

GROUP = 16  # columns per group: the int32 lanes of a 512-bit register
DEPTH = 4  # inputs per 32-bit lane (VPDPBUSD's four byte products)
BLOCK = 64  # inputs per scale of x and of W (kernels.c's BLOCK: passed to it, a library built for another is refused)
UNITS = cpu.I8_UNITS  # ("vnni", "avx2", "numpy")
UNIT_CODE = {"vnni": 1, "avx2": 2}  # as int8/kernels.c takes it


@dataclass
class Int8Weights:
    """W [K, N] packed for ``int8_matmul``: see the module's docstring."""

    q: np.ndarray  # int8 [N / GROUP, Kp / DEPTH, GROUP · DEPTH], 64-byte aligned
    scale: np.ndarray  # float32 [Kp / BLOCK, N]: s_w per block of inputs and column
    colsum: np.ndarray  # float32 [Kp / BLOCK, N]: Σ_{k∈b} wq[k, n] (integers, exact in float32)
    k: int  # K before padding

    @property
    def shape(self) -> tuple[int, int]:
        return self.k, self.scale.shape[1]

    @property
    def nbytes(self) -> int:
        return self.q.nbytes + self.scale.nbytes + self.colsum.nbytes


def padded(k: int) -> int:
    """K rounded up to whole blocks of BLOCK inputs."""
    return -(-k // BLOCK) * BLOCK


def quantize_columns(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(wq int8 [K, N], s_w float32 [Kp / BLOCK, N]): each column's block of BLOCK inputs by its
    own scale max|w| / 127 (a zero block: scale 0, zeros). Rounded in float64 from the float32
    scale, so wq·s_w is W's nearest point on that grid."""
    w = np.asarray(w, np.float32)
    K, N = w.shape
    kp = padded(K)
    full = np.zeros((kp, N), np.float32)
    full[:K] = w
    amax = np.abs(full.reshape(kp // BLOCK, BLOCK, N)).max(axis=1)
    s = (amax / np.float32(127)).astype(np.float32)
    safe = np.repeat(np.where(s > 0, s, 1).astype(np.float64), BLOCK, axis=0)[:K]
    q = np.clip(np.rint(w.astype(np.float64) / safe), -127, 127).astype(np.int8)
    return q, s


def pack_int8(w: np.ndarray) -> Int8Weights:
    """W [K, N] float32, N a multiple of GROUP -> ``Int8Weights`` (made once per weight)."""
    if w.dtype != np.float32 or w.ndim != 2 or w.shape[1] % GROUP or w.shape[0] == 0:
        raise ValueError(f"pack_int8: W must be float32 [K, N] with N a multiple of {GROUP}, not {w.dtype} {w.shape}")
    k, n = w.shape
    wq, s = quantize_columns(w)
    kp = padded(k)
    full = np.zeros((kp, n), np.int8)
    full[:k] = wq
    q = float32.aligned_empty((n // GROUP, kp // DEPTH, GROUP * DEPTH), np.int8)
    # [kp/4, 4, n/16, 16] -> [n/16, kp/4, 16, 4]: column j's four inputs in bytes 4j..4j + 3
    q[:] = full.reshape(kp // DEPTH, DEPTH, n // GROUP, GROUP).transpose(2, 0, 3, 1).reshape(q.shape)
    colsum = full.astype(np.int32).reshape(kp // BLOCK, BLOCK, n).sum(axis=1, dtype=np.int32)
    return Int8Weights(q, s, np.ascontiguousarray(colsum, dtype=np.float32), k)


def unpack_int8(packed: Int8Weights) -> np.ndarray:
    """wq [K, N] as int8 (the inverse of the layout; tests and ``dense``)."""
    g, kd, _ = packed.q.shape
    wq = packed.q.reshape(g, kd, GROUP, DEPTH).transpose(1, 3, 0, 2).reshape(kd * DEPTH, g * GROUP)
    return wq[:packed.k]


def dense(packed: Int8Weights) -> np.ndarray:
    """W as the product reads it: wq · s_w (each block's scale), float32 [K, N]."""
    return unpack_int8(packed).astype(np.float32) * np.repeat(packed.scale, BLOCK, axis=0)[:packed.k]


def quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(xq int8 [R, Kp], s_x float32 [R, Kp / BLOCK], z int32 [R, Kp / BLOCK]) as the kernel
    makes them, block by block: lo = min(min x, 0), hi = max(max x, 0), d = hi − lo (float32),
    inv = 255 / d (0 for a zero block), z = −128 − rint(lo·inv), xq = rint(x·inv) + z clipped to
    [−128, 127] (so x ≈ s_x·(xq − z)), s_x = d / 255; past K, xq = z (a zero)."""
    x = np.asarray(x, np.float32)
    R, K = x.shape
    kp = padded(K)
    nb = kp // BLOCK
    xb = np.zeros((R, kp), np.float32)
    xb[:, :K] = x
    xb = xb.reshape(R, nb, BLOCK)
    # over the real inputs only (the zeros past K are inside [lo, hi] anyway: lo ≤ 0 ≤ hi)
    lo = np.minimum(xb.min(axis=2), np.float32(0))
    hi = np.maximum(xb.max(axis=2), np.float32(0))
    d = (hi - lo).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d > 0, np.float32(255) / d, np.float32(0)).astype(np.float32)
    z = (np.float32(-128) - np.rint((lo * inv).astype(np.float32))).astype(np.int32)
    xq = np.clip(np.rint(xb * inv[..., None]) + z[..., None], -128, 127)
    xq = xq.astype(np.int8).reshape(R, kp)  # past K: rint(0)+z = z, a zero
    return xq, (d / np.float32(255)).astype(np.float32), z


def _twin(x: np.ndarray, packed: Int8Weights, bias, out: np.ndarray, gelu: bool) -> np.ndarray:
    xq, sx, z = quantize_rows(x)
    R, kp = xq.shape
    nb = kp // BLOCK
    wq = np.zeros((kp, packed.scale.shape[1]), np.float64)
    wq[:packed.k] = unpack_int8(packed)
    # per block, the exact integer sums T = Σ (xq − z)·wq (|T| < 2^24: exact in float32 too), then
    # the kernel's s = s_x·s_w (float32) and fused multiply-add acc = T·s + acc, emulated in float64
    # (T·s exact there) and rounded
    acc = np.zeros(out.shape, np.float32)
    for b in range(nb):
        xs = xq[:, b * BLOCK:(b + 1) * BLOCK].astype(np.float64) - z[:, b:b + 1]
        t = xs @ wq[b * BLOCK:(b + 1) * BLOCK]
        s = sx[:, b:b + 1] * packed.scale[b]  # float32 products, as the kernel's
        acc = (t * s.astype(np.float64) + acc).astype(np.float32)
    if bias is not None and not gelu:
        acc = acc + bias.astype(np.float32)
    out[:] = acc
    if gelu:
        return float32.bias_gelu(out, np.zeros(out.shape[1], np.float32) if bias is None else bias)
    return out


EPS = 0.5 + 2.0 ** -13  # a quantised number's error, in steps of its scale (kernels.c: rounding, float32 roundings, the clamp)


def error_bound(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The stated bound on |int8_matmul(x, pack_int8(w), bias) − (x·W + bias)| (float64 [R, N]),
    from kernels.c: with s_x per row and block (the block's range / 255) and s_w per block and
    column (the block's largest |w| / 127), e_k = EPS·s_x,b(k), f_k = EPS·s_w,b(k),
        Σ_k (e_k·|w_k| + |x_k|·f_k + e_k·f_k) + γ_(nb+2)·(Σ_k (|x_k| + e_k)(|w_k| + f_k) + |b|)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    R, K = x.shape
    N = w.shape[1]
    kp = padded(K)
    nb = kp // BLOCK
    xp = np.zeros((R, kp))
    xp[:, :K] = x
    xp = xp.reshape(R, nb, BLOCK)
    grow = 1 + 2.0 ** -22  # the float32 roundings of the range and of the scale, or above
    sx = (np.maximum(xp.max(axis=2), 0) - np.minimum(xp.min(axis=2), 0)) / 255 * grow
    wp = np.zeros((kp, N))
    wp[:K] = np.abs(w)
    sw = wp.reshape(nb, BLOCK, N).max(axis=1) / 127 * grow
    ex = EPS * np.repeat(sx, BLOCK, axis=1)[:, :K]  # |e_k| per row and input
    fw = EPS * np.repeat(sw, BLOCK, axis=0)[:K]  # |f_k| per input and column
    ax, aw = np.abs(x), np.abs(w)
    quant = ex @ aw + ax @ fw + ex @ fw
    u = 2.0 ** -24
    gamma = (nb + 2) * u / (1 - (nb + 2) * u)
    size = (ax + ex) @ (aw + fw) + (0 if bias is None else np.abs(np.asarray(bias, np.float64)))
    return quant + gamma * size


def unit(want: str | None = None) -> str:
    """The unit int8 products run on: ``want`` where this process can run it, else the next one
    down; default ``cpu.I8`` (chosen at import: ``QKV_INT8``, capped by ``QKV_ISA``)."""
    return cpu.i8_choose(want) if want is not None else cpu.I8


def int8_matmul(x: np.ndarray, packed: Int8Weights, bias: np.ndarray | None, out: np.ndarray,
                gelu: bool = False, isa: str | None = None) -> np.ndarray:
    """out [R, N] = x [R, K] · W + bias (then BERT's exact GELU if ``gelu``), W as ``pack_int8``
    made it, x quantised per row here; see the module's docstring. ``isa``: one of ``UNITS``
    (default ``unit()``). One thread; x, bias and out float32, out C-contiguous."""
    R, K = x.shape
    N = packed.scale.shape[1]
    if K != packed.k or out.shape != (R, N):
        raise ValueError(f"int8_matmul: x {x.shape}, W {packed.shape}, out {out.shape} do not fit")
    u = unit(isa)
    if u in UNIT_CODE and cpu.native(x, out, *([] if bias is None else [bias])):
        if gelu and bias is None:
            bias = np.zeros(N, np.float32)
        if cpu.lib.qkv_i8_gemm(x.ctypes.data, R, K, packed.q.ctypes.data, packed.scale.ctypes.data,
                               packed.colsum.ctypes.data, N, cpu.ptr(bias), int(gelu), out.ctypes.data,
                               UNIT_CODE[u], BLOCK) == 0:
            return out
    return _twin(x, packed, bias, out, gelu)
