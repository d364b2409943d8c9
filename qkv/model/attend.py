"""Steps 2-5 of attention for the fast layer, and the one dispatcher that picks how they run.

The reference layer (``qkv.model.layer.reference_layer``) runs the five steps as written, on
whole [batch, heads, L, L] arrays, and keeps what a trace asks for. When nothing inside attention
is traced, ``choose`` picks a fast route from the batch's shape and what the machine offers:

    route      when                                   how
    per_text   compiled kernels                       text by text, cut to its own length, in the
                                                      fused kernel that keeps each block's scores in
                                                      L1 (float32.attention_texts: one call for a
                                                      thread's texts); texts dealt out between
                                                      threads by cost (length²)
    batched    never chosen (kept for comparison:     all texts at once: Q·Kᵀ in BLAS, the compiled
               bench, tests)                          masked softmax (scale, mask, max, exp, sum and
                                                      division in one pass), ·V
    math       no compiled kernels (or not float32,   qkv.attention.scaled_dot_product_attention,
               or padding not at the end)             which itself goes tiled from TILED_FROM
    tiles      precision="bfloat16", the AMX unit     text by text as per_text, both products on
               in use, head size 32, L ≥ TILES_FROM   AMX tiles (bfloat16.attention_text_bf16):
                                                      Q, K, V and the weights rounded to bfloat16,
                                                      scores, softmax and sums in float32
    dots       precision="bfloat16", the avx512bf16   as tiles, both products as VDPBF16PS dot
               unit in use (no tiles: AMD Zen 4),     products on zmm registers: the same
               head size 32, L ≥ TILES_FROM           roundings, held to the same bound

precision="int8" takes the tiles and dots routes too, where the unit is in use (its products are
int8, attention's two bfloat16 as above: MiniLM titles 500 -> 586 sentences per CPU-second on a
Zen 4 stand-in, cosine to float32 unchanged by it: ~0.998 worst then, ~0.9996 with int8's blocks
of 32 and zero points); elsewhere (an AVX2 CPU) attention stays float32.

``batched`` was the route below TILED_FROM (64) tokens while ``per_text`` made one Python call a
text; with one call for all of them, ``per_text`` is faster at every length measured (32 texts of
up to 8, 16, 40, 63 tokens, one thread, paired: 1.05-1.21× for MiniLM float32 on AMX, 1.07-1.21×
for e5 on the float32 expansion, Zen 4 stand-in; e5 titles on AMX tiles 1.16×; docs/engine.md).

``per_text`` runs every float32 batch in particular when the products quantise x
(``invariant``: multilingual-e5-small's 4-bit products on int8 blocks, without AMX tiles). A
quantised product is a step function of x: a last-bit difference between two attention kernels
(BLAS over a padded batch against the per-text kernel) moves an element of x across a rounding
edge now and then, and the output by a whole quantum (~1e-4 of the embedding). With every text's
attention in the one per-text kernel — the one the lone text's one-call layer stack runs
(q4/layer.c) — and every other step row by row, a text's vectors are the same bits alone, in any
batch, padded or packed, and in an index (tests/model/test_e5_int8.py).

Each route is tested equal to the reference layer (tests/model/test_layer.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv.kernels import bfloat16, cpu, float32
from qkv.attention import scaled_dot_product_attention
from qkv.model.workers import deal

ROUTES = ("reference", "batched", "per_text", "math", "tiles", "dots")
# The bfloat16 attention route of each bfloat16 unit (bfloat16.attention_text_bf16 runs either).
BF16_ROUTES = {"amx": "tiles", "avx512bf16": "dots"}
# From this length the bfloat16 routes beat the float32 ones (measured: docs/engine.md).
TILES_FROM = 0


@dataclass
class Batch:
    """A batch's shape as attention sees it. Rows of the row-wise steps are either the padded
    [B·L] layout or, when ``flat`` is set (padding skipped), only the real tokens, text after text."""

    B: int
    L: int
    mask: np.ndarray  # [B, L] bool, True = real token
    lens: np.ndarray | None  # real tokens per text, when they come first and the kernels apply
    flat: np.ndarray | None = None  # packed: positions of the real rows in the padded layout

    @property
    def packed(self) -> bool:
        return self.flat is not None

    @property
    def rows(self) -> int:
        return len(self.flat) if self.packed else self.B * self.L

    def spans(self) -> list[tuple[int, int]]:
        """(first row, real tokens) of each text in the row layout."""
        if self.packed:
            starts = np.concatenate([[0], np.cumsum(self.lens)[:-1]])
            return [(int(s), int(n)) for s, n in zip(starts, self.lens)]
        return [(b * self.L, int(n)) for b, n in enumerate(self.lens)]


def compiled_lengths(mask: np.ndarray, dtype) -> np.ndarray | None:
    """Each text's length [B] when the compiled routes can take the batch (kernels loaded, float32,
    the real tokens first: right padding), else None."""
    lens = mask.sum(axis=1)
    L = mask.shape[1]
    right_padded = np.array_equal(mask, np.arange(L)[None, :] < lens[:, None])
    if cpu.available() and np.dtype(dtype) == np.float32 and right_padded:
        return lens
    return None


def choose(batch: Batch, traced: bool, precision: str = "float32", head_dim: int = 0,
           invariant: bool = False) -> str:
    """The route for steps 2-5 (see the table above): the one place that decides. ``invariant``:
    the products quantise x, so every text runs the per-text kernel (see the module's docstring)."""
    if traced:
        return "reference"
    if batch.lens is None:
        return "math"
    if (precision in ("bfloat16", "int8") and cpu.ISA in BF16_ROUTES and head_dim == bfloat16.ATTENTION_HEAD
            and batch.L >= TILES_FROM):
        return BF16_ROUTES[cpu.ISA]
    return "per_text"  # whatever the length (``invariant`` needs it; elsewhere it is the faster: see above)


def attend(route: str, qkv: np.ndarray, ctx: np.ndarray, batch: Batch, heads: int, scale: float,
           ws, workers) -> np.ndarray:
    """Steps 2-5 by ``route``: qkv [rows, 3H] (Q | K | V of each token) → ctx [rows, H], the
    heads' outputs merged. ``ws``: the call's Workspace; ``workers``: the encoder's Workers."""
    if route == "batched":
        return _batched(qkv, ctx, batch, heads, scale, ws)
    if route in ("per_text", "tiles", "dots"):
        return _per_text(qkv, ctx, batch, heads, scale, ws, workers, tiles=route in ("tiles", "dots"))
    if route == "math":
        B, L = batch.B, batch.L
        q, k, v = qkv.reshape(B, L, 3, heads, -1).transpose(2, 0, 3, 1, 4)  # [B, heads, L, d] views
        mask = None if batch.mask.all() else batch.mask[:, None, None, :]
        out = scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)
        ctx.reshape(B, L, heads, -1)[:] = out.transpose(0, 2, 1, 3)
        return ctx
    raise ValueError(f"attention route {route!r} is not one of {', '.join(ROUTES[1:])}")


def _batched(qkv, ctx, batch: Batch, heads: int, scale: float, ws) -> np.ndarray:
    B, L = batch.B, batch.L
    H = ctx.shape[1]
    if batch.packed:  # a padded copy of Q|K|V, its padding rows zero (they take weight 0 anyway)
        padded = ws.get("qkv_padded", (B * L, 3 * H), qkv.dtype)
        padded[~batch.mask.ravel()] = 0
        padded[batch.flat] = qkv
        out = ws.get("ctx_padded", (B * L, H), qkv.dtype)
    else:
        padded, out = qkv, ctx
    q, k, v = padded.reshape(B, L, 3, heads, -1).transpose(2, 0, 3, 1, 4)
    s = np.matmul(q, k.transpose(0, 1, 3, 2), out=ws.get("scores", (B, heads, L, L), qkv.dtype))
    float32.softmax_rows(s, float(scale), batch.lens)
    np.matmul(s, v, out=out.reshape(B, L, heads, -1).transpose(0, 2, 1, 3))
    if batch.packed:
        ctx[:] = out[batch.flat]
    return ctx


def _per_text(qkv, ctx, batch: Batch, heads: int, scale: float, ws, workers, tiles: bool = False) -> np.ndarray:
    d = ctx.shape[1] // heads
    if not batch.packed:  # padding rows are not attended: zero them
        ctx.reshape(batch.B, batch.L, -1)[~batch.mask] = 0
    spans = batch.spans()
    pairs = [(qkv[s:s + n], ctx[s:s + n]) for s, n in spans]
    need = (float32.attention_work(batch.L, d, d),)
    need_tiles = (bfloat16.attention_work_bf16(batch.L) if tiles else 0,)
    groups = deal([n ** 2 for _, n in spans], workers.threads)

    def run(g: int) -> None:
        work = ws.get(f"attn_work{g}", need, np.float32)
        if not tiles and qkv.dtype == np.float32 and ctx.dtype == np.float32:  # one call for the group's texts
            float32.attention_texts(qkv, [spans[i] for i in groups[g]], heads, float(scale), ctx, work)
            return
        tile_work = ws.get(f"attn_tiles{g}", need_tiles, np.uint8) if tiles else None
        for i in groups[g]:
            q, c = pairs[i]
            if tiles and bfloat16.attention_text_bf16(q, heads, float(scale), c, tile_work):
                continue  # on the unit in use (cpu.ISA): tiles or dot products
            if q.dtype == np.uint16 or c.dtype == np.uint16:  # bfloat16 bits the unit did not take
                q32 = bfloat16.from_bf16_bits(q) if q.dtype == np.uint16 else q
                c32 = np.empty(c.shape, np.float32) if c.dtype == np.uint16 else c
                float32.attention_text(q32, heads, float(scale), c32, work)
                if c32 is not c:
                    c[:] = bfloat16.to_bf16_bits(c32)
            else:
                float32.attention_text(q, heads, float(scale), c, work)

    workers.run(run, len(groups))
    return ctx
