"""The keyword files of a generation, beside FTS5's own index: per-term document frequencies
(``term_df``), the catalog's words before stemming with theirs (``word_df``: the speller's
dictionary, ``qkv.search.spelling``), row and token counts (``keyword_stats``), tokens per row (``doclen.npy``) and every
term's postings as two flat arrays (``postings.npy``: rows, ascending within a term;
``postings_tf.npy``: the term's count in that row; ``term_postings``: where each term's run starts
and how long it is). Written by the writer when it publishes; read memory-mapped by the keyword
plans: FTS5 hands postings out only row by row (fts5vocab, ~0.3 µs a posting), numpy scores them
at ~10 ns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from qkv.search.embedded.generations import Generation, rebuild_hint
from qkv.search.store import IndexError_


# ---------------------------------------------------------------------------- writing (publish)
def write_keyword_files(con: sqlite3.Connection, out: Path, slots: int) -> None:
    """Every keyword file of the generation being published from ``con`` into ``out``."""
    # merge FTS5's segments into one (fewer b-trees to walk per query term), then the counts that
    # fts5vocab would otherwise compute by walking the postings
    con.execute("INSERT INTO fts (fts) VALUES ('optimize')")
    con.execute("DELETE FROM term_df")
    con.execute("INSERT INTO term_df SELECT term, doc FROM fts_vocab")
    con.execute("DELETE FROM keyword_stats")
    con.execute("INSERT INTO keyword_stats SELECT (SELECT count(*) FROM fts), coalesce(sum(cnt), 0) FROM fts_vocab")
    np.save(out / "doclen.npy", doc_lengths(con, slots))
    con.execute("CREATE TABLE IF NOT EXISTS word_df (word TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID")
    con.execute("DELETE FROM word_df")
    con.executemany("INSERT INTO word_df VALUES (?, ?)",
                    word_counts(kt for (kt,) in con.execute("SELECT ktext FROM products")).items())
    _write_postings(con, out, slots)


def word_counts(ktexts) -> dict[str, int]:
    """How many keyword documents hold each word a speller may offer: letters only, two or more,
    no Han (a learned-weight document repeats its words: each counts once a document)."""
    from collections import Counter

    from qkv.text import zh

    out: Counter = Counter()
    for kt in ktexts:
        out.update(w for w in set(kt.split()) if len(w) > 1 and w.isalpha() and not zh.has_han(w))
    return dict(out)


def doc_lengths(con: sqlite3.Connection, slots: int) -> np.ndarray:
    """Tokens in each slot's normalised title (what FTS5 counts: the text is already split into
    words separated by single spaces); 0 for empty slots."""
    out = np.zeros(slots, dtype=np.uint16)
    for slot, kt in con.execute("SELECT slot, ktext FROM products"):
        out[slot] = min(kt.count(" ") + 1 if kt else 0, 65535)
    return out


def _write_postings(con: sqlite3.Connection, out: Path, slots: int) -> None:
    con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.w_inst USING fts5vocab(main, fts, 'instance')")
    con.execute("DELETE FROM term_postings")
    dtype = np.uint32 if slots < 2 ** 32 else np.int64
    docs, tfs, meta, start = [], [], [], 0
    for term, occ in con.execute("SELECT term, group_concat(doc, ' ') FROM temp.w_inst GROUP BY term"):
        rows, tf = np.unique(np.fromstring(occ, dtype=np.int64, sep=" "), return_counts=True)
        docs.append(rows.astype(dtype))
        tfs.append(np.minimum(tf, 65535).astype(np.uint16))
        meta.append((term, start, len(rows)))
        start += len(rows)
    con.executemany("INSERT INTO term_postings VALUES (?, ?, ?)", meta)
    con.execute("DROP TABLE temp.w_inst")
    np.save(out / "postings.npy", np.concatenate(docs) if docs else np.zeros(0, dtype))
    np.save(out / "postings_tf.npy", np.concatenate(tfs) if tfs else np.zeros(0, np.uint16))


# ---------------------------------------------------------------------------- reading
class Postings:
    """The keyword files of one open generation, loaded on first use."""

    def __init__(self, gen: Generation):
        self.gen = gen
        self.db = gen.db
        self._arrays = None
        self._at: dict[str, tuple[int, int]] = {}  # stem → (start, df) in the arrays
        self._stats = None
        self._doclen = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(postings, tf), memory-mapped and checked against ``term_postings``."""
        if self._arrays is None:
            where = self.gen.dir
            try:
                end = self.db.execute("SELECT coalesce(max(start + df), 0) FROM term_postings").fetchone()[0]
                post = (np.load(where / "postings.npy", mmap_mode="r"), np.load(where / "postings_tf.npy", mmap_mode="r"))
            except (sqlite3.OperationalError, OSError, ValueError) as e:
                raise IndexError_(f"{where}: the keyword postings arrays are missing or corrupt ({e}); "
                                  f"{rebuild_hint(self.gen.path)}") from None
            if not len(post[0]) == len(post[1]) == end or post[0].ndim != 1:
                raise IndexError_(f"{where}: the keyword postings arrays do not match the catalog "
                                  f"({len(post[0])} / {len(post[1])} postings, {end} listed); {rebuild_hint(self.gen.path)}")
            self._arrays = post
        return self._arrays

    def of(self, stem: str | None) -> tuple[np.ndarray, np.ndarray]:
        """(rows ascending, tf) of an indexed term, as slices of the mapped arrays."""
        at = self._at.get(stem)
        if at is None:
            row = self.db.execute("SELECT start, df FROM term_postings WHERE term = ?", (stem,)).fetchone()
            at = self._at[stem] = (int(row[0]), int(row[1])) if row else (0, 0)
            if len(self._at) > 100_000:
                self._at.clear()
        docs, tfs = self.arrays()
        return docs[at[0]:at[0] + at[1]], tfs[at[0]:at[0] + at[1]]

    def stats(self) -> tuple[int, float]:
        """(rows, average tokens per row) of the FTS5 table."""
        if self._stats is None:
            row = self.db.execute("SELECT rows, tokens FROM keyword_stats").fetchone()
            if row is None:
                raise IndexError_(f"{self.gen.dir}: keyword_stats is empty; {rebuild_hint(self.gen.path)}")
            n, tokens = int(row[0]), float(row[1] or 0)
            self._stats = (n, tokens / n if n else 1.0)
        return self._stats

    def doc_lengths(self) -> np.ndarray:
        """Tokens per slot (0 for tombstones)."""
        if self._doclen is None:
            try:
                self._doclen = self.gen.load("doclen.npy", "row lengths")
            except FileNotFoundError:
                raise IndexError_(f"{self.gen.dir}/doclen.npy is missing; {rebuild_hint(self.gen.path)}") from None
        return self._doclen
