"""The fast layer in one compiled call, for one short text on 4-bit weights.

A lone search query on multilingual-e5-small is ~14 tokens. Each step of its layer is then a few
microseconds of arithmetic, and running the steps one by one from Python (four products,
attention, two add-and-norms, their checks and scratch arrays: ten calls) cost about a third of the
layer — twelve times a query. ``fused_layer`` hands the whole layer to ``qkv_q4_layer``
(``qkv/kernels/q4/layer.c``): the same steps in the same order, the 4-bit products on the unit
``q4.unit()`` names, attention by the fused per-text kernel (the ``per_text`` route's).
It applies to one text (no padding) of at most FUSED_ROWS tokens whose four matrices are
``Q4Panels``, untraced, with float32 attention and BERT's GELU; otherwise it returns None and the
fast layer runs step by step. tests/model/test_layer_q4.py holds it to the reference layer.

``fused_stack`` goes one step further for the encoder's untraced pass over such a text: all its
layers in one call (``qkv_q4_stack``), the same layer call for each, no Python in between (~40 µs
a layer, about a tenth of a lone query).
"""

from __future__ import annotations

import weakref

import numpy as np

from qkv.kernels import cpu, q4
from qkv.model.linear_q4 import Q4Panels

FUSED_ROWS = 32  # a query with its prefix; batches are long enough that the calls do not matter
_POINTERS: dict[int, tuple] = {}  # id(layer parameters) -> (weak reference, their addresses or None)
_STACKS: dict[tuple, tuple] = {}  # ids of a stack's layers -> (weak references, int64 [L, 12] addresses or None)


def _pointers(p) -> tuple | None:
    """The addresses of a layer's matrices and vectors, worked out once per layer (None: not a
    4-bit layer the compiled call takes)."""
    key = id(p)
    hit = _POINTERS.get(key)
    if hit is not None and hit[0]() is p:
        return hit[1]
    arrays = (p.w_qkv, p.b_qkv, p.w_o, p.b_o, p.ln1_g, p.ln1_b, p.w_in, p.b_in, p.w_out, p.b_out, p.ln2_g, p.ln2_b)
    ptrs = None
    if all(isinstance(w, Q4Panels) for w in (p.w_qkv, p.w_o, p.w_in, p.w_out)):
        vectors = [a for a in arrays if not isinstance(a, Q4Panels)]
        if all(isinstance(v, np.ndarray) and v.dtype == np.float32 and v.flags.c_contiguous for v in vectors):
            ptrs = tuple(a.panels.ctypes.data if isinstance(a, Q4Panels) else a.ctypes.data for a in arrays)
    _POINTERS[key] = (weakref.ref(p, lambda _, key=key: _POINTERS.pop(key, None)), ptrs)
    return ptrs


def _fusable(cfg, x: np.ndarray, batch, route: str) -> bool:
    """Whether the compiled layer call takes this pass (see the module's docstring): kernels loaded,
    one unpacked float32 text of at most FUSED_ROWS rows, a compiled attention route, GELU."""
    return (cpu.lib is not None and batch.B == 1 and not batch.packed and 0 < x.shape[0] <= FUSED_ROWS
            and x.dtype == np.float32 and route in ("batched", "per_text") and cfg.hidden_act == "gelu")


def fused_layer(p, cfg, x: np.ndarray, batch, route: str, ws, scale: float) -> np.ndarray | None:
    """The layer's output rows for x [n, H] (a workspace array, never x itself), or None when the
    compiled call does not apply (see the module's docstring)."""
    n, H = x.shape
    if not _fusable(cfg, x, batch, route):
        return None
    ptrs = _pointers(p)
    if ptrs is None:
        return None
    lib = cpu.lib
    heads, inter = cfg.num_heads, cfg.intermediate_size
    work = ws.get("q4_layer", (int(lib.qkv_q4_layer_work(n, H, heads, inter)),), np.float32)
    x = np.ascontiguousarray(x)
    xp = x.ctypes.data
    out = ws.get("q4_out", (n, H), np.float32)
    if out.ctypes.data == xp:  # x is the last layer's output: alternate between two buffers
        out = ws.get("q4_out2", (n, H), np.float32)
    unit = q4.UNIT_CODE[q4.unit()]
    if lib.qkv_q4_layer(xp, n, H, heads, inter, scale, cfg.layer_norm_eps, *ptrs, out.ctypes.data,
                        work.ctypes.data, unit) != 0:
        return None
    return out


def _stack_pointers(layers) -> np.ndarray | None:
    """The addresses of every layer's arrays, [L, 12] int64 in qkv_q4_layer's order (None: one of
    them is not a 4-bit layer the compiled call takes); worked out once per stack."""
    key = tuple(id(p) for p in layers)
    hit = _STACKS.get(key)
    if hit is not None and all(r() is p for r, p in zip(hit[0], layers)):
        return hit[1]
    ptrs = [_pointers(p) for p in layers]
    table = None if any(t is None for t in ptrs) else np.array(ptrs, dtype=np.int64).reshape(len(layers), 12)
    drop = lambda _, key=key: _STACKS.pop(key, None)  # noqa: E731
    _STACKS[key] = (tuple(weakref.ref(p, drop) for p in layers), table)
    return table


def fused_stack(layers, cfg, x: np.ndarray, batch, route: str, ws, scale: float) -> np.ndarray | None:
    """The output rows of all ``layers`` one after the other for x [n, H] (a workspace array, never
    x itself), or None when the compiled call does not apply: as ``fused_layer``, for every layer."""
    n, H = x.shape
    if not layers or not _fusable(cfg, x, batch, route):
        return None
    table = _stack_pointers(layers)
    if table is None:
        return None
    lib = cpu.lib
    heads, inter = cfg.num_heads, cfg.intermediate_size
    work = ws.get("q4_stack", (int(lib.qkv_q4_layer_work(n, H, heads, inter)) + n * H,), np.float32)
    x = np.ascontiguousarray(x)
    out = ws.get("q4_out", (n, H), np.float32)
    if out.ctypes.data == x.ctypes.data:
        out = ws.get("q4_out2", (n, H), np.float32)
    unit = q4.UNIT_CODE[q4.unit()]
    if lib.qkv_q4_stack(x.ctypes.data, n, len(layers), table.ctypes.data, H, heads, inter, scale,
                        cfg.layer_norm_eps, out.ctypes.data, work.ctypes.data, unit) != 0:
        return None
    return out
