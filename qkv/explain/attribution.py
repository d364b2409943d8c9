"""Forward-only attributions, no gradients needed: value zeroing and leave-one-word-out occlusion.

Value zeroing (Mohebbi, Zuidema, Chrupała & Alishahi, 2023, "Quantifying Context Mixing in
Transformers"): in layer l, set token j's value vector to zero in every head, run the layer again
and see how far each token's output moves. C_ij = 1 − cos(y_i, y_i^{¬j}), rows rescaled to sum to 1:
how much token i's output after the layer relies on token j. Unlike raw attention it accounts for
value norms, the residual path, LayerNorm and the feed-forward block. The layer is recomputed by
``qkv.explain.layer.run_layer`` (the engine's pass cannot be edited from outside).

Occlusion: remove one word from the text, embed again, and measure the change — of the title's own
vector (1 − cosine), or of a query/title similarity (similarity drop; negative = the word pulled
the pair apart).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qkv.explain._inputs import check_text, tokenize_one
from qkv.explain.display import ShowsHtml
from qkv.explain.layer import pool, run_from, run_layer
from qkv.model.threads import blas_threads


def _cos_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)


def value_zeroing_layer(enc, layer: int, x: np.ndarray, max_batch_tokens: int = 8192) -> np.ndarray:
    """Context mixing of one layer for one text: x [n, H] entering ``layer`` -> C [n, n], rows sum to 1."""
    x = np.asarray(x, dtype=np.float64)  # 1 − cos is small: compute it without float32 rounding
    n = x.shape[0]
    base = run_layer(enc, layer, x[None])["out"][0]
    c = np.empty((n, n), dtype=np.float64)
    step = max(1, max_batch_tokens // max(n, 1))
    for lo in range(0, n, step):
        js = np.arange(lo, min(n, lo + step))
        scale = np.ones((len(js), n), dtype=np.float32)
        scale[np.arange(len(js)), js] = 0.0  # variant r zeroes token js[r]'s value vector
        xs = np.ascontiguousarray(np.broadcast_to(x, (len(js), n, x.shape[1])))  # BLAS needs real strides
        y = run_layer(enc, layer, xs, value_scale=scale)["out"]
        c[:, js] = (1.0 - _cos_rows(base[None], y)).T  # [n queries, variants]
    c = np.maximum(c, 0.0)
    return c / np.maximum(c.sum(axis=1, keepdims=True), 1e-12)


def value_zeroing(enc, maps) -> np.ndarray:
    """Value-zeroing maps for every layer of an ``AttentionMaps``: [layers, n, n]."""
    with blas_threads(enc.threads):
        return np.stack([value_zeroing_layer(enc, l, maps.inputs[l]) for l in range(maps.num_layers)])


@dataclass(frozen=True)
class WordScores:
    """A score per word of a text, from one method; higher = the word matters more."""

    text: str
    words: tuple[str, ...]
    scores: np.ndarray
    method: str  # occlusion | value_zeroing | rollout
    measure: str  # what the score is, in words
    starts: tuple[int, ...] = ()  # each word's first character in ``text``

    def ranked(self) -> list[tuple[str, float]]:
        order = np.argsort(-self.scores, kind="stable")
        return [(self.words[i], float(self.scores[i])) for i in order]

    def to_dict(self) -> dict:
        starts = self.starts or (None,) * len(self.words)
        return {"text": self.text, "method": self.method, "measure": self.measure,
                "words": [{"word": w, "start": st, "score": round(float(s), 6)}
                          for w, st, s in zip(self.words, starts, self.scores)]}


@dataclass(frozen=True)
class PairAttribution(ShowsHtml):
    """Which words made a query/title similarity high or low."""

    query: str
    title: str
    similarity: float
    query_words: WordScores
    title_words: WordScores
    method: str

    def to_dict(self) -> dict:
        return {"query": self.query, "title": self.title, "similarity": round(self.similarity, 6),
                "method": self.method, "query_words": self.query_words.to_dict(),
                "title_words": self.title_words.to_dict()}


def _content_words(seq):
    return [w for w in seq.words(segment=True) if not w.special]


def without_word(text: str, word) -> str:
    """The text with one word's characters removed (and the doubled space closed)."""
    out = text[:word.start] + text[word.end:]
    return " ".join(out.split()) if out.strip() else ""


def occlusion(enc, text: str, *, truncate: bool = False) -> WordScores:
    """Leave-one-word-out: 1 − cos(vector of the text, vector without word w), per content word."""
    seq = tokenize_one(enc, text, truncate)
    words = _content_words(seq)
    variants = [text] + [without_word(text, w) for w in words]
    e = enc.encode(variants, normalize=True, truncate=truncate)
    scores = 1.0 - e[1:] @ e[0]
    return WordScores(text, tuple(w.text for w in words), scores.astype(np.float64), "occlusion",
                      "1 − cosine(title, title without the word)", tuple(w.start for w in words))


def pair_occlusion(enc, query: str, title: str, *, truncate: bool = False) -> PairAttribution:
    """Similarity drop when a word is left out of the query or the title (positive = it helped)."""
    check_text(query, "query")
    qseq, tseq = tokenize_one(enc, query, truncate), tokenize_one(enc, title, truncate)
    qw, tw = _content_words(qseq), _content_words(tseq)
    texts = [query, title] + [without_word(query, w) for w in qw] + [without_word(title, w) for w in tw]
    e = enc.encode(texts, normalize=True, truncate=truncate)
    q, t = e[0], e[1]
    sim = float(q @ t)
    dq = sim - e[2:2 + len(qw)] @ t
    dt = sim - e[2 + len(qw):] @ q
    m = "similarity − similarity without the word"
    return PairAttribution(query, title, sim,
                           WordScores(query, tuple(w.text for w in qw), dq, "occlusion", m, tuple(w.start for w in qw)),
                           WordScores(title, tuple(w.text for w in tw), dt, "occlusion", m, tuple(w.start for w in tw)),
                           "occlusion")


def _zeroed_vectors(enc, seq, words) -> tuple[np.ndarray, np.ndarray]:
    """The text's vector, and one vector per word with that word's value vectors zeroed in every
    layer and its tokens left out of the pooling: what the sentence vector is without the word's
    content reaching any other token."""
    tr = enc.trace([seq.text], keep=["embeddings"])
    x = tr.get("embeddings", 0)
    n = x.shape[0]
    mask = np.ones((1 + len(words), n), dtype=bool)
    scale = np.ones((1 + len(words), n), dtype=np.float32)
    for r, w in enumerate(words, start=1):
        scale[r, list(w.tokens)] = 0.0
        mask[r, list(w.tokens)] = False
    xs = np.ascontiguousarray(np.broadcast_to(x, (1 + len(words),) + x.shape))
    with blas_threads(enc.threads):
        h = run_from(enc, 0, xs, None, value_scale=scale, zero_all_layers=True)
    v = pool(enc, h, mask, normalize=True)
    return v[0], v[1:]


def pair_value_zeroing(enc, query: str, title: str, *, truncate: bool = False) -> PairAttribution:
    """Similarity drop when a word's value vectors are zeroed in every layer (and the word is left
    out of the pooling), for each word of the query and of the title."""
    check_text(query, "query")
    qseq, tseq = tokenize_one(enc, query, truncate), tokenize_one(enc, title, truncate)
    qw, tw = _content_words(qseq), _content_words(tseq)
    q0, qz = _zeroed_vectors(enc, qseq, qw)
    t0, tz = _zeroed_vectors(enc, tseq, tw)
    sim = float(q0 @ t0)
    m = "similarity − similarity with the word's values zeroed in every layer"
    return PairAttribution(query, title, sim,
                           WordScores(query, tuple(w.text for w in qw), sim - qz @ t0, "value_zeroing", m,
                                      tuple(w.start for w in qw)),
                           WordScores(title, tuple(w.text for w in tw), sim - tz @ q0, "value_zeroing", m,
                                      tuple(w.start for w in tw)),
                           "value_zeroing")


def title_value_zeroing(enc, text: str, *, truncate: bool = False) -> WordScores:
    """1 − cos(title vector, title vector with the word's values zeroed everywhere), per content word."""
    seq = tokenize_one(enc, text, truncate)
    words = _content_words(seq)
    v0, vz = _zeroed_vectors(enc, seq, words)
    return WordScores(text, tuple(w.text for w in words), 1.0 - vz @ v0, "value_zeroing",
                      "1 − cosine(title, title with the word's values zeroed in every layer)",
                      tuple(w.start for w in words))
