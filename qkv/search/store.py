"""The vector-store interface every search backend implements, and the records it passes around.

Search, hybrid fusion, explanations and evaluation talk to a ``VectorStore`` and nothing else, so a
catalog can live in the embedded default (``qkv.search.embedded.EmbeddedStore``: faiss + SQLite in one
directory, no server) or in a server-backed store (e.g. Milvus) without the layers above changing.

Contract (what an implementation must guarantee)
-----------------------------------------------
* Products are identified by a string ``id``; each has a ``title`` (the embedded text) and any number
  of extra *fields* (``brand``, ``price`` …): ``str``, ``float`` or ``None``. ``fields()`` lists them
  with their kind ("text" or "number") so filters can be checked before they run.
* Vectors are float32 ``[n, manifest.dim]`` rows, L2-normalised by the caller for cosine models; a
  store may keep them as float16 (``manifest.dtype``) but always returns float32.
* Writes go through ``writer()``, a context manager holding the store's single-writer lock:
  everything done inside becomes visible at once when the block exits normally, and nothing of it
  when it raises (or the process dies). A second concurrent ``writer()`` raises
  ``qkv.search.store.WriterBusy`` (an ``InputError``) naming who holds the lock. Readers are never
  blocked and keep seeing the last committed state.
* ``dense_search`` returns up to ``k`` hits by decreasing inner product (cosine for normalised
  vectors), ``keyword_search`` up to ``k`` hits by decreasing BM25 (higher = better, positive).
  Both take an optional parsed ``qkv.search.filters.Filter`` (never a raw string) and apply it
  *before* cutting to ``k``, so a filtered search still returns ``k`` hits when ``k`` exist.
* ``keyword_search`` receives the user's raw query text; the store tokenises it and must never
  pass it to its engine as query syntax (quote every term).
* ``keyword_terms(query, ids)`` explains the keyword side: each matched query term's share of the
  BM25 score for each id (the shares sum to the score ``keyword_search`` reported). A store without
  per-term scoring returns ``{}``.
* ``manifest`` records the model (name + ``Encoder.fingerprint()``) the vectors came from; the
  ``Index`` layer refuses to search a store with another model's vectors.

Opening a directory: ``open_store(path)`` reads ``manifest.json`` and dispatches on its
``backend`` key through ``BACKENDS`` ("embedded" → ``qkv.search.embedded:EmbeddedStore``); another
backend adds itself to ``BACKENDS`` as ``"name": "module:Class"`` with ``Class.open(path)`` and
``Class.create(path, manifest, **options)`` classmethods.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Iterable, Mapping, Sequence

import numpy as np

from qkv.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from qkv.search.filters import Filter

FORMAT = "qkv-search-index"
FORMAT_VERSION = 1

Row = dict[str, Any]  # one product: {"id": str, "title": str, <field>: str | float | None, ...}


class IndexError_(InputError):
    """An index directory that cannot be used: missing, corrupt, foreign or built by another model."""


class WriterBusy(InputError):
    """Another process is writing to the same index."""


@dataclass(frozen=True)
class Hit:
    """One search result from a store: the product id and the backend's raw score."""

    id: str
    score: float


@dataclass(frozen=True)
class Manifest:
    """What an index holds and how it was made (stored as ``manifest.json``)."""

    model: str  # encoder name, e.g. "sentence-transformers/all-MiniLM-L6-v2"
    fingerprint: str  # Encoder.fingerprint() of the weights the vectors came from
    dim: int
    dtype: str = "float32"  # how vectors are kept: "float32" or "float16"
    count: int = 0  # live products
    backend: str = "embedded"
    ann: str = "auto"  # "auto" (exact below a threshold, HNSW above), "flat", "hnsw", "ivfpq"
    format: str = FORMAT
    version: int = FORMAT_VERSION
    extra: dict = field(default_factory=dict)  # backend-specific (generation, thresholds, stats …)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping, where: str = "manifest") -> "Manifest":
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            raise IndexError_(f"{where} is not a qkv search index (no '{FORMAT}' format marker); "
                              "point --index at a directory made by `qkv index`, or at a new path")
        if int(d.get("version", 0)) > FORMAT_VERSION:
            raise IndexError_(f"{where} has index format version {d.get('version')}, newer than this qkv "
                              f"understands ({FORMAT_VERSION}); upgrade qkv")
        known = {f for f in cls.__dataclass_fields__}
        try:
            return cls(**{k: v for k, v in d.items() if k in known})
        except TypeError as e:
            raise IndexError_(f"{where} is incomplete or corrupt ({e}); rebuild the index") from None


@dataclass(frozen=True)
class FieldInfo:
    name: str
    kind: str  # "text" or "number"


class StoreWriter(ABC):
    """Changes made inside ``VectorStore.writer()``; committed together at the end of the block."""

    @abstractmethod
    def title_hashes(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored title hash of each of ``ids`` that exists (to skip re-embedding unchanged rows)."""

    @abstractmethod
    def upsert(self, rows: Sequence[Row], vectors: np.ndarray, title_hashes: Sequence[str]) -> None:
        """Add or replace products by id, with new vectors: ``vectors[i]`` (float32 [dim]) and
        ``title_hashes[i]`` belong to ``rows[i]``. Rows must have distinct ids."""

    @abstractmethod
    def update_fields(self, rows: Sequence[Row]) -> None:
        """Replace the fields (title included) of existing products, keeping their vectors; used when
        a row's title hash is unchanged. Unknown ids raise InputError."""

    @abstractmethod
    def delete(self, ids: Iterable[str]) -> int:
        """Remove products by id; returns how many existed."""


class VectorStore(ABC):
    """A catalog of products with one vector each, searchable densely and by keywords."""

    path: Path

    # -- lifecycle
    @classmethod
    @abstractmethod
    def open(cls, path: str | Path) -> "VectorStore":
        ...

    @classmethod
    @abstractmethod
    def create(cls, path: str | Path, manifest: Manifest, **options) -> "VectorStore":
        ...

    def close(self) -> None:  # pragma: no cover - optional
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- description
    @property
    @abstractmethod
    def manifest(self) -> Manifest:
        ...

    @abstractmethod
    def count(self) -> int:
        ...

    @abstractmethod
    def fields(self) -> list[FieldInfo]:
        """Extra product fields (not id/title), usable in filters."""

    # -- writing
    @abstractmethod
    def writer(self, reset: bool = False) -> ContextManager[StoreWriter]:
        """The single-writer session (see the module docstring); ``reset=True`` starts from an
        empty catalog (a rebuild) that replaces the current one only when the block succeeds."""

    # -- reading
    @abstractmethod
    def dense_search(self, vector: np.ndarray, k: int, filter: "Filter | None" = None) -> list[Hit]:
        ...

    @abstractmethod
    def keyword_search(self, query: str, k: int, filter: "Filter | None" = None) -> list[Hit]:
        ...

    def keyword_terms(self, query: str, ids: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        """Per matched query term BM25 share for each id (see module docstring)."""
        return {}

    @abstractmethod
    def get_rows(self, ids: Sequence[str]) -> list[Row | None]:
        """The stored rows in the order of ``ids`` (``None`` for unknown ids)."""

    @abstractmethod
    def get_vectors(self, ids: Sequence[str]) -> np.ndarray:
        """float32 [len(ids), dim]; raises InputError for an unknown id."""

    @abstractmethod
    def all_ids(self) -> list[str]:
        ...


BACKENDS: dict[str, str] = {"embedded": "qkv.search.embedded:EmbeddedStore",
                             "milvus": "qkv.scale.milvus_store:MilvusStore"}  # needs qkv[milvus]


def read_manifest(path: str | Path) -> Manifest:
    """The manifest of the index at ``path``, with a clear error for a missing/foreign/corrupt one."""
    path = Path(path)
    if not path.exists():
        raise IndexError_(f"no index at {path}; build one with `qkv index CATALOG --index {path}`")
    mf = path / "manifest.json"
    if not path.is_dir() or not mf.is_file():
        raise IndexError_(f"{path} is not a qkv search index (no manifest.json); "
                          "point --index at a directory made by `qkv index`")
    try:
        data = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IndexError_(f"{mf} is unreadable or corrupt ({e}); rebuild the index") from None
    return Manifest.from_json(data, where=str(mf))


def store_class(backend: str):
    import importlib

    if backend not in BACKENDS:
        raise IndexError_(f"index backend {backend!r} is unknown; known: {', '.join(sorted(BACKENDS))}")
    mod, _, cls = BACKENDS[backend].partition(":")
    return getattr(importlib.import_module(mod), cls)


def open_store(path: str | Path) -> VectorStore:
    """Open the store at ``path`` with the backend its manifest names."""
    return store_class(read_manifest(path).backend).open(path)
