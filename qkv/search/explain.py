"""Why a title matched a query: the query-token × title-token grid.

For a mean-pooled model with cosine similarity the grid is an exact decomposition of the score.
With Q [n_q, H] and T [n_t, H] the last layer's token vectors (special tokens included, as
sentence-transformers pools them), q̄ = mean(Q), t̄ = mean(T):

    cos(q̄, t̄) = q̄·t̄ / (|q̄||t̄|) = Σ_i Σ_j Q_i·T_j / (n_q · n_t · |q̄| · |t̄|)

because q̄·t̄ = (1/n_q)(1/n_t) Σ_i Σ_j Q_i·T_j (the dot product is bilinear). So
G_ij = Q_i·T_j / (n_q n_t |q̄||t̄|) are the parts, and ΣG = the dense score. Summing G over the
tokens of a title word gives that word's share of the score; the query token with the largest
entry in a title token's column is the one it "answers" (the query attends to the title, as in
late-interaction models such as ColBERT, Khattab & Zaharia 2020). For other poolings (CLS, max)
there is no such identity: the grid then holds token-token cosines and ``exact`` is False.

Prefixes: a model trained with them (E5: "query: " / "passage: ") is searched with them, so the
grid explains the vectors actually compared: the query is embedded as ``query_prefix + query`` and
each title as ``passage_prefix + title``, and the prefix tokens are rows/columns of the grid like any
other. They are kept apart at word level: the words carry ``kind`` "word", "prefix" or "special",
word offsets point into the query and title as typed, and ``context`` says how much of the cosine
the prefix tokens and <s>/</s> ([CLS]/[SEP]) take, so that word pairs + prefix + special = cosine.

Who met whom: the parts G_ij share a large common term (the token vectors of a model point in much
the same direction, and a word of more pieces collects more parts), so a row's largest part rarely
says which title word a query word matched. Writing G_ij = μ + r_i + c_j + D_ij (grand mean, row and
column effects, interaction — a two-way decomposition), the interaction D, over the tokens of kind
"word", is what is left once each query token's and title token's general pull is removed; ``contrast``
is D averaged over each pair of words, and a title word "answers" the query word with the largest
contrast. It sums to 0, so it is a reading aid beside the exact parts, not a share of the score.
On "透气跑鞋" × "Breathable Mesh Running Shoes" (E5, prefixes on) the pieces 跑→Run and 鞋→Sho have the
largest interactions of the grid.

Words: Latin words from the tokenizer (pieces that touch, "▁" starts a word), Chinese runs cut by
the segmenter search uses (``qkv.text.zh``), so "透气跑鞋" against "Breathable Mesh Running Shoes"
gives a 2 × 4 word grid (透气, 跑鞋 × Breathable, Mesh, Running, Shoes).

Cost: a forward pass over the query and the shown titles (not stored for the catalog). A server
saves most of it: ``Index.explain_titles`` passes the token vectors of the search's own query pass
(``query_vectors``) and a ``TokenVectorCache`` of titles already explained, so only titles not seen
before run the model (issue 17: three explanations had cost 73 ms against 19 ms for the search).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WordShare:
    text: str
    start: int  # into the title as typed (0, 0 for special and prefix words)
    end: int
    share: float  # sum of the grid over this word's tokens (all query tokens)
    best_query_word: str  # the query word this title word interacts with most (``contrast``)
    special: bool = False  # [CLS]/[SEP], <s>/</s> or a prefix token: nothing to highlight
    kind: str = "word"  # "word", "prefix" or "special"
    tokens: tuple[int, ...] = ()  # columns of the grid


@dataclass(frozen=True)
class QueryWord:
    text: str
    start: int  # into the query as typed
    end: int
    kind: str  # "word", "prefix" or "special"
    tokens: tuple[int, ...]  # rows of the grid


@dataclass(frozen=True)
class MatchExplanation:
    query_tokens: tuple[str, ...]
    title_tokens: tuple[str, ...]
    grid: np.ndarray  # [n_q, n_t]; exact parts of the cosine when ``exact``
    exact: bool
    cosine: float  # the cosine of the pooled vectors, recomputed here
    parts_sum: float  # grid.sum(): equals ``cosine`` when exact
    query_norm: float  # |q̄| (un-normalised mean vector)
    title_norm: float
    title_words: tuple[WordShare, ...]
    keyword_terms: tuple[tuple[str, float], ...] = ()  # matched term → BM25 share
    query_words: tuple[QueryWord, ...] = ()
    query_prefix: str = ""
    passage_prefix: str = ""
    query_token_kinds: tuple[str, ...] = ()  # per grid row: "word", "prefix" or "special"
    title_token_kinds: tuple[str, ...] = ()  # per grid column

    def word_grid(self) -> np.ndarray:
        """[query words, title words] of kind "word": the grid summed over each pair's tokens (each
        cell is that pair's exact part of the cosine when ``exact``)."""
        qw = [w for w in self.query_words if w.kind == "word"]
        tw = [w for w in self.title_words if w.kind == "word"]
        g = self.grid.astype(np.float64)
        return _members(qw, len(g)) @ g @ _members(tw, g.shape[1]).T  # sums over each pair's tokens

    def contrast(self) -> np.ndarray:
        """[query words, title words] of kind "word": the grid's interaction term D (double-centred
        over the word tokens) averaged over each pair of words (see the module docstring)."""
        qk, tk = np.asarray(self.query_token_kinds), np.asarray(self.title_token_kinds)
        return _contrast(self.grid.astype(np.float64), qk, tk,
                         [w for w in self.query_words if w.kind == "word"],
                         [w for w in self.title_words if w.kind == "word"])

    def context(self) -> dict:
        """The cosine split: word pairs, cells touching a prefix token, the rest (special tokens)."""
        qk, tk = np.asarray(self.query_token_kinds), np.asarray(self.title_token_kinds)
        g = self.grid.astype(np.float64)
        words = float(g[np.ix_(qk == "word", tk == "word")].sum())
        prefix = float(g[(qk == "prefix")[:, None] | (tk == "prefix")[None, :]].sum())
        return {"words": words, "prefix": prefix, "special": float(g.sum()) - words - prefix,
                "query_prefix": self.query_prefix, "passage_prefix": self.passage_prefix}

    def pairs(self, k: int = 5, word_grid: np.ndarray | None = None) -> list[dict]:
        """The ``k`` query-word × title-word pairs with the largest share of the cosine
        (``word_grid``: this explanation's, if already computed)."""
        qw = [w for w in self.query_words if w.kind == "word"]
        tw = [w for w in self.title_words if w.kind == "word"]
        wg = self.word_grid() if word_grid is None else word_grid
        order = np.argsort(-wg, axis=None, kind="stable")[:k]
        return [{"query": qw[i].text, "title": tw[j].text, "share": float(wg[i, j])}
                for i, j in (divmod(int(o), wg.shape[1]) for o in order)]

    def to_json(self, detail: str = "full") -> dict:
        """Plain data. ``detail="grid"``: the token grid, its sums, the keyword terms, the grid over
        words and the cosine's split into words, prefixes and special tokens (what a page draws when
        a result's grid is opened); "full" adds the words themselves, the token kinds and norms and
        the top pairs."""
        if detail not in ("full", "grid"):
            raise ValueError(f'detail must be "full" or "grid", not {detail!r}')
        out = {"query_tokens": list(self.query_tokens), "title_tokens": list(self.title_tokens),
               # rounded in float64, as qkv.jsonable rounds, so the web answer takes it as it is
               "grid": np.round(self.grid.astype(np.float64), 6).tolist(), "exact": self.exact, "cosine": self.cosine,
               "parts_sum": self.parts_sum,
               "keyword_terms": [{"term": t, "bm25": s} for t, s in self.keyword_terms]}
        wg = self.word_grid()
        # the page draws the grid over words, prefixes and special tokens apart (their sums: context)
        out.update({"word_grid": {"rows": [w.text for w in self.query_words if w.kind == "word"],
                                  "cols": [w.text for w in self.title_words if w.kind == "word"],
                                  "values": wg.round(6).tolist(), "contrast": self.contrast().round(6).tolist()},
                    "context": self.context()})
        if detail == "grid":
            return out
        out.update({"query_token_kinds": list(self.query_token_kinds), "title_token_kinds": list(self.title_token_kinds),
                    "query_norm": self.query_norm, "title_norm": self.title_norm,
                    "title_words": [{**w.__dict__, "tokens": list(w.tokens)} for w in self.title_words],
                    "query_words": [{**w.__dict__, "tokens": list(w.tokens)} for w in self.query_words],
                    "pairs": self.pairs(word_grid=wg)})
        return out


def _words(tokens, prefix: str) -> list[tuple[str, object]]:
    """(kind, Word) for each word of a prefixed text, offsets moved back into the text as typed."""
    out = []
    cut = len(prefix)
    for w in tokens.words(segment=True):
        if w.special:
            out.append(("special", w))
        elif cut and w.end <= cut:
            out.append(("prefix", dataclasses.replace(w, start=0, end=0)))
        else:
            out.append(("word", dataclasses.replace(w, start=w.start - cut, end=w.end - cut)))
    return out


def _contrast(g: np.ndarray, qk: np.ndarray, tk: np.ndarray, qwords, twords) -> np.ndarray:
    rows, cols = np.flatnonzero(qk == "word"), np.flatnonzero(tk == "word")
    out = np.zeros((len(qwords), len(twords)))
    if not len(rows) or not len(cols):
        return out
    sub = g[np.ix_(rows, cols)]
    d = np.zeros_like(g)
    d[np.ix_(rows, cols)] = sub - sub.mean(axis=1, keepdims=True) - sub.mean(axis=0, keepdims=True) + sub.mean()
    # each pair's mean of D over its tokens, as indicator products (one per title: no loop over pairs)
    mq, mt = _members(qwords, len(g)), _members(twords, g.shape[1])
    return (mq @ d @ mt.T) / np.outer(mq.sum(axis=1), mt.sum(axis=1))


def _members(words, n: int) -> np.ndarray:
    """[len(words), n]: 1 where token j belongs to word i."""
    m = np.zeros((len(words), n))
    for i, w in enumerate(words):
        m[i, list(w.tokens)] = 1
    return m


def _token_kinds(words, n: int) -> tuple[str, ...]:
    kinds = ["word"] * n
    for kind, w in words:
        for t in w.tokens:
            kinds[t] = kind
    return tuple(kinds)


class TokenVectorCache:
    """A thread-safe LRU of (Tokens, token vectors, …) by key, bounded by the vectors' bytes (and
    optionally by entries). One cache serves one encoder: its keys need not name the model."""

    def __init__(self, max_bytes: int, max_entries: int | None = None):
        self.max_bytes, self.max_entries = int(max_bytes), max_entries
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = self.misses = 0

    def get(self, key):
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return hit

    def put(self, key, value) -> None:
        size = value[1].nbytes
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= old[1].nbytes
            self._items[key] = value
            self.bytes += size
            while self._items and (self.bytes > self.max_bytes
                                   or (self.max_entries is not None and len(self._items) > self.max_entries)):
                _, dropped = self._items.popitem(last=False)
                self.bytes -= dropped[1].nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)


def title_token_vectors(encoder, titles: list[str], cache: TokenVectorCache | None = None,
                        passage_prefix: str = "") -> list:
    """(Tokens, float32 last-layer vectors, words) of ``passage_prefix + title`` for each title; with a
    ``cache``, only titles not in it run the model (one batch), and they are kept. Keyed by the
    embedded text itself, so a product whose title changed never meets its old vectors."""
    texts = [passage_prefix + t for t in titles]
    out: list = [cache.get(t) if cache is not None else None for t in texts]
    missing = list(dict.fromkeys(t for t, v in zip(texts, out) if v is None))
    if missing:
        got = {t: (tt, T, _words(tt, passage_prefix))
               for t, (tt, T) in zip(missing, encoder.token_vectors(missing, truncate=True))}
        if cache is not None:
            for t, v in got.items():
                cache.put(t, v)
        out = [v if v is not None else got[t] for t, v in zip(texts, out)]
    return out


def explain_titles(encoder, query: str, titles: list[str],
                   keyword_terms: list[list[tuple[str, float]]] | None = None, *,
                   query_prefix: str = "", passage_prefix: str = "", query_vectors: tuple | None = None,
                   title_cache: TokenVectorCache | None = None) -> list[MatchExplanation]:
    """One explanation per title (see the module docstring). ``query_prefix`` / ``passage_prefix``:
    what the index put before queries and titles when it embedded them (E5: "query: " /
    "passage: "; ``Index.search`` passes its own), so the grid sums to the cosine search computed.
    ``query_vectors``: (Tokens, token vectors) of ``query_prefix + query`` from a pass already run
    (the search's own: the grid then decomposes that pass's cosine); without it the query runs in
    float32 with the titles. ``title_cache``: see ``title_token_vectors``."""
    if query_vectors is None and title_cache is None:
        tv = encoder.token_vectors([query_prefix + query] + [passage_prefix + t for t in titles], truncate=True)
        (qt, Q), rest = tv[0], [(tt, T, _words(tt, passage_prefix)) for tt, T in tv[1:]]
    else:
        qt, Q = (query_vectors if query_vectors is not None
                 else encoder.token_vectors([query_prefix + query], truncate=True)[0])
        rest = title_token_vectors(encoder, list(titles), title_cache, passage_prefix)
    mean = encoder.config.pooling == "mean"
    qbar = Q.mean(axis=0)
    qn = float(np.linalg.norm(qbar))
    qall = _words(qt, query_prefix)
    qwords = [w for kind, w in qall if kind == "word"]
    query_words = tuple(QueryWord(w.text, w.start, w.end, kind, tuple(w.tokens)) for kind, w in qall)
    out = []
    Q64 = Q.astype(np.float64)
    Qn = Q64 if mean else Q64 / np.linalg.norm(Q64, axis=1, keepdims=True)
    for n, (tt, T, tall) in enumerate(rest):
        tbar = T.mean(axis=0)
        tn = float(np.linalg.norm(tbar))
        T64 = T.astype(np.float64)
        if mean:
            grid = (Qn @ T64.T) / (len(Q) * len(T) * qn * tn)
        else:
            grid = Qn @ (T64 / np.linalg.norm(T64, axis=1, keepdims=True)).T
        cos = float(qbar.astype(np.float64) @ tbar.astype(np.float64) / (qn * tn))
        shares = []
        tkinds = _token_kinds(tall, len(tt))
        ct = _contrast(grid, np.asarray(_token_kinds(qall, len(qt))), np.asarray(tkinds), qwords,
                       [w for kind, w in tall if kind == "word"])
        col = 0
        for kind, w in tall:
            cols = list(w.tokens)
            share = float(grid[:, cols].sum()) if mean else float(grid[:, cols].max())
            best = ""
            if qwords and kind == "word":
                best = qwords[int(np.argmax(ct[:, col]))].text  # the query word it interacts with most
                col += 1
            shares.append(WordShare(w.text, w.start, w.end, share, best, kind != "word", kind, tuple(w.tokens)))
        out.append(MatchExplanation(qt.tokens, tt.tokens, grid.astype(np.float32), mean, cos,
                                    float(grid.sum()) if mean else float("nan"), qn, tn, tuple(shares),
                                    tuple(keyword_terms[n]) if keyword_terms else (), query_words,
                                    query_prefix, passage_prefix, _token_kinds(qall, len(qt)), tkinds))
    return out
