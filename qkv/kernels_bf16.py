"""Products in bfloat16 on the CPU's matrix units, and the choice of unit at run time.

``precision="bfloat16"`` packs each weight matrix once as bfloat16 panels (``pack_bf16``) and
multiplies them (``gemm_bf16``, ``qkv/_kernels_bf16.c``) on the best unit this process may use:

- ``amx``: AMX tiles (TDPBF16PS), where CPUID reports AMX-TILE and AMX-BF16 (with AVX-512 BF16,
  which the rounding of x uses), XCR0 says the OS saves the tile state, and Linux grants this
  process the tile data state (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``);
- ``avx512bf16``: AVX-512 BF16 dot products (VDPBF16PS), e.g. AMD Zen 4;
- ``float32``: neither — bfloat16 callers run the float32 product (``qkv.kernels.gemm``).

``QKV_ISA=amx|avx512bf16|float32`` starts the search at that unit (so tests can force each one);
one the CPU lacks or the kernel refuses falls to the next, never a crash. ``ISA`` holds the unit
in use, ``WHY`` the reasons any better one was passed over; ``qkv.kernels.STATUS`` names both once
this module is imported (``import qkv`` does: the model's packed weights use it). It sits beside
``qkv.kernels`` in the bottom layer and imports it, never the other way round.
Inputs are rounded to bfloat16 (8 significant bits), products summed in float32; LayerNorm,
softmax, GELU and the residuals stay float32. The error bound is stated in the C file.
"""

from __future__ import annotations

import os

import numpy as np

from qkv import kernels

ISAS = ("amx", "avx512bf16", "float32")
_CPU_AVX512BF16, _CPU_AMX, _OS_AMX = 1, 2, 4  # bits of qkv_bf16_cpu()
_ISA_CODE = {"avx512bf16": 1, "amx": 2}
PANEL = 32  # columns per panel (qkv_bf16_panel_width)
DEPTH = 32  # K is padded to a multiple of this (qkv_bf16_depth: one AMX tile's depth)


def cpu_bits() -> int:
    """What the CPU and OS offer (bits above); 0 without the compiled library."""
    return int(kernels._lib.qkv_bf16_cpu()) if kernels._lib is not None else 0


def request_amx() -> bool:
    """Ask Linux for the AMX tile data state for this process (idempotent)."""
    return kernels._lib is not None and bool(kernels._lib.qkv_amx_request())


def offered() -> list[str]:
    """The units this CPU has (before any permission request), best first; float32 always."""
    bits = cpu_bits()
    out = []
    if bits & _CPU_AMX and bits & _OS_AMX and bits & _CPU_AVX512BF16:
        out.append("amx")
    if bits & _CPU_AVX512BF16:
        out.append("avx512bf16")
    return out + ["float32"]


def choose(want: str | None = None) -> tuple[str, str]:
    """(unit, why): the best unit from ``want`` (default ``QKV_ISA``, else the best) down that
    this process can use, and why each better one was passed over."""
    want = (os.environ.get("QKV_ISA", "") if want is None else want).strip().lower()
    why = []
    if want and want not in ISAS:
        why.append(f"QKV_ISA={want!r} is not one of {', '.join(ISAS)}: ignored")
        want = ""
    if kernels._lib is None:
        return "float32", "; ".join(why + ["the compiled kernels are not in use"])
    bits = cpu_bits()
    for isa in ISAS[ISAS.index(want) if want else 0:]:
        if isa == "amx":
            if not bits & _CPU_AMX:
                why.append("amx: the CPU has no AMX-BF16")
            elif not bits & _OS_AMX:
                why.append("amx: the OS does not enable the tile state (XCR0)")
            elif not bits & _CPU_AVX512BF16:
                why.append("amx: the CPU has no AVX-512 BF16 (used to round x)")
            elif not request_amx():
                why.append("amx: Linux refused the tile data permission (arch_prctl)")
            else:
                return isa, "; ".join(why)
        elif isa == "avx512bf16":
            if bits & _CPU_AVX512BF16:
                return isa, "; ".join(why)
            why.append("avx512bf16: the CPU (or OS) has no AVX-512 BF16")
        else:
            return isa, "; ".join(why)
    raise AssertionError("unreachable: float32 is always offered")


ISA, WHY = "float32", ""
_BASE_STATUS = kernels.STATUS


def select(want: str | None = None) -> str:
    """Choose the unit again (``want`` as ``QKV_ISA``), update ``ISA``/``WHY`` and
    ``qkv.kernels.STATUS``; returns the unit. Packed weights do not depend on it."""
    global ISA, WHY
    ISA, WHY = choose(want)
    kernels.STATUS = (f"{_BASE_STATUS}; bfloat16 products: {ISA}" + (f" ({WHY})" if WHY else "")
                      + f"; 4-bit products: {'amx (x in three exact bfloat16 parts)' if ISA == 'amx' else 'float32'}")
    return ISA


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
    panels = kernels.aligned_empty((n // PANEL, kp // 2, PANEL, 2), np.uint16)
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
    ``pack_bf16``; sums in float32. ``isa``: the unit (default ``ISA``); "float32", or no compiled
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
    isa = ISA if isa is None else isa
    arrays = [a for a in (bias,) if a is not None] + ([] if bits_in else [x]) + ([] if bits_out else [out])
    if (isa in _ISA_CODE and kernels._native(*arrays) and panels.flags.c_contiguous
            and panels.dtype == np.uint16 and (not bits_in or x.flags.c_contiguous)
            and (not bits_out or out.flags.c_contiguous)
            and kernels._lib.qkv_gemm_bf16_io(None if bits_in else kernels._ptr(x), kernels._ptr(x) if bits_in else None,
                                              R, K, kernels._ptr(panels), kp, N, kernels._ptr(bias), int(gelu),
                                              None if bits_out else kernels._ptr(out),
                                              kernels._ptr(out) if bits_out else None, _ISA_CODE[isa]) == 0):
        return out
    xr = from_bf16_bits(x[:R]) if bits_in else round_bf16(x)
    y = np.matmul(xr, unpack_bf16(panels, K))
    if gelu:
        y = kernels.bias_gelu(y, np.zeros(N, y.dtype) if bias is None else bias)
    elif bias is not None:
        y += bias
    out[:] = to_bf16_bits(y) if bits_out else y
    return out


# --------------------------------------------------------------------------------- attention
ATTENTION_HEAD = 32  # the head size the tile kernel takes (all-MiniLM-L6-v2, bge-small, e5-small)


def attention_text_bf16(qkv: np.ndarray, heads: int, scale: float, ctx: np.ndarray,
                        work: np.ndarray | None = None, isa: str | None = None) -> bool:
    """Steps 2-5 of one text's attention (as ``qkv.kernels.attention_text``) with both products
    on AMX tiles: Q, K, V and the softmax weights rounded to bfloat16, the scores, softmax and
    sums in float32. qkv [n, 3·H] (Q | K | V), ctx [n, H], rows may be further apart, columns
    adjacent; head size 32. Each may be float32 or bfloat16 bits (uint16: Q | K | V as the
    product before wrote them; the output rounded to bfloat16 for the product after). Returns
    False (doing nothing) unless the unit is AMX and the arrays fit; callers then run the float32
    kernel. ``work``: optional uint8 scratch of at least ``attention_work_bf16(n)`` bytes."""
    isa = ISA if isa is None else isa
    n, width = qkv.shape
    H = width // 3
    if (isa != "amx" or kernels._lib is None or H != heads * ATTENTION_HEAD or width != 3 * H
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
    q, c = kernels._ptr(qkv), kernels._ptr(ctx)
    return kernels._lib.qkv_attention_bf16_io(None if bits_in else q, q if bits_in else None, n,
                                              qkv.strides[0] // qkv.itemsize, heads, scale,
                                              None if bits_out else c, c if bits_out else None,
                                              ctx.strides[0] // ctx.itemsize, kernels._ptr(work)) == 0


def add_layer_norm_bf16(x: np.ndarray, res: np.ndarray | None, bias: np.ndarray | None, g: np.ndarray,
                        b: np.ndarray, eps: float, bits: np.ndarray) -> np.ndarray:
    """``kernels.add_layer_norm`` in place on x [n, width] (float32: the residual stream), and the
    result rounded to bfloat16 bits into ``bits`` [n, width] for the products that read it, in
    the same pass (16 rows at a time, in L1). Returns x."""
    arrays = [a for a in (x, res, bias, g, b) if a is not None]
    if (ISA in _ISA_CODE and kernels._native(*arrays) and x.ndim == 2 and x.shape[1] % DEPTH == 0
            and (res is None or res.shape == x.shape) and bits.shape == x.shape and bits.dtype == np.uint16
            and bits.flags.c_contiguous):
        kernels._lib.qkv_add_layernorm_bf16(kernels._ptr(x), kernels._ptr(res), kernels._ptr(bias), kernels._ptr(g),
                                            kernels._ptr(b), x.shape[0], x.shape[1], eps, kernels._ptr(bits))
        return x
    kernels.add_layer_norm(x, res, bias, g, b, eps)
    bits[:] = to_bf16_bits(x)
    return x


def attention_work_bf16(n: int) -> int:
    """Bytes of scratch ``attention_text_bf16`` needs for a text of n tokens."""
    return int(kernels._lib.qkv_attention_bf16_work(n)) if kernels._lib is not None else 0


select()
