"""Selling points: the words of a title ranked by how much the whole title draws on them.

The sentence vector of a mean-pooled model is the average of the last layer's token vectors. The
last layer's attention rollout R (``rollout``) estimates how much each output token i comes from
input token j, so the share of the sentence vector that comes from token j is the column mean

    s_j = (1/n) Σ_i R[i, j]          (for a [CLS]-pooled model: s_j = R[0, j])

A word's salience is the sum over its pieces; [CLS], [SEP] and words made only of punctuation
("," "(") are left out — they soak up rollout much as [SEP] does and are no selling point — and the
remaining words' salience is rescaled to sum to 1 (the left-out share is reported beside it). The same formula runs on
the value-zeroing rollout with ``source="value_zeroing"``.

A SentencePiece model's bare "▁" pieces (a word start whose characters are in the next piece) are
left out the same way: they hold no characters of the title, yet soak up rollout like [SEP] — on
"Stridewell 男士透气网面跑鞋 轻便运动鞋 藏青色 US 9" (multilingual-e5-small) each takes 0.021–0.023
against 0.009–0.017 for any piece with characters, which would lift exactly the words after a space.

Rollout measures what the sentence vector is made of, not what a shopper asks for: on judged Home
Depot searches it ranks the words shoppers type no better than a random order (``qkv eval
selling-points``, docs/explain.md). So the words are *ranked* by a method (``METHODS``) and the
rollout salience is kept beside each word as the attention evidence:

* "title" (the default without a catalog) and "catalog" (with a ``PointsCatalog``): words that name
  what the product is over words that only identify it (``points.py``);
* "learned": a term-weight head trained on the seller's own search terms (``terms.py``);
* "query": the query side of attention — how a stand-in query about the product (the words its
  nearest catalog titles share) attends to each title word (``query_side.py``);
* "rollout": the salience itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import unicodedata

from qkv.explain.display import ShowsHtml
from qkv.explain.rollout import rollout
from qkv.explain.words import merge_scores


@dataclass(frozen=True)
class SellingPoints(ShowsHtml):
    text: str
    words: tuple[str, ...]  # content words, in text order
    starts: tuple[int, ...]  # character spans, for highlighting
    ends: tuple[int, ...]
    salience: np.ndarray  # sums to 1 over the content words
    special_share: float  # the share [CLS]/[SEP], bare "▁" pieces and punctuation took before rescaling
    source: str
    method: str = "rollout"  # what ranks the words (METHODS)
    scores: np.ndarray | None = None  # the method's score per word; None: the salience ranks

    @property
    def score(self) -> np.ndarray:
        return self.salience if self.scores is None else self.scores

    def ranked(self) -> list[tuple[str, float]]:
        """(word, score) best first, by the method's score."""
        sc = self.score
        order = np.argsort(-sc, kind="stable")
        return [(self.words[i], float(sc[i])) for i in order]

    def to_dict(self) -> dict:
        sc = self.score
        return {"text": self.text, "source": self.source, "method": self.method,
                "method_description": METHODS[self.method],
                "special_share": round(self.special_share, 6),
                "formula": "s_j = mean_i rollout[last][i, j], summed over a word's pieces, "
                           "rescaled to 1 over words other than [CLS]/[SEP]/punctuation (bare ▁ pieces left out)",
                "ranked": [{"word": self.words[i], "score": round(float(sc[i]), 6),
                            "salience": round(float(self.salience[i]), 6)}
                           for i in np.argsort(-sc, kind="stable")],
                "words": [{"word": w, "start": s, "end": e, "score": round(float(c), 6), "salience": round(float(v), 6)}
                          for w, s, e, c, v in zip(self.words, self.starts, self.ends, sc, self.salience)]}


METHODS = {
    "title": "what the product is, read from the title: later words, words before ' in '/' with '/'(', "
             "no numbers or units (points.py)",
    "catalog": "what the product is: words shared with the title's nearest catalog neighbours, later words, "
               "no numbers, units or brands (points.py)",
    "learned": "how likely shoppers search each word, from a term-weight head trained on search terms (terms.py)",
    "query": "the query side of attention: how much a stand-in query (the words the nearest catalog titles share "
             "most) attends to each word, last layer (query_side.py)",
    "rollout": "salience from last-layer rollout (what the sentence vector is made of)",
}


def _punct(text: str) -> bool:
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


def token_salience(r_last: np.ndarray, pooling: str = "mean") -> np.ndarray:
    """Share of the pooled vector drawn from each input token, from the last rollout matrix [n, n]."""
    return r_last[0] if pooling == "cls" else r_last.mean(axis=0)


def selling_points(maps, source: str = "rollout", *, method: str | None = None, catalog=None,
                   head=None) -> SellingPoints:
    """The title's content words ranked by ``method`` (default "catalog" with a ``PointsCatalog``,
    "learned" with a term-weight ``head``, else "title"), with the rollout salience (``source``:
    "rollout" or "value_zeroing") of each word beside its score."""
    from qkv.errors import InputError

    method = method or ("learned" if head is not None else "catalog" if catalog is not None else "title")
    if method not in METHODS:
        raise InputError(f"selling-points method {method!r} is not available; use one of {', '.join(METHODS)}")
    if method in ("catalog", "query") and catalog is None:
        raise InputError(f"the '{method}' method needs a catalog (PointsCatalog.build(titles, encoder))")
    if method in ("catalog", "query") and catalog.model != maps._enc.name:  # vectors of two models are not comparable
        raise InputError(f"the catalog was embedded by {catalog.model}, the title by {maps._enc.name}: use one model")
    if method == "learned" and head is None:
        raise InputError("the 'learned' method needs a term-weight head (qkv terms train)")
    if source == "rollout":
        r = maps.rollout()[-1]
    elif source == "value_zeroing":
        r = rollout(maps.value_zeroing(), residual=False)[-1]
    else:
        raise ValueError("source must be 'rollout' or 'value_zeroing'")
    pooling = getattr(getattr(maps._enc, "config", None), "pooling", "mean")
    s = token_salience(r, pooling).copy()
    seq = maps.seq
    marker = np.array([not sp and e <= st for (st, e), sp in zip(seq.offsets, seq.special)])
    left_out = float(s[marker].sum())  # bare "▁" pieces: no characters of the title (see above)
    s[marker] = 0.0
    words = maps.words
    ws = merge_scores(s, words)
    content = np.array([not w.special and not _punct(w.text) for w in words])
    special_share = float(ws[~content].sum()) + left_out
    cs = ws[content]
    cs = cs / max(cs.sum(), 1e-12)
    cw = [w for w, c in zip(words, content) if c]
    scores = None
    if method in ("title", "catalog"):
        from qkv.explain.points import features, score

        cat = catalog if method == "catalog" else None  # "title" reads the title alone, even with a catalog at hand
        vec = maps._enc.encode([maps.text], truncate=True)[0] if cat is not None else None
        scores = score(features(maps.text, cw, cat, vec)) + 1e-3 * cs
    elif method == "learned":
        scores = head.word_scores(maps._enc, maps.text, cw, catalog=catalog) + 1e-3 * cs
    elif method == "query":
        from qkv.explain.query_side import product_query, query_attention

        vec = maps._enc.encode([maps.text], truncate=True)[0]
        scores = query_attention(maps._enc, product_query(catalog, vec, maps.text), maps.text, cw) + 1e-3 * cs
    return SellingPoints(maps.text, tuple(w.text for w in cw), tuple(w.start for w in cw),
                         tuple(w.end for w in cw), cs, special_share, source, method, scores)
