"""A ``VectorStore`` served by Milvus through ``pymilvus``: Milvus Lite for a local ``.db`` file,
or a Milvus standalone/cluster server — the same code, only the URI differs.

    milvus://PATH.db[#collection]        Milvus Lite (embedded; ``pymilvus`` starts it in-process)
    http://HOST:19530[#collection]       a Milvus server (token from $QKV_MILVUS_TOKEN, never stored)

Like every qkv index, a Milvus-backed index is a *directory* holding ``manifest.json`` (backend
``"milvus"``, the model fingerprint, the URI and the live collection), so ``Index.open(DIR)``,
``qkv search --index DIR`` and evaluation work unchanged; the rows and vectors live in Milvus.

Collection layout: ``id`` (VARCHAR primary key), ``title``, ``ktext`` (the keyword text normalised
by ``qkv.text.keywords.normalize`` — CJK split into characters, units unified — analysed by Milvus'
``standard`` tokenizer and turned into a sparse BM25 vector by a Milvus BM25 function), ``title_hash``,
``vec`` (FLOAT_VECTOR, inner product) and the product's extra fields as dynamic fields: ``f<i>`` holds
the value, ``l<i>`` a lower-cased copy of text values so that text equality ignores case exactly as
the embedded store's ``COLLATE NOCASE`` does. The field catalogue (name → column, kind) is kept in
the manifest.

Naming: ``Index.open``, ``qkv search --index`` and the other places that take an index also take the
Milvus Lite URI it was created at (``milvus://PATH.db[#collection]``): ``create`` records the index
directory beside the ``.db`` file (``PATH.db.qkv-indexes.json``, collection → directory) and
``locate`` reads it back. A server URI has no local file to record it in, so ``locate`` says to name
the directory instead. ``qkv.scale`` registers this store (backend ``milvus``, URI schemes
``milvus``, ``http``, ``https``, ``tcp``, ``grpc``) when imported; search never names it.

Writes: ``writer(reset=True)`` (a build or rebuild) streams into a *new* collection and switches the
manifest to it when the block succeeds (the old one is then dropped), so a failed rebuild leaves the
previous index searchable. ``writer()`` (upsert/delete) buffers its changes and applies them to Milvus
when the block exits normally; Milvus has no multi-row transactions, so a process killed *during* that
final apply can leave part of it applied — re-running the same upsert repairs it (upserts are by id).
The single-writer lock is search's ``WriterLock`` on DIR/.lock: it protects writers on one machine
only. Every committed write bumps the manifest's ``generation``, so ``reopen_if_changed`` sees it.

Differences from the embedded store, measured or read from Milvus Lite 3.2 (docs/scale.md):
* no Porter stemming ("shirts" does not match "shirt"), no typo correction of unknown terms;
* Milvus Lite computes BM25 statistics over the rows a filter leaves, so a *filtered* keyword search
  ranks by BM25 of that subset (unfiltered scores and per-term shares are over the whole catalog);
* vectors are kept as float32 whatever ``--float16`` asks (the manifest says so).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

import numpy as np

from qkv.errors import InputError
from qkv.scale.milvus_writer import BATCH, MilvusWriter, create_collection
from qkv.text import keywords as textmod
from qkv.search.store import FieldInfo, Hit, IndexError_, Manifest, Row, VectorStore, read_manifest, write_manifest

DEFAULT_COLLECTION = "qkv_products"
MAX_LIMIT = 16384  # Milvus' cap on topk / query limit
HNSW_EF = 96
ANN_TO_MILVUS = {"auto": "HNSW", "hnsw": "HNSW", "flat": "FLAT", "ivfpq": "IVF_PQ"}


class MilvusUnavailable(InputError):
    """pymilvus / milvus-lite is not installed, or the server cannot be reached."""


def parse_uri(uri: str) -> tuple[str, str]:
    """``(connection uri for MilvusClient, collection name)`` from a qkv store URI."""
    if not isinstance(uri, str) or not uri.strip():
        raise InputError("the Milvus URI is empty; use milvus://PATH.db or http://HOST:19530")
    uri = uri.strip()
    base, _, coll = uri.partition("#")
    coll = coll or DEFAULT_COLLECTION
    if not coll.replace("_", "a").isalnum() or not (coll[0].isalpha() or coll[0] == "_"):
        raise InputError(f"collection name {coll!r} must be letters, digits and _ (starting with a letter)")
    if base.startswith("milvus://"):
        path = base[len("milvus://"):]
        if not path.endswith(".db"):
            raise InputError(f"a Milvus Lite URI names a file ending in .db, e.g. milvus://./products.db (got {uri!r})")
        return str(Path(path).expanduser().resolve()), coll
    scheme = urlsplit(base).scheme
    if scheme in ("http", "https", "tcp", "grpc"):
        return base, coll
    raise InputError(f"unknown store URI {uri!r}: use milvus://PATH.db (Milvus Lite) or http://HOST:19530 (a server)")


_CLIENTS: dict[str, object] = {}


def connect(conn_uri: str):
    """One ``MilvusClient`` per connection URI and process (Milvus Lite allows one server per file)."""
    if conn_uri in _CLIENTS:
        return _CLIENTS[conn_uri]
    try:
        from pymilvus import MilvusClient
    except ImportError:  # pragma: no cover - depends on the install
        raise MilvusUnavailable("the Milvus store needs pymilvus and milvus-lite: pip install 'qkv[milvus]'") from None
    try:
        if conn_uri.startswith("/"):
            import logging

            # Milvus Lite's in-process gRPC server logs a traceback for each RPC it does not implement
            # (AllocTimestamp, asked by pymilvus' query iterator, which then falls back by itself)
            logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
            Path(conn_uri).parent.mkdir(parents=True, exist_ok=True)
            client = MilvusClient(conn_uri)
        else:
            client = MilvusClient(uri=conn_uri, token=os.environ.get("QKV_MILVUS_TOKEN", ""))
    except Exception as e:  # pymilvus raises several kinds; one clear message
        raise MilvusUnavailable(f"cannot open Milvus at {conn_uri}: {e}") from None
    _CLIENTS[conn_uri] = client
    return client


def _handles_file(conn_uri: str) -> Path | None:
    """Where the index directories of a Milvus Lite file are recorded (None for a server)."""
    return Path(conn_uri + ".qkv-indexes.json") if conn_uri.startswith("/") else None


def _record_handle(conn_uri: str, collection: str, path: Path) -> None:
    f = _handles_file(conn_uri)
    if f is None:
        return
    try:
        known = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
    except (OSError, json.JSONDecodeError):
        known = {}
    known[collection] = str(Path(path).resolve())
    tmp = f.with_name(f.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(known, indent=2), encoding="utf-8")
    os.replace(tmp, f)


def _quote(s: str) -> str:
    """A Milvus expression string literal (JSON escaping is what Milvus' parser reads)."""
    return json.dumps(s, ensure_ascii=False)


def _num_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class MilvusStore(VectorStore):
    """Products and vectors in a Milvus collection; the manifest in a local directory."""

    def __init__(self, path: Path, manifest: Manifest):
        self.path = path
        self._manifest = manifest
        extra = manifest.extra
        if "uri" not in extra or "collection" not in extra:
            raise IndexError_(f"{path}/manifest.json is a Milvus index without uri/collection; rebuild it")
        self.conn_uri = extra["uri"]
        self.collection = extra["collection"]
        self.client = connect(self.conn_uri)
        if not self.client.has_collection(self.collection):
            raise IndexError_(f"{path}: the Milvus collection {self.collection!r} at {self.conn_uri} is missing; "
                              "rebuild the index or migrate it again")
        self.client.load_collection(self.collection)
        self._fields = dict(extra.get("fields", {}))  # name -> [col, kind]

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path) -> "MilvusStore":
        path = Path(path)
        return cls(path, read_manifest(path))

    @classmethod
    def locate(cls, uri: str) -> Path:
        """The index directory recorded for a Milvus Lite URI (see the module docstring)."""
        conn, coll = parse_uri(uri)
        f = _handles_file(conn)
        found = None
        if f is not None and f.is_file():
            with contextlib.suppress(OSError, json.JSONDecodeError, AttributeError):
                found = json.loads(f.read_text(encoding="utf-8")).get(coll)
        if found and (Path(found) / "manifest.json").is_file():
            return Path(found)
        where = (f"no qkv index is recorded for collection {coll!r} of {conn}" if f is not None
                 else f"{uri} is a Milvus server, where qkv records no index directory")
        raise IndexError_(f"{where}; --index takes the index directory holding manifest.json (the one "
                          "`qkv store migrate` or `qkv index --store` printed), or create one with "
                          f"`qkv index CATALOG --index DIR --store {uri}`")

    @classmethod
    def create(cls, path, manifest: Manifest, uri: str | None = None, **options) -> "MilvusStore":
        """A new Milvus-backed index at directory ``path`` whose data lives at ``uri``."""
        path = Path(path)
        if uri is None:
            raise InputError("a Milvus index needs a store URI: --store milvus://PATH.db or http://HOST:19530")
        conn, coll = parse_uri(uri)
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            if (path / "manifest.json").is_file():
                read_manifest(path)
                raise InputError(f"{path} already holds an index; use --upsert to change it or --rebuild")
            raise IndexError_(f"{path} exists and is not a qkv index; choose a new or empty directory")
        client = connect(conn)
        if client.has_collection(coll):
            raise InputError(f"the Milvus collection {coll!r} at {conn} already exists; choose another name "
                             f"(URI#name) or drop it first")
        path.mkdir(parents=True, exist_ok=True)
        m = replace(manifest, backend="milvus", dtype="float32", count=0,
                    extra={**manifest.extra, "uri": conn, "collection": coll, "base_collection": coll,
                           "generation": 0, "fields": {}, "index_type": ANN_TO_MILVUS.get(manifest.ann, "HNSW")})
        create_collection(client, coll, m)
        write_manifest(path, m)
        _record_handle(conn, coll, path)
        return cls(path, m)

    # ------------------------------------------------------------------ description
    @property
    def manifest(self) -> Manifest:
        return self._manifest

    def count(self) -> int:
        r = self.client.query(self.collection, filter="", output_fields=["count(*)"])
        return int(r[0]["count(*)"])

    def fields(self) -> list[FieldInfo]:
        return [FieldInfo(n, k) for n, (_, k) in sorted(self._fields.items(), key=lambda x: int(x[1][0][1:]))]

    # ------------------------------------------------------------------ filters
    def filter_expr(self, flt) -> str:
        """The Milvus boolean expression for a parsed ``Filter`` (values quoted, never spliced raw)."""
        from qkv.search.filters import And, Compare, Not, Or

        kinds = {"id": "text", "title": "text", **{n: k for n, (_, k) in self._fields.items()}}
        flt = flt.check(kinds)

        def col(name):  # (column to compare, kind)
            if name in ("id", "title"):
                return "l_" + name, "text"  # lower-cased copies, as for every text field
            c, kind = self._fields[name]
            return (("l" + c[1:]) if kind == "text" else c), kind

        def lit(v, kind):
            if kind == "text":
                s = _num_text(v) if isinstance(v, float) else str(v)
                return _quote(s)
            if isinstance(v, float):
                return repr(v)
            try:
                return repr(float(v))
            except ValueError:
                return None  # a word compared with a number field never matches

        def walk(n) -> str:
            if isinstance(n, Compare):
                c, kind = col(n.field)
                def lv(v):
                    q = lit(v, kind)
                    return q.lower() if (q is not None and kind == "text") else q
                if n.op == "in":
                    vals = [x for x in (lv(v) for v in n.value) if x is not None]
                    e = f"{c} in [{', '.join(vals)}]" if vals else "false"
                elif n.op == "contains":
                    v = n.value if not isinstance(n.value, float) else _num_text(n.value)
                    if kind != "text":
                        return "false"
                    e = f"{c} like {_quote('%' + _like_escape(str(v).lower()) + '%')}"
                else:
                    q = lv(n.value)
                    if q is None:
                        return "false"
                    e = f"{c} {'==' if n.op == '=' else n.op} {q}"
                return f"({e})"
            if isinstance(n, And):
                return "(" + " and ".join(walk(i) for i in n.items) + ")"
            if isinstance(n, Or):
                return "(" + " or ".join(walk(i) for i in n.items) + ")"
            return f"(not {walk(n.item)})"

        return walk(flt.root)

    # ------------------------------------------------------------------ reading
    def dense_search(self, vector, k, filter=None) -> list[Hit]:
        if k <= 0:
            raise InputError(f"k must be at least 1, got {k}")
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self._manifest.dim:
            raise InputError(f"query vector has {q.shape[0]} dimensions, the index {self._manifest.dim}")
        expr = self.filter_expr(filter) if filter is not None else ""
        params = {"metric_type": "IP", "params": {"ef": max(HNSW_EF, min(k, MAX_LIMIT))}}
        res = self.client.search(self.collection, data=[q.tolist()], anns_field="vec", limit=min(k, MAX_LIMIT),
                                 filter=expr, search_params=params, output_fields=[])
        return [Hit(str(h["id"]), float(h["distance"])) for h in res[0]]

    def query_terms(self, query: str) -> list[str]:
        return textmod.terms(query)

    def _bm25(self, text: str, k: int, expr: str = "") -> list[Hit]:
        res = self.client.search(self.collection, data=[text], anns_field="sparse", limit=min(k, MAX_LIMIT),
                                 filter=expr, search_params={"metric_type": "BM25"}, output_fields=[])
        # Milvus Lite reports BM25 as a distance (negated score); a server reports the score itself
        return [Hit(str(h["id"]), abs(float(h["distance"]))) for h in res[0]]

    def keyword_search(self, query, k, filter=None) -> list[Hit]:
        if k <= 0:
            raise InputError(f"k must be at least 1, got {k}")
        terms = self.query_terms(query)
        if not terms:
            return []
        expr = self.filter_expr(filter) if filter is not None else ""
        hits = self._bm25(" ".join(terms), k, expr)
        return sorted(hits, key=lambda h: -h.score)

    def keyword_terms(self, query, ids) -> dict[str, list[tuple[str, float]]]:
        """Each term's BM25 share, from one single-term search per term (BM25 adds up over terms).
        Only ids among a term's top 16,384 matches get that term's share."""
        want = set(ids)
        out: dict[str, list[tuple[str, float]]] = {i: [] for i in ids}
        for t in self.query_terms(query):
            for h in self._bm25(t, MAX_LIMIT):
                if h.id in want:
                    out[h.id].append((t, h.score))
        return out

    def _get(self, ids: Sequence[str], fields: list[str]) -> dict[str, dict]:
        found: dict[str, dict] = {}
        ids = [str(i) for i in ids]
        for a in range(0, len(ids), BATCH):
            for r in self.client.get(self.collection, ids=ids[a:a + BATCH], output_fields=fields):
                found[str(r["id"])] = r
        return found

    def _row(self, r: dict) -> Row:
        row = {"id": str(r["id"]), "title": r.get("title", "")}
        for name, (c, _) in self._fields.items():
            row[name] = r.get(c)
        return row

    def get_rows(self, ids: Sequence[str]) -> list[Row | None]:
        found = self._get(ids, ["title", "$meta"] if self._fields else ["title"])
        return [self._row(found[i]) if i in found else None for i in map(str, ids)]

    def get_vectors(self, ids: Sequence[str]) -> np.ndarray:
        found = self._get(ids, ["vec"])
        missing = [i for i in map(str, ids) if i not in found]
        if missing:
            raise InputError(f"unknown product id(s): {', '.join(missing[:5])}")
        return np.asarray([found[str(i)]["vec"] for i in ids], dtype=np.float32).reshape(len(ids), -1)

    def iter_rows(self, batch: int = BATCH, vectors: bool = True):
        """(rows, float32 vectors or None) batches over the whole collection (for migration/export)."""
        out = ["title", "title_hash"] + (["vec"] if vectors else []) + (["$meta"] if self._fields else [])
        it = self.client.query_iterator(self.collection, batch_size=batch, filter="", output_fields=out)
        try:
            while True:
                b = it.next()
                if not b:
                    break
                rows = [self._row(r) for r in b]
                vecs = np.asarray([r["vec"] for r in b], dtype=np.float32) if vectors else None
                yield rows, vecs, [r.get("title_hash", "") for r in b]
        finally:
            it.close()

    def all_ids(self) -> list[str]:
        out: list[str] = []
        it = self.client.query_iterator(self.collection, batch_size=5000, filter="", output_fields=["id"])
        try:
            while True:
                b = it.next()
                if not b:
                    break
                out.extend(str(r["id"]) for r in b)
        finally:
            it.close()
        return out

    # ------------------------------------------------------------------ writing
    def writer(self, reset: bool = False, manifest: Manifest | None = None):
        return MilvusWriter(self, reset, manifest if reset else None)
