"""A product prior from the seller's search log, measured on Home Depot dev, full corpus (../shared
data): re-order each query's hybrid top K by z(fused) + λ·z(log(1 + c)), c = how many of the
training half's queries found the product (judged it at all, or relevant: the gains summed) — the
popularity prior of learning to rank, here from the same query–product pairs `qkv terms` learns
from. Chosen on a2 (counts from a1), then counts from half a, reported on half b. The hybrid lists
are the weighted keyword side's with the MiniLM query adapter, as `bench/search_maxsim.py`.

    H=../shared/data/search/homedepot
    .venv/bin/python bench/search_prior.py --data $H --work /tmp/densetw --plain /tmp/deepct/plain \\
        --adapter /tmp/densetw/adapter-a-t0.05-lr0.001-r0-h0-e3.npy
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_densepool import Judge, floats  # noqa: E402
from search_ensemble import open_stack, stack_args, stack_lists  # noqa: E402
from search_maxsim import rerank_lists  # noqa: E402
from search_rerank import metrics  # noqa: E402

def counts(judge: Judge, half: str, relevant_only: bool) -> dict[str, float]:
    c: dict[str, float] = {}
    for n in judge.qids(half):
        for d, g in judge.qrels[judge.q["qids"][n]].items():
            if not relevant_only:
                c[d] = c.get(d, 0.0) + 1.0
            elif g > 1:
                c[d] = c.get(d, 0.0) + g - 1.0
    return c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    stack_args(ap)
    ap.add_argument("--ks", default="10,30,100")
    ap.add_argument("--lambdas", default="0.1,0.2,0.3,0.5,1")
    a = ap.parse_args()

    judge, V, W = open_stack(a)
    for train, ev in (("a1", "a2"), ("a", "b")):
        ns = judge.qids(ev)
        lists = stack_lists(judge, V, W, ns)
        base = metrics(judge, ns, [[i for i, _ in l] for l in lists])[0]
        print(f"counts from {train}, scored on {ev} (hybrid {base:.4f}): NDCG@10 change", flush=True)
        for rel in (False, True):
            c = counts(judge, train, rel)
            prior = [np.log1p([c.get(i, 0.0) for i, _ in l]) for l in lists]
            for k in (int(x) for x in floats(a.ks)):
                row = [f"λ {lam:g}: {metrics(judge, ns, rerank_lists(lists, prior, k, lam))[0] - base:+.4f}"
                       for lam in floats(a.lambdas)]
                print(f"  {'relevant gains' if rel else 'judged at all':14s} K {k:3d} | " + "  ".join(row), flush=True)


if __name__ == "__main__":
    main()
