"""The store contract every search backend implements, the records it passes around, and the
registry that finds a backend by name or URI scheme.

Search, hybrid fusion, explanations and evaluation talk to a ``VectorStore`` and nothing else, so a
catalog can live in the embedded default (``qkv.search.embedded.EmbeddedStore``: faiss + SQLite in one
directory, no server) or in a server-backed store without the layers above changing. Search names no
other store: a backend registers itself (``register_store``), e.g. ``qkv.scale`` registers Milvus
when imported, and the ``qkv.stores`` entry-point group in pyproject.toml lets the registry import it
the first time an index or URI names a backend it does not know yet.

Contract (what an implementation must guarantee)
-----------------------------------------------
* Products are identified by a string ``id``; each has a ``title`` (the embedded text) and any number
  of extra *fields* (``brand``, ``price`` …): ``str``, ``float`` or ``None``. ``fields()`` lists them
  with their kind ("text" or "number") so filters can be checked before they run.
* Vectors are float32 ``[n, manifest.dim]`` rows, L2-normalised by the caller for cosine models; a
  store may keep them as float16 (``manifest.dtype``) but always returns float32.
* Writes go through ``writer()``, a context manager holding the store's single-writer lock
  (``qkv.search.writelock.WriterLock``): everything done inside becomes visible at once when the
  block exits normally, and nothing of it when it raises (or the process dies). A second concurrent
  ``writer()`` raises ``WriterBusy`` (an ``InputError``) naming who holds the lock. Readers are never
  blocked and keep seeing the state they opened.
* An open store is a reader on one published state (a *generation*, named by ``generation``), as a
  Lucene ``DirectoryReader`` is: it never changes under its reader. ``reopen_if_changed()`` returns a
  new store on the newest published generation (its settings, e.g. ``ef_search``, carried over), or
  ``None`` when nothing was published since; it costs one small file read, cheap enough to call
  before every request. The old store stays usable for searches still running on it; ``warm()``
  loads what a first search would load on demand, so the swap costs the next request nothing.
* ``dense_search`` returns up to ``k`` hits by decreasing inner product (cosine for normalised
  vectors), ``keyword_search`` up to ``k`` hits by decreasing BM25 (higher = better, positive).
  Both take an optional parsed ``qkv.search.filters.Filter`` (never a raw string) and apply it
  *before* cutting to ``k``, so a filtered search still returns ``k`` hits when ``k`` exist.
* ``keyword_search`` receives the user's raw query text; the store tokenises it (``qkv.text.keywords``)
  and must never pass it to its engine as query syntax (quote every term).
* ``keyword_terms(query, ids)`` explains the keyword side: each matched query term's share of the
  BM25 score for each id (the shares sum to the score ``keyword_search`` reported). A store without
  per-term scoring returns ``{}``.
* The *slot* methods (``dense_slots``, ``keyword_slots``, ``slot_vectors``, ``ids_of``,
  ``matched_counts``) are the same searches in the store's own handle space, which hybrid fusion
  uses so that only the products it returns are looked up by id. The defaults here use the ids
  themselves as handles; a store with cheaper handles (the embedded store's row numbers) overrides
  them all. Handles are valid only on the open store that produced them.
* ``manifest`` records the model (name + ``Encoder.fingerprint()``) the vectors came from; the
  ``Index`` layer refuses to search a store with another model's vectors.

An index is named by its directory (holding ``manifest.json``, whose ``backend`` picks the class) or
by a store URI (``scheme://…``) that the registered backend of that scheme ``locate``s to its
directory. A backend is a ``VectorStore`` subclass with ``open(path)``, ``create(path, manifest,
**options)`` and, for URIs, ``locate(uri)`` classmethods.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterable, Mapping, Sequence

import numpy as np

from qkv.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from qkv.search.filters import Filter

FORMAT = "qkv-search-index"
# 2: every embedded generation carries its keyword planner files (term_df, keyword_stats,
# doclen.npy, postings arrays); indexes of format 1 are refused with a rebuild command.
FORMAT_VERSION = 2

Row = dict[str, Any]  # one product: {"id": str, "title": str, <field>: str | float | None, ...}
# A row written with this key indexes its value as the keyword document instead of the normalised
# title (learned term weights, ``qkv.search.termweights``); it is not a field. A store that cannot
# take it refuses weighted builds (``qkv.search.build.plan_build``).
KEYWORD_TEXT = "_keyword_text"


class IndexError_(InputError):
    """An index directory that cannot be used: missing, corrupt, foreign or built by another model."""


class WriterBusy(InputError):
    """Another process is writing to the same index."""


def title_hash(title: str) -> str:
    """The stored fingerprint of a title: a write re-embeds a product only when it changed."""
    return hashlib.blake2b(title.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Hit:
    """One search result from a store: the product id and the backend's raw score."""

    id: str
    score: float


# What a manifest says about the vectors' and keyword documents' making: a rebuild takes these from
# the new build's manifest (one it lacks is dropped: a rebuild without term weights is plain).
MODEL_EXTRA = ("normalized", "pooling", "precision", "query_prefix", "passage_prefix", "term_weights")


def rebuilt_manifest(current: "Manifest", new: "Manifest | None") -> "Manifest":
    """``current`` with the model, fingerprint, dim and MODEL_EXTRA of ``new`` (a rebuild's)."""
    if new is None:
        return current
    extra = {k: v for k, v in current.extra.items() if k not in MODEL_EXTRA}
    extra.update({k: new.extra[k] for k in MODEL_EXTRA if k in new.extra})
    return replace(current, model=new.model, fingerprint=new.fingerprint, dim=new.dim, extra=extra)


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


def write_manifest(root: Path, manifest: Manifest) -> None:
    """Replace ``root/manifest.json`` atomically (temporary file, fsync, ``os.replace``, fsync of
    the directory): a reader sees the old manifest or the new one, never a mix."""
    tmp = root / f".manifest-{os.getpid()}.json"
    tmp.write_text(json.dumps(manifest.to_json(), indent=2), encoding="utf-8")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, root / "manifest.json")
    fsync_dir(root)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
    """A catalog of products with one vector each, searchable densely and by keywords (the
    contract is the module docstring)."""

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

    @classmethod
    def for_rebuild(cls, path: str | Path) -> "VectorStore":
        """The store at ``path`` opened only to be replaced by ``writer(reset=True)``: an index too
        old (or too damaged) to search can still be rebuilt in place."""
        return cls.open(path)

    @classmethod
    def locate(cls, uri: str) -> Path:
        """The index directory of a store URI of this backend's scheme."""
        raise IndexError_(f"{uri} is a store URI; --index takes the index directory (the one holding "
                          "manifest.json that `qkv index --store` or `qkv store migrate` printed)")

    def close(self) -> None:  # pragma: no cover - optional
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def generation(self) -> str:
        """The published state this store reads: changes with every committed write."""
        return str(self.manifest.extra.get("generation", ""))

    def reopen_if_changed(self) -> "VectorStore | None":
        """A store on the newest published generation, or None if it is this one (module docstring)."""
        try:
            newest = read_manifest(self.path)
        except IndexError_:
            return None  # mid-swap or damaged: keep serving what is open
        if str(newest.extra.get("generation", "")) == self.generation and newest == self.manifest:
            return None
        new = type(self).open(self.path)
        if self.ef_search is not None and new.ef_search is not None:
            new.ef_search = self.ef_search
        return new

    def warm(self) -> None:
        """Load now what the first search would load on demand (an ANN index file, lookup
        arrays), so a server can swap in a new generation whose first search is as fast as the
        next. The default has nothing to load."""

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

    @property
    def ef_search(self) -> int | None:
        """HNSW's search breadth on this open store, or None for a store without the setting."""
        return None

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        raise InputError(f"the {type(self).__name__} store has no ef_search setting")

    # -- writing
    @abstractmethod
    def writer(self, reset: bool = False, manifest: "Manifest | None" = None) -> ContextManager[StoreWriter]:
        """The single-writer session (see the module docstring); ``reset=True`` starts from an
        empty catalog (a rebuild) that replaces the current one only when the block succeeds.
        ``manifest`` (with ``reset``): what the rebuilt vectors are (``rebuilt_manifest``: model,
        fingerprint, dim, precision, role prefixes), so a rebuild with another model records it."""

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

    def spell(self, query: str, keep: Callable[[str], bool] | None = None) -> str:
        """``query`` with the words no title holds corrected to the catalog's own words
        (``qkv.search.spelling``), or ``query`` itself: what both sides of a search run on;
        ``keep(word)`` true leaves an unknown word as typed. A store that keeps no word list
        searches every query as typed."""
        return query

    @abstractmethod
    def get_rows(self, ids: Sequence[str]) -> list[Row | None]:
        """The stored rows in the order of ``ids`` (``None`` for unknown ids)."""

    @abstractmethod
    def get_vectors(self, ids: Sequence[str]) -> np.ndarray:
        """float32 [len(ids), dim]; raises InputError for an unknown id."""

    @abstractmethod
    def all_ids(self) -> list[str]:
        ...

    # -- the slot space (defaults: a product's handle is its id)
    def dense_slots(self, vector: np.ndarray, k: int, filter: "Filter | None" = None) -> tuple[np.ndarray, np.ndarray]:
        """``dense_search`` as (handles, cosines) arrays."""
        hits = self.dense_search(vector, k, filter)
        return np.array([h.id for h in hits], dtype=object), np.array([h.score for h in hits], dtype=np.float64)

    def keyword_slots(self, query: str, k: int, filter: "Filter | None" = None) -> tuple[np.ndarray, np.ndarray]:
        """``keyword_search`` as (handles, BM25) arrays, best first."""
        hits = self.keyword_search(query, k, filter)
        return np.array([h.id for h in hits], dtype=object), np.array([h.score for h in hits], dtype=np.float64)

    def slot_vectors(self, slots: np.ndarray) -> np.ndarray:
        """float32 vectors of ``slots``."""
        return self.get_vectors([str(s) for s in slots])

    def ids_of(self, slots: Sequence) -> dict:
        """handle → product id, for live handles."""
        return {s: str(s) for s in slots}

    def matched_counts(self, query: str, slots: np.ndarray) -> np.ndarray:
        """How many of ``query``'s keyword terms each handle's title matches (0 without per-term
        scoring: fusion then weights BM25 as if one term matched)."""
        parts = self.keyword_terms(query, [str(s) for s in slots])
        return np.array([len(parts.get(str(s), ())) for s in slots], dtype=np.int64)


# ---------------------------------------------------------------------------------- the registry
# name → "module:Class". Every store registers itself, the default one too (qkv.search.embedded,
# which qkv.search imports): this contract names no store, so no store and it import each other.
_BACKENDS: dict[str, str] = {}
_SCHEMES: dict[str, str] = {}  # URI scheme → backend name
_PLUGINS_LOADED = False
ENTRY_POINTS = "qkv.stores"  # the entry-point group whose modules register stores when imported


def register_store(backend: str, target: str, schemes: Iterable[str] = ()) -> None:
    """Make ``backend`` (the manifest's ``backend`` value) open with ``target`` ("module:Class",
    imported on first use) and store URIs ``scheme://…`` of ``schemes`` resolve through it."""
    _BACKENDS[backend] = target
    for s in schemes:
        _SCHEMES[s] = backend


def _load_plugins() -> None:
    """Import the modules of the ``qkv.stores`` entry points (each registers its stores), once."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return
    _PLUGINS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        try:
            ep.load()
        except ImportError:  # an optional extra that is not installed: its backend stays unknown
            continue


def store_class(backend: str):
    if backend not in _BACKENDS:
        _load_plugins()
    if backend not in _BACKENDS:
        raise IndexError_(f"index backend {backend!r} is unknown; known: {', '.join(sorted(_BACKENDS))} "
                          "(a backend of an optional extra needs that extra installed, e.g. qkv[milvus])")
    mod, _, cls = _BACKENDS[backend].partition(":")
    return getattr(importlib.import_module(mod), cls)


def is_uri(name) -> bool:
    """A store URI (``scheme://…``), as opposed to an index directory."""
    return isinstance(name, str) and "://" in name


def backend_for_uri(uri: str) -> str:
    """The registered backend whose scheme ``uri`` has."""
    scheme = uri.partition("://")[0].lower()
    if scheme not in _SCHEMES:
        _load_plugins()
    if scheme not in _SCHEMES:
        raise IndexError_(f"no store is registered for {scheme}:// URIs ({uri}); known schemes: "
                          f"{', '.join(sorted(_SCHEMES)) or 'none'} (Milvus needs qkv[milvus])")
    return _SCHEMES[scheme]


def index_dir(name: str | Path) -> Path:
    """The index directory ``name`` refers to: itself, or the directory a store URI locates."""
    if is_uri(name):
        return Path(store_class(backend_for_uri(name)).locate(name))
    return Path(name)


def read_manifest(path: str | Path) -> Manifest:
    """The manifest of the index at ``path`` (a directory or store URI), with a clear error for a
    missing/foreign/corrupt one."""
    path = index_dir(path)
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


def open_store(path: str | Path) -> VectorStore:
    """Open the store at ``path`` (a directory or store URI) with the backend its manifest names."""
    path = index_dir(path)
    return store_class(read_manifest(path).backend).open(path)
