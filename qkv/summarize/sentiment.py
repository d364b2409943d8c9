"""Praise or complaint, read from the text when a review has no rating.

Chinese: SnowNLP's sentiment model (MIT licence; naive Bayes word counts that its author trained
on shopping reviews and ships inside the package — nothing here is trained by qkv), read with
rjieba's segmentation (below). Chosen by measurement against the 0/1 labels of 2,000 sampled
reviews of the online_shopping_10_cats data (`bench/zh_summarize.py --sentiment`): SnowNLP as
it runs itself 0.839 accuracy (0.828 on the 1,711 reviews absent from its own training text),
6.1 ms CPU a review (and 2.2 CPU-s to import); its model with rjieba 0.831 (0.823), 0.1 ms a
review. SnowNLP's own way reads up to FAST_ABOVE texts (zh dev R-1 without ratings 33.36, against
32.61 with rjieba there); more texts (a category of 10,000 reviews) are read the fast way.

English: VADER (vaderSentiment, MIT; Hutto & Gilbert 2014, a rule-based lexicon written for
social-media text, no training on our data): 0.858 accuracy on the 281 FewSum train+val reviews
with a clear rating (4-5 against 1-2; the majority side alone is 0.804), 0.13 ms a review
(`bench/zh_summarize.py --sentiment`). Its compound score c in [-1, 1] is read as P = (c + 1) / 2.
Other text gets no polarity (0.5: unknown). With ratings, ratings decide.

``positive_probability`` gives P(positive) per text (0.5 where unknown); ``text_polarity`` maps
it to +1 / -1 / 0 with a neutral band, so hedged units count for neither side.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

import numpy as np

from qkv.summarize.units import is_chinese

# P(positive) outside [NEG_BELOW, POS_ABOVE] gives a side; in between is neutral.
POS_ABOVE = 0.6
NEG_BELOW = 0.4


@lru_cache(maxsize=1)
def _model():
    """SnowNLP's shipped naive Bayes tables, read without importing the snownlp package (its import
    loads every model it has: 2.2-2.6 CPU-s) — None when SnowNLP is not installed.

    SnowNLP segments with its own character tagger (6.4 ms a review); segmenting with rjieba (a qkv
    dependency already) gives the same accuracy, 0.842 against 0.844 on 1,500 labelled reviews, in
    0.04 ms. The scoring below is naive Bayes with SnowNLP's add-one counts: log P(c) + Σ log P(w|c)."""
    import gzip
    import marshal
    from importlib.util import find_spec
    from pathlib import Path

    spec = find_spec("snownlp")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    with gzip.open(root / "sentiment" / "sentiment.marshal.3", "rb") as f:
        d = marshal.loads(f.read())
    stop = {w.strip() for w in (root / "normal" / "stopwords.txt").read_text(encoding="utf-8").splitlines()}
    classes = {k: (v["d"], float(v["total"]), float(v.get("none", 1))) for k, v in d["d"].items()}
    return classes, float(d["total"]), stop


def available() -> bool:
    return _model() is not None


def _p_pos(text: str, model) -> float:
    import rjieba

    classes, total, stop = model
    words = [w for w in rjieba.cut(text) if w not in stop]
    score = {}
    for c, (counts, n, none) in classes.items():
        s = math.log(n) - math.log(total)
        for w in words:
            s += math.log(counts.get(w, none) / n)
        score[c] = s
    diff = score["neg"] - score["pos"]
    return 0.0 if diff > 700 else 1.0 / (1.0 + math.exp(diff))


# Up to this many texts SnowNLP's own segmentation (slightly better summaries); above it, rjieba.
# A server sets it to 0 (qkv.web.serving): importing SnowNLP costs ~420 MB in every process.
FAST_ABOVE = 500


def positive_probability(texts: list[str], fast: bool | None = None) -> np.ndarray:
    """P(positive) of each text; 0.5 for text in a language without a classifier (or without
    SnowNLP). ``fast``: rjieba segmentation (default: when there are more than FAST_ABOVE texts)."""
    model = _model()
    out = np.full(len(texts), 0.5)
    if fast is None:
        fast = len(texts) > FAST_ABOVE
    sentiment, vader = None, None
    for i, t in enumerate(texts):
        if not t.strip():
            continue
        if is_chinese(t):
            if model is not None and fast:
                out[i] = _p_pos(t, model)
            elif model is not None:
                if sentiment is None:  # imported only when Chinese text is read SnowNLP's own way
                    from snownlp import sentiment
                out[i] = float(sentiment.classify(t))
        elif t.isascii() or _LATIN.search(t):
            vader = vader or _vader()
            if vader is not None:
                out[i] = (vader.polarity_scores(t)["compound"] + 1) / 2
    return out


_LATIN = re.compile(r"[A-Za-z]{3}")


@lru_cache(maxsize=1)
def _vader():
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError:
        return None
    return SentimentIntensityAnalyzer()


def text_polarity(texts: list[str]) -> np.ndarray:
    """+1 praise, -1 complaint, 0 neutral or unknown, per text."""
    p = positive_probability(texts)
    return np.where(p > POS_ABOVE, 1, np.where(p < NEG_BELOW, -1, 0)).astype(np.int64)
