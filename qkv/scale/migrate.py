"""Copy an index between stores (embedded ⇄ Milvus) and prove the copy: same count, same rows and
the same vectors for a random sample of products. The source is only read, never changed.

The copy searches as the source did: it keeps how the vectors were made (the model's query and
passage prefixes — without them a multilingual-e5 copy would embed its queries bare), an embedded
copy keeps a weighted keyword side's documents and weighting, and the index's query adapter
(``qkv terms adapt``) goes with it. What a target cannot hold (learned term weights in Milvus)
is named in the report's ``notes``."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qkv.errors import InputError, QkvError
from qkv.progress import Count, Progress
from qkv.search import termweights
from qkv.search.store import (KEYWORD_TEXT, MODEL_EXTRA, Manifest, VectorStore, is_uri, open_store, store_class,
                              title_hash)
from qkv.text import keywords as textmod
from qkv.text import zh

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
    term_weights: bool = False  # the weighted keyword documents (and their weighting) were carried
    query_adapter: bool = False  # the source's query adapter was copied to the target
    notes: list[str] = field(default_factory=list)  # what the copy could not carry, and what to do about it

    def to_json(self) -> dict:
        return dict(self.__dict__)


def default_handle(src: Path, uri: str) -> Path:
    """Where the manifest of a Milvus copy goes when --index is not given: next to the source."""
    return src.with_name(src.name + ".milvus")


def copy_rows(src: VectorStore, write, progress: Progress | None = None, *, keyword_texts: bool = False) -> int:
    """Stream every product of ``src`` through ``write(rows, vectors, hashes)``; ``progress``
    (``qkv.progress``) counts stage "copy" in rows. ``keyword_texts``: each row carries its stored
    keyword document (an embedded source's ``keyword_texts``) instead of having it made from the title."""
    ids = src.all_ids()
    total = len(ids)
    count = Count(progress, "copy", total)
    for a in range(0, total, CHUNK):
        chunk = ids[a:a + CHUNK]
        rows = src.get_rows(chunk)
        if keyword_texts:
            rows = [{**r, KEYWORD_TEXT: kt} for r, kt in zip(rows, src.keyword_texts(chunk))]
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
        notes: list[str] = []
        keep = {k: v for k, v in m.extra.items() if k in MODEL_EXTRA and k != termweights.MANIFEST_KEY}
        weighted = _carry_weighting(src, backend, notes)
        if weighted:
            keep[termweights.MANIFEST_KEY] = m.extra[termweights.MANIFEST_KEY]
        adapter = _source_adapter(source, m, notes)
        new = Manifest(model=m.model, fingerprint=m.fingerprint, dim=m.dim,
                       dtype=m.dtype if backend == "embedded" else "float32", ann=ann or m.ann,
                       backend=backend, extra=keep)
        dst = store_class(backend).create(handle, new, **options)
        try:
            with dst.writer(reset=True) as w:
                copy_rows(src, w.upsert, progress, keyword_texts=weighted)
        finally:
            dst.close()
        dst = open_store(handle)
        try:
            report = verify(src, dst, sample=sample, seed=seed, keyword_texts=weighted)
        finally:
            dst.close()
        if adapter is not None:
            from qkv.search.adapter import install

            install(handle, adapter)
        report.update(source=str(source), target=str(handle), uri=uri, seconds=time.perf_counter() - t0,
                      term_weights=weighted, query_adapter=adapter is not None, notes=notes)
        return MigrateReport(**report)
    finally:
        src.close()


def _carry_weighting(src: VectorStore, backend: str, notes: list[str]) -> bool:
    """Whether the copy keeps the source's learned term weights (its keyword documents as stored and
    the weighting that scores them): only an embedded target holds them, and only under the Chinese
    word scheme a new embedded index writes (the documents were cut by the source's)."""
    tw = termweights.recorded(src.manifest.extra)
    if tw is None:
        return False
    if backend != "embedded":
        notes.append(f"the keyword side of the copy is plain: Milvus does not hold learned term weights (the source "
                     f"is weighted by {tw.head}); copy to a directory to keep them")
        return False
    if textmod.han_scheme(src.manifest.extra) != zh.SCHEME:
        notes.append(f"the keyword side of the copy is plain: the source's weighted documents were cut with the Chinese "
                     f"scheme {textmod.han_scheme(src.manifest.extra)!r}, a new index uses {zh.SCHEME!r}; reweight it "
                     f"with `qkv index CATALOG --index COPY --rebuild --term-weights {tw.head}`")
        return False
    return True


def _source_adapter(source: Path, manifest: Manifest, notes: list[str]):
    """The source's query adapter to copy (None: it has none, or one the copy could not use)."""
    import warnings

    from qkv.search import adapter as adapter_mod

    if not adapter_mod.adapter_path(source).is_file():
        return None
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            ad = adapter_mod.load_for(source, manifest)
    except InputError as e:
        notes.append(f"the query adapter was not copied: {e}")
        return None
    if ad is None:
        notes.append("the query adapter was not copied: " + (str(seen[0].message) if seen else "it does not fit the index"))
    return ad


def verify(src: VectorStore, dst: VectorStore, sample: int = 200, seed: int = 0, *,
           keyword_texts: bool = False) -> dict:
    """Counts equal, and for ``sample`` random ids: rows equal and vectors equal (to float16 precision
    when either side keeps float16); with ``keyword_texts``, the stored keyword documents equal too."""
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
        if keyword_texts and src.keyword_texts(pick) != dst.keyword_texts(pick):
            raise MigrationMismatch("sampled keyword documents differ between the copy and the source")
        va, vb = src.get_vectors(pick), dst.get_vectors(pick)
        diff = float(np.max(np.abs(va - vb)))
        if diff > tol:
            raise MigrationMismatch(f"sampled vectors differ by up to {diff:.2g} (allowed {tol:g})")
    return {"count": a, "target_count": b, "sampled": len(pick), "max_vector_diff": diff}
