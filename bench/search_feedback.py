"""Dense pseudo-relevance feedback for English queries, measured on Home Depot dev, full corpus
(../shared data): the query vector moved toward its first hybrid results' titles, v' = unit(v + β ·
mean of the top k titles' vectors) (Rocchio 1971; the Chinese path's `crosslingual.feedback_vector`
does the same at k 3, β 0.25), then searched again. The hybrid lists are the weighted keyword
side's with the MiniLM query adapter, as `bench/search_maxsim.py`; k and β chosen on half a,
reported on half b.

    H=../shared/data/search/homedepot
    .venv/bin/python bench/search_feedback.py --data $H --work /tmp/densetw --plain /tmp/deepct/plain \\
        --adapter /tmp/densetw/adapter-a-t0.05-lr0.001-r0-h0-e3.npy
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_densepool import Judge, adapt, floats, unit  # noqa: E402
from search_ensemble import open_stack, stack_args, stack_lists  # noqa: E402

def feedback(V: np.ndarray, judge: Judge, first, Q: np.ndarray, k: int, beta: float) -> np.ndarray:
    """Each query vector plus β × the mean vector of its first ``k`` hybrid titles, unit length."""
    fb = np.stack([V[[judge.row[i] for i, _ in f[:k]]].mean(0) if f else np.zeros(V.shape[1], V.dtype)
                   for f in first])
    return unit(Q + beta * fb).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    stack_args(ap)
    ap.add_argument("--docs", default="3,5,10")
    ap.add_argument("--betas", default="0.1,0.25,0.5")
    a = ap.parse_args()

    judge, V, W = open_stack(a)
    for h in ("a", "b"):
        ns = judge.qids(h)
        Q = adapt(judge.q["vecs"][ns], W)
        first = stack_lists(judge, V, W, ns, depth=max(int(k) for k in floats(a.docs)))
        base = judge(V, h, "weighted", 0.5, qvecs=Q, modes=("hybrid",))["hybrid"]
        print(f"half {h}: hybrid {base[0]:.4f} / {base[1]:.4f}", flush=True)
        for k in (int(x) for x in floats(a.docs)):
            for beta in floats(a.betas):
                r = judge(V, h, "weighted", 0.5, qvecs=feedback(V, judge, first, Q, k, beta), modes=("hybrid",))["hybrid"]
                print(f"  {k} titles, β {beta:g}: {r[0]:.4f} ({r[0] - base[0]:+.4f}) / {r[1]:.4f}", flush=True)


if __name__ == "__main__":
    main()
