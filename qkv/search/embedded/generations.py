"""Generations on disk: the schema a new one starts from, what an open one holds, and publishing.

A generation is an immutable directory ``DIR/gen-NNNNNN/``; ``manifest.json`` names the current one.
A writer builds the next generation in ``DIR/.tmp-gen-NNNNNN-PID/``, fsyncs it, renames it into
place and then swaps the manifest (``write_manifest``: ``os.replace``). A kill at any moment leaves
the previous manifest pointing at the previous, complete generation.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np

from qkv.search.store import FORMAT_VERSION, FieldInfo, IndexError_, Manifest, fsync_dir, write_manifest

FTS_TOKENIZE = "porter unicode61 remove_diacritics 2 tokenchars './'"  # FTS5 on top of text.normalize
# the files every generation of the current format holds (vectors.npy and catalog.sqlite are read
# at open, the keyword files when a keyword search first needs them)
KEYWORD_FILES = ("doclen.npy", "postings.npy", "postings_tf.npy")


def rebuild_hint(path) -> str:
    return (f"rebuild it with `qkv index CATALOG --index {path} --rebuild` (or copy it with "
            "`qkv store migrate` from a store that still reads it)")


def init_schema(con: sqlite3.Connection) -> None:
    con.executescript(f"""
        CREATE TABLE products (slot INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
                               ktext TEXT NOT NULL, title_hash TEXT NOT NULL);
        CREATE TABLE fields (name TEXT PRIMARY KEY, col TEXT NOT NULL UNIQUE, kind TEXT NOT NULL);
        CREATE VIRTUAL TABLE fts USING fts5(ktext, tokenize="{FTS_TOKENIZE}");
        CREATE VIRTUAL TABLE fts_vocab USING fts5vocab(fts, 'row');
        CREATE TABLE term_df (term TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE word_df (word TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE keyword_stats (rows INTEGER NOT NULL, tokens INTEGER NOT NULL);
        CREATE TABLE term_postings (term TEXT PRIMARY KEY, start INTEGER NOT NULL, df INTEGER NOT NULL) WITHOUT ROWID;
    """)


class Generation:
    """One published generation opened for reading: its SQLite file (``immutable``: no locks, no
    waiting), its field catalogue and sizes. The codecs (rows, vectors, keywords) read through it."""

    def __init__(self, path: Path, manifest: Manifest):
        self.path = path
        self.manifest = manifest
        if int(manifest.version) < FORMAT_VERSION:
            raise IndexError_(f"the index at {path} was written by an older qkv (index format {manifest.version}, "
                              f"this qkv reads {FORMAT_VERSION}); {rebuild_hint(path)}")
        name = manifest.extra.get("generation")
        if not name:
            raise IndexError_(f"{path}/manifest.json names no generation; the index is corrupt, rebuild it")
        self.name = name
        self.dir = path / name
        db = self.dir / "catalog.sqlite"
        if not db.is_file():
            raise FileNotFoundError(db)
        try:
            self.db = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            self.fields = [FieldInfo(n, k) for n, k in self.db.execute("SELECT name, kind FROM fields ORDER BY col")]
            self.cols = {n: c for n, c in self.db.execute("SELECT name, col FROM fields")}
            self.count = self.db.execute("SELECT count(*) FROM products").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise IndexError_(f"{db} is corrupt ({e}); rebuild the index") from None
        self.slots = int(manifest.extra.get("slots", 0))

    def load(self, name: str, what: str) -> np.ndarray:
        """A memory-mapped array file of this generation, with a clear error when it is damaged."""
        try:
            return np.load(self.dir / name, mmap_mode="r")
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as e:
            raise IndexError_(f"{self.dir / name} ({what}) is corrupt ({e}); rebuild the index") from None

    def close(self) -> None:
        try:
            self.db.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


def publish(root: Path, tmp: Path, gen: str, manifest: Manifest) -> None:
    """Make ``tmp`` generation ``gen`` and point the manifest at it (atomic at the os.replace)."""
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    fsync_dir(tmp)
    final = root / gen
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    fsync_dir(root)
    write_manifest(root, manifest)


def drop_old(root: Path, keep: tuple[str, ...]) -> None:
    """Remove generations other than ``keep`` (the new one, and the previous one for readers that
    still have it open)."""
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith("gen-") and p.name not in keep:
            shutil.rmtree(p, ignore_errors=True)
