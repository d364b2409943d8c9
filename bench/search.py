"""Search benchmark: build throughput, query latency per mode, ANN recall, memory and disk.

    .venv/bin/python bench/search.py                                   # 10k and 100k
    .venv/bin/python bench/search.py --sizes 10000,100000,1000000      # + 1M (HNSW build: long)

Titles come from a generator of realistic product titles (bench/_titles.py; ~1,400 words plus model codes), so
no data set is needed. Vectors are the real all-MiniLM-L6-v2 embeddings of those titles, computed
once in chunks of 10,000 and cached under /tmp/qkv-cache/search-bench (resumable: `embed_titles`),
up to ``--real`` titles (default 20,000: ~1.5 min on an idle core the first time; docs/search.md
used 100,000). Beyond that (the 1M size) title i gets a synthetic
vector: a random convex mix λ·a + (1−λ)·b (λ ∈ [0.5, 0.85]) of two real embeddings, renormalised.
Such mixes stay on the real embeddings' manifold (unlike isotropic jitter, which made HNSW recall
look worse than it is); ``--validate`` measures HNSW recall on real vectors against real + mixes at
the same size, to check the stand-in. Keyword search always sees the real generated titles.

Build throughput: the encoder's rate is measured on ``--encode-sample`` fresh titles, in each of
``--precisions`` (default float32 and bfloat16, same run); the 10k index is built end to end by
``build_index`` (encoder included) in each; larger ones are timed once without the encoder (SQLite
+ FTS5 + keyword tables, vector file, faiss) and reported per precision as
n / (n / that precision's encoder rate + rest), with the non-encoder share of each.
Latency: ``--queries`` generated shopper queries per size, one thread, k = 10, split into query
encoding, ANN, keyword, fusion (exact cosines of keyword-only hits, BM25 shares) and fetching rows.
ANN recall@10 against exact search over the same vectors, for several efSearch values.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_titles.py, run by path too

from _titles import queries, titles  # noqa: E402  (the generated catalog)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def dir_mb(p: Path) -> float:
    """An index's size on disk: its current generation and manifest (a write keeps the previous
    generation for open readers until the next write: not counted)."""
    m = p / "manifest.json"
    if m.is_file():
        gen = json.loads(m.read_text()).get("extra", {}).get("generation")
        if gen and (p / gen).is_dir():
            return (m.stat().st_size + sum(f.stat().st_size for f in (p / gen).rglob("*") if f.is_file())) / 2**20
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 2**20


def pct(xs, q):
    return float(np.percentile(np.asarray(xs) * 1000, q))


CACHE = Path(os.environ.get("QKV_CACHE", "/tmp/qkv-cache")) / "search-bench"
CHUNK = 10_000


def cache_dir(enc, seed: int = 0) -> Path:
    """Where the embeddings of ``titles(·, seed)`` by ``enc`` are cached: keyed by the model's
    fingerprint and a hash of the generator's first titles (a changed generator gets a new key)."""
    import hashlib

    key = hashlib.blake2b("\n".join(titles(2000, seed)).encode(), digest_size=6).hexdigest()
    return CACHE / f"{enc.fingerprint()}-{key}"


def embed_titles(enc, n: int, progress=None, seed: int = 0, worker: tuple[int, int] = (0, 1)):
    """Real embeddings of the first ``n`` generated titles, computed in chunks of 10,000 saved under
    ``cache_dir`` (so a killed run resumes where it stopped). Returns the vectors and the encoder's
    rate (titles/s) measured over the chunks computed in this call (nan if all were cached).
    ``worker=(w, of)``: only compute chunks c with c % of == w and return None (to fill the cache
    from several processes)."""
    d = cache_dir(enc, seed)
    d.mkdir(parents=True, exist_ok=True)
    ts = titles(n, seed)
    out, secs, done = [], 0.0, 0
    for c, a in enumerate(range(0, n, CHUNK)):
        f = d / f"chunk-{c:04d}.npy"
        part = ts[a:a + CHUNK]
        if worker[1] > 1 and c % worker[1] != worker[0]:
            continue
        if f.is_file() and len(np.load(f, mmap_mode="r")) >= len(part):
            v = np.load(f)[:len(part)]
        else:
            t0 = time.perf_counter()
            v = enc.encode(part, batch_size=64)
            secs += time.perf_counter() - t0
            done += len(part)
            if len(part) == CHUNK:  # only full chunks are cached, so a larger n can reuse them
                tmp = d / f".chunk-{c:04d}-{os.getpid()}.npy"
                np.save(tmp, v)
                os.replace(tmp, f)
        out.append(v) if worker[1] == 1 else None
        if progress:
            progress(a + len(part), n)
    rate = done / secs if secs else float("nan")
    return (np.concatenate(out) if worker[1] == 1 else None), rate


def synthetic(base: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` stand-in vectors: random convex mixes of two rows of ``base`` (see the docstring)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, base.shape[1]), np.float32)
    for a in range(0, n, 100_000):
        m = min(100_000, n - a)
        i, j = rng.integers(0, len(base), m), rng.integers(0, len(base), m)
        lam = rng.uniform(0.5, 0.85, (m, 1)).astype(np.float32)
        v = lam * base[i] + (1 - lam) * base[j]
        out[a:a + m] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def vectors_for(enc, n: int, real: int, console) -> tuple[np.ndarray, int]:
    """Embeddings of ``titles(n)``: real for the first ``min(n, real)`` (cached), mixes after."""
    r = min(n, real)
    with console.status(f"embedding {r:,} titles (cached under {cache_dir(enc)})") as st:
        v, _ = embed_titles(enc, r, lambda d, t: st.update(f"embedding titles {d:,}/{t:,} (cached)"))
    if n > r:
        v = np.concatenate([v, synthetic(v, n - r, seed=n)])
    return v, r


def _recall(I, exact) -> float:
    return float(np.mean([len(set(a[a >= 0]) & set(b)) / len(b) for a, b in zip(I, exact)]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--real", type=int, default=20_000,
                    help="titles with real embeddings, cached (the rest: mixes); docs/search.md used 100000")
    ap.add_argument("--encode-sample", type=int, default=2000)
    ap.add_argument("--precisions", default="float32,bfloat16",
                    help="encoder precisions whose builds are reported side by side (issue 16: bfloat16 "
                         "against float32; the same rest, each precision's own encoder rate, same run)")
    ap.add_argument("--ef-search", default="64,96,128,192,256",
                    help="efSearch values for the recall sweep ('' skips the sweep)")
    ap.add_argument("--modes", default="dense,keyword,hybrid", help="search modes timed for latency")
    ap.add_argument("--where", default="", help="also time every mode with this filter, e.g. 'price < 50' "
                    "(prices run 5-204 over the generated products, so 'price < 50' keeps 22.5%%)")
    ap.add_argument("--dir", default=None, help="where to build (kept; an index already there is reused)")
    ap.add_argument("--build-threads", type=int, default=None,
                    help="faiss threads for the ANN graph (QKV_BUILD_THREADS; default: qkv's, every core; queries: one)")
    ap.add_argument("--keyword-compare", default="", metavar="SIZES",
                    help="only compare the planned keyword search with FTS5's exact OR query (no encoder)")
    ap.add_argument("--validate", type=int, default=0, metavar="N",
                    help="only compare HNSW recall on N real embeddings with N/5 real + mixes (the stand-in)")
    args = ap.parse_args(argv)
    if args.validate:
        return validate(args.validate, args.queries, [int(e) for e in args.ef_search.split(",")])
    if args.keyword_compare:
        return keyword_compare([int(s) for s in args.keyword_compare.split(",")], args.queries,
                               root=Path(args.dir) if args.dir else None)
    from rich.console import Console
    from rich.table import Table

    import qkv
    from qkv.search import Index, build_index
    from qkv.search.catalog import Catalog
    from qkv.search.embedded import EmbeddedStore
    from qkv.search.store import Manifest, title_hash

    console = Console(width=max(Console().width, 150))
    sizes = [int(s) for s in args.sizes.split(",")]
    enc = qkv.load(threads=1)
    root = Path(args.dir or tempfile.mkdtemp(prefix="qkv-bench-search-"))
    root.mkdir(parents=True, exist_ok=True)
    from qkv.model.linear import effective_precision

    fresh = titles(args.encode_sample, seed=99)  # not in any cache
    rates = {}  # asked precision → (its label, titles/s wall, titles per CPU-second)
    for prec in args.precisions.split(","):
        ran = effective_precision(prec, enc)  # bfloat16 only where a unit runs it
        enc.encode(fresh[:64], batch_size=64, precision=prec)  # packs the weights
        t0, c0 = time.perf_counter(), time.process_time()
        enc.encode(fresh, batch_size=64, precision=prec)
        raw_rate = len(fresh) / (time.perf_counter() - t0)
        cpu_rate = len(fresh) / (time.process_time() - c0)  # titles per CPU-second: what an idle core would do
        rates[prec] = (ran if ran == prec else f"{prec} (ran {ran})", raw_rate, cpu_rate)
        console.print(f"encoder alone, {rates[prec][0]}: {raw_rate:,.0f} titles/s wall, {cpu_rate:,.0f} per CPU-second "
                      f"on {len(fresh):,} generated titles (one thread); load average {os.getloadavg()[0]:.1f}")
    qs = queries(args.queries)
    qv = enc.encode(qs, batch_size=64)
    build_rows, lat_rows, res_rows, ef_rows = [], [], [], []
    for n in sizes:
        path = root / f"idx-{n}"
        ts = titles(n)
        rows = [{"id": f"b{i}", "title": t, "price": float(5 + i % 200)} for i, t in enumerate(ts)]
        if (path / "manifest.json").is_file() and args.dir:
            console.print(f"{n:,}: reusing the index in {path}")
            EmbeddedStore.open(path).close()  # an index of an older format is refused here: rebuild it
            build_rows.append((n, "—", float("nan"), float("nan"), float("nan"), float("nan"), dir_mb(path),
                               "reused (not timed)"))
        elif n <= 10_000:  # end to end, encoder included (the last precision's index stays for latency)
            for prec, (label, p_raw, p_cpu) in rates.items():
                shutil.rmtree(path, ignore_errors=True)
                c0 = time.process_time()
                rep = build_index(Catalog(rows, "id", "title", {"price": "number"}), path, enc, batch_size=64,
                                  precision=prec)
                cpu = time.process_time() - c0
                rest = rep.seconds - rep.embed_seconds
                build_rows.append((n, label, n / rep.seconds, (n / rep.seconds) / p_raw, rest / rep.seconds,
                                   max(cpu - n / p_cpu, 0.0) / cpu, dir_mb(path),
                                   f"measured end to end (encoder {n / rep.embed_seconds:,.0f}/s inside)"))
        else:
            shutil.rmtree(path, ignore_errors=True)
            vecs, real = vectors_for(enc, n, args.real, console)
            m = Manifest(model=enc.name, fingerprint=enc.fingerprint(), dim=enc.dim)
            from qkv.search.embedded.vectors import build_threads

            if args.build_threads:  # read when the index is published (qkv.search.embedded.vectors.build_threads)
                os.environ["QKV_BUILD_THREADS"] = str(args.build_threads)
            t1, c1 = time.perf_counter(), time.process_time()
            st = EmbeddedStore.create(path, m)
            with console.status(f"building the {n:,}-product index without the encoder"), st.writer() as w:
                for a in range(0, n, 65536):
                    w.upsert(rows[a:a + 65536], vecs[a:a + 65536], [title_hash(r["title"]) for r in rows[a:a + 65536]])
            rest, rest_cpu = time.perf_counter() - t1, time.process_time() - c1
            for prec, (label, p_raw, p_cpu) in rates.items():  # one rest, each precision's encoder rate
                embed = n / p_raw
                rate = n / (embed + rest)
                how = (f"encoder {p_raw:,.0f}/s × n + rest measured (rest: {rest:,.0f} s wall, {rest_cpu:,.0f} s CPU"
                       + f", graph on {build_threads()} faiss thread(s))"
                       + (f"; vectors: {real:,} real + mixes" if real < n else ""))
                build_rows.append((n, label, rate, rate / p_raw, rest / (embed + rest),
                                   rest_cpu / (n / p_cpu + rest_cpu), dir_mb(path), how))
            del vecs
        # ---- latency
        before = rss_mb()
        with Index.open(path, enc) as idx:
            for q in qs[:20]:
                idx.search(q, k=10)  # warm-up: stem cache, file pages
            mem = rss_mb() - before
            for mode, where in [(m, None) for m in args.modes.split(",")] + (
                    [(m, args.where) for m in args.modes.split(",")] if args.where else []):
                parts = {k: [] for k in ("encode", "ann", "keyword", "fuse", "fetch", "total", "cpu", "index")}
                for q in qs:
                    c1, t1 = time.process_time(), time.perf_counter()
                    res = idx.search(q, k=10, mode=mode, where=where)
                    parts["total"].append(time.perf_counter() - t1)
                    parts["cpu"].append(time.process_time() - c1)
                    for k_ in ("encode", "ann", "keyword", "fuse", "fetch"):
                        parts[k_].append(res.timings.get(k_, 0.0))
                    parts["index"].append(parts["total"][-1] - parts["encode"][-1])  # all but the encoder
                lat_rows.append((n, mode if where is None else f"{mode} where {where}",
                                 *[(pct(parts[k], 50), pct(parts[k], 99)) for k in
                                            ("total", "cpu", "index", "encode", "ann", "keyword", "fuse", "fetch")]))
            # ---- ANN recall@10 against exact search over the same vectors
            store = idx.store
            ann_kind = store.manifest.extra.get("ann_kind")
            vecs = np.asarray(store.vectors, dtype=np.float32)
            exact = np.argsort(-(qv @ vecs.T), axis=1)[:, :10]
            del vecs
            import faiss

            ann = store.dense.ann
            if isinstance(ann, faiss.IndexHNSW):
                for ef in [int(e) for e in args.ef_search.split(",") if e]:
                    ann.hnsw.efSearch = ef
                    t1 = time.perf_counter()
                    _, I = ann.search(np.ascontiguousarray(qv), 10)
                    ef_rows.append((n, ef, _recall(I, exact), (time.perf_counter() - t1) / len(qv) * 1000))
                ann.hnsw.efSearch = int(store.manifest.extra.get("ef_search", 0) or store_default_ef())
            _, I = ann.search(np.ascontiguousarray(qv), 10)
            res_rows.append((n, ann_kind, _recall(I, exact), mem, dir_mb(path)))
        if not args.dir:
            shutil.rmtree(path, ignore_errors=True)

    t = Table(title="index build (encoder on one thread; alone: " + ", ".join(
        f"{label} {r:,.0f} titles/s wall, {c:,.0f} per CPU-s" for label, r, c in rates.values()) + ")")
    for c in ("products", "encoder", "titles/s", "÷ encoder alone", "non-encoder share (wall)",
              "non-encoder share (CPU)", "disk MB", "how"):
        t.add_column(c, justify="right")
    for n, label, rate, ratio, share, cshare, mb, how in build_rows:
        t.add_row(f"{n:,}", label, f"{rate:,.0f}", f"{ratio:.3f}", f"{share:.1%}", f"{cshare:.1%}", f"{mb:,.1f}", how)
    console.print(t)
    for n in sorted({r[0] for r in build_rows}):
        by = {r[1]: r for r in build_rows if r[0] == n}
        a, b = by.get("float32"), by.get("bfloat16")
        if a and b and a[2] == a[2]:
            console.print(f"{n:,} products: the bfloat16 build {b[2] / a[2]:.2f}× the float32 build's titles/s "
                          f"({n / b[2] / 60:,.1f} against {n / a[2] / 60:,.1f} min)")
    t = Table(title=f"query latency, ms p50 / p99 over {len(qs)} queries, k=10, one thread")
    for c in ("products", "mode", "total", "total CPU time", "total − encode", "encode", "ANN", "keyword", "fuse",
              "fetch"):
        t.add_column(c, justify="right")
    for n, mode, *parts in lat_rows:
        t.add_row(f"{n:,}", mode, *[f"{a:.2f} / {b:.2f}" for a, b in parts])
    console.print(t)
    t = Table(title="ANN quality and footprint (default efSearch)")
    for c in ("products", "ANN", "recall@10 vs exact", "RSS after open MB", "disk MB", "disk per 1M GB"):
        t.add_column(c, justify="right")
    for n, kind, rec, mem, mb in res_rows:
        t.add_row(f"{n:,}", str(kind), f"{rec:.3f}", f"{mem:,.0f}", f"{mb:,.1f}", f"{mb / n * 1e6 / 1024:.2f}")
    console.print(t)
    if ef_rows:
        t = Table(title="HNSW efSearch sweep (one query at a time, one thread)")
        for c in ("products", "efSearch", "recall@10", "ANN ms / query"):
            t.add_column(c, justify="right")
        for n, ef, rec, ms in ef_rows:
            t.add_row(f"{n:,}", str(ef), f"{rec:.3f}", f"{ms:.2f}")
        console.print(t)
    console.print(f"load average at the end: {os.getloadavg()[0]:.1f} (2 vCPUs shared)")
    if not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def validate(n: int, nq: int, efs: list[int]) -> int:
    """HNSW (the store's M and efConstruction) recall@10 on n real embeddings vs n/5 real + mixes."""
    import faiss
    from rich.console import Console
    from rich.table import Table

    import qkv
    from qkv.search.embedded.vectors import HNSW_EF_CONSTRUCTION, HNSW_M

    faiss.omp_set_num_threads(1)
    console = Console()
    enc = qkv.load(threads=1)
    real, _ = embed_titles(enc, n)
    qv = enc.encode(queries(nq), batch_size=64)
    t = Table(title=f"stand-in check: HNSW M {HNSW_M}, efConstruction {HNSW_EF_CONSTRUCTION}, {n:,} vectors, "
                    f"{nq} generated queries")
    for c in ("vectors", "mean cos of 10th neighbour", *[f"recall@10 ef {e}" for e in efs]):
        t.add_column(c, justify="right")
    for name, X in (("real", real), (f"{n // 5:,} real + mixes", np.concatenate([real[:n // 5], synthetic(real[:n // 5], n - n // 5, 1)]))):
        exact = np.argsort(-(qv @ X.T), axis=1)[:, :10]
        idx = faiss.IndexHNSWFlat(X.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
        idx.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        with console.status(f"HNSW over {name}"):
            idx.add(X)
        recs = []
        for ef in efs:
            idx.hnsw.efSearch = ef
            recs.append(_recall(idx.search(qv, 10)[1], exact))
        t.add_row(name, f"{np.sort(qv @ X.T, axis=1)[:, -10].mean():.3f}", *[f"{r:.4f}" for r in recs])
    console.print(t)
    return 0


def keyword_compare(sizes: list[int], nq: int, depth: int = 200, root: Path | None = None) -> int:
    """Keyword side alone: FTS5's exact OR (``ORDER BY bm25`` over every matching row, joined to the
    rows as the store did before planning) against ``keyword_search`` with the SQL plan (what
    queries with a term FTS5 splits into a phrase use) and with the postings plan; CPU ms per query. Uses the
    benchmark index ``root/idx-N`` when there is one, else builds FTS5 tables of the titles."""
    from rich.console import Console
    from rich.table import Table

    from qkv.search.embedded import EmbeddedStore
    from qkv.search.embedded.vocabulary import quote as _quote
    from qkv.search.store import Manifest, open_store, title_hash

    console = Console(width=max(Console().width, 150))
    t = Table(title=f"keyword search, depth {depth}, {nq} generated queries, CPU ms p50 / p90 / p99; "
                    "∩ = share of the exact OR query's top 200 (top 10) returned")
    for c in ("products", "exact OR", "SQL plan", "∩ top 200 / top 10", "postings plan", "∩ top 200 / top 10"):
        t.add_column(c, justify="right")
    qs = queries(nq)
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            path = root / f"idx-{n}" if root is not None else None
            if path is None or not (path / "manifest.json").is_file():
                path = Path(d) / "kw"
                st = EmbeddedStore.create(path, Manifest(model="m", fingerprint="f", dim=1, ann="flat"))
                rows = [{"id": f"b{i}", "title": x} for i, x in enumerate(titles(n))]
                with console.status(f"FTS5 table of {n:,} titles"), st.writer() as w:
                    for a in range(0, n, 65536):
                        part = rows[a:a + 65536]
                        w.upsert(part, np.ones((len(part), 1), np.float32), [title_hash(r["title"]) for r in part])
                st.close()
            st = open_store(path)
            covers = st.keyword.postings_cover
            exact, times, overlap = [], {"exact": [], "sql": [], "post": []}, {"sql": [], "post": []}
            for q in qs:
                expr = " OR ".join(map(_quote, st.query_terms(q)))
                c0 = time.process_time()
                exact.append([i for i, _ in st.db.execute(
                    "SELECT p.id, -bm25(fts) FROM fts JOIN products p ON p.slot = fts.rowid WHERE fts MATCH ? "
                    "ORDER BY bm25(fts) LIMIT ?", (expr, depth))])
                times["exact"].append(time.process_time() - c0)
            for plan in ("sql", "post"):
                st.keyword.postings_cover = (lambda terms: False) if plan == "sql" else covers
                for q in queries(50, seed=2):
                    st.keyword_search(q, depth)  # warm-up: page cache, stem cache
                for q, ex in zip(qs, exact):
                    c1 = time.process_time()
                    got = [h.id for h in st.keyword_search(q, depth)]
                    times[plan].append(time.process_time() - c1)
                    overlap[plan].append((len(set(ex) & set(got)) / max(1, len(ex)),
                                          len(set(ex[:10]) & set(got[:10])) / max(1, len(ex[:10]))))
            st.close()

        def ms(xs):
            return " / ".join(f"{pct(xs, p):.1f}" for p in (50, 90, 99))

        def ov(plan):
            return " / ".join(f"{x:.3f}" for x in np.mean(overlap[plan], axis=0))

        t.add_row(f"{n:,}", ms(times["exact"]), ms(times["sql"]), ov("sql"), ms(times["post"]), ov("post"))
    console.print(t)
    console.print(f"load average: {os.getloadavg()[0]:.1f} (2 vCPUs shared)")
    return 0


def store_default_ef() -> int:
    from qkv.search.embedded.vectors import HNSW_EF_SEARCH

    return HNSW_EF_SEARCH


if __name__ == "__main__":
    raise SystemExit(main())
