"""Packed weights: each weight matrix as the product that reads it wants it.

The layer code asks for ``act(x·W + b)`` and nothing else; how W is laid out, in which precision,
and which product reads it are properties of the packed weight. ``PackedWeights.linear`` is the one
place that chooses, from what is asked (precision, rows) and what the machine offers (compiled
kernels), and keeps what it packed while the encoder lives.

The interface a new precision or weight format implements (a class, never a branch in the layer):

    class Linear:
        shape: tuple[int, int]    (K, N): W is [in, out], y = x·W as in the formulas
        precision: str            what the product reads: "float32", "float16", ...
        __call__(x, out, *, bias=None, act=None, workers=None) -> out
            out [R, N] = act(x [R, K]·W + bias); x and out float32 (any dtype for Blas), out
            C-contiguous; act None or a ``hidden_act`` name ("gelu", "gelu_new", "relu");
            workers: a ``qkv.model.workers.Workers`` the product may split its rows over.
        dense() -> np.ndarray     W [K, N] as float32 numbers: what the reference layer and the
                                  explain views read (a quantised format expands it here, once)
        quantises: bool           the product rounds x to a coarser grid first (False: x·W to
                                  float32 rounding); then seen(x) is x as rounded, x̃·W = the product

A weight reader may put a ``Linear`` straight into the parameter set (a 4-bit format hands over its
blocks that way, never expanded for the fast path); ``PackedWeights`` then uses it as it is.

Today's products (see ``qkv.kernels``):

- ``Float32Panels``: the compiled blocked product ``float32.gemm`` on column panels, bias and the
  exact GELU applied tile by tile; rows split between threads. Built with AVX-512, faster than
  OpenBLAS on all four of all-MiniLM-L6-v2's product shapes, for a batch of reviews and for a
  lone query (figures in docs/engine.md); an AVX2 build only for a few rows (``Blas``). Packed
  on first use: 42 MB for all-MiniLM-L6-v2.
- ``Float16Panels``: ``precision="float16"`` for at most FEW_ROWS rows (a lone search query, whose
  product is bound by reading W): half the bytes, sums in float32.
- ``BFloat16Panels``: ``precision="bfloat16"`` (batch work): bfloat16 panels in VNNI pairs read by
  ``bfloat16.gemm_bf16`` on the best unit the CPU offers and the kernel permits (AMX tiles,
  else AVX-512 BF16; ``QKV_ISA`` forces one); sums, bias and GELU in float32. Where neither unit
  is offered, bfloat16 is not emulated: the product is ``Float32Panels``.
- ``Int8Panels``: ``precision="int8"`` (float32 models): W quantised once per output column and
  block of 64 inputs to int8, x per row and block of 64 (with a zero point) as each call starts,
  integer dot products with exact int32 sums on AVX-512 VNNI or AVX2 (``int8.int8_matmul``; ``qkv
  info`` names the unit), one scale multiply-add per (row, block, column); bias and GELU in float32.
  Packed on first use: 12 MB for all-MiniLM-L6-v2 (int8 weights, a scale and a block sum per 64).
  Without the compiled kernels its NumPy twin computes the same numbers. Bound and measured
  cosine: docs/engine.md, "int8 for float32 models".
- ``Blas``: NumPy's matmul, without the compiled kernels or for dtypes they do not take (float64
  reference encoders); for a few rows as (Wᵀ·xᵀ)ᵀ on a transposed copy, the shape OpenBLAS takes
  fastest. Also float32 batches (more than FEW_ROWS rows) where the library was built without
  AVX-512 (``cpu.BLAS_BATCHES``: OpenBLAS's product is 1.3-1.6× the v3 build's from 96 rows on an
  AVX-512 Xeon, 1.1-1.4× from 48 rows on an AVX2 Zen 3, measured); bias and GELU then in the
  compiled kernel.
"""

from __future__ import annotations

import numpy as np

from qkv.kernels import bfloat16, cpu, float32, int8
from qkv.kernels.blas import blas_threads
from qkv.errors import InputError
from qkv.model.workers import claim, row_cuts

FEW_ROWS = 32  # up to this many rows a product is bound by reading W (see Float16Panels, Blas)
# Blas: batches in calls of this many rows, each on one BLAS thread. OpenBLAS's bits for a row depend
# on how many rows share its call and on its own thread count (measured on a Zen 3: x[:300]·W is not
# (x·W)[:300]), so the blocks are fixed and shared out between qkv's own threads: one thread and two
# give the same floats, as with the compiled products.
BLAS_BLOCK = 128
PRECISIONS = ("float32", "float16", "bfloat16", "int8")  # what ``encode(precision=...)`` may ask for


class Linear:
    """One weight matrix W [K, N] ready for products; see the module's docstring."""

    precision = "float32"
    shape: tuple[int, int]
    quantises = False

    def seen(self, x: np.ndarray) -> np.ndarray:
        """x as the product reads it: x itself, unless it ``quantises``."""
        return x

    def __call__(self, x: np.ndarray, out: np.ndarray, *, bias: np.ndarray | None = None,
                 act: str | None = None, workers=None) -> np.ndarray:
        raise NotImplementedError

    def dense(self) -> np.ndarray:
        raise NotImplementedError


def dense(w) -> np.ndarray:
    """W as an array of numbers, whether the parameter set holds an array or a ``Linear``."""
    return w.dense() if isinstance(w, Linear) else w


def seen(w, x: np.ndarray) -> np.ndarray:
    """x as the product with W reads it (``Linear.seen``): seen(w, x)·dense(w) is the product."""
    return w.seen(x) if isinstance(w, Linear) else x


def _finish(out: np.ndarray, bias, act) -> np.ndarray:
    """The bias and the activation, for products that did not fuse them."""
    if act is not None:
        return float32.bias_gelu(out, np.zeros(out.shape[1], out.dtype) if bias is None else bias, act)
    if bias is not None:
        out += bias
    return out


def _by_rows(gemm, panels, x, out, bias, act, workers, *, step: int) -> np.ndarray:
    """``gemm(x, panels, bias, out, gelu=)`` over x's rows, split between the workers in whole
    ``step``-row register blocks; bias and GELU fused, any other activation applied after."""
    x = np.ascontiguousarray(x)
    fused = act in (None, "gelu")
    b, gelu = (bias if fused else None), act == "gelu"
    cuts = row_cuts(out.shape[0], 1 if workers is None else workers.threads, step=step)
    # a bfloat16 x (bits, padded rows: bfloat16.gemm_bf16) is handed over from a worker's first row on
    xs = (lambda g: x[cuts[g]:]) if x.dtype == np.uint16 else (lambda g: x[cuts[g]:cuts[g + 1]])  # noqa: E731
    run = lambda g: gemm(xs(g), panels, b, out[cuts[g]:cuts[g + 1]], gelu=gelu)  # noqa: E731
    if workers is None or len(cuts) == 2:
        run(0)
    else:
        workers.run(run, len(cuts) - 1)
    return out if fused else _finish(out, bias, act)


class Blas(Linear):
    """x·W in NumPy's BLAS. Up to FEW_ROWS rows as (Wᵀ·xᵀ)ᵀ on a transposed copy of W (made on
    first use), the shape OpenBLAS takes fastest for a few rows; more in blocks of BLAS_BLOCK rows,
    each a one-thread BLAS call, shared out between the workers."""

    def __init__(self, w: np.ndarray):
        self.w, self.shape, self._wt = w, w.shape, None
        self.precision = str(w.dtype)

    def __call__(self, x, out, *, bias=None, act=None, workers=None):
        rows = x.shape[0]
        if rows <= FEW_ROWS:
            if self._wt is None:
                self._wt = np.ascontiguousarray(self.w.T)
            out[:] = (self._wt @ x.T).T
        else:
            starts = range(0, rows, BLAS_BLOCK)

            def block(g: int, i: int) -> None:
                np.matmul(x[starts[i]:starts[i] + BLAS_BLOCK], self.w, out=out[starts[i]:starts[i] + BLAS_BLOCK])

            with blas_threads(1):
                if workers is None or workers.threads == 1:
                    for i in range(len(starts)):
                        block(0, i)
                else:
                    claim(len(starts), workers, block)
        return _finish(out, bias, act)

    def dense(self):
        return self.w


class Float32Panels(Linear):
    """The compiled blocked product on float32 column panels (``float32.gemm``): bias and BERT's
    exact GELU fused, rows split between the workers' threads (same floats at any count)."""

    def __init__(self, w: np.ndarray):
        self.panels, self.shape = float32.pack_panels(w, np.float32), w.shape

    def __call__(self, x, out, *, bias=None, act=None, workers=None):
        return _by_rows(float32.gemm, self.panels, x, out, bias, act, workers, step=12)

    def dense(self):
        return float32.unpack_panels(self.panels)


class Float16Panels(Linear):
    """float16 column panels read by ``float32.panel_matmul`` (half the bytes; sums in float32):
    for a few rows, where the product is bound by reading W. The bias is fused; an activation
    follows."""

    precision = "float16"

    def __init__(self, w: np.ndarray):
        self.panels, self.shape = float32.pack_panels(w, np.float16), w.shape

    def __call__(self, x, out, *, bias=None, act=None, workers=None):
        float32.panel_matmul(np.ascontiguousarray(x), self.panels, None if act else bias, out)
        return _finish(out, bias, act) if act else out

    def dense(self):
        return float32.unpack_panels(self.panels)


class BFloat16Panels(Linear):
    """bfloat16 panels (``bfloat16.pack_bf16``) multiplied on the CPU's bfloat16 unit
    (``bfloat16.gemm_bf16``): x rounded to bfloat16 as each call starts, float32 sums, bias
    and BERT's exact GELU fused; rows split between the workers in whole 32-row tile blocks.

    ``bf16_bits``: x may also be bfloat16 bits (uint16, ``bfloat16.rows_padded(R)`` rows of
    Kp) and out uint16 (the result rounded to bfloat16), so that a product's output feeds the
    next product without a float32 round trip (the feed-forward's hidden layer: fast_layer)."""

    precision = "bfloat16"
    bf16_bits = True

    def __init__(self, w: np.ndarray):
        self.panels, self.shape = bfloat16.pack_bf16(w), w.shape

    def __call__(self, x, out, *, bias=None, act=None, workers=None):
        return _by_rows(bfloat16.gemm_bf16, self.panels, x, out, bias, act, workers, step=32)

    def dense(self):
        return bfloat16.unpack_bf16(self.panels, self.shape[0])


class Int8Panels(Linear):
    """W as int8 per output column and block (``int8.pack_int8``), x quantised per row and block at each call, int32
    sums on the CPU's integer unit (``int8.int8_matmul``: VNNI, else AVX2, else the NumPy twin);
    bias and BERT's exact GELU in float32, fused; rows split between the workers in 6-row blocks.
    ``dense()`` is W as the product reads it (wq·s_w)."""

    precision = "int8"

    def __init__(self, w: np.ndarray):
        self.packed, self.shape = int8.pack_int8(w), w.shape

    def __call__(self, x, out, *, bias=None, act=None, workers=None):
        return _by_rows(int8.int8_matmul, self.packed, x, out, bias, act, workers, step=6)

    def dense(self):
        return int8.dense(self.packed)


def choose(w, precision: str = "float32", rows: int = 0) -> type[Linear] | None:
    """The product for W, asked for in ``precision`` over ``rows`` rows: the dispatcher's one rule.
    None when W is already a ``Linear`` (a reader packed it; its precision is its own)."""
    if isinstance(w, Linear):
        return None
    if precision == "int8" and w.dtype == np.float32 and w.ndim == 2 and w.shape[1] % int8.GROUP == 0:
        return Int8Panels  # on any machine: without the compiled kernels its twin runs
    panels = cpu.available() and w.dtype == np.float32 and w.ndim == 2 and w.shape[1] % float32.PANEL == 0
    if not panels:
        return Blas
    if precision == "float16" and rows <= FEW_ROWS:
        return Float16Panels
    if precision == "bfloat16" and cpu.ISA != "float32":
        return BFloat16Panels
    if cpu.BLAS_BATCHES and rows > FEW_ROWS:  # a v3 build: OpenBLAS's batch kernels are faster
        return Blas
    return Float32Panels


def effective_precision(precision: str, encoder=None) -> str:
    """The precision ``encode(precision=...)`` actually runs for batches: "bfloat16" only where a
    bfloat16 unit runs it (float32 otherwise); float16 touches only a few-row pass, so batches
    of it are float32 as well; "int8" wherever the model's weights are float32 arrays (a 4-bit
    model's products keep their own format: float32). What an index manifest records."""
    if precision == "int8":
        layers = [] if encoder is None else encoder.weights.layers
        plain = encoder is None or (encoder.dtype == np.float32 and not any(isinstance(p.w_qkv, Linear) for p in layers))
        return "int8" if plain else "float32"
    ok = cpu.available() and (encoder is None or encoder.dtype == np.float32)
    return "bfloat16" if precision == "bfloat16" and ok and cpu.ISA != "float32" else "float32"


class PackedWeights:
    """The products of one parameter set, packed on first use and kept while it lives.

    ``force``: a ``Linear`` class every array weight goes to (tests, and bench/engine.py's
    OpenBLAS column: ``force=Blas``)."""

    def __init__(self, force: type[Linear] | None = None):
        self.force = force
        self._made: dict[tuple, tuple] = {}  # (id(w), class) -> (w, Linear); w kept so ids stay unique
        self._chosen: dict[tuple, tuple] = {}  # (id(w), precision, few rows, unit) -> (w, Linear)

    def linear(self, w, precision: str = "float32", rows: int = 0) -> Linear:
        """The packed product for W asked for in ``precision`` over ``rows`` rows (see ``choose``)."""
        unit = cpu.ISA if precision == "bfloat16" else None  # QKV_ISA / select() may change it
        key = (id(w), precision, rows <= FEW_ROWS, unit)  # what choose() reads, so a hit skips it
        hit = self._chosen.get(key)
        if hit is not None and hit[0] is w:
            return hit[1]
        if precision not in PRECISIONS:
            raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        kind = choose(w, precision, rows)
        if kind is None:
            lin = w
        else:
            kind = self.force or kind
            made = self._made.get((id(w), kind))
            if made is None:
                made = self._made[(id(w), kind)] = (w, kind(w))
            lin = made[1]
        self._chosen[key] = (w, lin)
        return lin

    def made(self) -> list[Linear]:
        """Everything packed so far (tests look at which products ran)."""
        return [lin for _, lin in self._made.values()]
