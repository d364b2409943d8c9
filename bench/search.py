"""Search benchmark: build throughput, query latency per mode, ANN recall, memory and disk.

    .venv/bin/python bench/search.py                 # sizes 10k and 100k
    .venv/bin/python bench/search.py --sizes 10000,100000,1000000 --encode-all

Titles come from a generator of realistic product titles (below), so no data set is needed. The
encoder dominates build time; its throughput is measured on ``--encode-sample`` titles (10k) and,
for larger sizes unless ``--encode-all``, the build time is that measured rate for the encoder plus
everything else (SQLite + FTS5, vector file, faiss) measured on the full size with vectors made by
jittering the sample's real embeddings (so ANN sees a realistic, non-duplicated distribution).
Latency: ``--queries`` generated queries per size, one thread, split into query encoding, ANN,
keyword and fetching rows. Recall@10 of the ANN index (HNSW from 100k on) against exact search.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NOUNS = ["running shoes", "hiking boots", "rain jacket", "down jacket", "wool sweater", "t-shirt", "leggings",
         "frying pan", "chef's knife", "electric kettle", "cutting board", "dutch oven", "water bottle",
         "headphones", "usb-c charger", "bluetooth speaker", "power bank", "keyboard", "webcam", "desk lamp",
         "curtains", "pillow", "duvet cover", "vacuum cleaner", "candle", "tent", "sleeping bag", "trekking poles",
         "headlamp", "camp chair", "face serum", "moisturiser", "sunscreen", "shampoo", "hair dryer",
         "building blocks", "remote control car", "teddy bear", "robot kit", "jigsaw puzzle", "drill", "hammer",
         "screwdriver set", "ladder", "garden hose", "lawn mower", "paint roller", "ceiling fan", "faucet",
         "shower head", "door lock", "smoke detector", "extension cord", "light bulb", "storage bin", "bookshelf"]
ADJ = ["waterproof", "lightweight", "cordless", "stainless steel", "non-stick", "organic cotton", "rechargeable",
       "foldable", "insulated", "breathable", "heavy duty", "compact", "wireless", "ergonomic", "adjustable",
       "portable", "ultralight", "premium", "classic", "smart", "energy saving", "quick-dry", "anti-slip"]
BRANDS = [a + b for a in ("North", "Lum", "Velo", "Ridge", "Copper", "Hearth", "Volt", "Echo", "Pixel", "Quiet",
                          "Harbor", "Canyon", "Petal", "Tumble", "Bright", "Orbit", "Stone", "River", "Cedar", "Maple")
          for b in ("peak", "ora", "line", "leaf", "stone", "aris", "net", "moon", "nest", "loom", "owl", "wood")]
COLOURS = ["black", "white", "navy", "red", "grey", "olive", "blue", "pink", "beige", "green", "silver", "brown"]
SIZES = ["S", "M", "L", "XL", "US 9", "EU 42", "20 cm", "28 cm", "1.7 L", "500 ml", "2-pack", "set of 3",
         "12 in.", "24 in.", "6 ft.", "1/2 in.", "2x4x8", "65W", "10000mAh", "queen", "king"]


def titles(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        t = (f"{rng.choice(BRANDS)} {rng.choice(ADJ).title()} {rng.choice(ADJ).title()} {rng.choice(NOUNS).title()}"
             f" - {rng.choice(COLOURS).title()}, {rng.choice(SIZES)} #{rng.randrange(1000)}")
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def queries(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [" ".join([rng.choice(ADJ), rng.choice(NOUNS)] + ([rng.choice(COLOURS)] if rng.random() < 0.4 else []))
            for _ in range(n)]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def dir_mb(p: Path) -> float:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) / 2**20


def pct(xs, q):
    return float(np.percentile(np.asarray(xs) * 1000, q))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--encode-sample", type=int, default=2000)
    ap.add_argument("--encode-all", action="store_true", help="embed every title at every size (slow)")
    ap.add_argument("--dir", default=None, help="where to build (default: a temporary directory)")
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    import qkv
    from qkv.search import Index, build_index
    from qkv.search.catalog import Catalog
    from qkv.search.embedded import EmbeddedStore, title_hash
    from qkv.search.store import Manifest

    console = Console()
    sizes = [int(s) for s in args.sizes.split(",")]
    enc = qkv.load(threads=1)
    root = Path(args.dir or tempfile.mkdtemp(prefix="qkv-bench-search-"))
    sample_n = min(args.encode_sample, max(sizes))
    sample = titles(sample_n)
    t0 = time.perf_counter()
    sample_vecs = enc.encode(sample, batch_size=64)
    raw_rate = sample_n / (time.perf_counter() - t0)
    console.print(f"encoder alone: {raw_rate:,.0f} titles/s on {sample_n:,} generated titles (1 BLAS thread)")
    qs = queries(args.queries)
    build_rows, lat_rows, res_rows = [], [], []
    for n in sizes:
        path = root / f"idx-{n}"
        shutil.rmtree(path, ignore_errors=True)
        ts = titles(n)
        rows = [{"id": f"b{i}", "title": t, "price": float(5 + i % 200)} for i, t in enumerate(ts)]
        if n <= sample_n or args.encode_all:
            rep = build_index(Catalog(rows, "id", "title", {"price": "number"}), path, enc, batch_size=64)
            total, embed = rep.seconds, rep.embed_seconds
            overhead = total - embed
            how = "measured"
            rate = n / total
        else:  # realistic vectors: the sample's embeddings, jittered and renormalised
            rng = np.random.default_rng(n)
            m = Manifest(model=enc.name, fingerprint=enc.fingerprint(), dim=enc.dim)
            t1 = time.perf_counter()
            st = EmbeddedStore.create(path, m)
            with st.writer() as w:
                for a in range(0, n, 65536):
                    part = rows[a:a + 65536]
                    v = sample_vecs[np.arange(a, a + len(part)) % sample_n] + rng.normal(0, 0.03, (len(part), enc.dim)).astype(np.float32)
                    v /= np.linalg.norm(v, axis=1, keepdims=True)
                    w.upsert(part, v, [title_hash(r["title"]) for r in part])
            overhead = time.perf_counter() - t1
            embed = n / raw_rate
            rate = n / (embed + overhead)
            how = "encoder rate × n + rest measured"
        build_rows.append((n, rate, rate / raw_rate, overhead / (embed + overhead), dir_mb(path), how))
        # ---- latency
        before = rss_mb()
        with Index.open(path, enc) as idx:
            idx.search("warm up", k=10)
            mem = rss_mb() - before
            for mode in ("dense", "keyword", "hybrid"):
                parts = {k: [] for k in ("encode", "ann", "keyword", "fuse", "fetch", "total")}
                for q in qs:
                    t1 = time.perf_counter()
                    idx.search(q, k=10, mode=mode)
                    parts["total"].append(time.perf_counter() - t1)
                    for k_ in ("encode", "ann", "keyword", "fuse", "fetch"):
                        parts[k_].append(idx.last_timings.get(k_, 0.0))
                lat_rows.append((n, mode, *[(pct(parts[k], 50), pct(parts[k], 99)) for k in
                                            ("total", "encode", "ann", "keyword", "fetch")]))
            # ---- ANN recall@10 against exact search over the same vectors
            store = idx.store
            ann_kind = store.manifest.extra.get("ann_kind")
            qv = enc.encode(qs[:100])
            vecs = np.asarray(store.vectors, dtype=np.float32)
            exact = np.argsort(-(qv @ vecs.T), axis=1)[:, :10]
            import faiss

            D, I = store.ann.search(np.ascontiguousarray(qv), 10)
            rec = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(I, exact)]))
            res_rows.append((n, ann_kind, rec, mem, dir_mb(path)))
            del vecs
        if not args.dir:
            shutil.rmtree(path, ignore_errors=True)

    t = Table(title="index build (1 BLAS thread)")
    for c in ("products", "titles/s", "÷ encoder alone", "non-encoder share", "disk MB", "how"):
        t.add_column(c, justify="right")
    for n, rate, ratio, share, mb, how in build_rows:
        t.add_row(f"{n:,}", f"{rate:,.0f}", f"{ratio:.3f}", f"{share:.1%}", f"{mb:,.1f}", how)
    console.print(t)
    t = Table(title=f"query latency, ms p50 / p99 over {len(qs)} queries, k=10")
    for c in ("products", "mode", "total", "encode", "ANN", "keyword", "fetch"):
        t.add_column(c, justify="right")
    for n, mode, *parts in lat_rows:
        t.add_row(f"{n:,}", mode, *[f"{a:.2f} / {b:.2f}" for a, b in parts])
    console.print(t)
    t = Table(title="ANN quality and footprint")
    for c in ("products", "ANN", "recall@10 vs exact", "RSS after open MB", "disk MB", "disk per 1M GB"):
        t.add_column(c, justify="right")
    for n, kind, rec, mem, mb in res_rows:
        t.add_row(f"{n:,}", str(kind), f"{rec:.3f}", f"{mem:,.0f}", f"{mb:,.1f}", f"{mb / n * 1e6 / 1024:.2f}")
    console.print(t)
    if not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
