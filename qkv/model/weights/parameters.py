"""The named parameter set every weight reader returns (described in ``qkv.model.weights``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from qkv.model.linear import Linear, dense


@dataclass(frozen=True)
class LayerParameters:
    w_qkv: np.ndarray | Linear  # [H, 3H]: columns are Q | K | V
    b_qkv: np.ndarray  # [3H]
    w_o: np.ndarray | Linear  # [H, H] attention output projection
    b_o: np.ndarray
    ln1_g: np.ndarray  # LayerNorm after attention + residual
    ln1_b: np.ndarray
    w_in: np.ndarray | Linear  # [H, I] feed-forward up-projection
    b_in: np.ndarray
    w_out: np.ndarray | Linear  # [I, H] feed-forward down-projection
    b_out: np.ndarray
    ln2_g: np.ndarray  # LayerNorm after feed-forward + residual
    ln2_b: np.ndarray

    def dense(self) -> "LayerParameters":
        """The layer with every matrix as an array of numbers (itself when they all are already):
        for code that reads the weights as numbers, like the explain views."""
        if not any(isinstance(getattr(self, f.name), Linear) for f in fields(self)):
            return self
        return LayerParameters(**{f.name: dense(getattr(self, f.name)) for f in fields(self)})


@dataclass(frozen=True)
class Parameters:
    word: np.ndarray  # [vocab, H] (or a 4-bit table, qkv.kernels.q4.Q4Rows: rows expanded on lookup)
    position: np.ndarray  # [max_positions, H]
    token_type: np.ndarray  # [type_vocab, H]
    emb_ln_g: np.ndarray
    emb_ln_b: np.ndarray
    layers: tuple[LayerParameters, ...]

    def astype(self, dtype) -> "Parameters":
        """A copy with every parameter as an array of ``dtype`` (float64 for reference-precision
        checks; packed matrices are expanded)."""
        cast = lambda a: np.ascontiguousarray(dense(a), dtype=dtype)  # noqa: E731
        layers = tuple(LayerParameters(**{f.name: cast(getattr(lw, f.name)) for f in fields(lw)})
                       for lw in self.layers)
        # a 4-bit word table (qkv.kernels.q4.Q4Rows) stays in blocks, its rows expanded in dtype on lookup
        word = self.word.astype(dtype) if hasattr(self.word, "blocks") else cast(self.word)
        return Parameters(word, cast(self.position), cast(self.token_type),
                          cast(self.emb_ln_g), cast(self.emb_ln_b), layers)

    @property
    def dtype(self) -> np.dtype:
        """The dtype the encoder computes in (that of the embeddings)."""
        return self.word.dtype

    @property
    def nbytes(self) -> int:
        arrays = [self.word, self.position, self.token_type, self.emb_ln_g, self.emb_ln_b]
        for lw in self.layers:
            arrays.extend(getattr(lw, f.name) for f in fields(lw))
        return sum(getattr(a, "nbytes", 0) for a in arrays)
