"""Named intermediates of a forward pass.

Every activation the encoder can keep has one stable dotted name (an idea from TransformerLens'
hook names), the same in the engine, the tests, the CLI's JSON and the web page:

    name                          shape                      what
    embeddings                    [batch, len, hidden]       word + position + type, LayerNorm
    layers.{i}.attn.q / k / v     [batch, heads, len, d]     X·Wq+b, X·Wk+b, X·Wv+b split into heads
    layers.{i}.attn.scores        [batch, heads, len, len]   Q·Kᵀ
    layers.{i}.attn.scaled_scores [batch, heads, len, len]   Q·Kᵀ/√d + padding mask (-inf)
    layers.{i}.attn.weights       [batch, heads, len, len]   softmax of each row
    layers.{i}.attn.context       [batch, heads, len, d]     weights·V, each head's output
    layers.{i}.attn.out           [batch, len, hidden]       heads concatenated, ·Wo + b
    layers.{i}.attn.norm          [batch, len, hidden]       LayerNorm(X + attn.out)
    layers.{i}.ffn.hidden         [batch, len, inter]        GELU(attn.norm·W1 + b1)
    layers.{i}.ffn.out            [batch, len, hidden]       ffn.hidden·W2 + b2
    layers.{i}.out                [batch, len, hidden]       LayerNorm(attn.norm + ffn.out)

Nothing is kept unless asked for (patterns with shell wildcards, e.g. ``layers.*.attn.weights``),
so an untraced forward pass pays nothing. Rows and columns past a text's length are padding.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from qkv.errors import InputError
from qkv.model.tokenizer import Tokens, Word

LAYER_NAMES = ("attn.q", "attn.k", "attn.v", "attn.scores", "attn.scaled_scores", "attn.weights",
               "attn.context", "attn.out", "attn.norm", "ffn.hidden", "ffn.out", "out")


def all_names(num_layers: int) -> list[str]:
    return ["embeddings"] + [f"layers.{i}.{n}" for i in range(num_layers) for n in LAYER_NAMES]


class Selector:
    """Which names to keep; answers ``name in selector`` quickly for the hot loop."""

    def __init__(self, patterns: Iterable[str] | str | None, num_layers: int):
        if patterns is None:
            patterns = []
        elif isinstance(patterns, str):
            patterns = [patterns]
        patterns = list(patterns)
        names = all_names(num_layers)
        chosen: set[str] = set()
        for p in patterns:
            hits = fnmatch.filter(names, p)
            if not hits:
                raise InputError(f"trace pattern {p!r} matches no name; names look like "
                                 "'embeddings', 'layers.0.attn.weights', 'layers.*.out' "
                                 f"(layers 0..{num_layers - 1})")
            chosen.update(hits)
        self.names = frozenset(chosen)

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def __bool__(self) -> bool:
        return bool(self.names)


@dataclass
class Trace(Mapping):
    """The kept intermediates of one forward pass over a batch of texts, indexed by name."""

    seqs: list[Tokens]
    input_ids: np.ndarray  # [batch, len]
    attention_mask: np.ndarray  # [batch, len] bool, False on padding
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    num_layers: int = 0
    num_heads: int = 0

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise KeyError(f"{name!r} was not kept in this trace; kept: {sorted(self.arrays)[:8]}"
                           f"{' ...' if len(self.arrays) > 8 else ''}. Ask for it with keep=[...]") from None

    def __iter__(self):
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)

    @property
    def tokens(self) -> list[tuple[str, ...]]:
        return [t.tokens for t in self.seqs]

    @property
    def offsets(self) -> list[tuple[tuple[int, int], ...]]:
        return [t.offsets for t in self.seqs]

    @property
    def lengths(self) -> list[int]:
        return [len(t) for t in self.seqs]

    def words(self, i: int = 0) -> list[Word]:
        return self.seqs[i].words()

    def get(self, name: str, i: int | None = None, default=None):
        """The array for ``name``; with ``i``, text i's slice with padding cut off."""
        if name not in self.arrays:
            return default
        a = self.arrays[name]
        if i is None:
            return a
        n = len(self.seqs[i])
        a = a[i]
        if re.search(r"attn\.(scores|scaled_scores|weights)$", name):
            return a[:, :n, :n]
        if re.search(r"attn\.(q|k|v|context)$", name):
            return a[:, :n]
        return a[:n]

    def stack(self, kind: str = "attn.weights", i: int = 0) -> np.ndarray:
        """``layers.*.{kind}`` for text i as one array [layers, ...] (padding cut off)."""
        return np.stack([self.get(f"layers.{l}.{kind}", i) for l in range(self.num_layers)])
