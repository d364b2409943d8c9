"""A cross-encoder fine-tuned on the seller's judged pairs, re-ranking the hybrid search's top
candidates, measured on Home Depot dev, full corpus (../shared data). Issue 28's hybrid target is
+0.022 NDCG@10; every dense-side change and the learned fusion moved hybrid by +0.003–0.006
(docs/search.md), because the cosine mostly breaks ties among titles BM25 already ranks. A model
that reads query and title together (monoBERT, Nogueira & Cho 2019) can overrule BM25 where it
knows better; this measures how much, before anything is built into the package.

torch, bench only: MiniLM (all-MiniLM-L6-v2) with a linear score on [CLS], trained listwise — per
query, a softmax over its judged relevant titles and hard negatives from its own hybrid top 50,
the target ∝ the gain (judgment − 1) — AdamW with 10% warm-up, the encoder at ``--lr`` (default
2e-5, which gained nothing in an epoch; the runs in docs/search.md that gained used 1e-4) and the
new score at ``--head-lr`` (1e-3).

    H=../shared/data/search/homedepot
    B=".venv/bin/python bench/search_rerank.py --data $H --work /tmp/densetw"
    $B lists --plain plain                           # hybrid top 100 of every judged query (needs queries.pkl)
    $B ceiling --half b                              # what the judgments leave to win
    $B train --train a1 --half a2 --epochs 3 --lr 1e-4   # choose K and λ on a2, then --train a --half b
    # over the whole stack's lists (spelling, the term head, the query adapter fitted on half a):
    $B lists --plain plain --adapter /tmp/densetw/adapter-a-t0.05-lr0.001-r0-h0-e3.npy --lists stack-lists.pkl
    $B train --lists stack-lists.pkl --train a --half b --epochs 3 --lr 1e-4 --ks 10,20,30 --lambdas 1,2
    # the same cross-encoder over the two-model fusion's lists (search_ensemble.py --write-lists):
    $B score --lists ensemble-lists.pkl --half b --checkpoint /tmp/densetw/ce-stack-lists-a-e3.pt \
        --reuse /tmp/densetw/stack-lists.pkl /tmp/densetw/ce-stack-lists-a-e3-on-b.npy --ks 10,20,30 --lambdas 1,2
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

from search_densepool import Judge, floats  # noqa: E402
from search_ensemble import paired_se, stack_lists  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TOP = 100


def hybrid_lists(judge: Judge, V: np.ndarray, side: str = "weighted", alpha: float = 0.5) -> list:
    """Per cached query: its hybrid top ``TOP`` as (id, fused score), by ``Index.fuse``'s fusion."""
    ns = list(range(len(judge.q["qids"])))
    return [[(str(i), float(s)) for i, s in fused] for _, _, _, fused in judge.lists(V, ns, side, alpha, depth=TOP)]


def metrics(judge: Judge, ns: list[int], rankings: list[list[str]]) -> tuple[float, float]:
    from qkv.search.evaluate import ndcg, recall

    nd = [ndcg(r, judge.qrels[judge.q["qids"][n]], 1.0) for n, r in zip(ns, rankings)]
    rc = [recall(r, judge.qrels[judge.q["qids"][n]], 1.0) for n, r in zip(ns, rankings)]
    return float(np.nanmean(nd)), float(np.nanmean(rc))


def per_query_ndcg(judge: Judge, ns: list[int], rankings: list[list[str]]) -> np.ndarray:
    from qkv.search.evaluate import ndcg

    return np.array([ndcg(r, judge.qrels[judge.q["qids"][n]], 1.0) for n, r in zip(ns, rankings)], np.float64)


def ceiling(judge: Judge, lists, ns: list[int], title: dict[str, str], ks=(10, 30, 100)) -> None:
    """What the judgments leave to win: how many of the hybrid top ten were never judged, the
    NDCG@10 of each query's top K put in the judgments' own order (what a perfect re-ranker of K
    would reach), and the NDCG@10 if a title identical to a judged title counted as judged the same."""
    ranks = [[i for i, _ in lists[n]] for n in ns]
    judged = [judge.qrels[judge.q["qids"][n]] for n in ns]
    top = sum(min(10, len(r)) for r in ranks)
    unjudged = sum(1 for r, j in zip(ranks, judged) for i in r[:10] if i not in j)
    print(f"top ten: {unjudged:,} of {top:,} titles never judged for their query ({unjudged / top:.0%})")
    for k in ks:
        oracle = [sorted(r[:k], key=lambda i: -j.get(i, 0.0)) + r[k:] for r, j in zip(ranks, judged)]
        print(f"top {k} in the judgments' order: NDCG@10 {metrics(judge, ns, oracle)[0]:.4f}")
    twins = []
    for r, j in zip(ranks, judged):
        best: dict[str, float] = {}
        for i, g in j.items():
            t = title[i].lower()
            best[t] = max(best.get(t, 0.0), g)
        twins.append({**{i: best[title[i].lower()] for i in r if title[i].lower() in best}, **j})
    from qkv.search.evaluate import ndcg

    nd = [ndcg(r, t, 1.0) for r, t in zip(ranks, twins)]
    counts: dict[str, int] = {}
    for t in title.values():
        counts[t.lower()] = counts.get(t.lower(), 0) + 1
    print(f"identical titles judged alike: NDCG@10 {np.nanmean(nd):.4f} "
          f"({sum(c for c in counts.values() if c > 1):,} catalog titles share their title with another)")


def zscore(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() + 1e-9)


def reorder(lists, scores, k: int, w_score: float, w_fused: float) -> list[list[str]]:
    """Each query's top K re-ordered by w_score·z(score) + w_fused·z(fused score) (z: within the
    query's K); the rest keep their places. ``scores``: per query, a score per listed title."""
    ranks = []
    for lst, sc in zip(lists, scores):
        head = lst[:k]
        if len(head) < 2:
            ranks.append([i for i, _ in lst])
            continue
        f = np.array([s for _, s in head])
        c = np.asarray(sc[:len(head)])
        order = np.argsort(-(w_score * zscore(c) + w_fused * zscore(f)), kind="stable")
        ranks.append([head[j][0] for j in order] + [i for i, _ in lst[k:]])
    return ranks


def rerank(lists, scores, ks, lambdas):
    """Each query's top K re-ordered by z(CE) + λ·z(fused), for every K and λ (``reorder``)."""
    return {(k, lam): reorder(lists, scores, k, 1.0, lam) for k in ks for lam in lambdas}


class CrossEncoder:
    def __init__(self, model_dir: Path, seed: int = 0):
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.manual_seed(seed)
        torch.set_num_threads(2)
        self.torch = torch
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.net = AutoModel.from_pretrained(model_dir)
        self.head = torch.nn.Linear(self.net.config.hidden_size, 1)

    def __call__(self, qs: list[str], ts: list[str]):
        x = self.tok(qs, ts, padding=True, truncation=True, max_length=64, return_tensors="pt")
        return self.head(self.net(**x).last_hidden_state[:, 0]).squeeze(-1)

    def score(self, qs: list[str], ts: list[str], batch: int = 256) -> np.ndarray:
        self.net.eval()
        out = []
        with self.torch.inference_mode():
            for a in range(0, len(qs), batch):
                out.append(self(qs[a:a + batch], ts[a:a + batch]).numpy())
        return np.concatenate(out) if out else np.zeros(0, np.float32)


def groups(judge: Judge, lists, ns, rng, size: int, pool: int):
    """Per query: (ids, target) — its relevant judged titles (≤ size/2, the highest gains) and
    hard negatives from its hybrid top ``pool`` that are not relevant."""
    out = []
    for n in ns:
        judged = judge.qrels[judge.q["qids"][n]]
        pos = sorted(((g - 1.0, i) for i, g in judged.items() if g - 1.0 > 0), reverse=True)[:size // 2]
        if not pos:
            continue
        posset = {i for _, i in pos}
        neg = [i for i, _ in lists[n][:pool] if i not in posset and judged.get(i, 1.0) - 1.0 <= 0]
        neg = [neg[j] for j in rng.permutation(len(neg))[:size - len(pos)]]
        ids = [i for _, i in pos] + neg
        t = np.array([g for g, _ in pos] + [0.0] * len(neg), np.float32)
        out.append((n, ids, t / t.sum()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=("lists", "ceiling", "train", "score"))
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--work", type=Path, default=Path("/tmp/densetw"))
    ap.add_argument("--plain", type=Path, help="the plain MiniLM index (its title vectors)")
    ap.add_argument("--adapter", type=Path, help="lists: the whole stack's, with this query adapter W (.npy)")
    ap.add_argument("--lists", default="hybrid-lists.pkl", help="the lists' cache, in --work")
    ap.add_argument("--train", default="a1")
    ap.add_argument("--half", default="a2")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--head-lr", type=float, default=1e-3)
    ap.add_argument("--score-epochs", default="", help="epochs after which to score (default: the last)")
    ap.add_argument("--group", type=int, default=16)
    ap.add_argument("--pool", type=int, default=50)
    ap.add_argument("--queries-per-step", type=int, default=4)
    ap.add_argument("--ks", default="10,20,30,50,100")
    ap.add_argument("--lambdas", default="0,0.25,0.5,1,2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoint", type=Path, help="score: a cross-encoder `train` saved (ce-*.pt)")
    ap.add_argument("--reuse", nargs=2, type=Path, metavar=("LISTS", "SCORES"),
                    help="score: pairs already scored — the lists cache and the .npy `train` wrote for --half")
    a = ap.parse_args()

    ids = json.loads((a.work / "tok" / "ids.json").read_text())
    judge = Judge(a.data, a.work, ids)
    lf = a.work / a.lists
    tag = "" if a.lists == "hybrid-lists.pkl" else f"{Path(a.lists).stem}-"  # the first runs' file names
    if a.stage == "lists":
        from qkv.search.store import open_store

        st = open_store(a.plain)
        try:
            V = np.asarray(st.get_vectors(ids), np.float32)
        finally:
            st.close()
        if a.adapter:
            ns = list(range(len(judge.q["qids"])))
            lists = [[(str(i), float(s)) for i, s in f] for f in stack_lists(judge, V, np.load(a.adapter), ns, TOP)]
        else:
            lists = hybrid_lists(judge, V)
        lf.write_bytes(pickle.dumps(lists))
        for h in ("a", "b"):
            ns = judge.qids(h)
            print(f"half {h}: hybrid NDCG@10 / R@100 {metrics(judge, ns, [[i for i, _ in lists[n]] for n in ns])}")
        return

    from qkv.search.catalog import read_catalog

    lists = pickle.loads(lf.read_bytes())
    title = {r["id"]: r["title"] for r in read_catalog(a.data / "corpus.jsonl").rows}
    if a.stage == "ceiling":
        ceiling(judge, lists, judge.qids(a.half), title)
        return
    import torch

    from qkv.model.hub import resolve
    from qkv.search.evaluate import load_queries

    queries = load_queries(a.data / "queries.dev.jsonl")
    qtext = [queries[q] for q in judge.q["qids"]]
    ce = CrossEncoder(resolve(MINILM)[1], a.seed)
    rng = np.random.default_rng(a.seed)
    tr, ev = judge.qids(a.train), judge.qids(a.half)
    kmax = max(int(k) for k in floats(a.ks))
    base = metrics(judge, ev, [[i for i, _ in lists[n]] for n in ev])
    print(f"half {a.half}: hybrid {base[0]:.4f} / {base[1]:.4f}", flush=True)
    if a.stage == "score":  # a saved cross-encoder over other lists (the ensemble's), its known pairs reused
        state = torch.load(a.checkpoint)
        ce.net.load_state_dict(state["net"])
        ce.head.load_state_dict(state["head"])
        known = {}
        if a.reuse:
            old = pickle.loads(a.reuse[0].read_bytes())
            flat, at = np.load(a.reuse[1]), 0
            for n in ev:
                for i, _ in old[n][:kmax]:
                    known[n, i] = float(flat[at])
                    at += 1
            if at != len(flat):
                raise SystemExit(f"{a.reuse[1]} holds {len(flat)} scores, {a.reuse[0]}'s top {kmax} of half {a.half} {at}")
        t0 = time.perf_counter()
        scores = score_lists(ce, qtext, title, ev, [lists[n][:kmax] for n in ev], known)
        print(f"scored ({len(known):,} pairs reused, {time.perf_counter() - t0:.0f}s)")
        report(judge, ev, [lists[n] for n in ev], scores, a, base)
        return
    nq = len(groups(judge, lists, tr, rng, a.group, a.pool))
    steps = a.epochs * ((nq + a.queries_per_step - 1) // a.queries_per_step)
    opt = torch.optim.AdamW([{"params": list(ce.net.parameters()), "lr": a.lr},
                             {"params": list(ce.head.parameters()), "lr": a.head_lr}])
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm))))
    t0 = time.perf_counter()
    for ep in range(1, a.epochs + 1):
        ce.net.train()
        gs = groups(judge, lists, tr, rng, a.group, a.pool)
        order = rng.permutation(len(gs))
        total, done = 0.0, 0
        for s in range(0, len(order), a.queries_per_step):
            batch = [gs[j] for j in order[s:s + a.queries_per_step]]
            qs = [qtext[n] for n, ids_, _ in batch for _ in ids_]
            ts = [title[i] for _, ids_, _ in batch for i in ids_]
            out = ce(qs, ts)
            loss, at = 0.0, 0
            for _, ids_, t in batch:
                logp = torch.log_softmax(out[at:at + len(ids_)], 0)
                loss = loss - (logp * torch.from_numpy(t)).sum()
                at += len(ids_)
            loss = loss / len(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(batch)
            done += len(batch)
            if (s // a.queries_per_step) % 100 == 0:
                print(f"  epoch {ep}: {done}/{len(gs)} queries, loss {total / done:.3f} ({time.perf_counter() - t0:.0f}s)",
                      flush=True)
        torch.save({"net": ce.net.state_dict(), "head": ce.head.state_dict()},
                   a.work / f"ce-{tag}{a.train}-e{ep}.pt")
        if ep not in ([int(e) for e in floats(a.score_epochs)] or [a.epochs]):
            continue
        scores = score_lists(ce, qtext, title, ev, [lists[n][:kmax] for n in ev])
        np.save(a.work / f"ce-{tag}{a.train}-e{ep}-on-{a.half}.npy", np.concatenate(scores))
        print(f"epoch {ep}: loss {total / done:.3f}, scored {sum(map(len, scores)):,} pairs "
              f"({time.perf_counter() - t0:.0f}s)")
        report(judge, ev, [lists[n] for n in ev], scores, a, base)


def score_lists(ce, qtext: list[str], title: dict[str, str], ev: list[int], heads: list,
                known: dict | None = None) -> list[np.ndarray]:
    """The cross-encoder's score of every (query, title) of each query's ``heads`` (lists of
    (id, fused); query rows ``ev``); pairs in ``known`` ((query row, id) → score) are not scored again."""
    known = dict(known or {})
    todo = sorted({(n, i) for n, h in zip(ev, heads) for i, _ in h} - set(known))
    flat = ce.score([qtext[n] for n, _ in todo], [title[i] for _, i in todo])
    known.update(zip(todo, flat.tolist()))
    return [np.array([known[n, i] for i, _ in h], np.float32) for n, h in zip(ev, heads)]


def report(judge: Judge, ev: list[int], lists, scores, a, base) -> None:
    for (k, lam), ranks in rerank(lists, scores, [int(k) for k in floats(a.ks)], floats(a.lambdas)).items():
        nd, rc = metrics(judge, ev, ranks)
        se = paired_se(per_query_ndcg(judge, ev, [[i for i, _ in lst] for lst in lists]),
                       per_query_ndcg(judge, ev, ranks))
        print(f"  K {k:3d} λ {lam:<4g}: {nd:.4f} ({nd - base[0]:+.4f} ± {se:.4f}) / {rc:.4f}", flush=True)


if __name__ == "__main__":
    main()
