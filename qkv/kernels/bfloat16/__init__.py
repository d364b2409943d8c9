"""Products and attention in bfloat16 on the CPU's matrix units.

``precision="bfloat16"`` packs each weight matrix once as bfloat16 panels (``pack_bf16``) and
multiplies them (``gemm_bf16``, ``kernels.c`` beside this file) on the unit ``qkv.kernels.cpu``
chose at import (``cpu.ISA``: ``amx`` tiles, ``avx512bf16`` dot products, or ``float32``, where
bfloat16 callers run the float32 product; ``QKV_ISA`` forces one, ``cpu.select`` re-chooses).
Inputs are rounded to bfloat16 (8 significant bits), products summed in float32; LayerNorm,
softmax, GELU and the residuals stay float32. The error bound is stated in the C file and held
by tests/kernels/test_bfloat16.py; every function has a NumPy twin (the same rounding, float32
BLAS sums).
"""

from __future__ import annotations

import numpy as np

from qkv.kernels import cpu, float32

PANEL = 32  # columns per panel (qkv_bf16_panel_width)
DEPTH = 32  # K is padded to a multiple of this (qkv_bf16_depth: one AMX tile's depth)


# ------------------------------------------------------------------------------------ packing
def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bits (uint16), rounded to nearest even, NaN kept NaN (as VCVTNE2PS2BF16)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32)
    out = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)  # quiet NaN, sign kept
    return out


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    """bfloat16 bits → float32 (exact)."""
    return (b.astype(np.uint32) << 16).view(np.float32)


def round_bf16(a: np.ndarray) -> np.ndarray:
    """a rounded to the nearest bfloat16, as float32."""
    return from_bf16_bits(to_bf16_bits(a))


def pack_bf16(w: np.ndarray) -> np.ndarray | None:
    """W [K, N] float32 as bfloat16 panels [N / 32, Kp / 2, 32, 2] (uint16 bits; Kp = K rounded up
    to 32, zero rows added): for each pair of rows of W, 32 columns × the pair side by side — the
    layout AMX's B tiles and VDPBF16PS read. None when N is not whole panels."""
    if w.ndim != 2 or w.shape[1] % PANEL:
        return None
    k, n = w.shape
    kp = -(-k // DEPTH) * DEPTH
    wp = np.zeros((kp, n), np.float32)
    wp[:k] = w
    panels = float32.aligned_empty((n // PANEL, kp // 2, PANEL, 2), np.uint16)
    panels[:] = to_bf16_bits(wp).reshape(kp // 2, 2, n // PANEL, PANEL).transpose(2, 0, 3, 1)
    return panels


def unpack_bf16(panels: np.ndarray, k: int) -> np.ndarray:
    """The inverse of ``pack_bf16``: W rounded to bfloat16, [K, N] float32."""
    p, kp2, width, _ = panels.shape
    return from_bf16_bits(panels.transpose(1, 3, 0, 2).reshape(kp2 * 2, p * width))[:k]


# ----------------------------------------------------------------------------------- product
def rows_padded(rows: int) -> int:
    """Rows a bfloat16 x handed to ``gemm_bf16`` must have for ``rows`` rows of output: whole
    tiles of either unit's kernel (the rows past ``rows`` are read, their values never used)."""
    return (rows + 31) // 32 * 32 + 12  # qkv_bf16_rows_padded


def gemm_bf16(x: np.ndarray, panels: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
              gelu: bool = False, isa: str | None = None) -> np.ndarray:
    """out [R, N] = bf16(x) [R, K] · W + bias, then BERT's exact GELU if ``gelu``; W packed by
    ``pack_bf16``; sums in float32. ``isa``: the unit (default ``cpu.ISA``); "float32", or no compiled
    library, runs the NumPy twin (the same rounding of x and W, float32 BLAS sums).

    x float32 [R, K], or bfloat16 bits (uint16) [≥ rows_padded(R), Kp], already rounded (e.g. the
    bfloat16 ``out`` of the product before): no rounding pass. out float32, or uint16: the result
    rounded to bfloat16 bits (nearest even), for the next product to read."""
    R, N = out.shape[0], panels.shape[0] * PANEL
    kp = panels.shape[1] * 2
    bits_in, bits_out = x.dtype == np.uint16, out.dtype == np.uint16
    K = kp if bits_in else x.shape[1]
    if (panels.ndim != 4 or panels.shape[2:] != (PANEL, 2) or kp < K or kp - K >= DEPTH or out.shape != (R, N)
            or x.ndim != 2 or x.shape[1] != K or x.shape[0] < (rows_padded(R) if bits_in else R)
            or (not bits_in and x.shape[0] != R)):
        raise ValueError(f"gemm_bf16: x {x.shape} {x.dtype}, panels {panels.shape}, out {out.shape} do not fit"
                         + (f" (bfloat16 x needs {rows_padded(R)} rows of {kp})" if bits_in else ""))
    isa = cpu.ISA if isa is None else isa
    arrays = [a for a in (bias,) if a is not None] + ([] if bits_in else [x]) + ([] if bits_out else [out])
    if (isa in cpu.ISA_CODE and cpu.native(*arrays) and panels.flags.c_contiguous
            and panels.dtype == np.uint16 and (not bits_in or x.flags.c_contiguous)
            and (not bits_out or out.flags.c_contiguous)
            and cpu.lib.qkv_gemm_bf16_io(None if bits_in else cpu.ptr(x), cpu.ptr(x) if bits_in else None,
                                              R, K, cpu.ptr(panels), kp, N, cpu.ptr(bias), int(gelu),
                                              None if bits_out else cpu.ptr(out),
                                              cpu.ptr(out) if bits_out else None, cpu.ISA_CODE[isa]) == 0):
        return out
    xr = from_bf16_bits(x[:R]) if bits_in else round_bf16(x)
    y = np.matmul(xr, unpack_bf16(panels, K))
    if gelu:
        y = float32.bias_gelu(y, np.zeros(N, y.dtype) if bias is None else bias)
    elif bias is not None:
        y += bias
    out[:] = to_bf16_bits(y) if bits_out else y
    return out


# --------------------------------------------------------------------------------- attention
ATTENTION_HEAD = 32  # the head size the attention kernels take (all-MiniLM-L6-v2, bge-small, e5-small)


# The attention kernel of each unit (kernels.c): the same steps and roundings, products on tiles
# or as VDPBF16PS dot products; the float32 unit has none (callers run the float32 attention).
_ATTENTION_KERNEL = {"amx": "qkv_attention_bf16_io", "avx512bf16": "qkv_attention_bf16_dp_io"}
ATTENTION_HOW = {"amx": "AMX tiles", "avx512bf16": "AVX-512 BF16 dot products (VDPBF16PS)"}


def attention_unit(isa: str | None = None) -> str:
    """Where ``precision="bfloat16"`` attention runs its two products with unit ``isa`` (default
    ``cpu.ISA``), in words: the unit's kernel (head size 32), or float32 (``qkv info`` says it)."""
    isa = cpu.ISA if isa is None else isa
    if isa in _ATTENTION_KERNEL and cpu.lib is not None:
        return f"{isa}: {ATTENTION_HOW[isa]}, head size {ATTENTION_HEAD}"
    return "float32"


def attention_text_bf16(qkv: np.ndarray, heads: int, scale: float, ctx: np.ndarray,
                        work: np.ndarray | None = None, isa: str | None = None) -> bool:
    """Steps 2-5 of one text's attention (as ``qkv.kernels.float32.attention_text``) with both products
    in bfloat16 on the unit ``isa`` (default ``cpu.ISA``): AMX tiles, or AVX-512 BF16 dot products
    (VDPBF16PS), the same roundings either way: Q, K, V and the softmax weights rounded to
    bfloat16, the scores, softmax and sums in float32 (one stated bound, kernels.c and
    tests/kernels/test_bfloat16.py). qkv [n, 3·H] (Q | K | V), ctx [n, H], rows may be further
    apart, columns adjacent; head size 32. Each may be float32 or bfloat16 bits (uint16: Q | K | V
    as the product before wrote them; the output rounded to bfloat16 for the product after).
    Returns False (doing nothing) when the unit has no such kernel (float32) or the arrays do not
    fit; callers then run the float32 kernel. ``work``: optional uint8 scratch of at least
    ``attention_work_bf16(n)`` bytes."""
    isa = cpu.ISA if isa is None else isa
    n, width = qkv.shape
    H = width // 3
    if (isa not in _ATTENTION_KERNEL or cpu.lib is None or H != heads * ATTENTION_HEAD or width != 3 * H
            or ctx.shape != (n, H) or qkv.dtype not in (np.float32, np.uint16) or ctx.dtype not in (np.float32, np.uint16)
            or qkv.strides[1] != qkv.itemsize or ctx.strides[1] != ctx.itemsize
            or qkv.strides[0] % qkv.itemsize or ctx.strides[0] % ctx.itemsize):
        return False
    if n == 0:
        return True
    need = attention_work_bf16(n)
    if work is None or work.nbytes < need or not work.flags.c_contiguous:
        work = np.empty(need, np.uint8)
    bits_in, bits_out = qkv.dtype == np.uint16, ctx.dtype == np.uint16
    q, c = cpu.ptr(qkv), cpu.ptr(ctx)
    kernel = getattr(cpu.lib, _ATTENTION_KERNEL[isa])
    return kernel(None if bits_in else q, q if bits_in else None, n, qkv.strides[0] // qkv.itemsize, heads, scale,
                  None if bits_out else c, c if bits_out else None, ctx.strides[0] // ctx.itemsize,
                  cpu.ptr(work)) == 0


def add_layer_norm_bf16(x: np.ndarray, res: np.ndarray | None, bias: np.ndarray | None, g: np.ndarray,
                        b: np.ndarray, eps: float, bits: np.ndarray) -> np.ndarray:
    """``float32.add_layer_norm`` in place on x [n, width] (float32: the residual stream), and the
    result rounded to bfloat16 bits into ``bits`` [n, width] for the products that read it, in
    the same pass (16 rows at a time, in L1). Returns x."""
    arrays = [a for a in (x, res, bias, g, b) if a is not None]
    if (cpu.ISA in cpu.ISA_CODE and cpu.native(*arrays) and x.ndim == 2 and x.shape[1] % DEPTH == 0
            and (res is None or res.shape == x.shape) and bits.shape == x.shape and bits.dtype == np.uint16
            and bits.flags.c_contiguous):
        cpu.lib.qkv_add_layernorm_bf16(cpu.ptr(x), cpu.ptr(res), cpu.ptr(bias), cpu.ptr(g),
                                            cpu.ptr(b), x.shape[0], x.shape[1], eps, cpu.ptr(bits))
        return x
    float32.add_layer_norm(x, res, bias, g, b, eps)
    bits[:] = to_bf16_bits(x)
    return x


def attention_work_bf16(n: int) -> int:
    """Bytes of scratch ``attention_text_bf16`` needs for a text of n tokens."""
    return int(cpu.lib.qkv_attention_bf16_work(n)) if cpu.lib is not None else 0

