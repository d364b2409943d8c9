"""Products on 4-bit weights (Q4_0 blocks), expanded inside the kernel; activations stay float32.

The blocks come from a file such as multilingual-e5-small's E5S1 (``qkv.model.weights.e5s1``): 32 weights
share a float16 scale d and each is (q − 8)·d. ``pack_q4`` rearranges a linear layer's blocks once,
at load, into Q4 panels (layout documented in ``q4/kernels.c``); ``q4_matmul`` multiplies by them:
a few rows expand each panel row into registers as they go (the product reads 0.625 bytes a weight
instead of 4), many rows expand the matrix once into float32 panels in a scratch buffer and run the
blocked float32 product. No quantization of the activations, so the result equals x times the
dequantized matrix up to float32 rounding: the parity of the model holds.

Where ``qkv.kernels.bfloat16`` chose AMX tiles (CPUID, XCR0, the arch_prctl permission; ``QKV_ISA``
forces a unit), the products run on the tiles instead (``qkv/kernels/q4/amx.c``): x split into
three bfloat16 parts whose sum is x exactly (Henry, Tang & Heinecke, ARITH 2019), each times the
exact bfloat16 q − 8 of a block, the block's scale applied in float32: exact products, float32
sums, an error bound of the float32 kernel's order (stated in the C file). Without tiles, x is
quantised per block of 32 to int8 with one scale (ggml's Q8_0) and the blocks are multiplied by
integer dot products, int32 sums, one scale multiply a block (``qkv/kernels/q4/int8.c``): "vnni"
(AVX-512 VNNI, e.g. Zen 4; ``QKV_ISA=avx512bf16`` on an AMX Xeon) or "avx2" (``QKV_ISA=float32``
stands in for such a CPU). Not exact: the bound (about d_x/2 per input, d_x = max|x_block|/127)
is stated in that file and docs/engine.md. ``unit()`` names the one in use. ``q4_ffn`` runs a
feed-forward block (two products, GELU between) in one call on those units, the hidden layer kept
as int8 blocks (the same bits as two ``q4_matmul`` calls).

Each function has a NumPy twin (the dequantized matrix and ``np.matmul``), used when the compiled
kernels are off, and held equal to the compiled one by tests/kernels/test_q4.py.
"""

from __future__ import annotations

import numpy as np

from qkv.kernels import cpu, float32

BLOCK = 32  # weights per block, along the input dimension
PANEL = 32  # outputs per panel, as the float32 products
BLOCK_BYTES = int(cpu.lib.qkv_q4_block_bytes()) if cpu.lib is not None else PANEL * 4 + BLOCK * PANEL // 2
# From this many rows the matrix is expanded once into float32 panels for the blocked product
# (qkv_q4_gemm); below it each panel row is expanded into registers as it is used (qkv_q4_matmul).
EXPAND_FROM = 48

Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # a Q4_0 block as stored, 18 bytes


def _blocks_check(blocks: np.ndarray) -> None:
    if blocks.dtype != Q4_BLOCK or blocks.ndim != 2:
        raise ValueError(f"expected Q4_0 blocks [rows, blocks] of dtype {Q4_BLOCK}, got {blocks.dtype} {blocks.shape}")


def dequantize_rows(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks [rows, nb] -> float32 [rows, nb·32], (q − 8)·d (exact in float32)."""
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8  # [rows, nb, 32]
    return (q * blocks["d"].astype(np.float32)[..., None]).reshape(blocks.shape[0], -1)


def pack_q4(blocks: np.ndarray) -> np.ndarray:
    """A linear layer's Q4_0 blocks [out N, in K / 32] (the file's [out, in] order) -> Q4 panels
    [N / 32, K / 32, BLOCK_BYTES] uint8, 64-byte aligned; see ``q4/kernels.c`` for the layout."""
    _blocks_check(blocks)
    n, nb = blocks.shape
    if n % PANEL:
        raise ValueError(f"pack_q4: {n} outputs are not whole panels of {PANEL}")
    out = float32.aligned_empty((n // PANEL, nb, BLOCK_BYTES), np.uint8)
    b = blocks.reshape(n // PANEL, PANEL, nb).transpose(0, 2, 1)  # [panel, block, output]
    out[..., :PANEL * 4] = np.ascontiguousarray(b["d"], dtype=np.float32).view(np.uint8).reshape(n // PANEL, nb, PANEL * 4)
    qs = b["qs"]  # [panel, block, output j, byte i]: weight i (low) and i + 16 (high) of output j
    lo = (qs & 0x0F).astype(np.uint8)  # [p, b, out, k < 16]
    hi = (qs >> 4).astype(np.uint8)
    q = np.concatenate([lo, hi], axis=-1).transpose(0, 1, 3, 2)  # [p, b, k (32), out (32)]
    packed = q[..., :16] | (q[..., 16:] << 4)  # byte j of row k: output j low, output j + 16 high
    out[..., PANEL * 4:] = packed.reshape(n // PANEL, nb, BLOCK * PANEL // 2)
    return out


def unpack_q4(panels: np.ndarray) -> np.ndarray:
    """The dequantized matrix W [K, N] (float32, the encoder's x·W orientation) of Q4 panels."""
    np_, nb, _ = panels.shape
    d = panels[..., :PANEL * 4].copy().view(np.float32)  # [p, b, 32]
    q = panels[..., PANEL * 4:].reshape(np_, nb, BLOCK, PANEL // 2)  # [p, b, k, byte]
    q = np.concatenate([q & 0x0F, q >> 4], axis=-1).astype(np.float32) - 8  # [p, b, k, out]
    w = q * d[:, :, None, :]
    return np.ascontiguousarray(w.transpose(1, 2, 0, 3).reshape(nb * BLOCK, np_ * PANEL))


UNITS = cpu.Q4_UNITS  # ("amx", "vnni", "avx2", "float32")
UNIT_CODE = {"float32": 0, "amx": 1, "vnni": 2, "avx2": 3}  # as q4/layer.c takes it
EXACT = ("amx", "float32")  # x times the dequantized W to float32 rounding; vnni and avx2 quantise x


def unit(isa: str | None = None) -> str:
    """The unit 4-bit products run on: "amx" (tiles, exact bfloat16 splits of x) where the
    bfloat16 unit in use (``qkv.cpu.ISA``) is AMX; else "vnni" or "avx2" (x in int8 blocks,
    integer dot products: ``q4/int8.c``, within the bound stated there) where the CPU has them
    (``cpu.Q4``, chosen by ``cpu.select``); else "float32". ``isa`` forces one: it runs where this
    process can, else the next one down (see ``cpu.q4_choose``; "amx" falls to float32)."""
    if isa is None:
        return cpu.Q4 if cpu.lib is not None else "float32"
    return cpu.q4_choose(isa)


def int8_blocks(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x [R, K] as the int8-block units quantise it (q4/int8.c's quantize_blocks, in NumPy, the same
    float32 steps): (xq [R, K] integers in [−127, 127] as float32, d_x [R, K/32] float32), x̂ = d_x·xq.
    Rounds to nearest even, as VCVTPS2DQ under the default MXCSR."""
    x = np.asarray(x, np.float32)
    xb = x.reshape(x.shape[0], -1, BLOCK)
    amax = np.abs(xb).max(-1, keepdims=True)
    inv = (np.float32(127) / np.where(amax > 0, amax, np.float32(1))).astype(np.float32) * (amax > 0)
    xq = np.clip(np.rint(xb * inv), -127, 127)
    dx = (amax / np.float32(127)).astype(np.float32)
    return xq.reshape(x.shape), dx[..., 0]


def int8_seen(x: np.ndarray) -> np.ndarray:
    """x̂ = d_x·xq: x [..., K] as the int8-block product reads it, in float64 (exact) for float64 x,
    else float32 (one rounding of 2^-24 relative). x̂·W is then the product to float32 rounding."""
    x = np.asarray(x)
    rows = x.reshape(-1, x.shape[-1])
    xq, dx = int8_blocks(rows)
    dt = np.float64 if x.dtype == np.float64 else np.float32
    out = xq.reshape(len(rows), -1, BLOCK).astype(dt) * dx[..., None].astype(dt)
    return out.reshape(x.shape)


def q4_work(k: int, n: int) -> int:
    """Floats of scratch ``q4_matmul`` needs for many rows of a [K, N] matrix (its float32 panels)."""
    return k * n


def q4_matmul(x: np.ndarray, panels: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
              gelu: bool = False, work: np.ndarray | None = None, isa: str | None = None) -> np.ndarray:
    """out [R, N] = x [R, K] · W + bias, then BERT's exact GELU if ``gelu``; W as Q4 panels.
    ``isa``: one of ``UNITS`` (default ``unit()``; see there). ``work``: float32 scratch of
    ``q4_work(K, N)`` elements, 64-byte aligned, for the float32 kernel at R ≥ EXPAND_FROM
    (allocated when missing; the tiles keep their own). One thread. The twin expands W and runs
    the steps in NumPy."""
    R, K = x.shape
    n_p, nb, width = panels.shape if panels.ndim == 3 else (0, 0, 0)
    N = n_p * PANEL
    if panels.ndim != 3 or nb * BLOCK != K or width != BLOCK_BYTES or out.shape != (R, N):
        raise ValueError(f"q4_matmul: x {x.shape}, panels {panels.shape}, out {out.shape} do not fit")
    arrays = [a for a in (x, bias, out) if a is not None]
    if cpu.native(*arrays) and panels.flags.c_contiguous and panels.dtype == np.uint8:
        if gelu and bias is None:
            bias = np.zeros(N, np.float32)
        lib = cpu.lib
        u = unit(isa)
        if u == "amx" and lib.qkv_q4_amx(
                x.ctypes.data, R, K, panels.ctypes.data, N, cpu.ptr(bias), int(gelu), out.ctypes.data) == 0:
            return out
        if u in ("vnni", "avx2") and lib.qkv_q4_int(x.ctypes.data, R, K, panels.ctypes.data, N, cpu.ptr(bias),
                                                    int(gelu), out.ctypes.data, 1 if u == "vnni" else 2) == 0:
            return out
        if R >= EXPAND_FROM:
            if (work is None or work.size < K * N or work.dtype != np.float32 or not work.flags.c_contiguous
                    or work.ctypes.data % float32.ALIGN):
                work = float32.aligned_empty(K * N, np.float32)
            lib.qkv_q4_gemm(x.ctypes.data, R, K, panels.ctypes.data, N, cpu.ptr(bias), int(gelu),
                            out.ctypes.data, work.ctypes.data)
        else:
            lib.qkv_q4_matmul(x.ctypes.data, R, K, panels.ctypes.data, N, cpu.ptr(bias), int(gelu),
                              out.ctypes.data)
        return out
    np.matmul(x, unpack_q4(panels).astype(x.dtype, copy=False), out=out)
    if gelu:
        return float32.bias_gelu(out, np.zeros(N, out.dtype) if bias is None else bias)
    if bias is not None:
        out += bias
    return out


def q4_ffn(x: np.ndarray, p_in: np.ndarray, b_in: np.ndarray, p_out: np.ndarray, b_out: np.ndarray | None,
           out: np.ndarray, isa: str | None = None) -> np.ndarray:
    """out [R, N] = GELU(x [R, K]·W_in + b_in)·W_out + b_out (b_out may be None): a feed-forward
    block on Q4 panels. On the int8-block units ("vnni", "avx2") one compiled call
    (``qkv_q4_int_ffn``) that keeps the hidden layer as int8 blocks, never float32: the same bits
    as the two ``q4_matmul`` calls it replaces; elsewhere (other units, no kernels) those two calls."""
    R, K = x.shape
    if p_in.ndim != 3 or p_out.ndim != 3 or p_in.shape[1] * BLOCK != K or p_out.shape[1] != p_in.shape[0] \
            or out.shape != (R, p_out.shape[0] * PANEL) or b_in is None or b_in.shape != (p_in.shape[0] * PANEL,):
        raise ValueError(f"q4_ffn: x {x.shape}, panels {p_in.shape} and {p_out.shape}, out {out.shape} do not fit")
    u = unit(isa)
    arrays = [a for a in (x, b_in, b_out, out) if a is not None]
    if u in ("vnni", "avx2") and cpu.native(*arrays) and all(
            p.flags.c_contiguous and p.dtype == np.uint8 and p.shape[2] == BLOCK_BYTES for p in (p_in, p_out)):
        if cpu.lib.qkv_q4_int_ffn(x.ctypes.data, R, K, p_in.ctypes.data, p_in.shape[0] * PANEL, b_in.ctypes.data,
                                  p_out.ctypes.data, out.shape[1], cpu.ptr(b_out), out.ctypes.data,
                                  1 if u == "vnni" else 2) == 0:
            return out
    h = q4_matmul(x, p_in, b_in, np.empty((R, p_in.shape[0] * PANEL), np.float32), gelu=True, isa=isa)
    return q4_matmul(h, p_out, b_out, out, isa=isa)


def q4_rows(blocks: np.ndarray, ids: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Rows ``ids`` of a Q4_0 matrix [rows, nb] (the file's own blocks, e.g. the word embeddings),
    expanded: [len(ids), nb·32]. Only these rows are ever expanded."""
    _blocks_check(blocks)
    ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= blocks.shape[0]):
        raise IndexError(f"row ids must lie in [0, {blocks.shape[0]}), got {ids.min()}..{ids.max()}")
    nb = blocks.shape[1]
    if cpu.lib is not None and blocks.flags.c_contiguous and np.dtype(dtype) == np.float32:
        out = np.empty((ids.size, nb * BLOCK), np.float32)
        cpu.lib.qkv_q4_rows(blocks.ctypes.data, nb, ids.ctypes.data, ids.size, out.ctypes.data)
        return out
    return dequantize_rows(blocks[ids]).astype(dtype, copy=False)


class Q4Rows:
    """An embedding table [rows, width] kept as its Q4_0 blocks (e.g. a view into a mapped file);
    indexing expands only the rows asked for, in ``dtype``."""

    def __init__(self, blocks: np.ndarray, dtype=np.float32):
        _blocks_check(blocks)
        self.blocks = blocks
        self.shape = (blocks.shape[0], blocks.shape[1] * BLOCK)
        self.dtype = np.dtype(dtype)
        self.ndim = 2

    @property
    def nbytes(self) -> int:
        return self.blocks.nbytes

    def astype(self, dtype) -> "Q4Rows":
        return Q4Rows(self.blocks, dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, ids) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError("Q4Rows is indexed by integer token ids")
        rows = q4_rows(self.blocks, ids.reshape(-1), self.dtype)
        return rows.reshape(*ids.shape, self.shape[1])
