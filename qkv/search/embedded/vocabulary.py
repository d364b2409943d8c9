"""The keyword vocabulary of a generation: how a query word is stemmed the way FTS5 indexed it,
how many products contain it, and what an unknown word most likely meant (``qkv.search.spelling``
over the catalog's own words).

Terms come from ``qkv.text.keywords`` (the keyword tokenizer: one function for titles and queries);
FTS5's tokenizer (``generations.FTS_TOKENIZE``: Porter stemming, diacritics removed) runs on top.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Callable, Iterable

from qkv.text import keywords as textmod
from qkv.text import zh
from qkv.search import spelling
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
        self._words: dict[str, int] | None = None  # word_df: the speller's dictionary
        self._spelled: list[str] = []
        self._fixes: dict[str, str | None] = {}

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

    def words(self) -> dict[str, int]:
        """The catalog's own words as its keyword documents spell them (before stemming), each with
        how many products hold it: the dictionary ``correct`` reads. Written when a generation is
        published (``word_df``); a generation from before that table is read from its documents."""
        if self._words is None:
            try:
                rows = self.db.execute("SELECT word, doc FROM word_df").fetchall()
            except sqlite3.OperationalError:  # published before word_df existed
                from qkv.search.embedded.postings import word_counts

                rows = list(word_counts(kt for (kt,) in self.db.execute("SELECT ktext FROM products")).items())
            self._spelled = [w for w, n in rows if n >= spelling.LEAST_DF]  # before _words: another
            self._words = dict(rows)  # thread reads both once _words is set
        return self._words

    def correct(self, term: str) -> str | None:
        """What an unknown query word most likely meant, in the catalog's own words: the nearest
        of them by edit distance (typos such as "backsplach", "celing"), or two of them run
        together ("windowair" → "window air"); None when nothing is near enough
        (``qkv.search.spelling``)."""
        if zh.has_han(term):  # Chinese words are not misspelt English
            return None
        if term not in self._fixes:  # a search and its second look (the floor) plan a query twice
            words = self.words()
            if len(self._fixes) > 10_000:
                self._fixes.clear()
            self._fixes[term] = spelling.correct(term, words, self._spelled)
        return self._fixes[term]

    def query_dfs(self, query: str) -> dict[str, int]:
        """The keyword terms searched for ``query`` with their document frequencies: normalised,
        the words no title holds left out (a query's plan corrects its spelling first: ``spell``)."""
        out: dict[str, int] = {}
        for t in textmod.terms(query, han=self.han):
            df = self.df(t)
            if t not in out and df:
                out[t] = df
        return out

    def spell(self, query: str, keep: Callable[[str], bool] | None = None) -> str:
        """``query`` with each word no title holds replaced by its correction (``correct``), the
        rest as typed (``query`` itself when no word needs one): the text a search runs on both
        sides (``qkv.search.plan``). ``keep(word)`` true leaves an unknown word as typed (the
        model's own words: ``Index.plan``)."""
        out, fixed_any = [], False
        for word in query.split():
            terms = textmod.terms(word, stopwords=False, han=self.han)
            unknown = len(terms) == 1 and not self.df(terms[0]) and not (keep is not None and keep(terms[0]))
            fixed = self.correct(terms[0]) if unknown else None
            out.append(fixed or word)
            fixed_any |= fixed is not None
        return " ".join(out) if fixed_any else query
