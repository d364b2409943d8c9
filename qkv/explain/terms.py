"""How likely is each title word to be searched? A term-weight head on the encoder's token vectors.

DeepCT (Dai & Callan 2019, "Context-Aware Sentence/Passage Term Importance Estimation for First
Stage Retrieval") regresses each token's contextual vector onto its *query term recall*: the share
of a document's relevant queries that contain the term, trained with squared error. Here the
document is a product title, the queries are the seller's search terms (a search-term report:
query, product, clicks or orders) or judged queries (BEIR qrels), and the head is the same linear
map, one weight vector over the last layer's vectors of a word (its pieces averaged):

    target(w) = Σ_q c_q·[q contains w] / Σ_q c_q          (c_q: clicks/orders, or 1 per judged query)
    ŷ(w)      = θ·x_w + b,   θ, b = argmin Σ (ŷ − target)² + λ‖θ‖²   (ridge: solved in closed form)

By default four title features join x_w (``TITLE_FEATURES``: the word's place, whether it comes
before " in/with/for", holds a digit or unit, or is a stop word — the "title" method's evidence),
so the seller's data also sets how much those count.

"Contains" is the selling-points measure's matching (``title_terms``: folded words, plural and
hyphen parts). The closed form needs one pass over the titles' token vectors, so training is
the time of encoding the titles. The head is a small file of the seller's own (``save``): nothing
learned from anyone's search data ships with qkv. A multilingual model's head applies to titles
in any language the model reads (trained on English titles, it scores Chinese ones).
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from qkv.errors import InputError
from qkv.explain.title_terms import STOP, fold, parts, query_terms

FORMAT = "qkv-term-head/2"  # 2: the inputs beside x_w are named in the file (``features``), catalog ones optional
RIDGE = 1.0
BATCH = 256
# read from the title alone (points.py), appended to x_w: place, before " in/with/for", digit or
# unit, stop word, place counted from the end, and the last word that names the product
TITLE_FEATURES = ("pos", "head", "spec", "stop", "fromend", "fromend_head", "last_head")
# read from the catalog (points.py): the share of the title's nearest catalog titles holding the
# word, and how often it opens a catalog title (a brand)
CATALOG_FEATURES = ("share", "brand")


def _title_vector(enc, seq, vec: np.ndarray) -> np.ndarray:
    """The title's unit vector from its token vectors (mean-pooled models: the mean of every row,
    as ``encode`` pools), so the catalog's neighbours need no second pass of the encoder."""
    if getattr(enc.config, "pooling", "mean") == "mean":
        v = vec.mean(axis=0)
        return v / max(float(np.linalg.norm(v)), 1e-12)
    return enc.encode([seq.text], normalize=True, truncate=True)[0]


def _inputs(text: str, words, vectors: np.ndarray, features: Sequence[str], catalog=None,
            vector: np.ndarray | None = None) -> np.ndarray:
    """The head's input per word: its vector, then the named ``features`` (points.py)."""
    if not features or not len(words):
        return vectors.astype(np.float64)
    from qkv.explain.points import features as read

    f = read(text, words, catalog, vector)
    return np.hstack([vectors.astype(np.float64), np.stack([f[k] for k in features], axis=1)])


def _content_words(seq) -> list:
    return [w for w in seq.words(segment=True)
            if not w.special and fold(w.text) and any(c.isalnum() for c in w.text)]


def word_vectors(seq, vectors: np.ndarray, words) -> np.ndarray:
    """Each word's vector: the mean of its pieces' last-layer vectors."""
    return np.stack([vectors[list(w.tokens)].mean(axis=0) for w in words]) if words else \
        np.zeros((0, vectors.shape[1]), dtype=np.float32)


def _matches(word: str, terms: set[str]) -> bool:
    f = fold(word)
    return bool(f) and f not in STOP and (f in terms or bool(parts(f) & terms))


@dataclass(frozen=True)
class Example:
    """A title and the search terms that found it, each with its weight (clicks, orders or 1)."""
    title: str
    queries: tuple[tuple[str, float], ...]


def targets(title_words: Sequence[str], queries: Iterable[tuple[str, float]]) -> np.ndarray:
    """Query term recall of each word: the weighted share of the queries that contain it."""
    qs = [(query_terms(q), float(c)) for q, c in queries if c > 0]
    total = sum(c for _, c in qs)
    if total <= 0:
        return np.zeros(len(title_words))
    return np.array([sum(c for t, c in qs if _matches(w, t)) / total for w in title_words])


@dataclass
class TermHead:
    theta: np.ndarray  # [hidden + len(features)]
    bias: float
    model: str
    fingerprint: str
    info: dict  # "features": the inputs beside x_w, in order; training counts and options

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(self.info.get("features", ()))

    @property
    def title_features(self) -> bool:
        return any(f in TITLE_FEATURES for f in self.features)

    @property
    def needs_catalog(self) -> bool:
        """Trained with the catalog's features: scoring needs the catalog (``PointsCatalog``) too."""
        return any(f in CATALOG_FEATURES for f in self.features)

    def _catalog(self, catalog):
        if not self.needs_catalog:
            return None
        if catalog is None:
            raise InputError("this term head reads the catalog (it was trained with its neighbour share and brands): "
                             "give the catalog (--catalog CATALOG; catalog=PointsCatalog in code), or train a head "
                             "without it (qkv terms train --no-catalog-features)")
        if catalog.model != self.model:
            raise InputError(f"the catalog was embedded by {catalog.model}, the head reads {self.model}: use one model")
        return catalog

    def word_scores(self, enc, text: str, words, catalog=None) -> np.ndarray:
        """ŷ for ``words`` (objects with .start/.end, e.g. ``AttentionMaps.words``) of ``text``;
        ``catalog``: the ``PointsCatalog`` a head trained with catalog features needs."""
        self.check(enc)
        cat = self._catalog(catalog)
        seq, vec = enc.token_vectors([text], truncate=True)[0]
        mine = seq.words(segment=True)
        by_span = {(w.start, w.end): w for w in mine}
        x = np.zeros((len(words), vec.shape[1]), dtype=np.float32)
        for i, w in enumerate(words):
            ww = by_span.get((w.start, w.end))
            toks = list(ww.tokens) if ww is not None else \
                [t for t, (a, b) in enumerate(seq.offsets) if a < w.end and b > w.start and not seq.special[t]]
            if toks:
                x[i] = vec[toks].mean(axis=0)
        if not len(words):
            return np.zeros(0)
        v = _title_vector(enc, seq, vec) if cat is not None else None
        return _inputs(text, words, x, self.features, cat, v) @ self.theta + self.bias

    def title_scores(self, enc, titles: Sequence[str], catalog=None) -> list[tuple[list[str], np.ndarray]]:
        """Each title's content words and their ŷ (the entry point other modules use: e.g. DeepCT
        term weights for a keyword index). ``catalog``: as ``word_scores``."""
        return [([w.text for w in words], y) for words, y in self.scored_words(enc, titles, catalog)]

    def scored_words(self, enc, titles: Sequence[str], catalog=None) -> list[tuple[list, np.ndarray]]:
        """Each title's content words (``Word``: text, character span, pieces) and their ŷ."""
        self.check(enc)
        cat = self._catalog(catalog)
        out = []
        for t, (seq, vec) in zip(titles, enc.token_vectors(list(titles), truncate=True)):
            words = _content_words(seq)
            v = _title_vector(enc, seq, vec) if cat is not None else None
            x = _inputs(t, words, word_vectors(seq, vec, words), self.features, cat, v)
            out.append((words, x @ self.theta + self.bias if len(words) else np.zeros(0)))
        return out

    def check(self, enc) -> None:
        if enc.name != self.model or (self.fingerprint and enc.fingerprint() != self.fingerprint):
            raise InputError(f"this term head was trained on {self.model}'s token vectors; load that model "
                             f"(--model {self.model}), not {enc.name}")

    def save(self, path) -> Path:
        path = Path(path)
        if path.suffix != ".npz":
            raise InputError(f"save the term head as a .npz file (got {path.name})")
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"format": FORMAT, "model": self.model, "fingerprint": self.fingerprint, "bias": self.bias, **self.info}
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, theta=self.theta.astype(np.float32), meta=np.array(json.dumps(meta)))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path, enc=None) -> "TermHead":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"no term head at {path} (train one with `qkv terms train`)")
        try:
            with np.load(path, allow_pickle=False) as z:
                theta, meta = z["theta"], json.loads(str(z["meta"]))
        except Exception as e:  # a damaged or foreign file: say what it is not
            raise InputError(f"{path} is not a term head saved by `qkv terms train` ({e})") from None
        if meta.get("format") != FORMAT:
            if str(meta.get("format", "")).startswith("qkv-term-head/"):
                raise InputError(f"{path} is a term head of an older qkv ({meta['format']}; this one reads {FORMAT}): "
                                 "its inputs differ, so train it again with `qkv terms train`")
            raise InputError(f"{path} is not a term head saved by `qkv terms train` (format {meta.get('format')!r})")
        info = {k: v for k, v in meta.items() if k not in ("format", "model", "fingerprint", "bias")}
        head = cls(theta, float(meta["bias"]), meta["model"], meta.get("fingerprint", ""), info)
        if enc is not None:
            head.check(enc)
        return head


def train(enc, examples: Sequence[Example], *, ridge: float = RIDGE, title_features: bool = True,
          catalog=None, progress=None, source: str = "") -> TermHead:
    """Fit the head on ``examples`` (see the module doc). ``title_features``: ``TITLE_FEATURES``
    (the word's place, whether it comes before " in/with/for", holds a digit or unit, is a stop
    word …) join its vector as inputs, weighted by the seller's data; ``catalog`` (a
    ``PointsCatalog`` of the seller's titles): so do ``CATALOG_FEATURES`` (the share of the nearest
    catalog titles holding the word, brands), and scoring then needs the catalog too.
    ``progress``: stage "titles" counts the titles encoded, then "fit" once."""
    examples = [e for e in examples if e.queries]
    if not examples:
        raise InputError("no training example: every product needs at least one search term with clicks/orders > 0")
    if catalog is not None and catalog.model != enc.name:
        raise InputError(f"the catalog was embedded by {catalog.model}, the head reads {enc.name}: use one model")
    feats = (TITLE_FEATURES if title_features else ()) + (CATALOG_FEATURES if catalog is not None else ())
    d = enc.dim + len(feats)
    xtx = np.zeros((d + 1, d + 1))
    xty = np.zeros(d + 1)
    n_words = 0
    positives = 0.0
    for s in range(0, len(examples), BATCH):
        chunk = examples[s:s + BATCH]
        for ex, (seq, vec) in zip(chunk, enc.token_vectors([e.title for e in chunk], truncate=True)):
            words = _content_words(seq)
            if not words:
                continue
            v = _title_vector(enc, seq, vec) if catalog is not None else None
            x = np.hstack([_inputs(ex.title, words, word_vectors(seq, vec, words), feats, catalog, v),
                           np.ones((len(words), 1))])
            y = targets([w.text for w in words], ex.queries)
            xtx += x.T @ x
            xty += x.T @ y
            n_words += len(words)
            positives += float(y.sum())
        if progress is not None:
            progress("titles", min(s + BATCH, len(examples)), len(examples))
    reg = ridge * np.eye(d + 1)
    reg[d, d] = 0.0  # the bias is not shrunk
    sol = np.linalg.solve(xtx + reg, xty)
    if progress is not None:
        progress("fit", 1, 1)
    info = {"titles": len(examples), "words": n_words, "mean_target": positives / max(n_words, 1),
            "ridge": ridge, "features": list(feats), "source": source}
    return TermHead(sol[:d].astype(np.float32), float(sol[d]), enc.name, enc.fingerprint(), info)


# ------------------------------------------------------------------ training data

def examples_from_qrels(corpus: Mapping[str, str], queries: Mapping[str, str],
                        qrels: Mapping[str, Mapping[str, float]], *, relevant: float = 2.5,
                        keep_query=None) -> list[Example]:
    """BEIR judgments → examples: each product with its queries judged ≥ ``relevant``, one each.
    ``keep_query(qid)``: which queries may be used (a split)."""
    by: dict[str, list[tuple[str, float]]] = {}
    for qid, judged in qrels.items():
        if qid not in queries or (keep_query is not None and not keep_query(qid)):
            continue
        for pid, s in judged.items():
            if s >= relevant and pid in corpus:
                by.setdefault(pid, []).append((queries[qid], 1.0))
    return [Example(corpus[p], tuple(q)) for p, q in sorted(by.items())]


QUERY_NAMES = ("query", "search term", "search_term", "customer search term", "searchterm", "keyword", "search query")
PRODUCT_NAMES = ("title", "product title", "product_title", "product", "product name", "item", "id", "product id",
                 "product_id", "asin", "sku")
WEIGHT_NAMES = ("orders", "purchases", "conversions", "clicks", "units", "sales")


def _column(header: list[str], given: str | None, names: tuple[str, ...], what: str, flag: str) -> int:
    low = [h.strip().lower() for h in header]
    if given is not None:
        if given.strip().lower() not in low:
            raise InputError(f"{flag} {given!r} is not a column of the report (columns: {', '.join(header)})")
        return low.index(given.strip().lower())
    for n in names:
        if n in low:
            return low.index(n)
    raise InputError(f"the report has no {what} column (looked for {', '.join(names)}); name it with {flag} "
                     f"(columns: {', '.join(header)})")


def report_rows(path, *, query_column: str | None = None, product_column: str | None = None,
                weight_column: str | None = None) -> list[tuple[str, str, float]]:
    """A search-term report (CSV or TSV with a header: query, product title or id, clicks/orders)
    → its rows as (query, product, weight), in file order; rows without a query or product are
    left out. Without a weight column every row counts 1. Shared by ``examples_from_report`` and
    the query adapter (``qkv.search.adapter``)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no search-term report at {path}")
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",\t;")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if len(rows) < 2:
        raise InputError(f"{path}: a report needs a header row and at least one row")
    header = rows[0]
    qi = _column(header, query_column, QUERY_NAMES, "query", "--query-column")
    pi = _column(header, product_column, PRODUCT_NAMES, "product", "--product-column")
    wi = None
    low = [h.strip().lower() for h in header]
    if weight_column is not None or any(n in low for n in WEIGHT_NAMES):
        wi = _column(header, weight_column, WEIGHT_NAMES, "clicks/orders", "--weight-column")
    out = []
    for n, r in enumerate(rows[1:], 2):
        if len(r) <= max(qi, pi, wi or 0) or not r[qi].strip() or not r[pi].strip():
            continue
        try:
            w = 1.0 if wi is None else float(r[wi].replace(",", "") or 0)
        except ValueError:
            raise InputError(f"{path}:{n}: {header[wi]} {r[wi]!r} is not a number") from None
        out.append((r[qi].strip(), r[pi].strip(), w))
    return out


def examples_from_report(path, *, titles: Mapping[str, str] | None = None, query_column: str | None = None,
                         product_column: str | None = None, weight_column: str | None = None) -> list[Example]:
    """A search-term report (``report_rows``) → examples, one per product. A product is looked up
    in ``titles`` (id → title, from a catalog) when given, else the column is the title itself."""
    by: dict[str, list[tuple[str, float]]] = {}
    unknown = 0
    for query, prod, w in report_rows(path, query_column=query_column, product_column=product_column,
                                      weight_column=weight_column):
        if titles is not None:
            if prod not in titles:
                unknown += 1
                continue
            prod = titles[prod]
        if prod:
            by.setdefault(prod, []).append((query, w))
    if titles is not None and unknown and not by:
        raise InputError(f"{path}: none of the report's products is in the catalog (by id); is the product "
                         "column a title? then leave --catalog out")
    return [Example(t, tuple(q)) for t, q in by.items()]


# ------------------------------------------------------------------ title advice

@dataclass(frozen=True)
class Advice:
    word: str  # as a neighbour writes it
    weight: float  # the learned weight the word carries in the neighbours' titles, similarity-weighted mean (0 where absent)
    neighbours: int  # how many of the neighbours read hold it

    def to_dict(self) -> dict:
        return {"word": self.word, "weight": round(self.weight, 4), "neighbours": self.neighbours}


FLOOR = 0.9  # a neighbour is read when its cosine is at least this share of the nearest one's
_NAMING_END = re.compile(r"\s(?:in|with|for)\s|[(,]|\s[-–—]\s", re.IGNORECASE)


def naming_part(title: str) -> str:
    """The part of a title that names the product: up to the first " in/with/for ", "(", "," or
    " - " — what follows is colour, size, finish or what is included ("… Boots - Navy, US 6")."""
    m = _NAMING_END.search(title)
    return title[:m.start()] if m else title


def product_type(title: str) -> str:
    """The folded last word of the naming part that is a word (letters, no digit, no unit, no
    stop word): titles name the product type last ("Velora Running Shoes, Red" → "shoe"); "" if none."""
    from qkv.explain.points import UNITS

    for tok in reversed(naming_part(title).split()):
        f = fold(tok)
        if f and f not in STOP and f not in UNITS and f.replace("-", "").replace("'", "").isalpha():
            return f
    return ""


def advisers(enc, title: str, catalog, *, k: int = 20, floor: float = FLOOR,
             same_type: bool = True) -> list[tuple[int, float]]:
    """The catalog titles advice is read from, with their cosines: of the ``k`` nearest, those at
    least ``floor`` × the nearest one's cosine and — when the title names a product type that some
    of them hold — only those (a running shoe's neighbours by brand include boots)."""
    vec = np.asarray(enc.encode([title], normalize=True, truncate=True)[0], dtype=np.float32)
    nb = catalog.neighbours(vec, title, k)
    if not nb:
        return []
    sims = catalog.vectors[nb] @ vec
    best = float(sims[0])
    kept = [(i, float(s)) for i, s in zip(nb, sims) if s >= floor * best or best <= 0]
    kind = product_type(title) if same_type else ""
    if kind:
        typed = [(i, s) for i, s in kept if catalog.holds(i, kind)]
        kept = typed or kept
    return kept


def _brand(catalog, word: str) -> bool:
    return catalog.df[word] > 0 and catalog.first[word] >= 0.5 * catalog.df[word]


def named_words(title: str, words: Iterable[tuple[str, int, float]], is_brand) -> list[tuple[str, str, float]]:
    """(folded, as written, ŷ) of a title's scored words (text, start, ŷ) that advice may offer: in
    the naming part (``naming_part``: not its colour or size), no stop word, number or brand
    (``is_brand(folded)``)."""
    cut = len(naming_part(title))
    out = []
    for text, start, y in words:
        f = fold(text)
        if start < cut and f and f not in STOP and not any(c.isdigit() for c in f) and not is_brand(f):
            out.append((f, text, float(y)))
    return out


def rank_advice(near: Sequence[tuple[int, float]], named: Sequence[list[tuple[str, str, float]]],
                have: set[str]) -> list[Advice]:
    """``advise``'s ranking: per word the title lacks (not in ``have``), the mean over the
    neighbours (``near``: (row, cosine)) of its learned weight in each (``named``, one list a
    neighbour, from ``named_words``; 0 where absent), each neighbour weighted by its cosine; words
    of a positive weight, best first."""
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    shown: dict[str, str] = {}
    for (_, sim), words in zip(near, named):
        seen = set()
        for f, text, y in words:
            if f in have or f in seen:
                continue
            seen.add(f)
            total[f] = total.get(f, 0.0) + sim * y
            count[f] = count.get(f, 0) + 1
            shown.setdefault(f, text)
    mass = sum(s for _, s in near) or 1.0
    out = [Advice(shown[f], total[f] / mass, count[f]) for f in total if total[f] > 0]
    out.sort(key=lambda a: -a.weight)
    return out


def advise(head: TermHead, enc, title: str, catalog, *, k: int = 20, top: int = 10, floor: float = FLOOR,
           same_type: bool = True, near: list[tuple[int, float]] | None = None) -> list[Advice]:
    """Words shoppers use for ``title``'s nearest catalog titles (``PointsCatalog``; read from
    ``advisers``) that it lacks, ranked by the learned weight they carry there: the mean over the
    neighbours of the word's weight in each (0 where absent), each neighbour weighted by its cosine.
    Only words of a neighbour's naming part count (``naming_part``: not its colour or size), no
    brand (a word that opens at least half the catalog titles holding it), number or stop word,
    and only words of a positive weight. ``near``: ``advisers``' answer, if already at hand."""
    if near is None:
        near = advisers(enc, title, catalog, k=k, floor=floor, same_type=same_type)
    have = {fold(t) for t in title.split()}
    have |= {p for w in list(have) for p in parts(w)}
    texts = [catalog.titles[i] for i, _ in near]
    named = [named_words(t, ((w.text, w.start, y) for w, y in zip(words, ys)), lambda f: _brand(catalog, f))
             for t, (words, ys) in zip(texts, head.scored_words(enc, texts, catalog))]
    return rank_advice(near, named, have)[:top]

