"""Selling points from the title and the catalog: words that name what the product is first.

Rollout (``salience.py``) says what the sentence vector is made of, and on judged Home Depot
searches it ranks the words shoppers type no better than chance (issue 28; ``qkv eval
selling-points``). Shoppers search for what a product *is* ("angle bracket", "area rug"), rarely
for what only identifies it (brand, model number, pack size). A title says which is which:

* ``share`` — the fraction of the title's ``K`` nearest catalog neighbours (cosine of the model's
  title vectors) whose titles hold the word: what the product is is shared with its neighbours
  (other brands' brackets say "bracket"), what identifies it is not;
* ``pos`` — where the word stands, 0 first … 1 last: titles put the product type last
  ("Simpson Strong-Tie 12-Gauge Angle"), and "last word first" alone beats rollout by 0.09 AP;
* ``head`` — 1 before the first " in ", " with ", " for ", "(" or ",": what follows is colour,
  finish or what is included ("… Faucet in Chrome with Sensor"), details a shopper rarely types;
* ``spec`` — 1 for a word holding a digit (sizes, model numbers, pack counts) or a unit ("ft",
  "gal"): not a selling point on its own;
* ``brand`` — how often the word opens a catalog title, over how often it occurs at all.

    score = share + 0.5·pos + 0.3·head − 1.0·spec − 0.5·brand      (+ 0.001·rollout, to break ties)

Stop words ("in", "x", "with") rank last. Without a catalog (method "title"), ``share`` and
``brand`` are 0 and the rest is read from the title alone. The weights are five hand-set numbers,
each variant measured on the Home Depot development judgments (``docs/explain.md``); nothing is
fitted to those judgments beyond choosing among them.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qkv.explain.title_terms import STOP, fold, parts

K = 20
WEIGHTS = {"share": 1.0, "pos": 0.5, "head": 0.3, "spec": -1.0, "brand": -0.5}
UNITS = frozenset("in ft gal lb oz cu sq mm cm m yd qt pt w v watt volt amp btu psi gpm mph ml l kg g hp rpm lm "
                  "ga gauge pc pk piece pack count ct dia".split())
_BOUNDARY = re.compile(r"\s(?:in|with|for)\s|[(,]", re.IGNORECASE)
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _terms(title: str) -> frozenset[str]:
    """The folded words of a title and their hyphen/slash parts (what ``share`` looks up)."""
    out: set[str] = set()
    for tok in title.split():
        w = fold(tok)
        if w:
            out.add(w)
            out |= parts(w)
    return frozenset(out)


@dataclass
class PointsCatalog:
    """The titles a title's words are compared with, their vectors (unit length) and counts."""
    titles: list[str]
    vectors: np.ndarray
    terms: list[frozenset[str]]
    df: Counter
    first: Counter
    model: str

    @classmethod
    def build(cls, titles: Sequence[str], encoder, *, vectors: np.ndarray | None = None,
              progress=None) -> "PointsCatalog":
        """``vectors``: the titles' embeddings by ``encoder`` if already computed (e.g. cached)."""
        from qkv.errors import InputError

        titles = [str(t) for t in titles]
        if not titles:
            raise InputError("the catalog has no titles: selling points need at least one title to compare with")
        if vectors is None:
            vectors = encoder.encode(titles, normalize=True, truncate=True, progress=progress)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(titles), encoder.dim):
            raise InputError(f"catalog vectors have shape {vectors.shape}, expected ({len(titles)}, {encoder.dim}) "
                             f"for {encoder.name}: embed the titles with the same model")
        terms = [_terms(t) for t in titles]
        df: Counter = Counter()
        first: Counter = Counter()
        for t, ts in zip(titles, terms):
            df.update(ts)
            words = t.split()
            if words and fold(words[0]):
                first[fold(words[0])] += 1
        return cls(titles, vectors, terms, df, first, encoder.name)

    def neighbours(self, vector: np.ndarray, title: str, k: int = K) -> list[int]:
        """The ``k`` titles nearest ``vector``, the title itself (same text) left out."""
        sim = self.vectors @ np.asarray(vector, dtype=np.float32)
        take = min(len(sim), k + 4)
        top = np.argpartition(-sim, take - 1)[:take] if take < len(sim) else np.arange(len(sim))
        top = top[np.argsort(-sim[top], kind="stable")]
        return [int(i) for i in top if self.titles[i] != title][:k]

    def holds(self, i: int, word: str) -> bool:
        """Does catalog title ``i`` hold the (folded) word? Chinese words: as a substring."""
        return word in self.terms[i] or (bool(_HAN.search(word)) and word in self.titles[i].lower())


def features(text: str, words, catalog: PointsCatalog | None = None, vector: np.ndarray | None = None,
             k: int = K) -> dict[str, np.ndarray]:
    """Each feature of the module doc for ``words`` (objects with .text and .start) of ``text``."""
    n = len(words)
    folded = [fold(w.text) for w in words]
    starts = np.array([w.start for w in words], dtype=float)
    pos = starts / max(starts.max(), 1.0) if n else starts
    m = _BOUNDARY.search(text)
    cut = m.start() if m else len(text)
    head = np.array([w.start < cut for w in words], dtype=float)
    spec = np.array([any(c.isdigit() for c in w.text) or f in UNITS for w, f in zip(words, folded)], dtype=float)
    share = np.zeros(n)
    brand = np.zeros(n)
    if catalog is not None and vector is not None:
        nb = catalog.neighbours(vector, text, k)
        if nb:
            share = np.array([sum(catalog.holds(i, f) for i in nb) / len(nb) if f else 0.0 for f in folded])
        brand = np.array([catalog.first[f] / catalog.df[f] if catalog.df[f] else 0.0 for f in folded])
    stop = np.array([not f or f in STOP for f in folded], dtype=float)
    return {"share": share, "pos": pos, "head": head, "spec": spec, "brand": brand, "stop": stop,
            **_from_end(head, stop)}


def _from_end(head: np.ndarray, stop: np.ndarray) -> dict[str, np.ndarray]:
    """Where a word stands counted from the end, which ``pos`` (a share of the title's length)
    blurs on long titles: ``fromend`` 1 for the last content word, 1/2 the one before …;
    ``fromend_head`` the same within the words before " in/with/for/(/," (0 after);
    ``last_head`` 1 for the last content word before them (the product type, "… Angle Bracket in
    Zinc"), else for the last content word. The term head learns their weights (terms.py)."""
    content = 1.0 - stop
    after = np.cumsum(content[::-1])[::-1] - content  # content words after each word
    named = content * head
    after_named = np.cumsum(named[::-1])[::-1] - named
    last = np.zeros(len(stop))
    pick = np.flatnonzero(named) if named.any() else np.flatnonzero(content)
    if len(pick):
        last[pick[-1]] = 1.0
    return {"fromend": content / (1 + after), "fromend_head": named / (1 + after_named), "last_head": last}


def score(feats: dict[str, np.ndarray], weights: dict[str, float] | None = None) -> np.ndarray:
    w = WEIGHTS if weights is None else weights
    s = sum(w[name] * feats[name] for name in w)
    return np.where(feats["stop"] > 0, -10.0 + s, s)  # stop words last, in their own order


CACHE = "/tmp/qkv-cache/points"


def load_catalog(path, encoder, *, cache_dir: str | None = CACHE, progress=None) -> PointsCatalog:
    """A catalog file (CSV or JSON lines, as ``qkv index`` reads it; BEIR corpus.jsonl too) as a
    ``PointsCatalog``. The titles' vectors are kept under ``cache_dir`` (keyed by the file's path,
    size and time and the model), so a second run does not embed the catalog again."""
    import hashlib
    from pathlib import Path

    from qkv.search.catalog import read_catalog

    path = Path(path)
    titles = [r["title"] for r in read_catalog(path).rows]
    vectors = None
    cache = None
    if cache_dir is not None:
        st = path.stat()
        key = hashlib.blake2b(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{encoder.fingerprint()}".encode(),
                              digest_size=8).hexdigest()
        cache = Path(cache_dir) / f"{key}.npy"
        if cache.is_file():
            vectors = np.load(cache)
            if vectors.shape != (len(titles), encoder.dim):
                vectors = None
    if vectors is None:
        vectors = encoder.encode(titles, normalize=True, truncate=True, progress=progress)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(".tmp.npy")
            np.save(tmp, vectors)
            tmp.replace(cache)
    return PointsCatalog.build(titles, encoder, vectors=vectors)
