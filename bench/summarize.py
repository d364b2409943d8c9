"""Benchmark for qkv.summarize: scale, and the scoring variants on the FewSum dev data.

    .venv/bin/python bench/summarize.py               # scale: 10,000 Chinese reviews, one thread
    .venv/bin/python bench/summarize.py --quick       # 2,500 reviews
    .venv/bin/python bench/summarize.py --variants    # + the variant comparison on FewSum train+val
    .venv/bin/python bench/summarize.py --agreement   # + clustered vs full path on 500 reviews

Scale: the clustered path (cheap static vectors → k-means → encoder on one representative per
cluster) on growing slices of ../shared/data/reviews/online_shopping_10_cats_zh.csv, wall and CPU
time per stage (the machine is shared: CPU time is what one thread needs), with the peak of traced
memory; the reference measured in the same run is the unreduced path (every sentence through the
encoder) on 600 of the same sentences, scaled linearly (a lower bound: its attention grows with n²).
Needs ../shared/data; says so and exits 0 when it is absent.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("QKV_SHARED", HERE.parent.parent / "shared")) / "data"
ZH = SHARED / "reviews" / "online_shopping_10_cats_zh.csv"
FEWSUM = SHARED / "summaries" / "fewsum_amazon"


def _reviews(n: int) -> list[str]:
    with open(ZH, encoding="utf-8", newline="") as f:
        rows = [r["review"] for r in csv.DictReader(f) if (r.get("review") or "").strip()]
    return rows[:n]


def scale(console, sizes: list[int]) -> None:
    from rich.table import Table
    from threadpoolctl import threadpool_limits

    import qkv
    from qkv.summarize import Params, get_counter, prepare, select

    enc = qkv.load(threads=1)
    counter = get_counter("cl100k")
    params = Params()
    table = Table(title="summaries at scale · one thread · budget 75 cl100k tokens · zh shopping reviews "
                        f"· {params.clusters} clusters")
    for col in ("reviews", "sentences", "prepare s (cpu)", "count+select s (cpu)", "total wall s", "total cpu s",
                "peak MiB", "dense n×n MiB", "tokens before → after", "saving"):
        table.add_column(col, justify="right")
    last = None
    with threadpool_limits(1):
        for n in sizes:
            reviews = _reviews(n)
            tracemalloc.start()
            w0, c0 = time.perf_counter(), time.process_time()
            doc = prepare(reviews, encoder=enc, params=params)
            w1, c1 = time.perf_counter(), time.process_time()
            before = counter.count("\n".join(reviews))
            s = select(doc, 75, counter, params, tokens_before=before)
            w2, c2 = time.perf_counter(), time.process_time()
            peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
            tracemalloc.stop()
            assert s.tokens_after <= 75
            table.add_row(f"{len(reviews):,}", f"{doc.n:,}", f"{w1 - w0:.1f} ({c1 - c0:.1f})",
                          f"{w2 - w1:.1f} ({c2 - c1:.1f})", f"{w2 - w0:.1f}", f"{c2 - c0:.1f}", f"{peak:,.0f}",
                          f"{doc.n ** 2 * 4 / 2 ** 20:,.0f}", f"{before:,} → {s.tokens_after}", f"{s.saving:.2f}%")
            last = (doc, w2 - w0, c2 - c0, s)
        # Reference, same run: every sentence through the encoder (the unreduced path), timed on a
        # slice of the same sentences and scaled linearly (a lower bound: dense attention is n²).
        doc, wall, cpu, s = last
        ref = doc.texts[:600]
        w0, c0 = time.perf_counter(), time.process_time()
        enc.encode(ref)
        rw, rc = (time.perf_counter() - w0) / len(ref), (time.process_time() - c0) / len(ref)
    console.print(table)
    console.print(f"reference, same run: the encoder on {len(ref)} of these sentences takes {rw * 1e3:.1f} ms each "
                  f"({rc * 1e3:.1f} ms cpu) → every one of {doc.n:,} sentences ≥ {rw * doc.n:,.0f} s wall "
                  f"({rc * doc.n:,.0f} s cpu); the clustered path took {wall:.1f} s wall ({cpu:.1f} s cpu): "
                  f"[bold]{rc * doc.n / cpu:.0f}× less cpu[/]")
    console.print(f"summary of the largest slice ({s.saving:.2f}% of {s.tokens_before:,} tokens saved):\n  {s.text}")


def agreement(console, n_reviews: int = 500) -> None:
    """How close the clustered path's summary is to the full path's on the same reviews."""
    from dataclasses import replace

    from rich.table import Table
    from threadpoolctl import threadpool_limits

    import qkv
    from qkv.summarize import Params, get_counter, prepare, select
    from qkv.summarize.rouge import rouge

    enc = qkv.load(threads=1)
    counter = get_counter("cl100k")
    with open(ZH, encoding="utf-8", newline="") as f:
        rows = [r["review"] for r in csv.DictReader(f) if r.get("cat") == "平板" and (r.get("review") or "").strip()]
    reviews = rows[:n_reviews]
    base = Params(full_limit=10 ** 9)
    table = Table(title=f"clustered vs full path · {len(reviews)} tablet reviews (zh) · budget 75 cl100k")
    for col in ("path", "sentences encoded", "cpu s", "ROUGE-1/2 vs the full path's summary (unicode)",
                "sentences shared"):
        table.add_column(col, justify="right")
    with threadpool_limits(1):
        c0 = time.process_time()
        full_doc = prepare(reviews, encoder=enc, params=base)
        full = select(full_doc, 75, counter, base)
        full_cpu = time.process_time() - c0
        table.add_row("full", f"{len(full_doc.cand):,}", f"{full_cpu:.1f}", "100 / 100", f"{len(full.sentences)}")
        for how, k in (("cluster", 200), ("cluster", 400), ("sample", 200), ("sample", 400)):
            p = replace(base, full_limit=0, clusters=k, reduce=how)
            c0 = time.process_time()
            d = prepare(reviews, encoder=enc, params=p)
            s = select(d, 75, counter, p)
            cpu = time.process_time() - c0
            r = rouge(s.text, [full.text], tokenizer="unicode")
            shared = len({x.text for x in s.sentences} & {x.text for x in full.sentences})
            table.add_row(f"{how} {k}", f"{len(d.cand):,}", f"{cpu:.1f}", f"{r['rouge1']:.1f} / {r['rouge2']:.1f}",
                          f"{shared} of {len(s.sentences)}")
        # Context: random sentences under the same budget (mean of 5 seeds).
        from qkv.summarize.baselines import fill, rank_random
        from qkv.summarize.core import _joiner

        rs = [rouge(_joiner([full_doc.texts[i] for i in fill(rank_random(full_doc.texts, seed), full_doc.texts, 75,
                                                              counter, _joiner)]), [full.text], tokenizer="unicode")
              for seed in range(5)]
        table.add_row("random sentences", "0", "-", f"{sum(r['rouge1'] for r in rs) / 5:.1f} / "
                      f"{sum(r['rouge2'] for r in rs) / 5:.1f}", "-", style="dim")
    console.print(table)


def variants(console) -> None:
    from dataclasses import replace

    from rich.table import Table

    import qkv
    from qkv.summarize import Params
    from qkv.summarize.evaluate import evaluate, load_products, prepare_all

    enc = qkv.load(threads=1)
    products = load_products(FEWSUM)
    docs = prepare_all(products, enc)
    base = Params()
    rows = [
        ("default: stationary π, τ=0.2, log MMR λ=0.7, personal ×0.5, balance", base),
        ("in-degree (one attention step) instead of π", replace(base, score="received")),
        ("cosine to the mean embedding instead of π", replace(base, score="centroid")),
        ("τ = 0.1", replace(base, tau=0.1)),
        ("τ = 0.3", replace(base, tau=0.3)),
        ("linear MMR relevance (π / max π), λ=0.6, τ=0.3", replace(base, relevance="linear", lam=0.6, tau=0.3)),
        ("no MMR (λ = 1, no duplicate guard)", replace(base, lam=1.0, duplicate=1.01)),
        ("no personal-sentence prior", replace(base, personal=1.0)),
        ("no rating balance", replace(base, balance=False)),
    ]
    budgets = (40, 75, 150)
    table = Table(title=f"variants on FewSum train+val ({len(products)} products) · ROUGE-1 F1 · cl100k budgets")
    table.add_column("variant")
    for b in budgets:
        table.add_column(f"R-1@{b}", justify="right")
    table.add_column("R-2@75", justify="right")
    table.add_column("R-L@75", justify="right")
    for name, p in rows:
        r = evaluate(products, budgets, encoder=enc, docs=docs, systems=("qkv",), params=p)
        table.add_row(name, *[f"{r.score('qkv', b):.2f}" for b in budgets], f"{r.score('qkv', 75, 'rouge2'):.2f}",
                      f"{r.score('qkv', 75, 'rougeL'):.2f}")
    r = evaluate(products, budgets, encoder=enc, docs=docs, systems=("lexrank", "centroid"))
    for sysname in ("lexrank", "centroid"):
        table.add_row(f"baseline: {sysname}", *[f"{r.score(sysname, b):.2f}" for b in budgets],
                      f"{r.score(sysname, 75, 'rouge2'):.2f}", f"{r.score(sysname, 75, 'rougeL'):.2f}",
                      style="dim")
    console.print(table)


def main() -> int:
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the tokenizers library: one thread too
    from rich.console import Console

    console = Console() if sys.stdout.isatty() else Console(width=170)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2,500 reviews only")
    ap.add_argument("--variants", action="store_true", help="also compare scoring variants on FewSum train+val")
    ap.add_argument("--agreement", action="store_true", help="also compare the clustered path with the full one")
    args = ap.parse_args(sys.argv[1:])
    if not ZH.is_file():
        console.print(f"[yellow]summarize bench skipped:[/] {ZH} is absent (the shared data lives beside the repo)")
        return 0
    # 10,000 reviews here are about 22,000 sentences (short Chinese reviews); 25,000 reach ~50,000.
    scale(console, [2500] if args.quick else [2500, 10000, 25000])
    if args.agreement:
        agreement(console)
    if args.variants:
        if FEWSUM.is_dir():
            variants(console)
        else:
            console.print(f"[yellow]variants skipped:[/] {FEWSUM} is absent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
