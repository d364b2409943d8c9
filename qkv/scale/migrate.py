"""Copy an index between stores (embedded ⇄ Milvus) and prove the copy: same count, same rows and
the same vectors for a random sample of products. The source is only read, never changed."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkv.errors import InputError, QkvError
from qkv.progress import Count, Progress
from qkv.search.store import Manifest, VectorStore, is_uri, open_store, store_class, title_hash

CHUNK = 2000


class MigrationMismatch(QkvError):
    """The copy does not match the source (counts, rows or vectors)."""


@dataclass
class MigrateReport:
    source: str
    target: str  # the new index directory
    uri: str | None  # where the data lives (Milvus), None for an embedded target
    count: int
    target_count: int
    sampled: int
    max_vector_diff: float
    seconds: float

    def to_json(self) -> dict:
        return dict(self.__dict__)


def default_handle(src: Path, uri: str) -> Path:
    """Where the manifest of a Milvus copy goes when --index is not given: next to the source."""
    return src.with_name(src.name + ".milvus")


def copy_rows(src: VectorStore, write, progress: Progress | None = None) -> int:
    """Stream every product of ``src`` through ``write(rows, vectors, hashes)``; ``progress``
    (``qkv.progress``) counts stage "copy" in rows."""
    ids = src.all_ids()
    total = len(ids)
    count = Count(progress, "copy", total)
    for a in range(0, total, CHUNK):
        chunk = ids[a:a + CHUNK]
        rows = src.get_rows(chunk)
        vecs = src.get_vectors(chunk)
        write(rows, vecs, [title_hash(r["title"]) for r in rows])
        count.add(len(chunk))
    return total


def migrate(source, to: str, index=None, *, sample: int = 200, ann: str | None = None, seed: int = 0,
            progress: Progress | None = None) -> MigrateReport:
    """Copy the index at ``source`` to ``to`` — a store URI (``milvus://PATH.db[#coll]``,
    ``http://HOST:19530[#coll]``; its manifest goes to ``index``, default ``SOURCE.milvus``) or a
    directory (an embedded index) — then verify counts and ``sample`` random products."""
    t0 = time.perf_counter()
    source = Path(source)
    src = open_store(source)
    try:
        m = src.manifest
        if is_uri(str(to)):
            from qkv.scale.milvus_store import parse_uri

            parse_uri(str(to))  # refuse a bad URI before anything is created
            handle = Path(index) if index else default_handle(source, str(to))
            backend, options, uri = "milvus", {"uri": str(to)}, str(to)
        else:
            if index:
                raise InputError("--index names the manifest directory of a Milvus copy; for an embedded copy "
                                 "--to is the directory itself")
            handle, backend, options, uri = Path(to), "embedded", {}, None
        if handle.resolve() == source.resolve():
            raise InputError(f"the target {handle} is the source itself; choose another place")
        keep = {k: v for k, v in m.extra.items() if k in ("normalized", "pooling", "precision")}
        new = Manifest(model=m.model, fingerprint=m.fingerprint, dim=m.dim,
                       dtype=m.dtype if backend == "embedded" else "float32", ann=ann or m.ann,
                       backend=backend, extra=keep)
        dst = store_class(backend).create(handle, new, **options)
        try:
            with dst.writer(reset=True) as w:
                n = copy_rows(src, w.upsert, progress)
        finally:
            dst.close()
        dst = open_store(handle)
        try:
            report = verify(src, dst, sample=sample, seed=seed)
        finally:
            dst.close()
        report.update(source=str(source), target=str(handle), uri=uri, seconds=time.perf_counter() - t0)
        return MigrateReport(**report)
    finally:
        src.close()


def verify(src: VectorStore, dst: VectorStore, sample: int = 200, seed: int = 0) -> dict:
    """Counts equal, and for ``sample`` random ids: rows equal and vectors equal (to float16 precision
    when either side keeps float16)."""
    a, b = src.count(), dst.count()
    if a != b:
        raise MigrationMismatch(f"the copy has {b} products, the source {a}; the source is untouched — run again")
    ids = src.all_ids()
    pick = random.Random(seed).sample(ids, min(sample, len(ids)))
    diff = 0.0
    if pick:
        tol = 2e-3 if "float16" in (src.manifest.dtype, dst.manifest.dtype) else 1e-6
        for ra, rb in zip(src.get_rows(pick), dst.get_rows(pick)):
            if rb is None:
                raise MigrationMismatch(f"product {ra['id']!r} is missing from the copy")
            for key, va in ra.items():
                vb = rb.get(key)
                same = (abs(va - vb) <= 1e-9 * max(1.0, abs(va))) if isinstance(va, float) and isinstance(vb, float) else va == vb
                if not same:
                    raise MigrationMismatch(f"product {ra['id']!r}: {key} is {vb!r} in the copy, {va!r} in the source")
        va, vb = src.get_vectors(pick), dst.get_vectors(pick)
        diff = float(np.max(np.abs(va - vb)))
        if diff > tol:
            raise MigrationMismatch(f"sampled vectors differ by up to {diff:.2g} (allowed {tol:g})")
    return {"count": a, "target_count": b, "sampled": len(pick), "max_vector_diff": diff}
