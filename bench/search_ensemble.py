"""Two dense models in one fusion, measured on Home Depot dev, full corpus (../shared data):
all-MiniLM-L6-v2 and multilingual-e5-small indexes of the same catalog, their cosines and the
keyword side's BM25 summed as w_m·cos_m + w_e·cos_e + (1 − w_m − w_e)·BM25/max (``fusion.
score_fusion`` with a second cosine; the BM25 is the weighted index's coverage-weighted one, over
the union of each side's 200 candidates, as ``Index.fuse`` takes them). Two models trained apart
make different mistakes, so their mean should break BM25's ties better than either. The weights
are chosen on half a with no query adapter (both adapters were fitted on half a's judgments, so
half a with them favours the dense side), then half b is scored with and without the adapters.

    H=../shared/data/search/homedepot
    .venv/bin/python bench/search_ensemble.py --data $H --work /tmp/densetw \\
        --minilm /tmp/deepct/plain --minilm-adapter /tmp/densetw/adapter-a-t0.05-lr0.001-r0-h0-e3.npy \\
        --e5 /tmp/hd-e5-ad          # an e5 index with `qkv terms adapt` run on it (half a)
    # needs search_densepool.py's caches in --work (`tokens` for the ids, `queries`)
    # --wms 0.1 --wes 0.6 --write-lists /tmp/densetw/ensemble-lists.pkl: those lists, for search_rerank.py score
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_densepool import Judge, adapt, floats  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"


def title_vectors(path: Path, ids: list[str]) -> np.ndarray:
    from qkv.search.store import open_store

    st = open_store(path)
    try:
        return np.asarray(st.get_vectors(ids), np.float32)
    finally:
        st.close()


def stack_args(ap: argparse.ArgumentParser) -> None:
    """The options of a bench over the whole stack's hybrid lists (search_prior.py, search_feedback.py)."""
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--work", type=Path, default=Path("/tmp/densetw"), help="search_densepool.py's caches")
    ap.add_argument("--plain", type=Path, required=True, help="the plain MiniLM index (its title vectors)")
    ap.add_argument("--adapter", type=Path, required=True, help="a query adapter W (.npy) fitted on half a")


def open_stack(a) -> tuple[Judge, np.ndarray, np.ndarray]:
    """(judge, title vectors in the token cache's order, adapter W) from ``stack_args``' options."""
    ids = json.loads((a.work / "tok" / "ids.json").read_text())
    return Judge(a.data, a.work, ids), title_vectors(a.plain, ids), np.load(a.adapter)


def stack_lists(judge: Judge, V: np.ndarray, W: np.ndarray, ns: list[int], depth: int = 100) -> list:
    """The stack's hybrid top ``depth`` of each query of ``ns``: the weighted keyword side, the
    MiniLM cosines of the adapted query vectors, ``Index.fuse``'s fusion at α 0.5."""
    return [f for _, _, _, f in judge.lists(V, ns, "weighted", 0.5, qvecs=adapt(judge.q["vecs"][ns], W), depth=depth)]


def e5_queries(data: Path, work: Path, e5: Path, judge: Judge) -> tuple[np.ndarray, np.ndarray]:
    """The e5 index's query vectors of every cached query (its plans' dense text, "query: "),
    without and with its adapter; cached in ``work/e5q.pkl``."""
    f = work / "e5q.pkl"
    if f.is_file():
        return pickle.loads(f.read_bytes())
    from qkv.model import shared_encoder
    from qkv.search.evaluate import load_queries
    from qkv.search.index import Index
    from qkv.search.store import read_manifest

    queries = load_queries(data / "queries.dev.jsonl")
    with Index.open(e5, shared_encoder(read_manifest(e5).model)) as idx:
        plans = [idx.plan(queries[q]) for q in judge.q["qids"]]
        out = (idx.plan_vectors(plans, adapt=False), idx.plan_vectors(plans, adapt=True))
    f.write_bytes(pickle.dumps(out))
    return out


def candidates(judge: Judge, ns, Vm, Ve, Qm, Qe, side: str):
    """Per query: candidate rows (each model's cosine top 200 ∪ keyword top 200), both cosines, BM25/max."""
    from qkv.search.index import CANDIDATES

    out = []
    for a in range(0, len(ns), 256):
        b = ns[a:a + 256]
        Sm, Se = Qm[b] @ Vm.T, Qe[b] @ Ve.T
        tm = np.argpartition(-Sm, CANDIDATES, axis=1)[:, :CANDIDATES]
        te = np.argpartition(-Se, CANDIDATES, axis=1)[:, :CANDIDATES]
        for r, n in enumerate(b):
            _, ks = judge.q[side][n]
            empty = not judge.q["text"][n].strip()  # as Judge.lists: no dense candidates
            rows = np.unique(np.concatenate([[] if empty else tm[r], [] if empty else te[r],
                                             [judge.row[i] for i in ks]]).astype(np.int64))
            kw = np.zeros(len(rows))
            if ks:
                at = {x: j for j, x in enumerate(rows)}
                top = max(ks.values())
                for i, s in ks.items():
                    kw[at[judge.row[i]]] = s / top
            out.append((n, rows, Sm[r, rows], Se[r, rows], kw))
    return out


def per_query(judge: Judge, cands, wm: float, we: float) -> np.ndarray:
    """Each query's NDCG@10 (NaN: nothing relevant judged) and Recall@100, [n, 2]."""
    from qkv.search.evaluate import ndcg, recall

    nd, rc = [], []
    for n, rows, cm, ce, kw in cands:
        s = wm * cm + we * ce + (1 - wm - we) * kw
        ranking = [judge.ids[j] for j in rows[np.argsort(-s, kind="stable")[:100]]]
        judged = judge.qrels[judge.q["qids"][n]]
        nd.append(ndcg(ranking, judged, 1.0))
        rc.append(recall(ranking, judged, 1.0))
    return np.array([nd, rc], np.float64).T


def fused_lists(judge: Judge, cands, wm: float, we: float, depth: int = 100) -> dict[int, list]:
    """Per query row: its fused top ``depth`` as (id, fused score), as ``per_query`` ranks them."""
    out = {}
    for n, rows, cm, ce, kw in cands:
        s = wm * cm + we * ce + (1 - wm - we) * kw
        top = np.argsort(-s, kind="stable")[:depth]
        out[n] = [(str(judge.ids[rows[j]]), float(s[j])) for j in top]
    return out


def score(judge: Judge, cands, wm: float, we: float) -> tuple[float, float]:
    nd, rc = np.nanmean(per_query(judge, cands, wm, we), axis=0)
    return float(nd), float(rc)


def paired_se(x: np.ndarray, y: np.ndarray) -> float:
    """The standard error of mean(y − x) over the queries both score (paired: the same queries)."""
    d = (y - x)[~(np.isnan(x) | np.isnan(y))]
    return float(d.std(ddof=1) / np.sqrt(len(d)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--work", type=Path, default=Path("/tmp/densetw"))
    ap.add_argument("--minilm", type=Path, required=True, help="a MiniLM index of the corpus")
    ap.add_argument("--minilm-adapter", type=Path, required=True, help="its query adapter W (.npy, fitted on half a)")
    ap.add_argument("--e5", type=Path, required=True, help="a multilingual-e5-small index with its adapter (half a)")
    ap.add_argument("--side", choices=("plain", "weighted"), default="weighted", help="the keyword side")
    ap.add_argument("--wms", default="0,0.1,0.15,0.2,0.25,0.3,0.5")
    ap.add_argument("--wes", default="0,0.3,0.4,0.5,0.55,0.6,0.65,0.7,0.75,0.8")
    ap.add_argument("--write-lists", type=Path, metavar="PKL",
                    help="only write every query's fused top 100 with both adapters at --wms/--wes' first "
                         "weights (for search_rerank.py score) and stop")
    a = ap.parse_args()

    ids = json.loads((a.work / "tok" / "ids.json").read_text())
    judge = Judge(a.data, a.work, ids)
    t0 = time.perf_counter()
    Vm, Ve = title_vectors(a.minilm, ids), title_vectors(a.e5, ids)
    Qm = {False: judge.q["vecs"], True: adapt(judge.q["vecs"], np.load(a.minilm_adapter))}
    e0, e1 = e5_queries(a.data, a.work, a.e5, judge)
    Qe = {False: e0, True: e1}
    print(f"vectors ready ({time.perf_counter() - t0:.0f}s)", flush=True)
    if a.write_lists:
        wm, we = floats(a.wms)[0], floats(a.wes)[0]
        ns = list(range(len(judge.q["qids"])))
        got = fused_lists(judge, candidates(judge, ns, Vm, Ve, Qm[True], Qe[True], a.side), wm, we)
        a.write_lists.write_bytes(pickle.dumps([got[n] for n in ns]))
        for h in ("a", "b"):
            print(f"half {h}, w_m {wm:g}, w_e {we:g}, adapters: NDCG@10 / R@100 "
                  f"{score(judge, candidates(judge, judge.qids(h), Vm, Ve, Qm[True], Qe[True], a.side), wm, we)}")
        return
    grid = [(wm, we) for wm in floats(a.wms) for we in floats(a.wes) if wm + we < 0.96]
    singles = {"MiniLM alone (α 0.5)": (0.5, 0.0), "e5 alone (α 0.8)": (0.0, 0.8)}

    def table(half: str, adapters: bool):
        c = candidates(judge, judge.qids(half), Vm, Ve, Qm[adapters], Qe[adapters], a.side)
        return c, {w: score(judge, c, *w) for w in grid + list(singles.values())}

    def gain(c, w) -> str:  # NDCG@10 of ``w`` minus MiniLM alone's, ± its paired standard error
        x, y = per_query(judge, c, *singles["MiniLM alone (α 0.5)"])[:, 0], per_query(judge, c, *w)[:, 0]
        return f"{np.nanmean(y) - np.nanmean(x):+.4f} ± {paired_se(x, y):.4f}"

    _, on_a = table("a", False)
    chosen = max(grid, key=lambda w: on_a[w][0])
    print(f"half a, no adapters: {', '.join(f'{k} {on_a[w][0]:.4f}' for k, w in singles.items())}; "
          f"best w_m {chosen[0]:g}, w_e {chosen[1]:g}: {on_a[chosen][0]:.4f} / {on_a[chosen][1]:.4f}", flush=True)
    print("\nhalf b, NDCG@10 / Recall@100 at half a's weights:")
    print("| adapters | MiniLM alone (α 0.5) | e5 alone (α 0.8) | both (w_m {:g}, w_e {:g}) | both − MiniLM alone "
          "| best weights on b |".format(*chosen))
    print("|---|---|---|---|---|---|")
    for adapters in (False, True):
        c, on_b = table("b", adapters)
        best = max(grid, key=lambda w: on_b[w][0])
        cell = [f"{on_b[w][0]:.4f} / {on_b[w][1]:.4f}" for w in (*singles.values(), chosen)]
        print(f"| {'yes' if adapters else 'no'} | " + " | ".join(cell) + f" | {gain(c, chosen)} "
              f"| w_m {best[0]:g}, w_e {best[1]:g}: {on_b[best][0]:.4f} |", flush=True)
    print(f"({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
