"""Late interaction over the hybrid search's top candidates, measured on Home Depot dev, full
corpus (../shared data). The cosine of two mean-pooled vectors averages every query token against
every title token (``qkv.search.explain``: the grid is an exact decomposition), so one strong
word-to-word match is diluted by all the pairs that do not match. MaxSim (ColBERT, Khattab &
Zaharia 2020) keeps each query word's best title token instead: S(q, t) = Σ_i w_i max_j cos(q_i, t_j).
This measures, before anything is built into the package, whether that score added to the fused
one re-orders the top K better than the fusion alone: z(fused) + λ·z(MaxSim) over each query's top
K (z: standardised within the query's K), K and λ (and the variant) chosen on half a, reported on
half b. No training: the token vectors are MiniLM's own last layer, the ones the index pools.

Variants of the score: ``raw`` token cosines; ``centred`` with the catalog's mean token vector
removed first (a model's token vectors share a large common direction, which flattens cosines:
Ethayarajh 2019, "How contextual are contextualized word representations?"); each with query
words weighted equally (``eq``) or by their keyword IDF in the catalog (``idf``). Query and title
tokens of no content word ([CLS], [SEP], punctuation) are left out.

    H=../shared/data/search/homedepot
    B=".venv/bin/python bench/search_maxsim.py --data $H --work /tmp/densetw"
    # needs search_densepool.py's caches in --work: `tokens` and `queries`
    $B --plain /tmp/deepct/plain --adapter /tmp/densetw/adapter-a-t0.05-lr0.001-r0-h0-e3.npy
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_densepool import Judge, Tokens, adapt, floats  # noqa: E402
from search_rerank import metrics, reorder  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"
TOP = 100


def query_tokens(data: Path, work: Path, plain: Path, judge: Judge) -> dict:
    """Per cached query: its content tokens' last-layer vectors (of the text a search embeds,
    the plan's dense text) and each token's word, cached in ``work/qtok.pkl``."""
    f = work / "qtok.pkl"
    if f.is_file():
        return pickle.loads(f.read_bytes())
    from qkv.explain.terms import _content_words
    from qkv.model import shared_encoder
    from qkv.search.evaluate import load_queries
    from qkv.search.index import Index
    from qkv.search.store import read_manifest

    queries = load_queries(data / "queries.dev.jsonl")
    enc = shared_encoder(read_manifest(plain).model)
    with Index.open(plain, enc) as idx:
        texts = [idx.plan(queries[q]).dense[0] for q in judge.q["qids"]]
    out = {"vecs": [], "words": []}
    for seq, v in enc.token_vectors(texts, truncate=True):
        ws = _content_words(seq)
        rows = [t for w in ws for t in w.tokens]
        out["vecs"].append(np.asarray(v[rows], np.float32))
        out["words"].append([w.text.lower() for w in ws for _ in w.tokens])
    f.write_bytes(pickle.dumps(out))
    return out


def unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class LearnedMaxSim:
    """MaxSim through a learned map of the frozen token vectors (ColBERT's linear layer, without
    fine-tuning the encoder): q_i, t_j ← unit(P h) with P [H, H] starting at the identity, and a
    weight per query token softplus(a·h_i + b) starting equal; trained listwise on the judged pairs —
    per query a softmax over its relevant titles and hard negatives from its hybrid top ``pool``,
    the target ∝ the gain (judgment − 1). torch, bench only."""

    def __init__(self, dim: int, seed: int = 0):
        import torch

        torch.manual_seed(seed)
        torch.set_num_threads(2)
        self.torch = torch
        self.P = torch.nn.Parameter(torch.eye(dim))
        self.a = torch.nn.Parameter(torch.zeros(dim))
        self.b = torch.nn.Parameter(torch.zeros(()))
        self.scale = torch.nn.Parameter(torch.tensor(20.0))

    def params(self):
        return [self.P, self.a, self.b, self.scale]

    def score(self, q, titles):
        """q [n_q, H] float32 tensor; titles: list of [n_t, H] tensors → [len(titles)] scores."""
        t = self.torch
        qp = t.nn.functional.normalize(q @ self.P, dim=-1)
        w = t.nn.functional.softplus(q @ self.a + self.b)
        lens = [len(x) for x in titles]
        T = t.nn.functional.normalize(t.cat(titles) @ self.P, dim=-1)
        sims = qp @ T.T  # [n_q, Σ n_t]
        best = t.stack([s.max(1).values for s in t.split(sims, lens, dim=1)])  # [n_titles, n_q]
        return best @ w / w.sum()


def title_tokens(tok: Tokens, row: int) -> np.ndarray:
    s0, ln = tok.starts[row], tok.lens[row]
    keep = tok.widx[s0:s0 + ln] >= 0
    t = tok.vecs[s0:s0 + ln][keep].astype(np.float32)
    return t if len(t) else tok.vecs[s0:s0 + ln].astype(np.float32)


def train_learned(tok, judge, qt, lists_of, train_ns, *, epochs, lr, pool=50, group=16, seed=0, each=None):
    import torch

    m = LearnedMaxSim(tok.vecs.shape[1], seed)
    opt = torch.optim.Adam(m.params(), lr=lr)
    rng = np.random.default_rng(seed)
    for ep in range(1, epochs + 1):
        order = rng.permutation(len(train_ns))
        total, done = 0.0, 0
        opt.zero_grad()
        for c, j in enumerate(order):
            n = train_ns[j]
            judged = judge.qrels[judge.q["qids"][n]]
            pos = sorted(((g - 1.0, i) for i, g in judged.items() if g > 1 and i in tok.row), reverse=True)[:group // 2]
            if not pos or not len(qt["vecs"][n]):
                continue
            ps = {i for _, i in pos}
            neg = [i for i, _ in lists_of[n][:pool] if i not in ps and judged.get(i, 1.0) <= 1.0]
            neg = [neg[k] for k in rng.permutation(len(neg))[:group - len(pos)]]
            idl = [i for _, i in pos] + neg
            target = torch.tensor([g for g, _ in pos] + [0.0] * len(neg))
            s = m.score(torch.from_numpy(qt["vecs"][n]), [torch.from_numpy(title_tokens(tok, tok.row[i])) for i in idl])
            loss = -(torch.log_softmax(m.scale * s, 0) * target / target.sum()).sum()
            (loss / 16).backward()
            total += float(loss.detach())
            done += 1
            if done % 16 == 0:
                opt.step()
                opt.zero_grad()
        opt.step()
        opt.zero_grad()
        print(f"  epoch {ep}: loss {total / max(done, 1):.3f} over {done:,} queries", flush=True)
        if each:
            each(ep, m)
    return m


def learned_scores(m, tok, qt, ns, lists, kmax):
    import torch

    out = []
    with torch.no_grad():
        for n, lst in zip(ns, lists):
            rows = [tok.row[i] for i, _ in lst[:kmax]]
            if not len(qt["vecs"][n]) or not rows:
                out.append(np.zeros(len(rows)))
                continue
            out.append(m.score(torch.from_numpy(qt["vecs"][n]), [torch.from_numpy(title_tokens(tok, r)) for r in rows]).numpy())
    return out


def rerank_lists(lst_all, sc_all, k, lam):
    """Each query's top K re-ordered by z(fused) + λ·z(score); the rest keep their places."""
    return reorder(lst_all, sc_all, k, lam, 1.0)


def learn(a, tok, judge, V, Q, qt) -> None:
    ks, lams = [int(k) for k in floats(a.ks)], floats(a.lambdas)
    kmax = max(ks)
    lists = {}
    for h in ("a1", "a2", "a", "b"):
        ns = judge.qids(h)
        got = [f for _, _, _, f in judge.lists(V, ns, a.side, 0.5, qvecs=Q[ns], depth=TOP)]
        lists[h] = dict(zip(ns, got))
    t0 = time.perf_counter()
    best = []

    def on(h):
        def each(ep, m):
            ns = judge.qids(h)
            ls = [lists[h][n] for n in ns]
            base = metrics(judge, ns, [[i for i, _ in l] for l in ls])[0]
            sc = learned_scores(m, tok, qt, ns, ls, kmax)
            for k in ks:
                row = []
                for lam in lams:
                    nd = metrics(judge, ns, rerank_lists(ls, sc, k, lam))[0]
                    row.append(f"λ {lam:g}: {nd - base:+.4f}")
                    best.append((nd - base, ep, k, lam))
                print(f"    half {h} (hybrid {base:.4f}) K {k:3d} | " + "  ".join(row), flush=True)
            print(f"    ({time.perf_counter() - t0:.0f}s)", flush=True)
        return each

    print("trained on a1, scored on a2")
    train_learned(tok, judge, qt, lists["a1"], judge.qids("a1"), epochs=a.epochs, lr=a.lr, each=on("a2"))
    gain, ep, k, lam = max(best)
    print(f"best on a2: epoch {ep}, K {k}, λ {lam:g} ({gain:+.4f}); trained on a, scored on b")
    best.clear()
    m = train_learned(tok, judge, qt, lists["a"], judge.qids("a"), epochs=ep, lr=a.lr)
    ns = judge.qids("b")
    ls = [lists["b"][n] for n in ns]
    base = metrics(judge, ns, [[i for i, _ in l] for l in ls])
    got = metrics(judge, ns, rerank_lists(ls, learned_scores(m, tok, qt, ns, ls, kmax), k, lam))
    print(f"half b: hybrid {base[0]:.4f} / {base[1]:.4f} → with learned MaxSim {got[0]:.4f} / {got[1]:.4f} "
          f"({got[0] - base[0]:+.4f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--work", type=Path, default=Path("/tmp/densetw"))
    ap.add_argument("--plain", type=Path, required=True, help="the plain MiniLM index (title vectors, query plans)")
    ap.add_argument("--adapter", type=Path, help="a query adapter W (.npy, search_densepool.py `adapter`)")
    ap.add_argument("--side", choices=("plain", "weighted"), default="weighted")
    ap.add_argument("--choose", default="a", help="the half K, λ and the variant are chosen on")
    ap.add_argument("--report", default="b")
    ap.add_argument("--ks", default="10,20,30,50")
    ap.add_argument("--lambdas", default="0.1,0.2,0.3,0.5,0.75,1")
    ap.add_argument("--learn", action="store_true", help="train the learned map on a1, choose on a2, then train on a, report b")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    a = ap.parse_args()

    tok = Tokens(a.work)
    judge = Judge(a.data, a.work, tok.ids)
    from qkv.search.store import open_store

    st = open_store(a.plain)
    try:
        V = np.asarray(st.get_vectors(tok.ids), np.float32)
    finally:
        st.close()
    Q = judge.q["vecs"]
    if a.adapter:
        Q = adapt(Q, np.load(a.adapter))
    qt = query_tokens(a.data, a.work, a.plain, judge)
    if a.learn:
        learn(a, tok, judge, V, Q, qt)
        return

    # the catalog's mean token vector (content tokens), and each word's document frequency
    content = tok.widx >= 0
    mu = np.zeros(tok.vecs.shape[1], np.float64)
    for s in range(0, len(tok.vecs), 1 << 18):
        h = tok.vecs[s:s + (1 << 18)].astype(np.float32)
        mu += h[content[s:s + (1 << 18)]].sum(0)
    mu = (mu / content.sum()).astype(np.float32)
    df: dict[str, int] = {}
    for ws in tok.words:
        for w in set(x.lower() for x in ws):
            df[w] = df.get(w, 0) + 1
    N = len(tok.ids)

    def idf(w: str) -> float:
        return math.log(1 + (N - df.get(w, 0) + 0.5) / (df.get(w, 0) + 0.5))

    kmax = max(int(k) for k in floats(a.ks))
    halves = {h: judge.qids(h) for h in (a.choose, a.report)}
    t0 = time.perf_counter()
    lists, scores = {}, {}
    for h, ns in halves.items():
        lists[h] = [fused for _, _, _, fused in judge.lists(V, ns, a.side, 0.5, qvecs=Q[ns], depth=TOP)]
        sc = {v: [] for v in ("raw-eq", "raw-idf", "centred-eq", "centred-idf")}
        for n, lst in zip(ns, lists[h]):
            qv = qt["vecs"][n]
            rows = [tok.row[i] for i, _ in lst[:kmax]]
            if not len(qv) or not rows:
                for v in sc:
                    sc[v].append(np.zeros(len(rows)))
                continue
            wq = {"eq": np.ones(len(qv)), "idf": np.array([idf(w) for w in qt["words"][n]])}
            for cen in ("raw", "centred"):
                q = unit_rows(qv - mu if cen == "centred" else qv)
                out = {k: [] for k in wq}
                for r in rows:
                    s0, ln = tok.starts[r], tok.lens[r]
                    keep = tok.widx[s0:s0 + ln] >= 0
                    t = tok.vecs[s0:s0 + ln][keep].astype(np.float32)
                    if not len(t):
                        for k in wq:
                            out[k].append(0.0)
                        continue
                    t = unit_rows(t - mu if cen == "centred" else t)
                    best = (q @ t.T).max(1)
                    for k, w in wq.items():
                        out[k].append(float(best @ w / w.sum()))
                for k in wq:
                    sc[f"{cen}-{k}"].append(np.array(out[k]))
        scores[h] = sc
        base = metrics(judge, ns, [[i for i, _ in l] for l in lists[h]])
        print(f"half {h}: {len(ns):,} queries, hybrid NDCG@10 / R@100 {base[0]:.4f} / {base[1]:.4f} "
              f"({time.perf_counter() - t0:.0f}s)", flush=True)

    grid = []
    ns = halves[a.choose]
    base_c = metrics(judge, ns, [[i for i, _ in l] for l in lists[a.choose]])[0]
    print(f"\nchosen on half {a.choose} (hybrid {base_c:.4f}): NDCG@10 of z(fused) + λ·z(MaxSim) over the top K")
    for v in scores[a.choose]:
        for k in (int(x) for x in floats(a.ks)):
            row = []
            for lam in floats(a.lambdas):
                nd = metrics(judge, ns, rerank_lists(lists[a.choose], scores[a.choose][v], k, lam))[0]
                row.append(f"λ {lam:g}: {nd - base_c:+.4f}")
                grid.append((nd, v, k, lam))
            print(f"  {v:12s} K {k:3d} | " + "  ".join(row), flush=True)
    nd, v, k, lam = max(grid)
    ns = halves[a.report]
    base_r = metrics(judge, ns, [[i for i, _ in l] for l in lists[a.report]])
    got = metrics(judge, ns, rerank_lists(lists[a.report], scores[a.report][v], k, lam))
    print(f"\nbest on half {a.choose}: {v}, K {k}, λ {lam:g} ({nd:.4f}, {nd - base_c:+.4f})")
    print(f"half {a.report}: hybrid {base_r[0]:.4f} / {base_r[1]:.4f} → with MaxSim {got[0]:.4f} / {got[1]:.4f} "
          f"({got[0] - base_r[0]:+.4f})")
    for v2 in scores[a.report]:
        g = metrics(judge, ns, rerank_lists(lists[a.report], scores[a.report][v2], k, lam))[0]
        print(f"  {v2:12s} at K {k}, λ {lam:g}: {g:.4f} ({g - base_r[0]:+.4f})")


if __name__ == "__main__":
    main()
