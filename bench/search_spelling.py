"""Spelling (``qkv.search.spelling``) measured on Home Depot dev, full corpus (../shared data): how
many queries hold a word no title holds, what each becomes, and keyword / dense / hybrid NDCG@10
with the speller's settings varied, every query searched as ``qkv eval search`` searches it.

    H=../shared/data/search/homedepot
    qkv index $H/corpus.jsonl --index /tmp/deepct/plain --model minilm
    B=".venv/bin/python bench/search_spelling.py --data $H --index /tmp/deepct/plain"
    $B words --half a --show 40                 # the unknown words and their corrections
    $B grid --half a --set LEAST_LETTERS=3,4,5 --set MAX_DISTANCE=1,2
    $B grid --half a --set EDIT_WEIGHT=2,4,6 --set SPLIT_COST=1,1.5,2

``grid`` runs ``evaluate`` over the half once per setting (the module's constants set, the
vocabulary's corrections dropped between settings); ``--set NAME=`` alone leaves the defaults, and
``qkv eval search --no-spell`` gives the figures with the dense side as typed. Results in
docs/search.md ("Spelling").
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"


def judged(data: Path, half: str):
    from qkv.search.evaluate import in_half, load_qrels, load_queries

    if not (data / "corpus.jsonl").is_file():
        raise SystemExit(f"no Home Depot data at {data} (../shared/data/search/homedepot; --data DIR)")
    queries, qrels = load_queries(data / "queries.dev.jsonl"), load_qrels(data / "qrels" / "dev.tsv")
    return {q: t for q, t in queries.items() if q in qrels and in_half(q, half)}, qrels


def words(args) -> None:
    from qkv.model import shared_encoder
    from qkv.search.index import Index
    from qkv.search.store import read_manifest
    from qkv.text import keywords

    queries, _ = judged(args.data, args.half)
    idx = Index.open(args.index, shared_encoder(read_manifest(args.index).model))  # the model guard
    voc = idx.store.keyword.vocab
    unknown = fixed = 0
    shown = 0
    for text in queries.values():
        terms = keywords.terms(text)
        if any(not voc.df(t) for t in terms):
            unknown += 1
            new = idx.plan(text).corrected  # as search plans it
            fixed += new is not None
            if new is not None and shown < args.show:
                print(f"  {text}  →  {new}")
                shown += 1
    print(f"{len(queries):,} queries: {unknown:,} hold a word no title holds, {fixed:,} searched as a correction")


def grid(args) -> None:
    from qkv.model import shared_encoder
    from qkv.search import spelling
    from qkv.search.evaluate import evaluate
    from qkv.search.index import Index
    from qkv.search.store import read_manifest

    queries, qrels = judged(args.data, args.half)
    axes = []
    for item in args.set:
        name, _, values = item.partition("=")
        if not hasattr(spelling, name):
            raise SystemExit(f"qkv.search.spelling has no setting {name}")
        kind = type(getattr(spelling, name))
        axes.append((name, [kind(v) for v in values.split(",")] if values else [getattr(spelling, name)]))
    enc = shared_encoder(read_manifest(args.index).model)
    with Index.open(args.index, enc) as idx:
        voc = idx.store.keyword.vocab
        for combo in itertools.product(*(v for _, v in axes)):
            for (name, _), v in zip(axes, combo):
                setattr(spelling, name, v)
            voc._fixes.clear()
            voc._words = None  # LEAST_DF decides which words may be offered
            r = evaluate(idx, queries, qrels)
            m = r.metrics
            print(" ".join(f"{n}={v:g}" for (n, _), v in zip(axes, combo)),
                  f"corrected {r.settings['corrected']:,}: keyword {m['keyword']['ndcg@10']:.4f}  dense "
                  f"{m['dense']['ndcg@10']:.4f}  hybrid {m['hybrid']['ndcg@10']:.4f} / R@100 "
                  f"{m['hybrid']['recall@100']:.4f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("words", "grid"))
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--index", type=Path, required=True, help="a full-corpus index (`qkv index`)")
    ap.add_argument("--half", choices=("a", "b", "all"), default="a")
    ap.add_argument("--show", type=int, default=20, help="words: how many corrected queries to print")
    ap.add_argument("--set", action="append", default=[], help="grid: NAME=v1,v2 (a qkv.search.spelling constant)")
    args = ap.parse_args()
    {"words": words, "grid": grid}[args.what](args)


if __name__ == "__main__":
    main()
