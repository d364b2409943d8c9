"""The embedded store: one directory, no server. faiss for vectors, SQLite (+FTS5) for rows.

Layout::

    DIR/manifest.json        which generation is current, the model, dims, counts (replaced atomically)
    DIR/gen-000007/          one immutable generation
        catalog.sqlite       products(slot, id, title, ktext, title_hash, f0, f1 …), fields, fts (FTS5)
        vectors.npy          float32 or float16 [slots, dim]; slot = faiss id = FTS rowid
        ann.faiss            the ANN index over the slots (absent while empty)
    DIR/.lock                held (flock) by the one writer

Every write builds a new generation in a temporary directory next to the current one (copying the
SQLite file, appending vectors, adding to the faiss index), renames it into place, then swaps
``manifest.json`` with ``os.replace``. A kill at any moment leaves the previous manifest pointing at
the previous, complete generation; leftovers are removed by the next writer. Readers open the
generation the manifest names with SQLite's ``immutable`` flag, so they take no locks and never wait.

Replaced or deleted products leave their slot behind as a tombstone, excluded at search time by a
faiss ID selector; when tombstones pass a quarter of the slots, the next write compacts them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from qkv.errors import InputError
from qkv.search import text as textmod
from qkv.search.store import (FieldInfo, Hit, IndexError_, Manifest, Row, StoreWriter, VectorStore, WriterBusy,
                              read_manifest)

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
FILTER_CACHE = 32  # filters whose allowed rows an open store keeps (a generation never changes)
IVFPQ_MIN = 10_000  # IVF-PQ needs enough vectors to train its quantisers
IVFPQ_RESCORE = 8  # IVF-PQ fetches k × this candidates and rescores them with the stored vectors
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2 tokenchars './'"
KEYWORD_BUDGET = 20_000  # postings one keyword query reads (0.1 µs each; see _keyword_plan)
SCORE_BUDGET = 2_000  # rows one FTS5 bm25() query may score (~3 µs each; see _scored)
MAXSCORE_POOL = 5_000  # rows the postings plan completes with the common terms' shares, at most
POSTINGS_BUDGET = 100_000  # postings the in-memory plan scores exactly per query (~10 ns each; _postings_plan)


_NO_SLOTS = (np.zeros(0, np.int64), np.zeros(0, np.float32))


def _rare_terms(terms: list[str], dfs: dict[str, int], budget: int | None = None) -> list[str]:
    """The rarest terms (``terms`` sorted rarest first) whose postings fit ``budget`` (default
    ``KEYWORD_BUDGET``) together; always at least one."""
    budget = KEYWORD_BUDGET if budget is None else budget
    rare, used = [], 0
    for t in terms:
        if rare and used + dfs[t] > budget:
            break
        rare.append(t)
        used += dfs[t]
    return rare


def title_hash(title: str) -> str:
    return hashlib.blake2b(title.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


_faiss_threads_set = False


def _faiss():
    """faiss, with its OpenMP threads set once to qkv's thread count (QKV_THREADS, default 1): on
    these shared 2-vCPU machines a one-query search is ~3x faster on one thread than on two
    (measured: 54k × 384 exact search 48 ms vs 141 ms under load)."""
    global _faiss_threads_set
    import faiss

    if not _faiss_threads_set:
        from qkv.model.threads import default_threads

        faiss.omp_set_num_threads(default_threads())
        _faiss_threads_set = True
    return faiss


def build_threads() -> int:
    """faiss threads for building the ANN graph when a write is published: QKV_BUILD_THREADS, or
    every core this process may use. The encoder has finished by then, so the other cores are
    idle; on this 2-vCPU machine two threads built a 200k-vector HNSW graph in 23 s instead of
    48 s, with 6% less CPU time (docs/search.md)."""
    raw = os.environ.get("QKV_BUILD_THREADS", "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            raise InputError(f"QKV_BUILD_THREADS={raw!r} is not a whole number") from None
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _new_ann(kind: str, dim: int, dtype: str, n: int):
    faiss = _faiss()

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


class EmbeddedStore(VectorStore):
    """faiss + SQLite in one directory (see the module docstring)."""

    def __init__(self, path: Path, manifest: Manifest):
        self.path = path
        self._manifest = manifest
        gen = manifest.extra.get("generation")
        if not gen:
            raise IndexError_(f"{path}/manifest.json names no generation; the index is corrupt, rebuild it")
        self.gen_dir = path / gen
        db = self.gen_dir / "catalog.sqlite"
        if not db.is_file():
            raise FileNotFoundError(db)
        try:
            self.db = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            self._fields = [FieldInfo(n, k) for n, k in self.db.execute("SELECT name, kind FROM fields ORDER BY col")]
            self._cols = {n: c for n, c in self.db.execute("SELECT name, col FROM fields")}
            self._slots = int(manifest.extra.get("slots", 0))
            self._count = self.db.execute("SELECT count(*) FROM products").fetchone()[0]
        except sqlite3.DatabaseError as e:
            raise IndexError_(f"{db} is corrupt ({e}); rebuild the index") from None
        try:  # mapped now, so a later writer removing this generation cannot pull it away
            self._vectors = np.load(self.gen_dir / "vectors.npy", mmap_mode="r")
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as e:
            raise IndexError_(f"{self.gen_dir / 'vectors.npy'} is corrupt ({e}); rebuild the index") from None
        self._ann = None
        self._ef_search: int | None = None  # see ef_search
        self._filters: dict[tuple, list] = {}  # (SQL, params) -> [allowed slots, selector, mask]
        self._filters_lock = threading.Lock()  # searches may share an open store across threads
        self._ram = None  # see _ram_vectors
        self._selector_all = None
        self._vocab = None
        self._stemmer = None  # in-memory FTS5 table that stems query terms like the index does
        self._stems: dict[str, str | None] = {}
        self._dfs: dict[str, int] = {}  # a generation is immutable: its counts can be kept
        self._seen: dict[str, int] = {}  # id → slot of recently returned products
        self._shares: tuple[tuple, dict] = ((), {})  # the last query's BM25 shares per slot
        self._has_df = None
        self._fts_stats = None
        self._doclen = None
        self._inst = False  # temp.fts_inst (fts5vocab 'instance': term → rows, one per occurrence) made
        self._post = None  # (postings, tf) memory-mapped, or False for generations written without them
        self._post_at: dict[str, tuple[int, int]] = {}  # stem → (start, df) in the postings arrays
        self._acc = threading.local()  # a per-thread score accumulator over all slots (_postings_plan)

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
        manifest = replace(manifest, backend="embedded", count=0, extra=extra)
        with _Lock(path):
            tmp = path / f".tmp-gen-000000-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            con = sqlite3.connect(tmp / "catalog.sqlite")
            _init_schema(con)
            con.commit()
            con.close()
            np.save(tmp / "vectors.npy", np.zeros((0, manifest.dim), dtype=manifest.dtype))
            gen = "gen-000000"
            _publish(path, tmp, gen, replace(manifest, extra={**extra, "generation": gen, "slots": 0, "ann_kind": None}))
        return cls.open(path)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.db.close()

    # ------------------------------------------------------------------ description
    @property
    def manifest(self) -> Manifest:
        return self._manifest

    def count(self) -> int:
        return self._count

    def fields(self) -> list[FieldInfo]:
        return list(self._fields)

    def _column(self, name: str) -> str:
        if name == "id":
            return "p.id"
        if name == "title":
            return "p.title"
        return f"p.{self._cols[name]}"

    def _kinds(self) -> dict[str, str]:
        return {"id": "text", "title": "text", **{f.name: f.kind for f in self._fields}}

    def _where(self, flt) -> tuple[str, list]:
        if flt is None:
            return "", []
        kinds = self._kinds()
        flt.check(kinds)
        sql, params = flt.to_sql(self._column, kinds)
        return " AND " + sql, params

    # ------------------------------------------------------------------ vectors / ANN
    @property
    def vectors(self) -> np.ndarray:
        return self._vectors

    @property
    def ann(self):
        if self._ann is None and self._slots:
            faiss = _faiss()

            try:
                self._ann = faiss.read_index(str(self.gen_dir / "ann.faiss"))
            except RuntimeError as e:  # faiss reports missing/corrupt files as RuntimeError
                raise IndexError_(f"cannot read {self.gen_dir / 'ann.faiss'} ({str(e).splitlines()[0][:120]}); "
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
        return int(self._manifest.extra.get("ef_search", HNSW_EF_SEARCH))

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
            raise InputError(f"ef_search must be a whole number from 1 to 100000, got {value!r} "
                             f"(the default is {HNSW_EF_SEARCH}; raise it for better recall, lower it for speed)")
        self._ef_search = value
        if self._ann is not None and hasattr(self._ann, "hnsw"):
            self._ann.hnsw.efSearch = value

    def _params(self, selector, share: float = 1.0):
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

    def _bitmap(self, slots: np.ndarray) -> tuple:
        """A faiss selector allowing ``slots``, with the bit array it points into (keep both)."""
        import faiss

        mask = np.zeros(self._slots, dtype=bool)
        mask[slots] = True
        bits = np.packbits(mask, bitorder="little")
        return faiss.IDSelectorBitmap(self._slots, faiss.swig_ptr(bits)), bits

    def _live_selector(self) -> tuple | None:
        """(selector, bits) allowing every live slot (None when no slot is a tombstone)."""
        if self._slots == self._count:
            return None
        pair = self._selector_all
        if pair is None:
            live = np.fromiter((s for (s,) in self.db.execute("SELECT slot FROM products")), dtype=np.int64)
            pair = self._selector_all = self._bitmap(live)
        return pair

    def _allowed(self, flt) -> list:
        """[sorted slots the filter allows, (selector, bits) or None, mask or None] — the last two
        made on first use — from SQL once per open store and filter: a generation never changes,
        and a shop's filters (its facets) repeat. At 1M products the SQL alone reads every row."""
        where, params = self._where(flt)
        key = (where, tuple(params))
        with self._filters_lock:
            entry = self._filters.get(key)
            if entry is None:
                rows = self.db.execute(f"SELECT p.slot FROM products p WHERE 1{where}", params)
                slots = np.sort(np.fromiter((s for (s,) in rows), dtype=np.int64))
                if len(self._filters) >= FILTER_CACHE:
                    self._filters.pop(next(iter(self._filters)))  # the oldest
                entry = self._filters[key] = [slots, None, None]
            return entry

    def _allowed_mask(self, flt) -> np.ndarray:
        """The filter's allowed slots as a boolean mask over all slots (kept with them)."""
        entry = self._allowed(flt)
        if entry[2] is None:
            mask = np.zeros(self._slots, dtype=bool)
            mask[entry[0]] = True
            entry[2] = mask
        return entry[2]

    def dense_search(self, vector, k, filter=None) -> list[Hit]:
        return self._hits(*self.dense_slots(vector, k, filter))

    def dense_slots(self, vector, k, filter=None) -> tuple[np.ndarray, np.ndarray]:
        """``dense_search`` as (slots, cosines) arrays, without looking up ids: hybrid search fuses
        in slot space and names only the products it returns (200 ids cost 1.5-5 ms at 1M)."""
        if k <= 0:
            raise InputError(f"k must be at least 1, got {k}")
        if not self._count:
            return _NO_SLOTS
        q = np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        if q.shape[1] != self._manifest.dim:
            raise InputError(f"query vector has {q.shape[1]} dimensions, the index {self._manifest.dim}")
        share = 1.0
        if filter is not None:
            entry = self._allowed(filter)
            slots = entry[0]
            if not len(slots):
                return _NO_SLOTS
            if len(slots) <= EXACT_SUBSET:  # exact over the few allowed rows: no recall loss
                scores = np.asarray(self.vectors[slots], dtype=np.float32) @ q[0]
                order = np.argsort(-scores, kind="stable")[:k]
                return slots[order], scores[order]
            pair = entry[1]  # (selector, the bits it reads): held here for the whole search
            if pair is None:
                pair = entry[1] = self._bitmap(slots)
            sel, share = pair[0], len(slots) / max(self._count, 1)
        else:
            pair = self._live_selector()
            sel = None if pair is None else pair[0]
        import faiss

        lossy = isinstance(self.ann, faiss.IndexIVFPQ)
        want = min(k * IVFPQ_RESCORE if lossy else k, self._count)
        D, I = self.ann.search(q, want, params=self._params(sel, share))
        keep = I[0] >= 0
        slots, scores = I[0][keep], D[0][keep]
        if lossy:  # PQ scores are approximate: rescore the candidates with the stored vectors
            scores = np.asarray(self.vectors[np.sort(slots)], dtype=np.float32) @ q[0]
            slots = np.sort(slots)
            order = np.argsort(-scores, kind="stable")[:k]
            slots, scores = slots[order], scores[order]
        return slots.astype(np.int64), scores

    def _hits(self, slots, scores) -> list[Hit]:
        slots = [int(s) for s in slots]
        if not slots:
            return []
        ids = self._ids_of(slots)
        return [Hit(ids[s], float(v)) for s, v in zip(slots, scores) if s in ids]

    def get_vectors(self, ids: Sequence[str]) -> np.ndarray:
        slots = self._slots_of(ids)
        missing = [i for i, s in zip(ids, slots) if s is None]
        if missing:
            raise InputError(f"unknown product id(s): {', '.join(map(str, missing[:5]))}")
        if not len(slots):
            return np.zeros((0, self._manifest.dim), np.float32)
        return self.slot_vectors(slots)

    def _ram_vectors(self) -> np.ndarray | None:
        """The float32 vectors a loaded flat or HNSW-flat faiss index already holds in memory, as a
        numpy view: hybrid fusion reads ~200 scattered rows per query, which from the memory-mapped
        file cost page faults (~6 ms a query at 1M products)."""
        if self._ram is None and self._ann is not None:
            import faiss

            flat = self._ann
            if isinstance(flat, faiss.IndexHNSW):
                flat = faiss.downcast_index(flat.storage)
            if isinstance(flat, faiss.IndexFlat) and flat.ntotal == self._slots and flat.code_size == 4 * flat.d:
                self._ram = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(flat.ntotal, flat.d)
                self._ram_owner = flat  # the view points into this index's memory
            else:
                self._ram = False
        return self._ram if self._ram is not False else None

    def _slots_of(self, ids: Sequence[str]) -> list[int | None]:
        ids = list(ids)
        seen = self._seen
        if all(i in seen for i in ids):  # the ids the last searches returned (fusion, explain)
            return [seen[i] for i in ids]
        found: dict[str, int] = {}
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            found.update(self.db.execute(
                f"SELECT id, slot FROM products WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return [found.get(i) for i in ids]

    # ------------------------------------------------------------------ keyword side
    def _stem(self, term: str) -> str | None:
        """``term`` as FTS5 indexes it (porter-stemmed, folded), from a one-row in-memory FTS5 table
        with the same tokenizer; None if it yields no single token."""
        if self._stemmer is None:
            con = sqlite3.connect(":memory:", check_same_thread=False)
            con.execute(f"CREATE VIRTUAL TABLE s USING fts5(x, tokenize=\"{FTS_TOKENIZE}\")")
            con.execute("CREATE VIRTUAL TABLE sv USING fts5vocab(s, 'instance')")
            self._stemmer = con
        con = self._stemmer
        con.execute("INSERT INTO s (rowid, x) VALUES (1, ?)", (term,))
        toks = [t for (t,) in con.execute("SELECT term FROM sv")]
        con.execute("DELETE FROM s")
        return toks[0] if len(toks) == 1 else None

    def _df(self, term: str) -> int:
        """How many products contain ``term`` (0 if none): from the ``term_df`` table written with
        each generation (a B-tree lookup), or counted from FTS5 for indexes made before it existed."""
        if self._has_df is None:
            self._has_df = self.db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'term_df'").fetchone() is not None
        if term in self._dfs:
            return self._dfs[term]
        stem = self._word_stem(term)
        if stem is None:  # several tokens: count the phrase's matches
            return self.db.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (_quote(term),)).fetchone()[0]
        table = "term_df" if self._has_df else "fts_vocab"
        row = self.db.execute(f"SELECT doc FROM {table} WHERE term = ?", (stem,)).fetchone()
        if len(self._dfs) > 100_000:
            self._dfs.clear()
        self._dfs[term] = int(row[0]) if row else 0
        return self._dfs[term]

    def _correct(self, term: str) -> str | None:
        """The closest indexed term to an unknown one (typos such as "backsplach")."""
        import difflib

        if len(term) < 4 or not term.isalpha():
            return None
        if self._vocab is None:
            self._vocab = {}
            for (t,) in self.db.execute("SELECT term FROM fts_vocab"):
                if t.isalpha() and len(t) >= 3:
                    self._vocab.setdefault(t[0], []).append(t)
        cands = [t for t in self._vocab.get(term[0], []) if abs(len(t) - len(term)) <= 2]
        best = difflib.get_close_matches(term, cands, n=1, cutoff=0.8)
        return best[0] if best else None

    def query_terms(self, query: str) -> list[str]:
        """The keyword terms searched for ``query``: normalised, unknown words replaced by the
        closest indexed word when one is close enough."""
        return list(self._query_dfs(query))

    def _query_dfs(self, query: str) -> dict[str, int]:
        """``query_terms`` with each term's document frequency."""
        out: dict[str, int] = {}
        for t in textmod.terms(query):
            df = self._df(t)
            if not df:
                t = self._correct(t)
                if t is None:
                    continue
                df = self._df(t)
            if t not in out and df:
                out[t] = df
        return out

    def keyword_search(self, query, k, filter=None) -> list[Hit]:
        """Top ``k`` by BM25 of the OR of the query's terms, planned so that one query scores at most
        a few times ``KEYWORD_BUDGET`` rows however large the catalog (see ``_keyword_plan``)."""
        return self._hits(*self.keyword_slots(query, k, filter))

    def keyword_slots(self, query, k, filter=None) -> tuple[np.ndarray, np.ndarray]:
        """``keyword_search`` as (slots, BM25) arrays, best first (ties by slot), without ids."""
        if k <= 0:
            raise InputError(f"k must be at least 1, got {k}")
        dfs = self._query_dfs(query)
        if not dfs or not self._count:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        where, params = self._where(filter)
        terms = sorted(dfs, key=lambda t: (dfs[t], t))  # rarest first
        if where and self._postings() is not None and all(self._word_stem(t) is not None for t in terms):
            scores = self._postings_plan(terms, dfs, k, self._allowed_mask(filter))  # as unfiltered, masked
        else:
            scores = self._keyword_plan(dfs, k, where, params)
        top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return np.array([s for s, _ in top], dtype=np.int64), np.array([v for _, v in top], dtype=np.float64)

    def slot_vectors(self, slots: np.ndarray) -> np.ndarray:
        """float32 vectors of ``slots`` (from faiss's memory when loaded: no page faults)."""
        src = self._ram_vectors()
        return np.asarray((self.vectors if src is None else src)[np.asarray(slots, dtype=np.int64)], dtype=np.float32)

    def matched_counts(self, query: str, slots: np.ndarray) -> np.ndarray:
        """How many of ``query``'s keyword terms each slot's title matches (``keyword_terms`` in
        slot space; the shares come from the keyword search's memo when it just scored them)."""
        terms = self.query_terms(query)
        shares = self._term_scores([int(s) for s in slots], terms)
        return np.array([len(shares.get(s, ())) for s in slots.tolist()], dtype=np.int64)  # keys ⊆ terms

    def ids_of(self, slots: Sequence[int]) -> dict[int, str]:
        """slot → product id for live slots."""
        return self._ids_of(slots)

    def _scored(self, terms: list[str], op: str, limit: int, where: str, params: list) -> dict[int, float]:
        """slot → BM25 (FTS5's, over ``terms``) of the best ``limit`` rows matching ``terms`` joined
        by ``op``, scoring at most ``SCORE_BUDGET`` rows: FTS5 computes bm25() for every matching
        row before sorting (~3 µs a row), so when more rows match, only the first
        ``SCORE_BUDGET`` in slot order are ranked (a bounded sample, like a search engine's
        ``terminate_after``; the dense side ranks within such large sets in hybrid search)."""
        expr = f" {op} ".join(map(_quote, terms))
        join = " JOIN products p ON p.slot = fts.rowid" if where else ""
        base = f"FROM fts{join} WHERE fts MATCH ?{where}"
        cut = self.db.execute(f"SELECT fts.rowid {base} LIMIT 1 OFFSET ?", [expr, *params, SCORE_BUDGET]).fetchone()
        bound = " AND fts.rowid < ?" if cut else ""
        args = [expr, *params] + ([cut[0]] if cut else []) + [limit]
        return dict(self.db.execute(f"SELECT fts.rowid, -bm25(fts) {base}{bound} ORDER BY bm25(fts) LIMIT ?", args))

    def _keyword_plan(self, dfs: dict[str, int], k: int, where: str, params: list) -> dict[int, float]:
        """slot → OR-BM25 for up to ``k`` candidates, at bounded cost however large the catalog.

        FTS5 has no top-k pruning: ``MATCH 'a OR b' ORDER BY bm25 LIMIT k`` computes bm25() (~3 µs,
        it looks up each row's length) for every product containing any query word: 110 ms for a
        5-word query over 1M generated titles. Instead, in the spirit of MaxScore (Turtle & Flood
        1995: the rare terms decide the top, common ones add little):
          1. when the terms' postings (Σ df) exceed ``KEYWORD_BUDGET``: the AND of all terms first
             (FTS5 walks the rarest term's postings and seeks the others; its bm25() equals the OR's
             score on every row it returns); enough rows → done;
          2. the OR of the rarest terms whose postings fit ``KEYWORD_BUDGET`` (all of them in small
             catalogs), scored in numpy from the postings (fts5vocab's per-occurrence rows through
             ``group_concat``, ~0.3 µs a posting) and the stored row lengths: exact BM25 over these terms;
          3. when step 2 left terms out, its best ``1.5·k + 2·len(step 1)`` rows get the left-out terms'
             BM25 shares (``_term_scores``); otherwise step 2's top ``k`` are exact as they are.
        With a filter, steps 1–2 run in FTS5 over the filtered rows instead (``_keyword_plan_sql``).
        Exact when the rare terms are all the terms; otherwise products matching only the common
        words, or whose common words would have lifted them past step 2's cut, can be missed
        (docs/search.md measures the effect)."""
        if where:
            return self._keyword_plan_sql(dfs, k, where, params)
        terms = sorted(dfs, key=lambda t: (dfs[t], t))  # rarest first
        if self._postings() is not None and all(self._word_stem(t) is not None for t in terms):
            return self._postings_plan(terms, dfs, k)
        found: dict[int, float] = {}
        if len(terms) > 1 and sum(dfs.values()) > KEYWORD_BUDGET:
            found = self._scored(terms, "AND", k, where, params)
            if len(found) >= k:
                return found
        rare = _rare_terms(terms, dfs)
        n, avgdl = self._stats()
        dl = self._doc_lengths()
        slots, parts, used_terms = [], [], []
        if not self._inst:
            self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_inst USING fts5vocab(main, fts, 'instance')")
            self._inst = True
        for t in rare:
            stem = self._word_stem(t)
            if stem is not None:  # one row per occurrence, so a row's repeats are its tf
                sql = "SELECT group_concat(doc, ' ') FROM (SELECT doc FROM temp.fts_inst WHERE term = ? LIMIT ?)"
                args = (stem, 2 * KEYWORD_BUDGET)
            else:
                sql = "SELECT group_concat(rowid, ' ') FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?)"
                args = (_quote(t), KEYWORD_BUDGET)
            s = self.db.execute(sql, args).fetchone()[0]
            if not s:
                continue
            occ = np.fromstring(s, dtype=np.int64, sep=" ")
            if len(occ) == args[1]:  # cut off: the last row's occurrences may be incomplete
                occ = occ[occ != occ[-1]]
            if not len(occ):
                continue
            rows, tf = np.unique(occ, return_counts=True)
            idf = max(math.log((n - dfs[t] + 0.5) / (dfs[t] + 0.5)), 1e-6)
            slots.append(rows)
            used_terms.append(t)
            parts.append(idf * tf * (self._K1 + 1) / (tf + self._K1 * (1 - self._B + self._B * dl[rows] / avgdl)))
        if slots:
            allr = np.concatenate(slots)
            uniq, inv = np.unique(allr, return_inverse=True)
            score = np.bincount(inv, weights=np.concatenate(parts), minlength=len(uniq))
            if found:
                keep = ~np.isin(uniq, np.fromiter(found, dtype=np.int64))
                uniq, score = uniq[keep], score[keep]
            missing = [t for t in terms if t not in rare]
            m = min(len(uniq), k + (k // 2 + 2 * len(found) if missing else 0))  # margin: common terms may lift rows
            top = np.sort(uniq[np.argpartition(-score, m - 1)[:m]] if m < len(uniq) else uniq)
            memo = self._memo(terms)
            shares: dict[int, dict[str, float]] = {int(s): {} for s in top}
            for t, rows, contrib in zip(used_terms, slots, parts):  # each term's share, from its postings
                pos = np.minimum(np.searchsorted(rows, top), len(rows) - 1)
                hit = rows[pos] == top
                for s, v in zip(top[hit].tolist(), contrib[pos[hit]].tolist()):
                    shares[s][t] = v
            if missing:
                for s, extra in self._term_scores(top.tolist(), missing, use_memo=False).items():
                    shares[s].update(extra)
            for s, sh in shares.items():
                memo[s] = sh
                found[s] = sum(sh.values())
        return found

    def _postings(self):
        """(postings, tf) of this generation memory-mapped (see ``_write_postings``), or None."""
        if self._post is None:
            try:
                end = self.db.execute("SELECT coalesce(max(start + df), 0) FROM term_postings").fetchone()[0]
            except sqlite3.OperationalError:  # a generation written before the arrays existed
                self._post = False
                return None
            try:
                post = (np.load(self.gen_dir / "postings.npy", mmap_mode="r"),
                        np.load(self.gen_dir / "postings_tf.npy", mmap_mode="r"))
            except (OSError, ValueError) as e:
                raise IndexError_(f"{self.gen_dir}: the keyword postings arrays are missing or corrupt ({e}); "
                                  "rebuild the index") from None
            if not len(post[0]) == len(post[1]) == end or post[0].ndim != 1:
                raise IndexError_(f"{self.gen_dir}: the keyword postings arrays do not match the catalog "
                                  f"({len(post[0])} / {len(post[1])} postings, {end} listed); rebuild the index")
            self._post = post
        return self._post or None

    def _term_postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows ascending, tf) of a single-token query term, as slices of the mapped arrays."""
        stem = self._word_stem(term)
        at = self._post_at.get(stem)
        if at is None:
            row = self.db.execute("SELECT start, df FROM term_postings WHERE term = ?", (stem,)).fetchone()
            at = self._post_at[stem] = (int(row[0]), int(row[1])) if row else (0, 0)
            if len(self._post_at) > 100_000:
                self._post_at.clear()
        docs, tfs = self._postings()
        return docs[at[0]:at[0] + at[1]], tfs[at[0]:at[0] + at[1]]

    def _accumulator(self) -> np.ndarray:
        acc = getattr(self._acc, "a", None)
        if acc is None or len(acc) != self._slots:
            acc = self._acc.a = np.zeros(self._slots)
        return acc

    def _bm25_part(self, term: str, rows: np.ndarray, tf: np.ndarray) -> np.ndarray:
        n, avgdl = self._stats()
        df = self._df(term)
        idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
        dl = self._doc_lengths()
        tf = tf.astype(np.float64)
        return idf * tf * (self._K1 + 1) / (tf + self._K1 * (1 - self._B + self._B * dl[rows] / avgdl))

    def _postings_plan(self, terms: list[str], dfs: dict[str, int], k: int,
                       allowed: np.ndarray | None = None) -> dict[int, float]:
        """``_keyword_plan`` from the generation's postings arrays, MaxScore-style (Turtle & Flood
        1995): the rarest terms whose postings fit ``POSTINGS_BUDGET`` (all terms in most queries)
        are scored exactly for every row containing them (numpy, ~10 ns a posting); the best 4·k of
        those rows get the common terms' shares by binary search in those terms' postings; if a row
        left out could still reach the top k (its rare-term score plus the common terms' largest
        possible share, idf·(k1+1) each, is not below the k-th full score), one wider pool takes
        every such row (at most ``MAXSCORE_POOL``). Exact for every row containing a rare term
        unless that cap binds; rows matching only common terms can be missed when the k-th score is
        below the common terms' largest possible sum. Shares of the returned rows go to the memo
        (fusion, explain). ``allowed`` (a boolean mask over slots, from a filter) drops the other
        rows after the rare terms are scored; the bound below then only has fewer rows to beat."""
        rare = _rare_terms(terms, dfs, POSTINGS_BUDGET)
        common = terms[len(rare):]
        n, _ = self._stats()
        acc = self._accumulator()
        post = {}
        try:
            for t in rare:  # a term's rows are distinct, so one fancy-indexed add per term is exact
                rows, tf = self._term_postings(t)
                rows = np.asarray(rows, dtype=np.int64)
                part = self._bm25_part(t, rows, np.asarray(tf))
                post[t] = (rows, part)
                acc[rows] += part
            touched = np.concatenate([r for r, _ in post.values()]) if post else np.zeros(0, np.int64)
            if allowed is not None:
                touched = touched[allowed[touched]]
            score = acc[touched]
        finally:
            for rows, _ in post.values():  # leave the accumulator zeroed for the next query
                acc[rows] = 0.0
        if not len(touched):
            return {}
        # the most any row can gain from the common terms: idf·(k1+1) each (tf → ∞)
        bound = sum(max(math.log((n - dfs[t] + 0.5) / (dfs[t] + 0.5)), 1e-6) * (self._K1 + 1) for t in common)
        def complete(top):  # the distinct rows of ``touched[top]``: rare-term score, full score
            cand, first = np.unique(touched[top], return_index=True)
            base = score[top][first]
            full = base.copy()
            for t in common:
                rows, tf = self._term_postings(t)
                if not len(rows):
                    continue
                pos = np.minimum(np.searchsorted(rows, cand), len(rows) - 1)
                hit = np.asarray(rows[pos] == cand)
                if hit.any():
                    part = self._bm25_part(t, cand[hit], np.asarray(tf[pos[hit]]))
                    full[hit] += part
                    post[t] = (cand[hit], part)
            return cand, base, full

        m = min(len(touched), (4 * k if common else k) * len(rare))  # a row appears once per rare term it has
        cand, base, full = complete(np.argpartition(-score, m - 1)[:m] if m < len(touched) else slice(None))
        if common and m < len(touched):
            kth = np.partition(full, len(full) - k)[len(full) - k] if len(full) >= k else -np.inf
            if base.min() + bound >= kth:  # rows left out could still reach the top k: one wider pool,
                wide = np.flatnonzero(score + bound >= kth)  # every row that can, at most MAXSCORE_POOL
                cap = MAXSCORE_POOL * len(rare)
                if len(wide) > cap:
                    wide = wide[np.argpartition(-score[wide], cap - 1)[:cap]]
                cand, base, full = complete(wide)
        keep = np.argsort(-full, kind="stable")[:max(k, 1)] if len(cand) > k else np.arange(len(cand))
        memo = self._memo(terms)
        out: dict[int, float] = {}
        shares: dict[int, dict[str, float]] = {int(s): {} for s in cand[keep]}
        for t in terms:  # each returned row's per-term shares, from the postings scored above
            if t not in post:
                continue
            rows, part = post[t]
            sel = cand[keep]
            pos = np.minimum(np.searchsorted(rows, sel), len(rows) - 1)
            hit = rows[pos] == sel
            for s, v in zip(sel[hit].tolist(), part[pos[hit]].tolist()):
                shares[s][t] = v
        for i in keep.tolist():
            s = int(cand[i])
            memo[s] = shares[s]
            out[s] = float(full[i])
        return out

    def _keyword_plan_sql(self, dfs: dict[str, int], k: int, where: str, params: list) -> dict[int, float]:
        """``_keyword_plan`` for a filtered search: the same steps with FTS5 scoring the filtered rows."""
        terms = sorted(dfs, key=lambda t: (dfs[t], t))
        if len(terms) == 1 or sum(dfs.values()) <= KEYWORD_BUDGET:
            return self._scored(terms, "OR", k, where, params)
        found = self._scored(terms, "AND", k, where, params)
        if len(found) >= k:
            return found
        rare = _rare_terms(terms, dfs)
        part = {s: v for s, v in self._scored(rare, "OR", k + len(found), where, params).items() if s not in found}
        missing = [t for t in terms if t not in rare]
        if part and missing:
            for s, shares in self._term_scores(list(part), missing, use_memo=False).items():
                part[s] += sum(shares.values())
        found.update(part)
        return found

    def _doc_lengths(self) -> np.ndarray:
        """Tokens per slot (0 for tombstones): ``doclen.npy`` of the generation, or counted once
        from the stored normalised titles for generations written before it existed."""
        if self._doclen is None:
            f = self.gen_dir / "doclen.npy"
            if f.is_file():
                self._doclen = np.load(f, mmap_mode="r")
            else:
                self._doclen = _doc_lengths(self.db, self._slots)
        return self._doclen

    def _ids_of(self, slots: Sequence[int]) -> dict[int, str]:
        slots = [int(s) for s in slots]
        if not slots:
            return {}
        out = {}
        for i in range(0, len(slots), 900):
            chunk = slots[i:i + 900]
            out.update(self.db.execute(f"SELECT slot, id FROM products WHERE slot IN ({','.join('?' * len(chunk))})", chunk))
        if len(self._seen) > 50_000:
            self._seen.clear()
        self._seen.update((pid, s) for s, pid in out.items())  # a generation never changes: keep them
        return out

    # BM25 exactly as FTS5's bm25() computes it (sqlite/ext/fts5/fts5_aux.c): k1 = 1.2, b = 0.75,
    # idf = ln((N − df + 0.5) / (df + 0.5)) floored at 1e-6, avgdl = all tokens / N.
    _K1, _B = 1.2, 0.75

    def _stats(self) -> tuple[int, float]:
        """(rows, average tokens per row) of the FTS5 table."""
        if self._fts_stats is None:
            row = None
            with contextlib.suppress(sqlite3.OperationalError):  # indexes made before keyword_stats
                row = self.db.execute("SELECT rows, tokens FROM keyword_stats").fetchone()
            if row is None:
                row = self.db.execute("SELECT (SELECT count(*) FROM fts), sum(cnt) FROM fts_vocab").fetchone()
            n, tokens = int(row[0]), float(row[1] or 0)
            self._fts_stats = (n, tokens / n if n else 1.0)
        return self._fts_stats

    def _word_stems(self, words) -> dict[str, str | None]:
        """The stem of each word, cached; unknown words are stemmed together in one pass."""
        stems = self._stems
        new = [w for w in set(words) if w not in stems]
        if new:
            self._stem("x")  # creates the stemming table
            con = self._stemmer
            con.executemany("INSERT INTO s (rowid, x) VALUES (?, ?)", list(enumerate(new, 1)))
            got: dict[int, list[str]] = {}
            for doc, term in con.execute("SELECT doc, term FROM sv"):
                got.setdefault(doc, []).append(term)
            con.execute("DELETE FROM s")
            for i, w in enumerate(new, 1):
                toks = got.get(i, [])
                stems[w] = toks[0] if len(toks) == 1 else None
        return stems

    def _word_stem(self, word: str) -> str | None:
        return self._word_stems([word])[word]

    def _memo(self, terms: Sequence[str]) -> dict[int, dict[str, float]]:
        """The BM25 shares already computed for this query's rows (search, then fusion, then
        explain ask for the same rows)."""
        key = tuple(sorted(terms))
        if self._shares[0] != key:
            self._shares = (key, {})
        return self._shares[1]

    def _term_scores(self, slots: Sequence[int], terms: Sequence[str],
                     use_memo: bool = True) -> dict[int, dict[str, float]]:
        """slot → {term: BM25 share} for the terms each row contains, computed here instead of by
        FTS5: a ``MATCH 't' AND rowid IN (…)`` query recomputes t's idf by walking all its postings
        once per listed row (0.4 ms a row for a term in 3% of 1M titles). A row's tokens are its
        stored normalised text split on spaces, stemmed like FTS5 stems (cached per word); the
        tests check the shares against FTS5's own bm25()."""
        import math

        n, avgdl = self._stats()
        want: dict[str, list[tuple[str, float]]] = {}  # stem → query terms with that stem ("cat", "cats")
        for t in terms:
            st = self._word_stem(t)
            if st is not None:
                df = self._df(t)
                idf = math.log((n - df + 0.5) / (df + 0.5)) if df else 0.0
                want.setdefault(st, []).append((t, idf if idf > 0 else 1e-6))
        memo = self._memo(terms) if use_memo else {}
        out = {s: memo[s] for s in map(int, slots) if s in memo}
        slots = [s for s in map(int, slots) if s not in memo]
        for i in range(0, len(slots), 900):
            chunk = slots[i:i + 900]
            rows = [(slot, ktext.split()) for slot, ktext in self.db.execute(
                f"SELECT slot, ktext FROM products WHERE slot IN ({','.join('?' * len(chunk))})", chunk)]
            stems = self._word_stems(w for _, words in rows for w in words)
            for slot, words in rows:
                tf: dict[str, int] = {}
                for w in words:
                    st = stems[w]
                    if st in want:
                        tf[st] = tf.get(st, 0) + 1
                norm = self._K1 * (1 - self._B + self._B * len(words) / avgdl)
                out[slot] = memo[slot] = {t: idf * f * (self._K1 + 1) / (f + norm)
                                          for st, f in tf.items() for t, idf in want[st]}
        return out

    def keyword_terms(self, query, ids) -> dict[str, list[tuple[str, float]]]:
        # BM25 is a sum over the query's terms with corpus-wide statistics, so each term's one-term
        # score on a row is exactly its share of the OR query's score on that row.
        terms = self.query_terms(query)
        slots = {s: pid for pid, s in zip(ids, self._slots_of(ids)) if s is not None}
        out: dict[str, list[tuple[str, float]]] = {pid: [] for pid in slots.values()}
        for s, shares in self._term_scores(list(slots), terms).items():
            out[slots[s]] = [(t, shares[t]) for t in terms if t in shares]
        return out

    # ------------------------------------------------------------------ rows
    def get_rows(self, ids: Sequence[str]) -> list[Row | None]:
        ids = list(ids)
        cols = [f.name for f in self._fields]
        sel = ", ".join(["id", "title"] + [self._cols[c] for c in cols])
        found = {}
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            for r in self.db.execute(f"SELECT {sel} FROM products WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                row = {"id": r[0], "title": r[1]}
                row.update({c: v for c, v in zip(cols, r[2:])})
                found[r[0]] = row
        return [found.get(i) for i in ids]

    def all_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT id FROM products ORDER BY slot")]

    # ------------------------------------------------------------------ writing
    def writer(self, reset: bool = False):
        return _Writer(self, reset)


def _init_schema(con: sqlite3.Connection) -> None:
    con.executescript(f"""
        CREATE TABLE products (slot INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
                               ktext TEXT NOT NULL, title_hash TEXT NOT NULL);
        CREATE TABLE fields (name TEXT PRIMARY KEY, col TEXT NOT NULL UNIQUE, kind TEXT NOT NULL);
        CREATE VIRTUAL TABLE fts USING fts5(ktext, tokenize="{FTS_TOKENIZE}");
        CREATE VIRTUAL TABLE fts_vocab USING fts5vocab(fts, 'row');
    """)
    _init_term_df(con)


def _init_term_df(con: sqlite3.Connection) -> None:
    con.execute("CREATE TABLE IF NOT EXISTS term_df (term TEXT PRIMARY KEY, doc INTEGER NOT NULL) WITHOUT ROWID")


def _doc_lengths(con: sqlite3.Connection, slots: int) -> np.ndarray:
    """Tokens in each slot's normalised title (what FTS5 counts: the text is already split into
    words separated by single spaces); 0 for empty slots."""
    out = np.zeros(slots, dtype=np.uint16)
    for slot, kt in con.execute("SELECT slot, ktext FROM products"):
        out[slot] = min(kt.count(" ") + 1 if kt else 0, 65535)
    return out


def _refresh_keyword_index(con: sqlite3.Connection) -> None:
    """Merge FTS5's segments into one (fewer b-trees to walk per query term) and store each term's
    document frequency for the query planner (fts5vocab counts it by walking the postings)."""
    con.execute("INSERT INTO fts (fts) VALUES ('optimize')")
    _init_term_df(con)
    con.execute("DELETE FROM term_df")
    con.execute("INSERT INTO term_df SELECT term, doc FROM fts_vocab")
    con.execute("CREATE TABLE IF NOT EXISTS keyword_stats (rows INTEGER NOT NULL, tokens INTEGER NOT NULL)")
    con.execute("DELETE FROM keyword_stats")
    con.execute("INSERT INTO keyword_stats SELECT (SELECT count(*) FROM fts), coalesce(sum(cnt), 0) FROM fts_vocab")


def _write_postings(con: sqlite3.Connection, out: Path, slots: int) -> None:
    """Every term's postings as two flat arrays, term after term (``postings.npy``: slots, ascending
    within a term; ``postings_tf.npy``: the term's count in that row), and ``term_postings`` (term →
    where its run starts, how long it is). Read memory-mapped by ``_postings_plan``: FTS5 hands
    postings out only row by row (fts5vocab, ~0.3 µs a posting), numpy scores them at ~10 ns."""
    con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.w_inst USING fts5vocab(main, fts, 'instance')")
    con.execute("DROP TABLE IF EXISTS term_postings")
    con.execute("CREATE TABLE term_postings (term TEXT PRIMARY KEY, start INTEGER NOT NULL, "
                "df INTEGER NOT NULL) WITHOUT ROWID")
    dtype = np.uint32 if slots < 2 ** 32 else np.int64
    docs, tfs, meta, start = [], [], [], 0
    for term, occ in con.execute("SELECT term, group_concat(doc, ' ') FROM temp.w_inst GROUP BY term"):
        rows, tf = np.unique(np.fromstring(occ, dtype=np.int64, sep=" "), return_counts=True)
        docs.append(rows.astype(dtype))
        tfs.append(np.minimum(tf, 65535).astype(np.uint16))
        meta.append((term, start, len(rows)))
        start += len(rows)
    con.executemany("INSERT INTO term_postings VALUES (?, ?, ?)", meta)
    con.execute("DROP TABLE temp.w_inst")
    np.save(out / "postings.npy", np.concatenate(docs) if docs else np.zeros(0, dtype))
    np.save(out / "postings_tf.npy", np.concatenate(tfs) if tfs else np.zeros(0, np.uint16))


def _publish(root: Path, tmp: Path, gen: str, manifest: Manifest) -> None:
    """Make ``tmp`` generation ``gen`` and point the manifest at it (atomic at the os.replace)."""
    for f in tmp.iterdir():
        _fsync_file(f)
    _fsync_dir(tmp)
    final = root / gen
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(root)
    mtmp = root / f".manifest-{os.getpid()}.json"
    mtmp.write_text(json.dumps(manifest.to_json(), indent=2), encoding="utf-8")
    _fsync_file(mtmp)
    os.replace(mtmp, root / "manifest.json")
    _fsync_dir(root)


class _Lock:
    """An exclusive, non-blocking flock on DIR/.lock; the OS drops it if the process dies."""

    def __init__(self, root: Path):
        self.path = root / ".lock"
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                who = os.read(self.fd, 200).decode(errors="replace").strip()
            except OSError:
                who = ""
            os.close(self.fd)
            raise WriterBusy(f"another process is writing to the index at {self.path.parent} ({who or 'unknown'}); "
                             "wait for it to finish, then retry (searching works meanwhile)") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode())
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        return False


class _Writer(StoreWriter):
    """Changes staged in a temporary generation; published by ``__exit__`` when no exception."""

    def __init__(self, store: EmbeddedStore, reset: bool):
        self.store = store
        self.reset = reset
        self.build_threads = build_threads()  # read now: a bad QKV_BUILD_THREADS fails before any work

    def __enter__(self):
        st = self.store
        root = st.path
        self.lock = _Lock(root).__enter__()
        try:
            current = read_manifest(root)  # re-read under the lock: another writer may have finished
            self.manifest = current
            self.base_gen = current.extra["generation"]
            self.gen_no = int(self.base_gen.split("-")[1]) + 1
            for p in root.iterdir():  # leftovers of killed writers
                if p.name.startswith((".tmp-gen-", ".manifest-")):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            self.tmp = root / f".tmp-gen-{self.gen_no:06d}-{os.getpid()}"
            self.tmp.mkdir()
            if self.reset:
                self.con = sqlite3.connect(self.tmp / "catalog.sqlite")
                _init_schema(self.con)
                self.old_vectors = np.zeros((0, current.dim), dtype=current.dtype)
                self.ann_kind = None
            else:
                src = sqlite3.connect(f"file:{root / self.base_gen / 'catalog.sqlite'}?mode=ro", uri=True)
                self.con = sqlite3.connect(self.tmp / "catalog.sqlite")
                src.backup(self.con)
                src.close()
                self.old_vectors = np.load(root / self.base_gen / "vectors.npy", mmap_mode="r")
                self.ann_kind = current.extra.get("ann_kind")
            self.con.execute("PRAGMA journal_mode=OFF")
            self.con.execute("PRAGMA synchronous=OFF")  # the file is fsynced before it is published
            self.con.execute("BEGIN")
            self.cols = {n: (c, k) for n, c, k in self.con.execute("SELECT name, col, kind FROM fields")}
            self.next_slot = len(self.old_vectors)
            self.new_vectors: list[np.ndarray] = []
            self.tombstones = int(current.extra.get("slots", 0)) - current.count if not self.reset else 0
            self.changed = False
        except BaseException:
            self.lock.__exit__(None, None, None)
            raise
        return self

    # -- the StoreWriter interface
    def title_hashes(self, ids):
        out = {}
        ids = list(ids)
        for i in range(0, len(ids), 900):
            chunk = ids[i:i + 900]
            out.update(self.con.execute(
                f"SELECT id, title_hash FROM products WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return out

    def _field_cols(self, rows) -> None:
        for row in rows:
            for name, v in row.items():
                if name in ("id", "title"):
                    continue
                kind = "number" if isinstance(v, (int, float)) and not isinstance(v, bool) else "text"
                if name not in self.cols:
                    col = f"f{len(self.cols)}"
                    self.con.execute(f"ALTER TABLE products ADD COLUMN {col}")
                    self.con.execute("INSERT INTO fields VALUES (?, ?, ?)", (name, col, kind if v is not None else "number"))
                    self.cols[name] = (col, kind if v is not None else "number")
                elif v is not None and kind == "text" and self.cols[name][1] == "number":
                    self.con.execute("UPDATE fields SET kind = 'text' WHERE name = ?", (name,))
                    self.cols[name] = (self.cols[name][0], "text")

    def _remove(self, ids) -> int:
        n = 0
        for pid in ids:
            r = self.con.execute("SELECT slot FROM products WHERE id = ?", (pid,)).fetchone()
            if r is not None:
                self.con.execute("DELETE FROM products WHERE slot = ?", r)
                self.con.execute("DELETE FROM fts WHERE rowid = ?", r)
                self.tombstones += 1
                n += 1
        return n

    def upsert(self, rows, vectors, title_hashes) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(rows) != len(vectors) or len(rows) != len(title_hashes):
            raise InputError("upsert needs one vector and one title hash per row")
        if vectors.ndim != 2 or (len(rows) and vectors.shape[1] != self.manifest.dim):
            raise InputError(f"vectors must be [n, {self.manifest.dim}]")
        ids = [str(r["id"]) for r in rows]
        if len(set(ids)) != len(ids):
            raise InputError("upsert rows must have distinct ids")
        if not rows:
            return
        self._remove(ids)
        self._field_cols(rows)
        names = list(self.cols)
        colsql = ", ".join(["slot", "id", "title", "ktext", "title_hash"] + [self.cols[n][0] for n in names])
        ph = ",".join("?" * (5 + len(names)))
        data, fts = [], []
        for row, h in zip(rows, title_hashes):
            slot = self.next_slot
            self.next_slot += 1
            kt = textmod.normalize(row["title"])
            data.append([slot, str(row["id"]), row["title"], kt, h] + [row.get(n) for n in names])
            fts.append((slot, kt))
        self.con.executemany(f"INSERT INTO products ({colsql}) VALUES ({ph})", data)
        self.con.executemany("INSERT INTO fts (rowid, ktext) VALUES (?, ?)", fts)
        self.new_vectors.append(vectors)
        self.changed = True

    def update_fields(self, rows) -> None:
        self._field_cols(rows)
        for row in rows:
            names = [n for n in row if n not in ("id",)]
            r = self.con.execute("SELECT slot FROM products WHERE id = ?", (str(row["id"]),)).fetchone()
            if r is None:
                raise InputError(f"update_fields: unknown id {row['id']!r}")
            sets = []
            vals = []
            for n in names:
                sets.append("title = ?" if n == "title" else f"{self.cols[n][0]} = ?")
                vals.append(row[n])
            if "title" in row:
                kt = textmod.normalize(row["title"])
                sets.append("ktext = ?")
                vals.append(kt)
                self.con.execute("DELETE FROM fts WHERE rowid = ?", r)
                self.con.execute("INSERT INTO fts (rowid, ktext) VALUES (?, ?)", (r[0], kt))
            if sets:
                self.con.execute(f"UPDATE products SET {', '.join(sets)} WHERE slot = ?", (*vals, r[0]))
        self.changed = self.changed or bool(rows)

    def delete(self, ids: Iterable[str]) -> int:
        n = self._remove([str(i) for i in ids])
        self.changed = self.changed or n > 0
        return n

    def refresh(self) -> None:
        """Publish a new generation with the same rows, so that one written by older code gets the
        derived files the current code writes (keyword tables, postings arrays); the ANN index is
        copied, not rebuilt."""
        self.changed = True

    # -- publishing
    def __exit__(self, et, ev, tb):
        try:
            if et is None and (self.changed or self.reset):
                self._finish()
        finally:
            with contextlib.suppress(Exception):
                self.con.close()
            if self.tmp.exists():
                shutil.rmtree(self.tmp, ignore_errors=True)
            self.lock.__exit__(None, None, None)
        return False

    def _write_ann(self, vecs, slots: int, rebuild: bool, want: str, new) -> None:
        """The ANN index of the new generation: built afresh from every vector, or the last one
        with the new vectors added; written into the generation being made."""
        if not slots:
            return
        faiss, m = _faiss(), self.manifest
        if rebuild:
            ann = _new_ann(want, m.dim, m.dtype, slots)
            if want == "ivfpq":
                rng = np.random.default_rng(0)
                sample = np.sort(rng.choice(slots, size=min(slots, max(256 * 39, ann.nlist * 39)), replace=False))
                ann.train(np.asarray(vecs[sample], dtype=np.float32))
            for a in range(0, slots, 65536):
                ann.add(np.ascontiguousarray(vecs[a:a + 65536], dtype=np.float32))
        else:
            ann = faiss.read_index(str(self.store.path / self.base_gen / "ann.faiss"))
            if len(new):
                ann.add(np.ascontiguousarray(new, dtype=np.float32))
        faiss.write_index(ann, str(self.tmp / "ann.faiss"))

    def _finish(self) -> None:
        faiss = _faiss()

        m = self.manifest
        count = self.con.execute("SELECT count(*) FROM products").fetchone()[0]
        new = np.concatenate(self.new_vectors) if self.new_vectors else np.zeros((0, m.dim), np.float32)
        slots = self.next_slot
        compact = slots > 0 and self.tombstones > max(1000, slots // 4) if not self.reset else False
        want = m.ann
        if want == "auto":
            want = "flat" if count < int(m.extra.get("flat_threshold", FLAT_THRESHOLD)) else "hnsw"
        elif want == "ivfpq" and count < int(m.extra.get("ivfpq_min", IVFPQ_MIN)):
            want = "flat"  # too few vectors to train product quantisers: exact until there are enough
        rebuild = compact or self.ann_kind != want or want == "ivfpq"
        vpath = self.tmp / "vectors.npy"
        if compact:  # renumber live slots 0..count-1 and drop tombstoned vectors
            live = [s for (s,) in self.con.execute("SELECT slot FROM products ORDER BY slot")]
            out = np.lib.format.open_memmap(vpath, mode="w+", dtype=m.dtype, shape=(count, m.dim))
            n_old = len(self.old_vectors)
            for a in range(0, count, 65536):
                part = np.asarray(live[a:a + 65536])
                olds = part[part < n_old]
                news = part[part >= n_old] - n_old
                out[a:a + len(olds)] = self.old_vectors[olds]
                out[a + len(olds):a + len(part)] = new[news]
            out.flush()
            del out
            self.con.execute("CREATE TEMP TABLE remap AS SELECT slot AS old, row_number() OVER (ORDER BY slot) - 1 AS new FROM products")
            self.con.execute("CREATE INDEX temp.remap_old ON remap(old)")
            self.con.execute("UPDATE products SET slot = -1 - (SELECT new FROM remap WHERE old = products.slot)")
            self.con.execute("UPDATE products SET slot = -1 - slot")
            self.con.execute("DELETE FROM fts")
            self.con.execute("INSERT INTO fts (rowid, ktext) SELECT slot, ktext FROM products")
            slots, self.tombstones = count, 0
        else:
            out = np.lib.format.open_memmap(vpath, mode="w+", dtype=m.dtype, shape=(slots, m.dim))
            n_old = len(self.old_vectors)
            for a in range(0, n_old, 65536):
                b = min(a + 65536, n_old)
                out[a:b] = self.old_vectors[a:b]
            out[n_old:] = new
            out.flush()
            del out
        _refresh_keyword_index(self.con)
        np.save(self.tmp / "doclen.npy", _doc_lengths(self.con, slots))
        _write_postings(self.con, self.tmp, slots)
        self.con.commit()
        self.con.execute("VACUUM") if compact else None
        self.con.close()
        vecs = np.load(vpath, mmap_mode="r")
        faiss.omp_set_num_threads(self.build_threads)
        try:
            self._write_ann(vecs, slots, rebuild, want, new)
        finally:
            from qkv.model.threads import default_threads

            faiss.omp_set_num_threads(default_threads())  # searches: one query at a time
        gen = f"gen-{self.gen_no:06d}"
        extra = {**m.extra, "generation": gen, "slots": int(slots), "ann_kind": want if slots else None,
                 "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        _publish(self.store.path, self.tmp, gen, replace(m, count=int(count), extra=extra))
        # keep the previous generation for readers that still have it open; drop older ones
        for p in self.store.path.iterdir():
            if p.is_dir() and p.name.startswith("gen-") and p.name not in (gen, self.base_gen):
                shutil.rmtree(p, ignore_errors=True)
