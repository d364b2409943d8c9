"""Praise or complaint, read from the text when a review has no rating.

Chinese: SnowNLP's sentiment classifier (MIT licence; a naive Bayes model over words that its
author trained on shopping reviews and ships inside the package — nothing here is trained by qkv),
its model file read and applied here (``_NaiveBayes``) without importing SnowNLP, whose import
loads ~420 MB of models a process (``qkv serve`` has several). Measured with
`bench/zh_summarize.py --sentiment` against the 0/1 labels of 2,000 sampled reviews of the
online_shopping_10_cats data: 0.826 accuracy, 0.815 on the 1,711 of them absent from SnowNLP's
own training text, 0.2 ms CPU a review (SnowNLP itself, with its own segmenter: 0.839 and 0.828,
6 ms). Other languages get no text polarity (0: unknown), so their summaries without ratings are
not balanced; with ratings, ratings decide.

``positive_probability`` gives P(positive) per text (0.5 where unknown); ``text_polarity`` maps
it to +1 / -1 / 0 with a neutral band, so hedged units count for neither side.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from qkv.summarize.units import is_chinese

# P(positive) outside [NEG_BELOW, POS_ABOVE] gives a side; in between is neutral.
POS_ABOVE = 0.6
NEG_BELOW = 0.4


class _NaiveBayes:
    """SnowNLP's shipped sentiment model, read from its file and applied here: importing SnowNLP
    loads all of its models (~420 MB of Python objects per process, its word segmenter alone 300),
    where the classifier needs 6 MB. The file (snownlp/sentiment/sentiment.marshal.3: gzip of a
    marshal dump) holds per class ("pos", "neg") its word counts ``d`` (add-one smoothed: an unseen
    word counts ``none`` = 1) and their ``total``. Words are segmented by jieba (``qkv.text.zh``,
    already loaded for search) rather than by SnowNLP's own segmenter, a word the model never saw
    split into its characters, and SnowNLP's stop words dropped; accuracy measured with ``bench/zh_summarize.py --sentiment`` (module docstring).
    Naive Bayes: log P(class) + Σ log P(word | class), normalised over the two classes."""

    def __init__(self, root: Path):
        import gzip
        import marshal

        with gzip.open(root / "sentiment" / "sentiment.marshal.3", "rb") as f:
            data = marshal.loads(f.read())
        self.classes = {k: (v["d"], float(v["total"]), v.get("none", 1)) for k, v in data["d"].items()}
        self.total = float(data["total"])
        with open(root / "normal" / "stopwords.txt", encoding="utf-8") as f:
            self.stop = {w.strip() for w in f}

    def positive(self, text: str) -> float:
        from qkv.text.zh import segment

        words = []
        for w in segment(text):
            if not w.strip() or w in self.stop:
                continue
            if len(w) > 1 and not any(w in counts for counts, _, _ in self.classes.values()):
                # a word the model never saw (jieba keeps "坑人" whole, SnowNLP's segmenter split
                # it): its characters, as SnowNLP would have seen them
                words += [c for c in w if c not in self.stop]
            else:
                words.append(w)
        score = {}
        for k, (counts, total, none) in self.classes.items():
            score[k] = math.log(total) - math.log(self.total) + sum(
                math.log(counts.get(w, none) / total) for w in words)
        diff = score["neg"] - score["pos"]
        return 0.0 if diff > 700 else 1.0 / (1.0 + math.exp(diff))


@lru_cache(maxsize=1)
def _classifier() -> _NaiveBayes | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec("snownlp")  # finds the package without importing it
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        return _NaiveBayes(Path(list(spec.submodule_search_locations)[0]))
    except (OSError, ValueError, KeyError, EOFError, ImportError):
        return None


def available() -> bool:
    return _classifier() is not None


def positive_probability(texts: list[str]) -> np.ndarray:
    """P(positive) of each text; 0.5 for text in a language without a classifier (or without SnowNLP)."""
    out = np.full(len(texts), 0.5)
    chinese = [i for i, t in enumerate(texts) if t.strip() and is_chinese(t)]
    clf = _classifier() if chinese else None
    if clf is None:
        return out
    for i in chinese:
        out[i] = clf.positive(texts[i])
    return out


def text_polarity(texts: list[str]) -> np.ndarray:
    """+1 praise, -1 complaint, 0 neutral or unknown, per text."""
    p = positive_probability(texts)
    return np.where(p > POS_ABOVE, 1, np.where(p < NEG_BELOW, -1, 0)).astype(np.int64)
