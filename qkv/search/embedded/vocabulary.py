"""The keyword vocabulary of a generation: how a query word is stemmed the way FTS5 indexed it,
how many products contain it, and the closest indexed word when it is unknown (spelling fallback).

Terms come from ``qkv.text.keywords`` (the keyword tokenizer: one function for titles and queries);
FTS5's tokenizer (``generations.FTS_TOKENIZE``: Porter stemming, diacritics removed) runs on top.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Iterable

from qkv.text import keywords as textmod
from qkv.text import zh
from qkv.search.embedded.generations import FTS_TOKENIZE, Generation


def quote(term: str) -> str:
    """An FTS5 string literal: user text is never FTS5 query syntax."""
    return '"' + term.replace('"', '""') + '"'


class Vocabulary:
    def __init__(self, gen: Generation):
        self.db = gen.db
        self.han = textmod.han_scheme(gen.manifest.extra)  # how this generation's Chinese was indexed
        self._stemmer = None  # in-memory FTS5 table that stems query terms like the index does
        # One table serves every thread that searches this generation: two threads filling it at
        # once collided on its rowids (IntegrityError) or read each other's words' stems.
        self._stemmer_lock = threading.Lock()
        self._stems: dict[str, str | None] = {}
        self._dfs: dict[str, int] = {}  # a generation is immutable: its counts can be kept
        self._vocab = None

    def _stemmer_db(self) -> sqlite3.Connection:
        if self._stemmer is None:
            con = sqlite3.connect(":memory:", check_same_thread=False)
            con.execute(f"CREATE VIRTUAL TABLE s USING fts5(x, tokenize=\"{FTS_TOKENIZE}\")")
            con.execute("CREATE VIRTUAL TABLE sv USING fts5vocab(s, 'instance')")
            self._stemmer = con
        return self._stemmer

    def stems(self, words: Iterable[str]) -> dict[str, str | None]:
        """The stem of each word as FTS5 indexes it (None if it yields no single token), cached;
        unknown words are stemmed together in one pass of a one-table in-memory FTS5."""
        stems = self._stems
        new = [w for w in set(words) if w not in stems]
        if new:
            got: dict[int, list[str]] = {}
            with self._stemmer_lock:
                con = self._stemmer_db()
                con.executemany("INSERT INTO s (rowid, x) VALUES (?, ?)", list(enumerate(new, 1)))
                for doc, term in con.execute("SELECT doc, term FROM sv"):
                    got.setdefault(doc, []).append(term)
                con.execute("DELETE FROM s")
            for i, w in enumerate(new, 1):
                toks = got.get(i, [])
                stems[w] = toks[0] if len(toks) == 1 else None
        return stems

    def stem(self, word: str) -> str | None:
        return self.stems([word])[word]

    def df(self, term: str) -> int:
        """How many products contain ``term`` (0 if none): the ``term_df`` table of the generation
        (a B-tree lookup); a term FTS5 splits into several tokens counts its phrase's matches."""
        if term in self._dfs:
            return self._dfs[term]
        stem = self.stem(term)
        if stem is None:
            return self.db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (quote(term),)).fetchone()[0]
        row = self.db.execute("SELECT doc FROM term_df WHERE term = ?", (stem,)).fetchone()
        if len(self._dfs) > 100_000:
            self._dfs.clear()
        self._dfs[term] = int(row[0]) if row else 0
        return self._dfs[term]

    def correct(self, term: str) -> str | None:
        """The closest indexed term to an unknown one (typos such as "backsplach")."""
        import difflib

        if len(term) < 4 or not term.isalpha() or zh.has_han(term):  # Chinese words are not misspelt English
            return None
        if self._vocab is None:
            self._vocab = {}
            for (t,) in self.db.execute("SELECT term FROM fts_vocab"):
                if t.isalpha() and len(t) >= 3:
                    self._vocab.setdefault(t[0], []).append(t)
        cands = [t for t in self._vocab.get(term[0], []) if abs(len(t) - len(term)) <= 2]
        best = difflib.get_close_matches(term, cands, n=1, cutoff=0.8)
        return best[0] if best else None

    def query_dfs(self, query: str) -> dict[str, int]:
        """The keyword terms searched for ``query`` with their document frequencies: normalised,
        unknown words replaced by the closest indexed word when one is close enough."""
        out: dict[str, int] = {}
        for t in textmod.terms(query, han=self.han):
            df = self.df(t)
            if not df:
                t = self.correct(t)
                if t is None:
                    continue
                df = self.df(t)
            if t not in out and df:
                out[t] = df
        return out
