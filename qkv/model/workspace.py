"""Scratch arrays reused across the layers and batches of one call."""

from __future__ import annotations

import math

import numpy as np

from qkv import kernels


class Workspace:
    """Named scratch arrays, grown as needed and handed out again. A large fresh array costs page
    faults on first touch (glibc maps big blocks and unmaps them when freed); reusing them was
    measured at about 7% of a forward pass over 8×256-token reviews."""

    def __init__(self):
        self._bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple, dtype) -> np.ndarray:
        n = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.size < n or buf.dtype != dtype:
            buf = self._bufs[name] = kernels.aligned_empty(max(n, 1), dtype)  # see aligned_empty
        return buf[:n].reshape(shape)
