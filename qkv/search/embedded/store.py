"""``EmbeddedStore``: the ``VectorStore`` of one directory, no server — an open generation read
through one codec per concern (``rows``: stored fields, ``dense``: vectors and faiss, ``keyword``: BM25 over
FTS5 and the postings arrays), written by ``writer.Writer``."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from qkv.errors import InputError
from qkv.text import keywords as textmod
from qkv.search.embedded import generations, postings
from qkv.search.embedded.generations import Generation
from qkv.search.embedded.keyword import Keywords
from qkv.search.embedded.rows import Rows
from qkv.search.embedded.vectors import FLAT_THRESHOLD, IVFPQ_MIN, Vectors
from qkv.search.embedded.writer import Writer
from qkv.search.store import FieldInfo, Hit, IndexError_, Manifest, Row, VectorStore, read_manifest
from qkv.search.writelock import WriterLock
from qkv.text import zh


class EmbeddedStore(VectorStore):
    """faiss + SQLite in one directory (see the package docstring)."""

    def __init__(self, path: Path, manifest: Manifest, *, read: bool = True):
        self.path = path
        self._manifest = manifest
        self.gen = self.rows = self.dense = self.keyword = None
        if read:
            self.gen = Generation(path, manifest)
            try:
                self.rows = Rows(self.gen)
                self.dense = Vectors(self.gen, self.rows)
                self.keyword = Keywords(self.gen, self.rows)
            except BaseException:
                self.gen.close()
                raise

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path) -> "EmbeddedStore":
        path = Path(path)
        for attempt in range(5):  # a writer may swap generations between our reads: retry
            manifest = read_manifest(path)
            try:
                return cls(path, manifest)
            except FileNotFoundError:
                if attempt == 4:
                    raise IndexError_(f"{path}: the generation named by manifest.json is missing; "
                                      "the index is damaged, rebuild it") from None
                time.sleep(0.05)
        raise AssertionError("unreachable")

    @classmethod
    def for_rebuild(cls, path) -> "EmbeddedStore":
        """Only ``writer(reset=True)`` works on this handle: nothing of the old generation is read."""
        path = Path(path)
        return cls(path, read_manifest(path), read=False)

    @classmethod
    def create(cls, path, manifest: Manifest, **options) -> "EmbeddedStore":
        path = Path(path)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            if (path / "manifest.json").is_file():
                read_manifest(path)  # a foreign/corrupt one raises here
                raise InputError(f"{path} already holds an index; use --upsert to change it or --rebuild")
            raise IndexError_(f"{path} exists and is not a qkv index ({'a file' if path.is_file() else 'a non-empty directory'}); "
                              "choose a new or empty directory")
        path.mkdir(parents=True, exist_ok=True)
        extra = dict(manifest.extra)
        extra.setdefault("flat_threshold", int(options.get("flat_threshold", FLAT_THRESHOLD)))
        extra.setdefault("ivfpq_min", int(options.get("ivfpq_min", IVFPQ_MIN)))
        extra.setdefault(textmod.MANIFEST_KEY, zh.SCHEME)  # how Chinese titles become keyword terms
        manifest = replace(manifest, backend="embedded", count=0, version=generations.FORMAT_VERSION, extra=extra)
        with WriterLock(path):
            tmp = path / f".tmp-gen-000000-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            con = sqlite3.connect(tmp / "catalog.sqlite")
            generations.init_schema(con)
            postings.write_keyword_files(con, tmp, 0)
            con.commit()
            con.close()
            np.save(tmp / "vectors.npy", np.zeros((0, manifest.dim), dtype=manifest.dtype))
            gen = "gen-000000"
            generations.publish(path, tmp, gen, replace(manifest, extra={**extra, "generation": gen, "slots": 0,
                                                                         "ann_kind": None}))
        return cls.open(path)

    def close(self) -> None:
        if self.gen is not None:
            self.gen.close()

    def warm(self) -> None:
        """Load the ANN index and the keyword arrays (each is otherwise read by the first search
        that needs it)."""
        self._reading()
        _ = self.dense.ann
        self.keyword.postings.arrays()
        self.keyword.postings.stats()
        self.keyword.postings.doc_lengths()
        self.keyword.vocab.words()

    def _reading(self) -> None:
        if self.gen is None:
            raise InputError(f"the index at {self.path} is open only to be rebuilt")

    # ------------------------------------------------------------------ description
    @property
    def manifest(self) -> Manifest:
        return self._manifest

    @property
    def db(self) -> sqlite3.Connection:
        """The generation's SQLite file (read-only)."""
        return self.gen.db

    def count(self) -> int:
        return self.gen.count

    def fields(self) -> list[FieldInfo]:
        return list(self.gen.fields)

    @property
    def vectors(self) -> np.ndarray:
        """The generation's vectors, memory-mapped [slots, dim] (float32 or float16)."""
        return self.dense.array

    @property
    def ef_search(self) -> int:
        return self.dense.ef_search

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        self.dense.ef_search = value

    # ------------------------------------------------------------------ searching
    def _hits(self, slots, scores) -> list[Hit]:
        slots = [int(s) for s in slots]
        if not slots:
            return []
        ids = self.rows.ids_of(slots)
        return [Hit(ids[s], float(v)) for s, v in zip(slots, scores) if s in ids]

    def dense_search(self, vector, k, filter=None) -> list[Hit]:
        return self._hits(*self.dense_slots(vector, k, filter))

    def dense_slots(self, vector, k, filter=None) -> tuple[np.ndarray, np.ndarray]:
        """``dense_search`` as (slots, cosines) arrays, without looking up ids: hybrid search fuses
        in slot space and names only the products it returns (200 ids cost 1.5-5 ms at 1M)."""
        return self.dense.search(vector, k, filter)

    def keyword_search(self, query, k, filter=None) -> list[Hit]:
        """Top ``k`` by BM25 of the OR of the query's terms (``keyword.Keywords.search``)."""
        return self._hits(*self.keyword_slots(query, k, filter))

    def keyword_slots(self, query, k, filter=None) -> tuple[np.ndarray, np.ndarray]:
        return self.keyword.search(query, k, filter)

    def query_terms(self, query: str) -> list[str]:
        return self.keyword.query_terms(query)

    def keyword_terms(self, query, ids) -> dict[str, list[tuple[str, float]]]:
        return self.keyword.terms_of(query, list(ids))

    def spell(self, query: str, keep=None) -> str:
        return self.keyword.vocab.spell(query, keep)

    def keyword_vocabulary(self):
        """How many titles hold given keyword terms, for translating queries into the catalog's
        own words (``qkv.translate.translator.FtsVocabulary`` over this generation's FTS5 table)."""
        from qkv.translate import FtsVocabulary

        self._reading()
        return FtsVocabulary(self.db, "fts")

    def matched_counts(self, query: str, slots: np.ndarray) -> np.ndarray:
        return self.keyword.matched_counts(query, slots)

    def slot_vectors(self, slots: np.ndarray) -> np.ndarray:
        return self.dense.of_slots(slots)

    def ids_of(self, slots: Sequence[int]) -> dict[int, str]:
        return self.rows.ids_of(slots)

    # ------------------------------------------------------------------ rows
    def get_rows(self, ids: Sequence[str]) -> list[Row | None]:
        return self.rows.get(ids)

    def get_vectors(self, ids: Sequence[str]) -> np.ndarray:
        ids = list(ids)
        slots = self.rows.slots_of(ids)
        missing = [i for i, s in zip(ids, slots) if s is None]
        if missing:
            raise InputError(f"unknown product id(s): {', '.join(map(str, missing[:5]))}")
        if not len(slots):
            return np.zeros((0, self._manifest.dim), np.float32)
        return self.slot_vectors(slots)

    def all_ids(self) -> list[str]:
        return self.rows.all_ids()

    def keyword_texts(self, ids: Sequence[str]) -> list[str | None]:
        """The stored keyword documents of ``ids`` (what ``qkv store migrate`` carries to an embedded copy)."""
        return self.rows.keyword_texts(ids)

    # ------------------------------------------------------------------ writing
    def writer(self, reset: bool = False, manifest: Manifest | None = None):
        if not reset:
            self._reading()
        return Writer(self, reset, manifest if reset else None)
