"""The vector side of a generation: ``vectors.npy`` (float32 or float16 [slots, dim]; slot = faiss
id = FTS rowid) and the faiss ANN index over it (``ann.faiss``; absent while empty) — reading,
searching with filters and tombstones, and building it when a writer publishes."""

from __future__ import annotations

import math

import numpy as np

from qkv.errors import InputError
# The thread settings' owner; build_threads is read by the writer through this module.
from qkv.model.threads import build_threads, default_threads  # noqa: F401
from qkv.search.embedded.generations import Generation
from qkv.search.embedded.rows import Rows
from qkv.search.store import IndexError_

FLAT_THRESHOLD = 100_000  # "auto": exact search below this many products, HNSW above
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 40  # 80 built twice as slowly for the same recall at 100k (docs/search.md)
HNSW_EF_SEARCH = 96
EXACT_SUBSET = 20_000  # a filter leaving at most this many products is searched exactly (~1 µs each)
# With a filter, HNSW walks the whole graph but may return only allowed products; the rarer they
# are, the more of the walk is wasted, so efSearch grows as FILTER_EF_SCALE / the allowed share
# (up to FILTER_EF_MAX). Measured at 100k generated products, 100 queries, recall@10 against
# exact search over the allowed rows: 22.5 % allowed, efSearch 96 / 192: 0.982 / 0.991 (0.6 ms);
# 5 %, 96 / 384 / 768: 0.931 / 0.985 / 0.991 (2.4 ms); 2 %, 96 / 768: 0.770 / 0.975.
FILTER_EF_SCALE = 0.4
FILTER_EF_MAX = 1024
IVFPQ_MIN = 10_000  # IVF-PQ needs enough vectors to train its quantisers
IVFPQ_RESCORE = 8  # IVF-PQ fetches k × this candidates and rescores them with the stored vectors

NO_SLOTS = (np.zeros(0, np.int64), np.zeros(0, np.float32))

_faiss_threads_set = False


def faiss_module():
    """faiss, with its OpenMP threads set once to qkv's thread count (``qkv.model.threads``,
    default 1): on these shared 2-vCPU machines a one-query search is ~3x faster on one thread
    than on two (measured: 54k × 384 exact search 48 ms vs 141 ms under load)."""
    global _faiss_threads_set
    import faiss

    if not _faiss_threads_set:
        faiss.omp_set_num_threads(default_threads())
        _faiss_threads_set = True
    return faiss


def ann_kind(want: str, count: int, extra: dict) -> str:
    """The ANN a generation of ``count`` products gets for the manifest's ``ann`` setting."""
    if want == "auto":
        return "flat" if count < int(extra.get("flat_threshold", FLAT_THRESHOLD)) else "hnsw"
    if want == "ivfpq" and count < int(extra.get("ivfpq_min", IVFPQ_MIN)):
        return "flat"  # too few vectors to train product quantisers: exact until there are enough
    return want


def new_ann(kind: str, dim: int, dtype: str, n: int):
    faiss = faiss_module()

    ip = faiss.METRIC_INNER_PRODUCT
    if kind == "flat":
        return faiss.IndexFlatIP(dim) if dtype == "float32" else faiss.IndexScalarQuantizer(
            dim, faiss.ScalarQuantizer.QT_fp16, ip)
    if kind == "hnsw":
        idx = faiss.IndexHNSWFlat(dim, HNSW_M, ip) if dtype == "float32" else faiss.IndexHNSWSQ(
            dim, faiss.ScalarQuantizer.QT_fp16, HNSW_M, ip)
        idx.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        idx.hnsw.efSearch = HNSW_EF_SEARCH
        return idx
    if kind == "ivfpq":
        nlist = max(16, min(65536, int(4 * np.sqrt(max(n, 1)))))
        m = next(m for m in (48, 32, 24, 16, 12, 8, 4, 2, 1) if dim % m == 0)
        quant = faiss.IndexFlatIP(dim)
        idx = faiss.IndexIVFPQ(quant, dim, nlist, m, 8, ip)
        idx.nprobe = max(8, nlist // 16)  # faiss's wrapper keeps ``quant`` referenced by ``idx``
        return idx
    raise InputError(f"unknown ANN kind {kind!r}; use auto, flat, hnsw or ivfpq")


def write_ann(out_dir, vecs, slots: int, kind: str, dim: int, dtype: str, threads: int,
              previous=None, new=None) -> None:
    """``out_dir/ann.faiss``: built afresh from every vector, or (``previous``: the last
    generation's file) that index with the ``new`` vectors added. The graph is built on ``threads``
    faiss threads, then faiss goes back to qkv's thread count for searches."""
    if not slots:
        return
    faiss = faiss_module()
    faiss.omp_set_num_threads(threads)
    try:
        if previous is None:
            ann = new_ann(kind, dim, dtype, slots)
            if kind == "ivfpq":
                rng = np.random.default_rng(0)
                sample = np.sort(rng.choice(slots, size=min(slots, max(256 * 39, ann.nlist * 39)), replace=False))
                ann.train(np.asarray(vecs[sample], dtype=np.float32))
            for a in range(0, slots, 65536):
                ann.add(np.ascontiguousarray(vecs[a:a + 65536], dtype=np.float32))
        else:
            ann = faiss.read_index(str(previous))
            if len(new):
                ann.add(np.ascontiguousarray(new, dtype=np.float32))
        faiss.write_index(ann, str(out_dir / "ann.faiss"))
    finally:
        faiss.omp_set_num_threads(default_threads())  # searches: one query at a time


class Vectors:
    """Dense search on one generation."""

    def __init__(self, gen: Generation, rows: Rows):
        self.gen = gen
        self.rows = rows
        self.dim = gen.manifest.dim
        # mapped now, so a later writer removing this generation cannot pull it away
        self.array = gen.load("vectors.npy", "the vectors")
        self._ann = None
        self._ef_search: int | None = None  # see ef_search
        self._ram = None  # see ram
        self._selector_all = None

    @property
    def ann(self):
        if self._ann is None and self.gen.slots:
            faiss = faiss_module()
            path = self.gen.dir / "ann.faiss"
            try:
                self._ann = faiss.read_index(str(path))
            except RuntimeError as e:  # faiss reports missing/corrupt files as RuntimeError
                raise IndexError_(f"cannot read {path} ({str(e).splitlines()[0][:120]}); "
                                  "if the index was updated since it was opened, open it again; "
                                  "otherwise rebuild it") from None
            if isinstance(self._ann, faiss.IndexHNSW):
                self._ann.hnsw.efSearch = self.ef_search
        return self._ann

    @property
    def ef_search(self) -> int:
        """HNSW's search breadth (candidates kept while walking the graph): more finds more of the
        true nearest neighbours for more time. The manifest's ``ef_search`` or HNSW_EF_SEARCH,
        unless set on this open store; no effect on exact or IVF indexes."""
        if self._ef_search is not None:
            return self._ef_search
        return int(self.gen.manifest.extra.get("ef_search", HNSW_EF_SEARCH))

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
            raise InputError(f"ef_search must be a whole number from 1 to 100000, got {value!r} "
                             f"(the default is {HNSW_EF_SEARCH}; raise it for better recall, lower it for speed)")
        self._ef_search = value
        if self._ann is not None and hasattr(self._ann, "hnsw"):
            self._ann.hnsw.efSearch = value

    def params(self, selector, share: float = 1.0):
        """faiss search parameters; ``share``: the fraction of products the selector allows."""
        import faiss

        ann = self.ann
        if isinstance(ann, faiss.IndexHNSW):
            p = faiss.SearchParametersHNSW()
            ef = ann.hnsw.efSearch  # widened for a filter (see FILTER_EF_SCALE), never narrowed
            wide = math.ceil(round(ef * FILTER_EF_SCALE / max(share, 1e-9), 6))
            p.efSearch = min(max(ef, FILTER_EF_MAX), max(ef, wide))
        elif isinstance(ann, faiss.IndexIVF):
            p = faiss.SearchParametersIVF()
            p.nprobe = ann.nprobe
        else:
            p = faiss.SearchParameters()
        if selector is not None:
            p.sel = selector
        return p

    def bitmap(self, slots: np.ndarray) -> tuple:
        """A faiss selector allowing ``slots``, with the bit array it points into (keep both)."""
        import faiss

        mask = np.zeros(self.gen.slots, dtype=bool)
        mask[slots] = True
        bits = np.packbits(mask, bitorder="little")
        return faiss.IDSelectorBitmap(self.gen.slots, faiss.swig_ptr(bits)), bits

    def live_selector(self) -> tuple | None:
        """(selector, bits) allowing every live slot (None when no slot is a tombstone)."""
        if self.gen.slots == self.gen.count:
            return None
        pair = self._selector_all
        if pair is None:
            pair = self._selector_all = self.bitmap(self.rows.live_slots())
        return pair

    def search(self, vector, k, filter=None) -> tuple[np.ndarray, np.ndarray]:
        """(slots, cosines) of the ``k`` nearest live products the filter allows."""
        if k <= 0:
            raise InputError(f"k must be at least 1, got {k}")
        if not self.gen.count:
            return NO_SLOTS
        q = np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        if q.shape[1] != self.dim:
            raise InputError(f"query vector has {q.shape[1]} dimensions, the index {self.dim}")
        share = 1.0
        if filter is not None:
            entry = self.rows.allowed(filter)
            slots = entry[0]
            if not len(slots):
                return NO_SLOTS
            if len(slots) <= EXACT_SUBSET:  # exact over the few allowed rows: no recall loss
                scores = np.asarray(self.array[slots], dtype=np.float32) @ q[0]
                order = np.argsort(-scores, kind="stable")[:k]
                return slots[order], scores[order]
            pair = entry[1]  # (selector, the bits it reads): held here for the whole search
            if pair is None:
                pair = entry[1] = self.bitmap(slots)
            sel, share = pair[0], len(slots) / max(self.gen.count, 1)
        else:
            pair = self.live_selector()
            sel = None if pair is None else pair[0]
        import faiss

        lossy = isinstance(self.ann, faiss.IndexIVFPQ)
        want = min(k * IVFPQ_RESCORE if lossy else k, self.gen.count)
        D, I = self.ann.search(q, want, params=self.params(sel, share))
        keep = I[0] >= 0
        slots, scores = I[0][keep], D[0][keep]
        if lossy:  # PQ scores are approximate: rescore the candidates with the stored vectors
            scores = np.asarray(self.array[np.sort(slots)], dtype=np.float32) @ q[0]
            slots = np.sort(slots)
            order = np.argsort(-scores, kind="stable")[:k]
            slots, scores = slots[order], scores[order]
        return slots.astype(np.int64), scores

    def ram(self) -> np.ndarray | None:
        """The float32 vectors a loaded flat or HNSW-flat faiss index already holds in memory, as a
        numpy view: hybrid fusion reads ~200 scattered rows per query, which from the memory-mapped
        file cost page faults (~6 ms a query at 1M products)."""
        if self._ram is None and self._ann is not None:
            import faiss

            flat = self._ann
            if isinstance(flat, faiss.IndexHNSW):
                flat = faiss.downcast_index(flat.storage)
            if isinstance(flat, faiss.IndexFlat) and flat.ntotal == self.gen.slots and flat.code_size == 4 * flat.d:
                self._ram = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d)
                self._ram_owner = flat  # the view points into this index's memory
            else:
                self._ram = False
        return self._ram if self._ram is not False else None

    def of_slots(self, slots) -> np.ndarray:
        """float32 vectors of ``slots`` (from faiss's memory when loaded: no page faults)."""
        src = self.ram()
        return np.asarray((self.array if src is None else src)[np.asarray(slots, dtype=np.int64)], dtype=np.float32)
