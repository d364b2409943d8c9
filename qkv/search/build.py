"""Building and updating an index: the write half of search, shared by every engine.

    report = build_index("catalog.csv", "my-index")              # or upsert=True to update

``open_target`` opens (or creates) the store an index directory names, ready for its one writer;
``write_rows`` is what every engine does inside that writer: title hashes decide which rows keep
their vectors, the rest get vectors from the engine's ``embed`` (this process, a pool of processes,
or shards a Ray cluster wrote: ``qkv.scale.ray_index``) and are upserted in order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from qkv.errors import InputError
from qkv.progress import Count, Progress, relay
from qkv.text import keywords as textmod
from qkv.search.catalog import Catalog, read_catalog
from qkv.search.store import (KEYWORD_TEXT, IndexError_, Manifest, Row, StoreWriter, VectorStore, index_dir,
                              open_store, read_manifest, store_class, title_hash)
from qkv.search import termweights
from qkv.text import zh

# Titles are embedded in bfloat16 where the CPU has a bfloat16 unit (float32 elsewhere): faster,
# dev NDCG@10 within 0.002 of float32 (docs/search.md).
BUILD_PRECISION = "bfloat16"


@dataclass
class BuildReport:
    path: str
    catalog: dict = field(default_factory=dict)
    embedded: int = 0  # titles sent to the encoder (new or changed)
    unchanged: int = 0  # rows whose title was already indexed: fields updated, vector kept
    deleted: int = 0
    count: int = 0  # products in the index afterwards
    seconds: float = 0.0
    embed_seconds: float = 0.0
    model: str = ""  # the encoder that embedded the titles
    term_weights: dict | None = None  # the learned term weighting of the keyword side (termweights)


def check_model(manifest: Manifest, encoder, where) -> None:
    """Refuse an encoder whose vectors are not the index's (another model, or other weights)."""
    fp = encoder.fingerprint()
    if manifest.fingerprint != fp or manifest.dim != encoder.dim:
        raise IndexError_(f"the index at {where} was built with model {manifest.model} (fingerprint "
                          f"{manifest.fingerprint}, {manifest.dim} dims), not {encoder.name} ({fp}, {encoder.dim} dims); "
                          f"search it with --model {manifest.model}, or rebuild it with --rebuild")


def role_prefixes(encoder) -> dict[str, str]:
    """The text the model expects before a query and before a document (E5: "query: " /
    "passage: "; empty for models trained without): recorded in the manifest, so that titles and
    queries are embedded by the convention the index was built with."""
    return {"query_prefix": encoder.config.query_prefix, "passage_prefix": encoder.config.passage_prefix}


def prefixed(manifest: Manifest, texts: Sequence[str], role: str) -> list[str]:
    """``texts`` with the manifest's prefix for ``role`` ("query" or "passage") before each. An index
    written before the prefixes were recorded had none (its model, MiniLM, uses none)."""
    prefix = manifest.extra.get(f"{role}_prefix", "")
    return [prefix + t for t in texts] if prefix else list(texts)


def new_manifest(encoder, *, model: str | None = None, dtype: str = "float32", ann: str = "auto",
                 backend: str = "embedded", precision: str = "float32",
                 weighting: "termweights.TermWeighting | None" = None) -> Manifest:
    """The manifest of a new index whose vectors ``encoder`` makes in ``precision`` (the one that
    ran: ``qkv.model.linear.effective_precision``) and whose keyword side ``weighting`` weights."""
    tw = {termweights.MANIFEST_KEY: weighting.to_json()} if weighting is not None else {}
    return Manifest(model=model or encoder.name, fingerprint=encoder.fingerprint(), dim=encoder.dim, dtype=dtype,
                    ann=ann, backend=backend,
                    extra={"normalized": bool(encoder.config.normalize), "pooling": encoder.config.pooling,
                           textmod.MANIFEST_KEY: zh.SCHEME,  # how Chinese titles become keyword terms
                           "precision": precision, **role_prefixes(encoder), **tw})


@dataclass
class BuildPlan:
    """What every engine builds with (``plan_build``): the encoder, the precision its titles are
    embedded in, and the manifest a new or rebuilt index gets."""

    encoder: object
    precision: str
    manifest: Manifest
    weighting: "termweights.TermWeighting | None" = None  # learned term weights of the keyword side


def plan_build(path, encoder=None, *, model: str | None = None, upsert: bool = False, rebuild: bool = False,
               dtype: str = "float32", ann: str = "auto", backend: str = "embedded",
               precision: str | None = None, term_weights=None, term_scale: float | None = None,
               keep_zero: bool | None = None, term_k1: float | None = None, term_b: float | None = None,
               term_blend: float | None = None, term_floor: float | None = None) -> BuildPlan:
    """The one place that decides an index's model, prefixes, precision and keyword scheme, for
    ``build_index`` and for ``qkv.scale.ray_index`` alike: the encoder given, else ``model``, else
    the existing index's model, else the rule's model for text not known yet
    (``qkv.model.default_model``: a new index's queries may come in any language); ``precision`` given, else the index's recorded
    one (an update or rebuild), else BUILD_PRECISION — as it actually runs on this CPU.
    ``term_weights``: a term-weight head file (``qkv terms train``) whose learned weights the
    keyword documents are written with (``qkv.search.termweights``; ``term_scale``, ``keep_zero``,
    ``term_blend`` and ``term_floor`` tune how, ``term_k1``/``term_b`` the BM25 that scores them),
    ``"none"`` for a plain keyword side, or None: the index's own (an update or rebuild keeps the
    head and settings its manifest records; a new index is plain). An update must use the index's own
    head: another one means a rebuild."""
    from qkv.model import default_model, shared_encoder
    from qkv.model.linear import PRECISIONS, effective_precision

    path = index_dir(path)
    if dtype not in ("float32", "float16"):
        raise InputError(f"dtype must be float32 or float16, not {dtype!r}")
    if ann not in ("auto", "flat", "hnsw", "ivfpq"):
        raise InputError(f"ann must be auto, flat, hnsw or ivfpq, not {ann!r}")
    if precision is not None and precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    existing = read_manifest(path) if (path / "manifest.json").is_file() else None
    if existing is not None:
        if not (upsert or rebuild):
            raise InputError(f"{path} already holds an index of {existing.count} products; pass --upsert to add or "
                             "replace products by id, or --rebuild to replace the whole index")
        if encoder is None:
            encoder = shared_encoder(model or existing.model)
        if not rebuild:
            check_model(existing, encoder, path)
        if precision is None:  # an update embeds as the index was built (before it was recorded: float32)
            precision = existing.extra.get("precision", "float32")
    elif encoder is None:
        encoder = shared_encoder(model or default_model())
    precision = effective_precision(precision or BUILD_PRECISION, encoder)
    weighting = _weighting(path, existing, term_weights, {"scale": term_scale, "keep_zero": keep_zero, "k1": term_k1,
                                                          "b": term_b, "blend": term_blend, "floor": term_floor},
                           rebuild)
    if weighting is not None and (existing.backend if existing is not None else backend) != "embedded":
        raise InputError("learned term weights (--term-weights) need the embedded store; "
                         f"the {backend if existing is None else existing.backend} store indexes raw titles")
    made = new_manifest(encoder, dtype=dtype, ann=ann, backend=backend, precision=precision, weighting=weighting)
    return BuildPlan(encoder, precision, made, weighting)


def _weighting(path: Path, existing: Manifest | None, given, settings: dict,
               rebuild: bool) -> "termweights.TermWeighting | None":
    """The term weighting a build writes with (``plan_build``'s ``term_weights``): the file given
    (checked now, before anything is written), none, or the index's recorded one — whose head
    must still be there, unchanged, to weight the titles about to be written. ``settings``
    (``termweights.SETTINGS``, None: not given) override the recorded ones, else the defaults."""
    had = termweights.recorded(existing.extra) if existing is not None else None
    asked = {k: v for k, v in settings.items() if v is not None}
    if isinstance(given, str) and given.strip().lower() == termweights.OFF:
        if had is not None and not rebuild:
            raise InputError(f"the index at {path} weights its keyword side with {had.head}; an update cannot "
                             "drop that: rebuild with --rebuild --term-weights none")
        return None
    if given is None:
        if had is None:
            if asked:
                raise InputError(f"{', '.join(termweights.OPTIONS[k] for k in asked)} set how --term-weights HEAD "
                                 "weights titles; give the head too")
            return None
        if any(had.settings()[k] != v for k, v in asked.items()):
            if not rebuild:
                now = ", ".join(f"{termweights.OPTIONS[k]} {had.settings()[k]}" for k in asked)
                raise InputError(f"the index at {path} was weighted with {now}; another setting means --rebuild "
                                 "(every title's keyword document and score change)")
            had = replace(had, **asked)  # checked by TermWeighting itself
        termweights.check_available(had, path)
        return had
    # settings not given: the index's own, else the defaults
    tw = termweights.TermWeighting.of_file(given, **{**(had.settings() if had else {}), **asked})
    if existing is not None and not rebuild and (had is None or (had.sha256, had.settings())
                                                 != (tw.sha256, tw.settings())):
        raise InputError(f"the index at {path} was written " + (f"with term head {had.head}" if had else
                         "without term weights") + f"; weighting new titles with {given} " + (
                         "and these settings " if had is not None and had.sha256 == tw.sha256 else "")
                         + "would mix two keyword sides: rebuild with --rebuild to write every title with it")
    return tw


def open_target(path: Path, make_manifest: Callable[[], Manifest], *, rebuild: bool, backend: str = "embedded",
                **store_options) -> VectorStore:
    """The store at ``path`` for writing: the existing one (``rebuild``: opened only to be replaced,
    so an index too old to search can still be rebuilt), or a new one of ``backend``."""
    if (path / "manifest.json").is_file():
        cls = store_class(read_manifest(path).backend)
        return cls.for_rebuild(path) if rebuild else cls.open(path)
    return store_class(backend).create(path, make_manifest(), **store_options)


def write_rows(w: StoreWriter, rows: Sequence[Row], embed: Callable[[list[Row]], Iterable[np.ndarray]], *,
               reuse: bool = True,
               keyword_texts: Callable[[list[str]], list[str]] | None = None) -> tuple[int, int]:
    """Write ``rows`` through the writer ``w``: rows whose stored title hash is unchanged (``reuse``)
    keep their vectors (and keyword documents) and get their fields updated; the others are
    upserted with vectors from ``embed(rows_to_embed)``, which yields arrays for consecutive runs
    of those rows, in order, and with ``keyword_texts(titles)`` as their keyword documents when
    given (learned term weights, ``termweights.Weigher``). Returns (embedded, unchanged)."""
    hashes = [title_hash(r["title"]) for r in rows]
    old = w.title_hashes([r["id"] for r in rows]) if reuse else {}
    same = [r for r, h in zip(rows, hashes) if old.get(r["id"]) == h]
    todo = [(r, h) for r, h in zip(rows, hashes) if old.get(r["id"]) != h]
    if same:
        w.update_fields(same)
    at = 0
    for vecs in embed([r for r, _ in todo]):
        part = todo[at:at + len(vecs)]
        at += len(part)
        put = [r for r, _ in part]
        if keyword_texts is not None:
            put = [{**r, KEYWORD_TEXT: kt} for r, kt in zip(put, keyword_texts([r["title"] for r in put]))]
        w.upsert(put, vecs, [h for _, h in part])
    if at != len(todo):
        raise AssertionError(f"embed returned vectors for {at} of {len(todo)} rows")
    return len(todo), len(same)


def build_index(catalog, path, encoder=None, *, upsert: bool = False, rebuild: bool = False,
                dtype: str = "float32", ann: str = "auto", id_column: str | None = None,
                title_column: str | None = None, fmt: str | None = None, batch_size: int = 64,
                chunk: int = 4096, progress: Progress | None = None,
                backend: str = "embedded", workers: int = 1, precision: str | None = None,
                term_weights=None, term_scale: float | None = None, keep_zero: bool | None = None,
                term_k1: float | None = None, term_b: float | None = None, term_blend: float | None = None,
                term_floor: float | None = None, **store_options) -> BuildReport:
    """Create an index at ``path`` from ``catalog`` (a file path or a ``Catalog``), or update one
    (``upsert``: add/replace by id, embedding only new or changed titles; ``rebuild``: replace all).
    ``progress`` (``qkv.progress``) counts stage "embed" in titles. ``workers`` > 1 embeds in that many
    processes with one BLAS thread each (1.94× one process on an idle 2-vCPU machine, 0.47× when
    its cores were already busy: docs/search.md). ``precision``: the encoder's (``Encoder.encode``);
    default BUILD_PRECISION for a new index, the recorded one for an update; the manifest records
    the precision that actually ran (float32 where the CPU has no bfloat16 unit). ``term_weights``
    (a head file, ``"none"``, or None: the index's own), ``term_scale``, ``keep_zero``, ``term_k1``,
    ``term_b``, ``term_blend``, ``term_floor``: learned term
    weights on the keyword side (``plan_build``, ``qkv.search.termweights``); ``progress`` then
    also counts stage "weigh" in titles."""
    t0 = time.perf_counter()
    path = index_dir(path)
    cat = catalog if isinstance(catalog, Catalog) else read_catalog(
        catalog, id_column=id_column, title_column=title_column, fmt=fmt)
    plan = plan_build(path, encoder, upsert=upsert, rebuild=rebuild, dtype=dtype, ann=ann, backend=backend,
                      precision=precision, term_weights=term_weights, term_scale=term_scale, keep_zero=keep_zero,
                      term_k1=term_k1, term_b=term_b, term_blend=term_blend, term_floor=term_floor)
    encoder, precision, made = plan.encoder, plan.precision, plan.manifest
    weigh = None
    if plan.weighting is not None:  # loaded before the store is touched: a bad head changes nothing
        updating = upsert and not rebuild and (path / "manifest.json").is_file()  # its own Chinese scheme
        weigher = termweights.Weigher(plan.weighting, encoder,
                                      han=textmod.han_scheme(read_manifest(path).extra) if updating else None,
                                      catalog_titles=[r["title"] for r in cat.rows])
        weigh = lambda titles: weigher.keyword_texts(titles, weighed.add)  # noqa: E731
    weighed = None  # stage "weigh": counted over the titles written (known when ``embed`` is called)
    store = open_target(path, lambda: made, rebuild=rebuild, backend=backend, **store_options)
    # titles get the prefix the index records (an update: the index's own; a new index or a
    # rebuild: the encoder's, which the rebuilt manifest records)
    passages = made if rebuild else store.manifest
    report = BuildReport(str(path), cat.summary(), model=encoder.name,
                         term_weights=plan.weighting.to_json() if plan.weighting is not None else None)

    def embed(todo: list[Row]) -> Iterator[np.ndarray]:
        nonlocal weighed
        if weigh is not None:
            weighed = Count(progress, "weigh", len(todo))
        count = Count(progress, "embed", len(todo))
        te = time.perf_counter()
        if workers > 1 and len(todo) > batch_size:
            size = max(batch_size, min(chunk, -(-len(todo) // (4 * workers))))  # several chunks per worker
            parts = [todo[a:a + size] for a in range(0, len(todo), size)]
            with _EncoderPool(encoder, workers) as pool:
                for vecs in pool.encode([prefixed(passages, [r["title"] for r in p], "passage") for p in parts],
                                        batch_size, precision):
                    count.add(len(vecs))
                    report.embed_seconds += time.perf_counter() - te
                    yield vecs
                    te = time.perf_counter()
            return
        for a in range(0, len(todo), chunk):
            # the encoder's own counts, as titles of the whole build
            vecs = encoder.encode(prefixed(passages, [r["title"] for r in todo[a:a + chunk]], "passage"),
                                  batch_size=batch_size,
                                  progress=relay(progress, "embed", a, len(todo)), precision=precision)
            report.embed_seconds += time.perf_counter() - te
            yield vecs
            te = time.perf_counter()

    try:
        with store.writer(reset=rebuild, manifest=made if rebuild else None) as w:
            report.embedded, report.unchanged = write_rows(w, cat.rows, embed, reuse=not rebuild, keyword_texts=weigh)
    finally:
        store.close()
    report.count = read_manifest(path).count
    report.seconds = time.perf_counter() - t0
    return report


def delete_products(path, ids: Sequence[str]) -> int:
    """Remove products by id; returns how many existed."""
    store = open_store(path)
    try:
        with store.writer() as w:
            return w.delete(ids)
    finally:
        store.close()


# ---------------------------------------------------------------------------- embedding processes
_WORKER_ENCODER = None


def _worker_init(path: str) -> None:
    global _WORKER_ENCODER
    from qkv.model import shared_encoder
    from qkv.model.threads import WORKER_THREADS, set_default_threads

    set_default_threads(WORKER_THREADS)  # N processes already fill N cores
    _WORKER_ENCODER = shared_encoder(path, threads=WORKER_THREADS)


def _worker_fingerprint(_: int) -> str:
    return _WORKER_ENCODER.fingerprint()


def _worker_encode(job: tuple[list[str], int, str]) -> np.ndarray:
    texts, batch_size, precision = job
    return _WORKER_ENCODER.encode(texts, batch_size=batch_size, precision=precision)


class _EncoderPool:
    """``workers`` spawned processes, each loading the same model files with one BLAS thread;
    ``encode`` yields the chunks' vectors in order as they finish."""

    def __init__(self, encoder, workers: int):
        self.encoder, self.workers = encoder, workers

    def __enter__(self):
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        from qkv.errors import ModelError

        if self.encoder.path is None:
            raise InputError("--workers needs a model loaded from files (encoder.path is unset)")
        self.pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"),
                                        initializer=_worker_init, initargs=(str(self.encoder.path),))
        try:
            fps = set(self.pool.map(_worker_fingerprint, range(self.workers)))
            if fps != {self.encoder.fingerprint()}:
                raise ModelError(f"worker processes loaded weights with fingerprint(s) {sorted(fps)} from "
                                 f"{self.encoder.path}, not {self.encoder.fingerprint()}; build with --workers 1")
        except BaseException:
            self.pool.shutdown(cancel_futures=True)
            raise
        return self

    def encode(self, texts: list[list[str]], batch_size: int, precision: str = "float32"):
        return self.pool.map(_worker_encode, [(t, batch_size, precision) for t in texts])

    def __exit__(self, *exc):
        self.pool.shutdown(cancel_futures=True)
        return False
