"""Q4Panels: a weight matrix kept in 4-bit blocks, one more packed product (``qkv.model.linear``).

A reader of a 4-bit format (``qkv.model.weights.e5s1``) puts these straight into the parameter set;
``PackedWeights`` then uses them as they are. The blocks are llama.cpp's Q4_0 (32 weights share a
float16 scale; a weight is (q − 8)·d), rearranged once at load into column panels
(``qkv.kernels.q4.pack_q4``; layout in ``qkv/kernels/q4/kernels.c``) and expanded inside the product: the
activations stay float32, so the result is x times the dequantized matrix up to float32 rounding.
Where the AMX tiles are in use (``q4.unit()``) the same panels are multiplied on them, x
split into three bfloat16 parts (exact products; ``qkv/kernels/q4/amx.c``); without tiles, on
integer dot products over x in int8 blocks (``qkv/kernels/q4/int8.c``, not exact: its bound is
stated there). 0.625 bytes a weight in memory (float32: 4).
"""

from __future__ import annotations

import threading

import numpy as np

from qkv.kernels import float32, q4
from qkv.model.linear import Linear, _finish
from qkv.model.workers import row_cuts


class Q4Panels(Linear):
    """W [K in, N out] from Q4_0 blocks stored [N, K / 32] (a layer's [out, in], blocked along in)."""

    precision = "q4_0"
    _scratch = threading.local()  # per thread: float32 panels for products of many rows

    def __init__(self, blocks: np.ndarray):
        self.panels = q4.pack_q4(blocks)
        self.shape = (blocks.shape[1] * q4.BLOCK, blocks.shape[0])

    @property
    def nbytes(self) -> int:
        return self.panels.nbytes

    def _work(self) -> np.ndarray | None:
        """This thread's scratch for the many-rows product (the expanded matrix, ≤ 2.4 MB here)."""
        need = q4.q4_work(*self.shape)
        buf = getattr(self._scratch, "buf", None)
        if buf is None or buf.size < need:
            buf = self._scratch.buf = float32.aligned_empty(need, np.float32)
        return buf

    def __call__(self, x, out, *, bias=None, act=None, workers=None):
        if x.dtype != np.float32:
            raise TypeError("4-bit products compute in float32; Encoder.astype gives dense weights for other dtypes")
        x = np.ascontiguousarray(x)
        fused = act in (None, "gelu")
        b = bias if fused else None
        gelu = act == "gelu"
        threads = 1 if workers is None else workers.threads
        unit = q4.unit()  # tiles: whole 32-row tile blocks per thread; tiles and int8 keep their scratch
        cuts = row_cuts(x.shape[0], threads, step=32 if unit == "amx" else 12)

        def run(g: int) -> None:
            lo, hi = cuts[g], cuts[g + 1]
            work = self._work() if hi - lo >= q4.EXPAND_FROM and unit == "float32" else None
            q4.q4_matmul(x[lo:hi], self.panels, b, out[lo:hi], gelu=gelu, work=work)

        if workers is None or len(cuts) == 2:
            run(0)
        else:
            workers.run(run, len(cuts) - 1)
        return out if fused else _finish(out, bias, act)

    def feed_forward(self, w_out, x, out, *, bias=None, workers=None) -> np.ndarray | None:
        """out = GELU(x·W + bias)·W_out (W_out's bias left to the caller's add-and-norm) in one
        product call per thread that never writes the hidden layer in float32
        (``q4.q4_ffn``): where the unit in use quantises x (int8 blocks) and W_out is Q4Panels
        too; the same bits as the two products. None (nothing done) otherwise."""
        if not (isinstance(w_out, Q4Panels) and self.quantises and x.dtype == np.float32 and bias is not None):
            return None
        x = np.ascontiguousarray(x)
        cuts = row_cuts(x.shape[0], 1 if workers is None else workers.threads, step=12)

        def run(g: int) -> None:
            lo, hi = cuts[g], cuts[g + 1]
            q4.q4_ffn(x[lo:hi], self.panels, bias, w_out.panels, None, out[lo:hi])

        if workers is None or len(cuts) == 2:
            run(0)
        else:
            workers.run(run, len(cuts) - 1)
        return out

    def dense(self) -> np.ndarray:
        return q4.unpack_q4(self.panels)

    @property
    def quantises(self) -> bool:
        """Whether the unit in use rounds x to int8 blocks (``q4.EXACT`` units do not)."""
        return q4.unit() not in q4.EXACT

    def seen(self, x: np.ndarray) -> np.ndarray:
        """x as the unit in use reads it: x̂ = d_x·xq in int8 blocks (``q4.int8_seen``), else x."""
        return q4.int8_seen(x) if self.quantises else x

    def __repr__(self) -> str:
        return f"Q4Panels({self.shape[0]}×{self.shape[1]}, {self.nbytes / 2**20:.1f} MiB)"
