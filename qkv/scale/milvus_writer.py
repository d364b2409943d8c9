"""The writer of a Milvus-backed index (``MilvusStore.writer()``) and the collections it writes into:
see ``milvus_store``'s docstring — a rebuild streams into a new collection switched in at the end; an
update buffers its changes and applies them when the block exits normally. Holds search's
``WriterLock`` on the index directory."""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Iterable

import numpy as np

from qkv.errors import InputError
from qkv.text import keywords as textmod
from qkv.search.store import Manifest, Row, StoreWriter, read_manifest, rebuilt_manifest, write_manifest
from qkv.search.writelock import WriterLock

BATCH = 1000  # rows per insert/upsert call
HNSW_PARAMS = {"M": 32, "efConstruction": 80}
MAX_TITLE = 65535


def create_collection(client, name: str, m: Manifest) -> None:
    from pymilvus import DataType, Function, FunctionType

    s = client.create_schema(auto_id=False, enable_dynamic_field=True)
    s.add_field("id", DataType.VARCHAR, max_length=1024, is_primary=True)
    s.add_field("title", DataType.VARCHAR, max_length=MAX_TITLE)
    s.add_field("ktext", DataType.VARCHAR, max_length=MAX_TITLE, enable_analyzer=True,
                analyzer_params={"tokenizer": "standard"})
    s.add_field("title_hash", DataType.VARCHAR, max_length=64)
    s.add_field("vec", DataType.FLOAT_VECTOR, dim=int(m.dim))
    s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    s.add_function(Function(name="ktext_bm25", function_type=FunctionType.BM25, input_field_names=["ktext"],
                            output_field_names=["sparse"]))
    ip = client.prepare_index_params()
    kind = m.extra.get("index_type", "HNSW")
    params = HNSW_PARAMS if kind == "HNSW" else ({"nlist": 256, "m": 16, "nbits": 8} if kind == "IVF_PQ" else {})
    ip.add_index(field_name="vec", index_type=kind, metric_type="IP", params=params)
    ip.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    client.create_collection(name, schema=s, index_params=ip)


class MilvusWriter(StoreWriter):
    """See the module docstring: reset → a new collection switched in at the end; else buffered."""

    def __init__(self, store, reset: bool, manifest=None):  # store: the MilvusStore written (it imports this module)
        self.store = store
        self.reset = reset
        self.rebuilt = manifest  # a rebuild's model, fingerprint, dim … (store.rebuilt_manifest)
        self.client = store.client

    def __enter__(self):
        self.lock = WriterLock(self.store.path).__enter__()
        try:
            # re-read: another writer may have committed since this store was opened
            self.manifest = rebuilt_manifest(read_manifest(self.store.path), self.rebuilt)
            self.fields = {k: list(v) for k, v in self.manifest.extra.get("fields", {}).items()}
            self.ops: list[tuple] = []
            self.staged: dict[str, str | None] = {}  # id -> title hash (None: deleted) in this block
            if self.reset:
                gen = int(self.manifest.extra.get("generation", 0)) + 1
                self.target = f"{self.manifest.extra['base_collection']}_g{gen}"
                if self.client.has_collection(self.target):  # leftover of a failed rebuild
                    self.client.drop_collection(self.target)
                create_collection(self.client, self.target, self.manifest)
                self.fields = {}
                self.gen = gen
            else:
                self.target = self.manifest.extra["collection"]
        except BaseException:
            self.lock.__exit__()
            raise
        return self

    def _col(self, name: str, v) -> list:
        kind = "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else "text"
        if name not in self.fields:
            self.fields[name] = [f"f{len(self.fields)}", kind if v is not None else "number"]
        elif v is not None and kind == "text" and self.fields[name][1] == "number":
            self.fields[name][1] = "text"
        return self.fields[name]

    def _entity(self, row: Row, vec: np.ndarray, h: str) -> dict:
        e = {"id": str(row["id"]), "title": row["title"], "ktext": textmod.normalize(row["title"]) or " ",
             "title_hash": h, "vec": np.asarray(vec, dtype=np.float32).tolist(),
             "l_id": str(row["id"]).lower(), "l_title": str(row["title"]).lower()}
        for name, v in row.items():
            if name in ("id", "title"):
                continue
            col, _ = self._col(name, v)
            if v is None:
                continue
            if isinstance(v, bool):
                v = float(v)
            e[col] = float(v) if isinstance(v, (int, float)) else str(v)
            if not isinstance(v, (int, float)):
                e["l" + col[1:]] = str(v).lower()
        return e

    # -- the StoreWriter interface
    def title_hashes(self, ids):
        if self.reset:
            return {i: h for i, h in self.staged.items() if h is not None and i in set(map(str, ids))}
        ids = [str(i) for i in ids]
        out = {i: r.get("title_hash") for i, r in self.store._get(ids, ["title_hash"]).items()}
        for i in ids:
            if i in self.staged:
                if self.staged[i] is None:
                    out.pop(i, None)
                else:
                    out[i] = self.staged[i]
        return out

    def upsert(self, rows, vectors, title_hashes) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(rows) != len(vectors) or len(rows) != len(title_hashes):
            raise InputError("upsert needs one vector and one title hash per row")
        if len(rows) and (vectors.ndim != 2 or vectors.shape[1] != self.manifest.dim):
            raise InputError(f"vectors must be [n, {self.manifest.dim}]")
        ids = [str(r["id"]) for r in rows]
        if len(set(ids)) != len(ids):
            raise InputError("upsert rows must have distinct ids")
        ents = [self._entity(r, v, h) for r, v, h in zip(rows, vectors, title_hashes)]
        again = any(i in self.staged for i in ids)
        for i, h in zip(ids, title_hashes):
            self.staged[i] = h
        if self.reset:  # the new collection is invisible until the switch: write straight away
            write = self.client.upsert if again else self.client.insert  # insert: new ids, cheaper
            for a in range(0, len(ents), BATCH):
                write(self.target, ents[a:a + BATCH])
        else:
            self.ops.append(("upsert", ents))

    def update_fields(self, rows) -> None:
        if not rows:
            return
        ids = [str(r["id"]) for r in rows]
        if self.reset:
            raise InputError("update_fields needs existing products; a rebuild re-embeds every row")
        cur = self.store._get(ids, ["title", "title_hash", "vec", "$meta"] if self.fields else
                              ["title", "title_hash", "vec"])
        ents = []
        for row, pid in zip(rows, ids):
            if pid not in cur or self.staged.get(pid, "") is None:
                raise InputError(f"update_fields: unknown id {row['id']!r}")
            old = self.store._row(cur[pid])
            new = {**old, **row}
            ents.append(self._entity(new, cur[pid]["vec"], cur[pid]["title_hash"]))
        self.ops.append(("upsert", ents))

    def delete(self, ids: Iterable[str]) -> int:
        ids = [str(i) for i in ids]
        existing = set(self.title_hashes(ids))
        for i in ids:
            self.staged[i] = None
        if existing:
            if self.reset:
                self.client.delete(self.target, ids=sorted(existing))
            else:
                self.ops.append(("delete", sorted(existing)))
        return len(existing)

    # -- publishing
    def __exit__(self, et, ev, tb):
        try:
            if et is None:
                self._finish()
            elif self.reset:
                with contextlib.suppress(Exception):
                    self.client.drop_collection(self.target)
        finally:
            self.lock.__exit__()
        return False

    def _finish(self) -> None:
        for op, data in self.ops:
            if op == "upsert":
                for a in range(0, len(data), BATCH):
                    self.client.upsert(self.target, data[a:a + BATCH])
            else:
                self.client.delete(self.target, ids=data)
        # seal the written segments: Milvus builds the HNSW/BM25 indexes on sealed segments only, and
        # searches growing ones by brute force (Milvus Lite, 10k rows: 786 ms → 11 ms a query)
        self.client.flush(self.target)
        self.client.release_collection(self.target)
        self.client.load_collection(self.target)
        count = int(self.client.query(self.target, filter="", output_fields=["count(*)"])[0]["count(*)"])
        extra = {**self.manifest.extra, "fields": self.fields, "collection": self.target,
                 "generation": self.gen if self.reset else int(self.manifest.extra.get("generation", 0)) + 1}
        old = self.manifest.extra["collection"]
        m = replace(self.manifest, count=count, extra=extra)
        write_manifest(self.store.path, m)
        if self.reset and old != self.target and self.client.has_collection(old):
            self.client.drop_collection(old)
        self.store._manifest = m
        self.store._fields = dict(self.fields)
        self.store.collection = self.target
        time.sleep(0)  # visible now
