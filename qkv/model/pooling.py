"""Sentence vectors from token vectors, by the model's pooling rule (sentence-transformers'
``1_Pooling/config.json``: mean, CLS or max), then normalised if the model says so. One module,
used by ``Encoder.encode`` and by the explain views that re-run layers."""

from __future__ import annotations

import numpy as np


def pool(hidden: np.ndarray, mask: np.ndarray, rule: str = "mean") -> np.ndarray:
    """Un-normalised sentence vectors [B, H] from hidden states [B, L, H], mask [B, L] (True = real)."""
    mask = np.asarray(mask, dtype=bool)
    if rule == "cls":
        return hidden[:, 0].copy()
    if rule == "max":
        return np.where(mask[..., None], hidden, -np.inf).max(axis=1)
    if rule != "mean":
        raise ValueError(f"pooling rule {rule!r} is not one of mean, cls, max")
    m = mask.astype(np.float32)
    return np.einsum("bl,blh->bh", m, hidden) / np.maximum(m.sum(axis=1, keepdims=True), 1e-9)


def normalize(v: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (rows of zeros stay zero), in place."""
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return v
