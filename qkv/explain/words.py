"""Word level: merge sub-word pieces ("breath", "##able") into the words of the text.

Words come from the tokenizer's character offsets (``Tokens.words()``): pieces whose spans touch
form one word, edge punctuation stands alone, special tokens are words of their own, and each
Chinese character is its own token. For attention matrices we follow Clark et al. (2019, "What
does BERT look at?"): attention *to* a word is the sum over its pieces (so rows still sum to 1),
attention *from* a word is the mean over its pieces.
"""

from __future__ import annotations

import numpy as np

from qkv.model.tokenizer import Word


def word_matrix(words: list[Word], n_tokens: int) -> np.ndarray:
    """[n_words, n_tokens] 0/1 membership: row w marks the tokens of word w."""
    m = np.zeros((len(words), n_tokens), dtype=np.float32)
    for r, w in enumerate(words):
        m[r, list(w.tokens)] = 1.0
    return m


def merge_attention(a: np.ndarray, words: list[Word]) -> np.ndarray:
    """Token×token maps [..., n, n] -> word×word [..., w, w]: sum over key pieces, mean over query pieces."""
    m = word_matrix(words, a.shape[-1])
    mean_rows = m / m.sum(axis=1, keepdims=True)
    return mean_rows @ a @ m.T


def merge_scores(s: np.ndarray, words: list[Word], how: str = "sum") -> np.ndarray:
    """Per-token scores [..., n] -> per-word [..., w] by summing (or averaging, ``how="mean"``) pieces."""
    m = word_matrix(words, s.shape[-1])
    if how == "mean":
        m = m / m.sum(axis=1, keepdims=True)
    return s @ m.T
