"""Scale benchmark: how the stores grow with N (embedded faiss+SQLite vs Milvus Lite), and what Ray
costs and buys for embedding on this machine.

    .venv/bin/python bench/scale.py                              # 10k, 100k; Milvus Lite 10k, 100k
    .venv/bin/python bench/scale.py --sizes 10000,100000,1000000 --milvus-sizes 10000,100000

Needs no data set: titles come from bench/_titles.py's generator of realistic product titles.
Vectors: ``--sample`` (2,000) generated titles are really embedded (cached under /tmp/qkv-cache/scale);
every store size uses those embeddings jittered (σ 0.03) and renormalised, so the ANN sees a realistic,
clustered, non-duplicated distribution without encoding a million titles on 2 shared cores. The store
part (build, memory, disk, latency, recall) therefore excludes the encoder, whose cost is the
"titles/s" of the Ray section. Each cell runs in its own process (peak RSS = that process's maxrss,
no thread fights between cells). Query latency is the store's own call with a precomputed query
vector (dense) or the query text (keyword), one at a time, k=10; recall@10 is against exact search.

Ray: local encoding (one process, one BLAS thread) vs ``index_with_ray`` with 1 and 2 actors on a
local Ray (``num_cpus = workers + 1``), same titles; "pipeline" is Ray Data's wall time (actor start
and model load included), "start" is ``ray.init``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = Path(os.environ.get("QKV_CACHE", "/tmp/qkv-cache")) / "scale"
PNG = ROOT / "docs" / "img" / "scale-growth.png"


def _gen():
    spec = importlib.util.spec_from_file_location("bench_titles", ROOT / "bench" / "_titles.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sample_vectors(n: int) -> tuple[list[str], np.ndarray]:
    import qkv

    g = _gen()
    ts = g.titles(n)
    f = CACHE / f"sample-{n}.npy"
    enc = qkv.load(threads=1)
    key = CACHE / f"sample-{n}.fp"
    if f.is_file() and key.is_file() and key.read_text() == enc.fingerprint():
        return ts, np.load(f)
    CACHE.mkdir(parents=True, exist_ok=True)
    v = enc.encode(ts, batch_size=64)
    np.save(f, v)
    key.write_text(enc.fingerprint())
    return ts, v


def vectors(n: int, base: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = base[np.arange(n) % len(base)] + rng.normal(0, 0.03, (n, base.shape[1])).astype(np.float32)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def dir_mb(p: Path) -> float:
    if p.is_file():
        return p.stat().st_size / 2**20
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 2**20


def pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


# --------------------------------------------------------------------------- one store cell (subprocess)
def one_store(store: str, n: int, sample: int, queries: int, work: Path) -> dict:
    import qkv
    import qkv.scale  # noqa: F401
    from qkv.search.store import Manifest, open_store, store_class, title_hash

    g = _gen()
    enc = qkv.load(threads=1)
    _, base = sample_vectors(sample)
    ts = g.titles(n)
    rows = [{"id": f"b{i}", "title": t, "price": float(5 + i % 200)} for i, t in enumerate(ts)]
    vecs = vectors(n, base, seed=n)
    path = work / f"{store}-{n}"
    shutil.rmtree(path, ignore_errors=True)
    db = work / f"{store}-{n}.db"
    shutil.rmtree(db, ignore_errors=True)
    m = Manifest(model=enc.name, fingerprint=enc.fingerprint(), dim=enc.dim, backend=store)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    st = store_class(store).create(path, m, **({"uri": f"milvus://{db}"} if store == "milvus" else {}))
    with st.writer(reset=True) as w:
        for a in range(0, n, 20000):
            part = rows[a:a + 20000]
            w.upsert(part, vecs[a:a + len(part)], [title_hash(r["title"]) for r in part])
    st.close()
    st = open_store(path)
    qs = g.queries(queries)
    qv = enc.encode(qs, batch_size=64)
    st.dense_search(qv[0], 10)  # load the ANN index before timing
    build = time.perf_counter() - t0
    dense, kw = [], []
    for q, v in zip(qs, qv):
        t = time.perf_counter()
        st.dense_search(v, 10)
        dense.append(time.perf_counter() - t)
        t = time.perf_counter()
        st.keyword_search(q, 10)
        kw.append(time.perf_counter() - t)
    nq = min(100, queries)
    exact = np.argsort(-(qv[:nq] @ vecs.T), axis=1)[:, :10]
    rec = float(np.mean([len({h.id for h in st.dense_search(qv[i], 10)} & {f"b{j}" for j in exact[i]}) / 10
                         for i in range(nq)]))
    disk = dir_mb(path) + (dir_mb(db) if store == "milvus" else 0.0)
    ann = st.manifest.extra.get("ann_kind") or st.manifest.extra.get("index_type")
    st.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(db, ignore_errors=True)
    return {"store": store, "n": n, "build_s": build, "rows_per_s": n / build, "peak_rss_mb": peak,
            "rss_before_mb": rss0, "disk_mb": disk, "dense_p50_ms": pct(dense, 50), "dense_p99_ms": pct(dense, 99),
            "kw_p50_ms": pct(kw, 50), "kw_p99_ms": pct(kw, 99), "recall10": rec, "ann": ann}


# --------------------------------------------------------------------------- Ray cell (subprocess)
def one_ray(engine: str, workers: int, n: int, work: Path) -> dict:
    import csv

    import qkv

    g = _gen()
    ts = g.titles(n, seed=7)
    enc = qkv.load(threads=1)
    if engine == "local":
        enc.encode(ts[:32])
        t = time.perf_counter()
        enc.encode(ts, batch_size=64)
        s = time.perf_counter() - t
        return {"engine": "local", "workers": 1, "n": n, "pipeline_s": s, "start_s": 0.0, "titles_per_s": n / s}
    from qkv.scale.ray_index import index_with_ray

    cat = work / f"ray-{n}.csv"
    with open(cat, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "title"])
        w.writerows([f"r{i}", t] for i, t in enumerate(ts))
    path = work / f"ray-idx-{workers}"
    shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(path.with_name(path.name + ".ray-shards"), ignore_errors=True)
    rep = index_with_ray(cat, path, workers=workers, encoder=enc, block_rows=max(64, n // (8 * workers)))
    shutil.rmtree(path, ignore_errors=True)
    return {"engine": "ray", "workers": workers, "n": n, "pipeline_s": rep.embed_seconds,
            "start_s": rep.ray_start_seconds, "total_s": rep.seconds, "titles_per_s": n / rep.embed_seconds}


def _run(args: list[str], timeout: float) -> dict | None:
    env = {**os.environ, "QKV_THREADS": "1", "OMP_NUM_THREADS": "1"}
    try:
        out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout,
                             env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1][:200]}


def plot(cells: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    for store, colour in (("embedded", "#1f77b4"), ("milvus", "#d62728")):
        cs = sorted((c for c in cells if c.get("store") == store and "error" not in c), key=lambda c: c["n"])
        if not cs:
            continue
        n = [c["n"] for c in cs]
        label = "embedded (faiss + SQLite)" if store == "embedded" else "Milvus Lite"
        ax[0].loglog(n, [c["build_s"] for c in cs], "o-", color=colour, label=label)
        ax[1].loglog(n, [c["dense_p50_ms"] for c in cs], "o-", color=colour, label=f"{label} dense p50")
        ax[1].loglog(n, [c["dense_p99_ms"] for c in cs], "o--", color=colour, alpha=0.6, label=f"{label} dense p99")
        ax[1].loglog(n, [c["kw_p50_ms"] for c in cs], "s:", color=colour, alpha=0.8, label=f"{label} keyword p50")
        ax[2].loglog(n, [c["disk_mb"] for c in cs], "o-", color=colour, label=f"{label} disk")
        ax[2].loglog(n, [c["peak_rss_mb"] for c in cs], "o--", color=colour, alpha=0.6, label=f"{label} peak RSS")
    lo = min((c["n"] for c in cells if "n" in c), default=1e4)
    hi = max((c["n"] for c in cells if "n" in c), default=1e5)
    ref = [c for c in cells if c.get("store") == "embedded" and c.get("n") == lo and "error" not in c]
    if ref:  # a linear-growth guide through the smallest embedded build
        ax[0].loglog([lo, hi], [ref[0]["build_s"], ref[0]["build_s"] * hi / lo], color="grey", lw=0.8, ls=":",
                     label="∝ N")
    ax[0].set(title="build (store only, no encoder)", xlabel="products", ylabel="seconds")
    ax[1].set(title="query latency, k=10", xlabel="products", ylabel="ms")
    ax[2].set(title="footprint", xlabel="products", ylabel="MB")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="embedded store sizes")
    ap.add_argument("--milvus-sizes", default="10000,100000", help="Milvus Lite sizes ('' to skip)")
    ap.add_argument("--sample", type=int, default=2000, help="titles really embedded for the vectors")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--milvus-queries", type=int, default=50, help="queries per Milvus Lite size (it is slow)")
    ap.add_argument("--ray-titles", type=int, default=2000, help="titles for local vs Ray (0 to skip)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds allowed per cell")
    ap.add_argument("--png", default=str(PNG))
    ap.add_argument("--merge", nargs="*", help="JSON files of earlier runs whose store cells join the table/plot")
    ap.add_argument("--one", nargs="+", help=argparse.SUPPRESS)  # internal: one cell in this process
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="qkv-bench-scale-"))
    try:
        if args.one:
            kind = args.one[0]
            if kind == "store":
                print(json.dumps(one_store(args.one[1], int(args.one[2]), args.sample, args.queries, work)))
            else:
                print(json.dumps(one_ray(args.one[1], int(args.one[2]), int(args.one[3]), work)))
            return 0
        return _main(args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _main(args) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(150, Console().width))
    console.print(f"[dim]generated titles, no data set needed; load average {os.getloadavg()[0]:.1f} on "
                  f"{os.cpu_count()} CPUs (other jobs share them: absolute times are noisy)[/]")
    cells = []
    for f in args.merge or []:  # store cells of earlier runs (their JSON), shown and plotted with this run's
        cells += [c for c in json.loads(Path(f).read_text()) if "store" in c]
    if args.merge:
        console.print(f"[dim]merged store cells from {', '.join(args.merge)}[/]")
    sizes = args.sizes if args.sizes != "none" else ""
    if sizes or args.milvus_sizes:
        sample_vectors(args.sample)  # embed (or load) the sample once, outside the timed cells
    plan = [("embedded", int(n)) for n in sizes.split(",") if n] + \
           [("milvus", int(n)) for n in args.milvus_sizes.split(",") if n]
    for store, n in plan:
        console.print(f"[dim]… {store} {n:,}[/]")
        nq = args.queries if store == "embedded" else args.milvus_queries
        c = _run(["--one", "store", store, str(n), "--sample", str(args.sample), "--queries", str(nq)], args.timeout)
        c["queries"] = nq
        cells.append({"store": store, "n": n, **c})
    cells.sort(key=lambda c: (c["store"] != "embedded", c["n"]))
    t = Table(title="stores: build (no encoder), footprint, latency (k=10, one query at a time), ANN recall")
    for col in ("store", "products", "ANN", "build s", "rows/s", "peak RSS MB", "disk MB", "dense p50/p99 ms",
                "keyword p50/p99 ms", "recall@10", "queries"):
        t.add_column(col, justify="right")
    base = {c["n"]: c for c in cells if c["store"] == "embedded" and "error" not in c}
    for c in cells:
        if "error" in c:
            t.add_row(c["store"], f"{c['n']:,}", "", f"[red]{c['error']}[/]", *[""] * 7)
            continue
        ratio = ""
        if c["store"] == "milvus" and c["n"] in base:
            ratio = f" (×{c['build_s'] / base[c['n']]['build_s']:.1f})"
        t.add_row(c["store"], f"{c['n']:,}", str(c["ann"]), f"{c['build_s']:,.1f}{ratio}", f"{c['rows_per_s']:,.0f}",
                  f"{c['peak_rss_mb']:,.0f}", f"{c['disk_mb']:,.1f}",
                  f"{c['dense_p50_ms']:.2f} / {c['dense_p99_ms']:.2f}", f"{c['kw_p50_ms']:.2f} / {c['kw_p99_ms']:.2f}",
                  f"{c['recall10']:.3f}", str(c["queries"]))
    console.print(t)
    emb = sorted(base.values(), key=lambda c: c["n"])
    if len(emb) >= 2:
        a, b = emb[0], emb[-1]
        g = b["n"] / a["n"]
        console.print(f"embedded {a['n']:,} → {b['n']:,} (×{g:.0f} products): build ×{b['build_s'] / a['build_s']:.1f}, "
                      f"dense p50 ×{b['dense_p50_ms'] / a['dense_p50_ms']:.1f}, keyword p50 ×{b['kw_p50_ms'] / a['kw_p50_ms']:.1f}, "
                      f"disk ×{b['disk_mb'] / a['disk_mb']:.1f}")
    plot(cells, Path(args.png))
    console.print(f"plot: {args.png}")
    if args.ray_titles:
        rays = []
        for engine, w in (("local", 1), ("ray", 1), ("ray", 2)):
            console.print(f"[dim]… {engine} {w} worker(s), {args.ray_titles:,} titles[/]")
            rays.append(_run(["--one", "ray", engine, str(w), str(args.ray_titles)], args.timeout))
        t = Table(title=f"embedding {args.ray_titles:,} generated titles: local vs Ray on this machine")
        for col in ("engine", "workers", "titles/s", "÷ local", "pipeline s", "ray.init s"):
            t.add_column(col, justify="right")
        loc = rays[0].get("titles_per_s")
        for r in rays:
            if "error" in r:
                t.add_row("?", "", f"[red]{r['error']}[/]", "", "", "")
                continue
            t.add_row(r["engine"], str(r["workers"]), f"{r['titles_per_s']:,.0f}",
                      f"{r['titles_per_s'] / loc:.2f}" if loc else "", f"{r['pipeline_s']:.1f}", f"{r['start_s']:.1f}")
        console.print(t)
        if loc and "error" not in rays[1]:
            over = rays[1]["pipeline_s"] - args.ray_titles / loc
            console.print(f"Ray overhead at equal worker count (1): {over:+.1f}s on {args.ray_titles:,} titles "
                          f"(pipeline {rays[1]['pipeline_s']:.1f}s vs local {args.ray_titles / loc:.1f}s), "
                          f"plus {rays[1]['start_s']:.1f}s to start Ray")
        cells.append({"ray": rays})
    CACHE.mkdir(parents=True, exist_ok=True)
    name = f"run-{args.sizes}-{args.milvus_sizes}-{args.ray_titles}.json".replace(",", "_")
    (CACHE / name).write_text(json.dumps(cells, indent=1))  # the raw numbers, for docs and plots
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
