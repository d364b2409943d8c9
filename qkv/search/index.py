"""Building and searching an index: the Python API the CLI and the web app call.

    from qkv.search import Index, build_index
    report = build_index("catalog.csv", "my-index")              # or upsert=True to update
    idx = Index.open("my-index")
    hits = idx.search("breathable running shoes", k=5)            # hybrid by default
    hits = idx.search("跑鞋", mode="dense", where="price < 50", explain=True)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from qkv.errors import InputError
from qkv.search import fusion
from qkv.search.catalog import Catalog, read_catalog
from qkv.search.embedded import title_hash
from qkv.search.explain import MatchExplanation, explain_titles
from qkv.search.filters import Filter, parse_filter
from qkv.search.store import IndexError_, Manifest, VectorStore, open_store, read_manifest, store_class

MODES = ("hybrid", "dense", "keyword")
FUSIONS = ("score", "rrf")
CANDIDATES = 200  # depth each side contributes to hybrid fusion (at least k); 200 tuned on dev half a
MAX_QUERY_CHARS = 2000


@dataclass(frozen=True)
class SearchResult:
    rank: int
    id: str
    title: str
    score: float  # the mode's score: cosine (dense), BM25 (keyword), fused (hybrid)
    fields: dict
    dense_score: float | None = None  # cosine, when known
    keyword_score: float | None = None  # BM25, when the keyword side matched
    dense_rank: int | None = None
    keyword_rank: int | None = None
    explanation: MatchExplanation | None = None

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("rank", "id", "title", "score", "fields", "dense_score",
                                            "keyword_score", "dense_rank", "keyword_rank")}
        if self.explanation is not None:
            d["explanation"] = self.explanation.to_json()
        return d


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


def _check_model(manifest: Manifest, encoder, where) -> None:
    fp = encoder.fingerprint()
    if manifest.fingerprint != fp or manifest.dim != encoder.dim:
        raise IndexError_(f"the index at {where} was built with model {manifest.model} (fingerprint "
                          f"{manifest.fingerprint}, {manifest.dim} dims), not {encoder.name} ({fp}, {encoder.dim} dims); "
                          f"search it with --model {manifest.model}, or rebuild it with --rebuild")


def build_index(catalog, path, encoder=None, *, upsert: bool = False, rebuild: bool = False,
                dtype: str = "float32", ann: str = "auto", id_column: str | None = None,
                title_column: str | None = None, fmt: str | None = None, batch_size: int = 64,
                chunk: int = 4096, progress: Callable[[int, int], None] | None = None,
                backend: str = "embedded", workers: int = 1, **store_options) -> BuildReport:
    """Create an index at ``path`` from ``catalog`` (a file path or a ``Catalog``), or update one
    (``upsert``: add/replace by id, embedding only new or changed titles; ``rebuild``: replace all).
    ``progress(done, total)`` is called as titles are embedded. ``workers`` > 1 embeds in that many
    processes with one BLAS thread each (1.94× one process on an idle 2-vCPU machine, 0.47× when
    its cores were already busy: docs/search.md)."""
    import qkv

    t0 = time.perf_counter()
    path = Path(path)
    if dtype not in ("float32", "float16"):
        raise InputError(f"dtype must be float32 or float16, not {dtype!r}")
    if ann not in ("auto", "flat", "hnsw", "ivfpq"):
        raise InputError(f"ann must be auto, flat, hnsw or ivfpq, not {ann!r}")
    cat = catalog if isinstance(catalog, Catalog) else read_catalog(
        catalog, id_column=id_column, title_column=title_column, fmt=fmt)
    exists = (path / "manifest.json").is_file()
    if exists:
        manifest = read_manifest(path)
        if not (upsert or rebuild):
            raise InputError(f"{path} already holds an index of {manifest.count} products; pass --upsert to add or "
                             "replace products by id, or --rebuild to replace the whole index")
        if encoder is None:
            encoder = qkv.load(manifest.model)
        if not rebuild:
            _check_model(manifest, encoder, path)
        store = open_store(path)
    else:
        encoder = encoder or qkv.load()
        manifest = Manifest(model=encoder.name, fingerprint=encoder.fingerprint(), dim=encoder.dim,
                            dtype=dtype, ann=ann, backend=backend,
                            extra={"normalized": bool(encoder.config.normalize), "pooling": encoder.config.pooling})
        store = store_class(backend).create(path, manifest, **store_options)
    report = BuildReport(str(path), cat.summary())
    try:
        with store.writer(reset=rebuild) as w:
            rows = cat.rows
            hashes = [title_hash(r["title"]) for r in rows]
            old = {} if rebuild else w.title_hashes([r["id"] for r in rows])
            same = [r for r, h in zip(rows, hashes) if old.get(r["id"]) == h]
            todo = [(r, h) for r, h in zip(rows, hashes) if old.get(r["id"]) != h]
            if same:
                w.update_fields(same)
            report.unchanged = len(same)
            done = 0
            if progress:
                progress(0, len(todo))
            if workers > 1 and len(todo) > batch_size:
                chunk = max(batch_size, min(chunk, -(-len(todo) // (4 * workers))))  # several chunks per worker
                parts = [todo[a:a + chunk] for a in range(0, len(todo), chunk)]
                te = time.perf_counter()
                with _EncoderPool(encoder, workers) as pool:
                    for part, vecs in zip(parts, pool.encode([[r["title"] for r, _ in p] for p in parts], batch_size)):
                        report.embed_seconds += time.perf_counter() - te
                        w.upsert([r for r, _ in part], vecs, [h for _, h in part])
                        report.embedded += len(part)
                        done += len(part)
                        if progress:
                            progress(done, len(todo))
                        te = time.perf_counter()
            for a in range(0, len(todo) if workers <= 1 or len(todo) <= batch_size else 0, chunk):
                part = todo[a:a + chunk]
                te = time.perf_counter()

                def tick(n, base=done):
                    nonlocal done
                    done += n
                    if progress:
                        progress(done, len(todo))

                vecs = encoder.encode([r["title"] for r, _ in part], batch_size=batch_size, progress=tick)
                report.embed_seconds += time.perf_counter() - te
                w.upsert([r for r, _ in part], vecs, [h for _, h in part])
                report.embedded += len(part)
    finally:
        store.close()
    report.count = read_manifest(path).count
    report.seconds = time.perf_counter() - t0
    return report


_WORKER_ENCODER = None


def _worker_init(path: str) -> None:
    global _WORKER_ENCODER
    import qkv

    _WORKER_ENCODER = qkv.load(path, threads=1)


def _worker_fingerprint(_: int) -> str:
    return _WORKER_ENCODER.fingerprint()


def _worker_encode(job: tuple[list[str], int]) -> np.ndarray:
    texts, batch_size = job
    return _WORKER_ENCODER.encode(texts, batch_size=batch_size)


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

    def encode(self, texts: list[list[str]], batch_size: int):
        return self.pool.map(_worker_encode, [(t, batch_size) for t in texts])

    def __exit__(self, *exc):
        self.pool.shutdown(cancel_futures=True)
        return False


def delete_products(path, ids: Sequence[str]) -> int:
    """Remove products by id; returns how many existed."""
    store = open_store(path)
    try:
        with store.writer() as w:
            return w.delete(ids)
    finally:
        store.close()


class Index:
    """A searchable index (any ``VectorStore`` backend) plus the encoder its vectors came from."""

    def __init__(self, store: VectorStore, encoder=None):
        self.store = store
        self._encoder = encoder
        if encoder is not None:
            _check_model(store.manifest, encoder, store.path)
        self.last_timings: dict[str, float] = {}

    @classmethod
    def open(cls, path, encoder=None, *, ef_search: int | None = None) -> "Index":
        """Open an index directory. ``ef_search``: HNSW's search breadth for this session (the
        store's default is 96; more recall for more time, see docs/search.md)."""
        store = open_store(path)
        if ef_search is not None:
            if not hasattr(store, "ef_search"):
                store.close()
                raise InputError(f"the {type(store).__name__} store has no ef_search setting")
            try:
                store.ef_search = ef_search
            except InputError:
                store.close()
                raise
        return cls(store, encoder)

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def encoder(self):
        if self._encoder is None:
            import qkv

            enc = qkv.load(self.store.manifest.model)
            _check_model(self.store.manifest, enc, self.store.path)
            self._encoder = enc
        return self._encoder

    @property
    def manifest(self) -> Manifest:
        return self.store.manifest

    def __len__(self) -> int:
        return self.store.count()

    # ------------------------------------------------------------------ search
    @staticmethod
    def _check(query: str, k: int, mode: str, fusion_: str) -> str:
        if not isinstance(query, str) or not query.strip():
            raise InputError("the query is empty; type what a shopper would search for")
        if len(query) > MAX_QUERY_CHARS:
            raise InputError(f"the query has {len(query)} characters; keep it under {MAX_QUERY_CHARS}")
        if not isinstance(k, int) or k <= 0:
            raise InputError(f"k must be a positive whole number, got {k!r}")
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if fusion_ not in FUSIONS:
            raise InputError(f"fusion must be one of {', '.join(FUSIONS)}, not {fusion_!r}")
        return query.strip()

    def encode_query(self, query: str, exact: bool = False) -> np.ndarray:
        """The query's vector. A lone query reads float16 copies of the weights (half the bytes of
        a pass bound by reading them; the vector is within cosine distance ~2e-7 of float32's,
        see ``Encoder.encode``); ``exact`` keeps float32, which explanations need so that their
        parts add up to the very score returned."""
        return self.encoder.encode([query], truncate=True, precision="float32" if exact else "float16")[0]

    def retrieve(self, query: str, k: int = 10, mode: str = "hybrid", where: str | Filter | None = None,
                 fusion_: str = "score", alpha: float = fusion.ALPHA, candidates: int = CANDIDATES,
                 vector: np.ndarray | None = None, exact: bool = False) -> list[tuple[str, float, dict]]:
        """Ranked (id, score, details) without fetching rows; ``vector`` skips query encoding;
        ``exact``: see ``encode_query``."""
        query = self._check(query, k, mode, fusion_)
        flt = parse_filter(where) if isinstance(where, str) or where is None else where
        if flt is not None:
            flt.check({"id": "text", "title": "text", **{f.name: f.kind for f in self.store.fields()}})
        t = self.last_timings = {"encode": 0.0, "ann": 0.0, "keyword": 0.0, "fuse": 0.0, "fetch": 0.0}
        depth = k if mode != "hybrid" else max(k, candidates)
        if mode == "hybrid" and fusion_ == "score" and hasattr(self.store, "dense_slots"):
            return self._hybrid_slots(query, k, depth, flt, vector, alpha, t, exact)
        dense: list = []
        kw: list = []
        if mode in ("dense", "hybrid"):
            t0 = time.perf_counter()
            vector = self.encode_query(query, exact) if vector is None else vector
            t1 = time.perf_counter()
            dense = self.store.dense_search(vector, depth, flt)
            t["encode"], t["ann"] = t1 - t0, time.perf_counter() - t1
        if mode in ("keyword", "hybrid"):
            t0 = time.perf_counter()
            kw = self.store.keyword_search(query, depth, flt)
            t["keyword"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = self.fuse(mode, dense, kw, k, vector, fusion_, alpha, query=query)
        t["fuse"] = time.perf_counter() - t0
        return out

    def _hybrid_slots(self, query: str, k: int, depth: int, flt, vector, alpha: float,
                      t: dict[str, float], exact: bool = False) -> list[tuple[str, float, dict]]:
        """Hybrid score fusion in the store's slot space (``dense_slots``/``keyword_slots``): the
        same ranking as ``fuse`` (a test compares them), but only the ``k`` products returned are
        looked up by id, and the fusion is array arithmetic instead of dicts of 400 candidates."""
        st = self.store
        t0 = time.perf_counter()
        vector = self.encode_query(query, exact) if vector is None else vector
        vector = np.asarray(vector, np.float32)
        t1 = time.perf_counter()
        d_slots, d_cos = st.dense_slots(vector, depth, flt)
        t2 = time.perf_counter()
        k_slots, k_bm25 = st.keyword_slots(query, depth, flt)
        t3 = time.perf_counter()
        t["encode"], t["ann"], t["keyword"] = t1 - t0, t2 - t1, t3 - t2
        d_pos = {s: r for r, s in enumerate(d_slots.tolist())}
        k_list = k_slots.tolist()
        extra = np.array([s for s in k_list if s not in d_pos], dtype=np.int64)
        slots = np.concatenate([d_slots, extra])
        cos = np.concatenate([d_cos.astype(np.float64),
                              (st.slot_vectors(extra) @ vector).astype(np.float64) if len(extra) else np.zeros(0)])
        kw = np.zeros(len(slots))
        if len(k_slots):
            matched = st.matched_counts(query, k_slots)  # BM25 × matched terms^p, as fusion.coverage_weighted
            weighted = k_bm25 * np.maximum(1, matched).astype(np.float64) ** fusion.COVERAGE_POWER
            pos = {s: i for i, s in enumerate(slots.tolist())}
            kw[[pos[s] for s in k_list]] = weighted
        fused = fusion.score_fusion_arrays(cos, kw, alpha)
        if len(fused) > k:  # the top k, plus any tied with the k-th (ties go by id, as in ``fuse``)
            cut = np.partition(fused, len(fused) - k)[len(fused) - k]
            pick = np.flatnonzero(fused >= cut)
        else:
            pick = np.arange(len(fused))
        ids = st.ids_of(slots[pick])
        k_pos = {s: r for r, s in enumerate(k_list, 1)}
        top = sorted(((ids[int(slots[i])], float(fused[i]), int(i)) for i in pick if int(slots[i]) in ids),
                     key=lambda x: (-x[1], x[0]))[:k]
        out = []
        for pid, score, i in top:
            s = int(slots[i])
            dr = d_pos[s] + 1 if s in d_pos else None
            kr = k_pos.get(s)
            out.append((pid, score, {"dense_rank": dr, "dense_score": float(cos[i]), "keyword_rank": kr,
                                     "keyword_score": float(k_bm25[kr - 1]) if kr else None}))
        t["fuse"] = time.perf_counter() - t3
        return out

    def fuse(self, mode: str, dense: list, kw: list, k: int, vector: np.ndarray | None = None,
             fusion_: str = "score", alpha: float = fusion.ALPHA, query: str | None = None,
             coverage: bool = True) -> list[tuple[str, float, dict]]:
        """Rank the store's dense and keyword hits by ``mode`` (hybrid: fused, see ``fusion``);
        ``query`` enables the matched-terms weighting of BM25 (``coverage``)."""
        d_rank = {h.id: (r, h.score) for r, h in enumerate(dense, 1)}
        k_rank = {h.id: (r, h.score) for r, h in enumerate(kw, 1)}
        if mode == "dense":
            ranked = [(h.id, h.score) for h in dense]
        elif mode == "keyword":
            ranked = [(h.id, h.score) for h in kw]
        elif fusion_ == "rrf":
            ranked = fusion.ranked(fusion.rrf([[h.id for h in dense], [h.id for h in kw]]), k)
        else:
            cos = {h.id: h.score for h in dense}
            extra = [h.id for h in kw if h.id not in cos]
            if extra:  # exact cosine for keyword-only candidates
                for pid, v in zip(extra, self.store.get_vectors(extra) @ np.asarray(vector, np.float32)):
                    cos[pid] = float(v)
                    d_rank[pid] = (None, float(v))
            kscores = {h.id: h.score for h in kw}
            if query is not None and kw and coverage:
                parts = self.store.keyword_terms(query, list(kscores))
                if parts:
                    kscores = fusion.coverage_weighted(kscores, {i: len(p) for i, p in parts.items()})
            ranked = fusion.ranked(fusion.score_fusion(cos, kscores, alpha), k)
        out = []
        for pid, s in ranked[:k]:
            dr, ds = d_rank.get(pid, (None, None))
            kr, ks = k_rank.get(pid, (None, None))
            out.append((pid, float(s), {"dense_rank": dr, "dense_score": ds, "keyword_rank": kr, "keyword_score": ks}))
        return out

    def search(self, query: str, k: int = 10, mode: str = "hybrid", where: str | Filter | None = None,
               explain: bool = False, fusion: str = "score") -> list[SearchResult]:
        """The top ``k`` products for ``query`` (see ``SearchResult``); ``where`` filters on fields;
        ``explain`` adds the token grid and BM25 terms of each result."""
        ranked = self.retrieve(query, k, mode, where, fusion_=fusion, exact=explain)
        t0 = time.perf_counter()
        rows = self.store.get_rows([pid for pid, _, _ in ranked])
        self.last_timings["fetch"] = time.perf_counter() - t0
        out = []
        for r, ((pid, s, d), row) in enumerate(zip(ranked, rows), 1):
            row = dict(row or {"id": pid, "title": ""})
            title = row.pop("title")
            row.pop("id", None)
            out.append(SearchResult(r, pid, title, s, row, **d))
        if explain and out:
            t0 = time.perf_counter()
            terms = self.store.keyword_terms(query, [x.id for x in out])
            exps = explain_titles(self.encoder, query.strip(), [x.title for x in out],
                                  [terms.get(x.id, []) for x in out])
            out = [SearchResult(**{**x.__dict__, "explanation": e}) for x, e in zip(out, exps)]
            self.last_timings["explain"] = time.perf_counter() - t0
        return out
