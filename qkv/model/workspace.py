"""Scratch arrays reused across the layers and batches of one call."""

from __future__ import annotations

import math

import numpy as np

from qkv.kernels import float32


class Workspace:
    """Named scratch arrays, grown as needed and handed out again. A large fresh array costs page
    faults on first touch (glibc maps big blocks and unmaps them when freed); reusing them was
    measured at about 7% of a forward pass over 8×256-token reviews."""

    def __init__(self):
        self._bufs: dict[str, np.ndarray] = {}
        self._bits: tuple | None = None  # (array, its bfloat16 bits): see bits_of
        self._parts: dict[int, Workspace] = {}

    def part(self, g: int) -> "Workspace":
        """The workspace of run ``g`` of a batch cut between threads (kept, like the arrays)."""
        return self._parts.setdefault(g, Workspace())

    def bits_of(self, x: np.ndarray) -> np.ndarray | None:
        """The bfloat16 copy recorded for x (this very array object) by ``keep_bits``, or None."""
        return self._bits[1] if self._bits is not None and self._bits[0] is x else None

    def keep_bits(self, x: np.ndarray | None, bits: np.ndarray | None = None) -> None:
        """Record ``bits`` as x rounded to bfloat16 (a layer's output, for the next layer's first
        product); ``keep_bits(None)`` forgets it."""
        self._bits = None if x is None else (x, bits)

    def get(self, name: str, shape: tuple, dtype) -> np.ndarray:
        n = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.size < n or buf.dtype != dtype:
            buf = self._bufs[name] = float32.aligned_empty(max(n, 1), dtype)  # see aligned_empty
        return buf[:n].reshape(shape)
