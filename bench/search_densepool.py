"""Learned term weights and the seller's query–product pairs on the DENSE side, measured on Home
Depot dev, full corpus (../shared data): a title's vector pooled from its token vectors weighted by
a term head's ŷ (``qkv terms train``) instead of their plain mean (``pool``); a linear map of the
query vector fitted on half a's judged pairs (``adapter``); titles moved toward the queries that
found them (``expand``); the query side's encoder fine-tuned with the titles frozen (``tower``,
torch). Keyword, dense and hybrid NDCG@10 / Recall@100; every choice on half a (a1/a2: half a
split in two), reported on half b. Results in docs/search.md.

    H=../shared/data/search/homedepot
    B=".venv/bin/python bench/search_densepool.py --data $H --work /tmp/densetw"
    $B tokens                                      # every title's token vectors once (float16, ~4 min)
    $B queries --plain plain --weighted variants/head-a2c-s20-keep-l0.25   # query vectors, keyword candidates
    $B check --plain plain --half b                # the index's own vectors: reproduces `qkv eval search`
    $B pool --weights weights-c643d85b827e.jsonl --half a --betas 0,0.1,0.25,0.5,1 --others 0,1 --mixes 0.5,1
    $B adapter --weights ... --train a1 --half a2 --epochs 8        # then --train a --half b --epochs E
    $B tower --weights ... --train a1 --half a2 --epochs 4

Variants are scored with the very fusion ``qkv eval search`` runs (``Index.fuse``: score fusion,
α by model, BM25 × matched terms², 200 candidates a side), from cached keyword candidates (their
coverage-weighted BM25 read once from each index) and an exact inner-product search over the
variant's 54,667 title vectors; ``check`` reproduces the CLI's figures from the index's own vectors.
Pooling follows sentence-transformers' mean pooling (every token, [CLS] and [SEP] included) with
each token weighted: w = β + max(ŷ, 0) for a piece of a content word the head scores (its word's
ŷ spread to all its pieces), w = β·s for the others (specials, punctuation; s = --others).
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

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "search" / "homedepot"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
CHUNK = 2048
POOL_STEP = 1 << 18  # tokens converted to float32 at a time (a title may straddle two steps)


# ------------------------------------------------------------------ caches
def cache_tokens(data: Path, work: Path, model: str) -> None:
    """Each title's last-layer token vectors (float16) and each token's content word (-1: none),
    in chunks of CHUNK titles (resumable)."""
    from qkv.explain.terms import _content_words
    from qkv.model import shared_encoder
    from qkv.search.catalog import read_catalog

    out = work / "tok"
    out.mkdir(parents=True, exist_ok=True)
    rows = read_catalog(data / "corpus.jsonl").rows  # as `qkv index` reads it
    titles = [r["title"] for r in rows]
    (out / "ids.json").write_text(json.dumps([r["id"] for r in rows]))
    enc = shared_encoder(model)
    t0 = time.perf_counter()
    for c, a in enumerate(range(0, len(titles), CHUNK)):
        f = out / f"chunk-{c:03d}.npz"
        if f.is_file():
            continue
        vecs, widx, lens, words = [], [], [], []
        for seq, v in enc.token_vectors(titles[a:a + CHUNK], truncate=True):  # as the head reads titles
            ws = _content_words(seq)
            wi = np.full(len(seq), -1, np.int16)
            for k, w in enumerate(ws):
                wi[list(w.tokens)] = k
            vecs.append(v.astype(np.float16))
            widx.append(wi)
            lens.append(len(seq))
            words.append([w.text for w in ws])
        np.savez(f, vecs=np.concatenate(vecs), widx=np.concatenate(widx), lens=np.array(lens, np.int32),
                 words=np.array(json.dumps(words)))
        print(f"  {min(a + CHUNK, len(titles)):,}/{len(titles):,} titles, {(a + CHUNK) / (time.perf_counter() - t0):.0f}/s",
              flush=True)


class Tokens:
    """The cached token vectors: flat [n_tokens, H] float16, title starts, each token's word."""

    def __init__(self, work: Path):
        d = work / "tok"
        self.ids = json.loads((d / "ids.json").read_text())
        files = sorted(d.glob("chunk-*.npz"))
        if len(files) * CHUNK < len(self.ids):
            raise SystemExit(f"the token cache at {d} is incomplete: run `tokens` first")
        vecs, widx, lens, self.words = [], [], [], []
        for f in files:
            with np.load(f) as z:
                vecs.append(z["vecs"])
                widx.append(z["widx"])
                lens.append(z["lens"])
                self.words += json.loads(str(z["words"]))
        self.vecs, self.widx, self.lens = np.concatenate(vecs), np.concatenate(widx), np.concatenate(lens)
        self.starts = np.concatenate([[0], np.cumsum(self.lens)[:-1]])
        self.owner = np.repeat(np.arange(len(self.lens)), self.lens)
        self.row = {i: r for r, i in enumerate(self.ids)}

    def token_weights(self, yhat: list[np.ndarray], beta: float, others: float) -> np.ndarray:
        """Per token: β + max(ŷ of its word, 0), or β·others for a token of no content word."""
        flat = np.concatenate([np.concatenate([y, [0.0]]) for y in yhat])  # each title's ŷ, then a 0 for "none"
        base = np.concatenate([[0], np.cumsum([len(y) + 1 for y in yhat])[:-1]])
        none = np.array([len(y) for y in yhat])
        w_idx = np.where(self.widx >= 0, self.widx, none[self.owner]) + base[self.owner]
        w = beta + np.maximum(flat[w_idx], 0.0)
        return np.where(self.widx >= 0, w, beta * others).astype(np.float32)

    def pool(self, w: np.ndarray | None = None) -> np.ndarray:
        """Unit title vectors: Σ w_t h_t / Σ w_t (w None: the plain mean, as ``Encoder.encode``)."""
        out = np.zeros((len(self.lens), self.vecs.shape[1]), np.float32)
        step = POOL_STEP
        for a in range(0, len(self.vecs), step):
            h = self.vecs[a:a + step].astype(np.float32)
            if w is not None:
                h *= w[a:a + step, None]
            _add_rows(out, self.owner[a:a + step], h)
        den = self.lens.astype(np.float32) if w is None else np.bincount(self.owner, w, len(self.lens)).astype(np.float32)
        out /= np.maximum(den, 1e-9)[:, None]
        return unit(out)


def _add_rows(out: np.ndarray, owner: np.ndarray, h: np.ndarray) -> None:
    """out[owner[i]] += h[i] for sorted ``owner`` (reduceat over the runs: far faster than add.at)."""
    cut = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    out[owner[cut]] += np.add.reduceat(h, cut, axis=0)


def unit(v: np.ndarray) -> np.ndarray:
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return v


def load_yhat(path: Path, tok: Tokens) -> list[np.ndarray]:
    """The head's ŷ of every title (the JSON lines `bench/search_termweights.py` caches), in the
    token cache's order; its words must be the cache's content words."""
    by = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            by[r["id"]] = (r["words"], np.asarray(r["w"], np.float64))
    out = []
    for i, words in zip(tok.ids, tok.words):
        ws, y = by[i]
        if ws != words:
            raise SystemExit(f"title {i}: the weights' words {ws} are not the token cache's {words}")
        out.append(y)
    return out


def cache_queries(data: Path, work: Path, plain: Path, weighted: Path) -> None:
    """Per judged dev query: its vector (as ``evaluate`` embeds it: the plan's dense text), its keyword text, and the top
    200 keyword candidates of the plain and the weighted index with the coverage-weighted BM25 that
    ``Index.fuse`` reads."""
    from qkv.model import shared_encoder
    from qkv.search import fusion
    from qkv.search.evaluate import load_qrels, load_queries
    from qkv.search.index import CANDIDATES, Index
    from qkv.search.store import read_manifest

    queries, qrels = load_queries(data / "queries.dev.jsonl"), load_qrels(data / "qrels" / "dev.tsv")
    qids = [q for q in queries if q in qrels]
    enc = shared_encoder(read_manifest(plain).model)
    out = {"qids": qids}
    for name, path in (("plain", plain), ("weighted", weighted)):
        with Index.open(path, enc) as idx:
            plans = [idx.plan(queries[q]) for q in qids]
            if any(p.translated for p in plans):
                raise SystemExit("this bench reads English queries only")
            if name == "plain":
                # what a search embeds: the plan's dense text (its spelling corrected, ``plan_query``)
                out["vecs"] = np.asarray(idx.query_vectors([p.dense[0] for p in plans]), np.float32)
                out["text"] = [p.keyword for p in plans]
            kws = []
            for p in plans:
                kw = idx.store.keyword_search(p.keyword, CANDIDATES) if p.keyword.strip() else []
                ks = {h.id: h.score for h in kw}
                if kw:
                    parts = idx.store.keyword_terms(p.keyword, list(ks))
                    if parts:
                        ks = fusion.coverage_weighted(ks, {i: len(x) for i, x in parts.items()})
                kws.append(([(h.id, h.score) for h in kw], ks))
            out[name] = kws
        print(f"  {name}: {len(qids):,} queries", flush=True)
    (work / "queries.pkl").write_bytes(pickle.dumps(out))


# ------------------------------------------------------------------ scoring
class Judge:
    """Keyword, dense and hybrid NDCG@10 / Recall@100 of title vectors (rows in ``ids`` order),
    by ``evaluate``'s metrics and ``Index.fuse``'s score fusion."""

    def __init__(self, data: Path, work: Path, ids: list[str]):
        from qkv.search.evaluate import load_qrels

        self.q = pickle.loads((work / "queries.pkl").read_bytes())
        self.qrels = load_qrels(data / "qrels" / "dev.tsv")
        self.ids = np.asarray(ids)
        self.row = {i: r for r, i in enumerate(ids)}

    def qids(self, half: str) -> list[int]:
        """Positions of the half's queries; "a1"/"a2": half a split in two by the hash's second bit
        (to choose the adapter's settings inside half a; ``search_termweights.in_part``)."""
        from search_termweights import in_part

        return [n for n, q in enumerate(self.q["qids"]) if in_part(q, half)]

    def lists(self, V: np.ndarray, ns: list[int], side: str = "weighted", alpha: float = 0.5,
              qvecs: np.ndarray | None = None, hybrid: bool = True, depth: int = 100):
        """Per query position of ``ns``: (n, dense candidates as (id, cosine), keyword candidates
        as (id, BM25), hybrid top ``depth`` as (id, fused score) or None without ``hybrid``)."""
        from qkv.search import fusion
        from qkv.search.index import CANDIDATES

        Q = self.q["vecs"][ns] if qvecs is None else qvecs
        for a in range(0, len(ns), 512):
            S = Q[a:a + 512] @ V.T
            top = np.argpartition(-S, CANDIDATES, axis=1)[:, :CANDIDATES]
            for r, n in enumerate(ns[a:a + 512]):
                if not self.q["text"][n].strip():
                    dense = []
                else:
                    t = top[r][np.argsort(-S[r, top[r]], kind="stable")]
                    dense = [(self.ids[j], float(S[r, j])) for j in t]
                raw, ks = self.q[side][n]
                fused = None
                if hybrid:
                    cos = dict(dense)
                    for i, _ in raw:
                        if i not in cos:
                            cos[i] = float(S[r, self.row[i]])
                    fused = fusion.ranked(fusion.score_fusion(cos, ks, alpha), depth)
                yield n, dense, raw, fused

    def __call__(self, V: np.ndarray, half: str, side: str = "weighted", alpha: float = 0.5,
                 qvecs: np.ndarray | None = None, modes=("keyword", "dense", "hybrid")) -> dict:
        from qkv.search.evaluate import ndcg, recall

        per = {m: ([], []) for m in modes}
        for n, dense, raw, fused in self.lists(V, self.qids(half), side, alpha, qvecs, hybrid="hybrid" in modes):
            judged = self.qrels[self.q["qids"][n]]
            for m in modes:
                ranking = [i for i, _ in {"dense": dense, "keyword": raw}.get(m, fused)[:100]]
                per[m][0].append(ndcg(ranking, judged, 1.0))
                per[m][1].append(recall(ranking, judged, 1.0))
        return {m: (float(np.nanmean(x)), float(np.nanmean(y))) for m, (x, y) in per.items()}


# ------------------------------------------------------------------ query adapter
def relevant(judge: Judge, ns: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query: the rows of its relevant titles (grade > 1) and their gains (grade − 1), summing to 1."""
    out = []
    for n in ns:
        rel = [(judge.row[d], g - 1.0) for d, g in judge.qrels[judge.q["qids"][n]].items() if g > 1 and d in judge.row]
        rows = np.array([r for r, _ in rel], np.int64)
        gains = np.array([g for _, g in rel], np.float64)
        out.append((rows, gains / gains.sum() if len(rel) else gains))
    return out


def keyword_parts(judge: Judge, ns: list[int], side: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query: its keyword candidates' rows and BM25 × matched² / max, as fusion reads them."""
    out = []
    for n in ns:
        ks = judge.q[side][n][1]
        rows = np.array([judge.row[i] for i in ks], np.int64)
        sc = np.array(list(ks.values()), np.float64)
        out.append((rows, sc / sc.max() if len(sc) and sc.max() > 0 else sc))
    return out


def adapter_loss(W: np.ndarray, q: np.ndarray, targets, V: np.ndarray, tau: float, keyword=None,
                 hybrid: float = 0.0, alpha: float = 0.5, tau_h: float = 0.02) -> tuple[float, np.ndarray]:
    """The summed loss of ``fit_adapter`` over queries ``q`` (float64 [B, d]) with their
    ``targets`` (and ``keyword`` parts), and its gradient in W averaged over them (ridge left out).
    u = unit(W q); d loss / d u = Σ (softmax − target) v / τ, then through the normalisation."""
    z = q @ W.T
    nz = np.linalg.norm(z, axis=1, keepdims=True)
    u64 = z / nz
    C = u64.astype(np.float32) @ V.T  # the cosines
    S = C / tau
    S -= S.max(axis=1, keepdims=True)
    P = np.exp(S)  # float32, as V: the [B, n] products are the cost
    P /= P.sum(axis=1, keepdims=True)
    loss = 0.0
    for k, (rows, g) in enumerate(targets):
        loss -= float(g @ np.log(np.maximum(P[k, rows], 1e-30)))
        P[k, rows] -= g  # softmax − target
    du = (P @ V).astype(np.float64) / tau
    if hybrid > 0:
        depth = min(200, V.shape[0] - 1)
        top = np.argpartition(-C, depth, axis=1)[:, :depth]
        for k, ((rows, g), (krows, kn)) in enumerate(zip(targets, keyword)):
            cand = np.union1d(krows, top[k])
            f = alpha * C[k, cand].astype(np.float64)
            f[np.searchsorted(cand, krows)] += (1 - alpha) * kn
            p = np.exp((f - f.max()) / tau_h)
            p /= p.sum()
            inside = np.isin(rows, cand)
            if not inside.any():
                continue
            t = np.zeros_like(p)
            t[np.searchsorted(cand, rows[inside])] = g[inside] / g[inside].sum()
            loss -= hybrid * float(t[t > 0] @ np.log(np.maximum(p[t > 0], 1e-30)))
            du[k] += hybrid * alpha / tau_h * ((p - t) @ V[cand])
    dz = (du - (du * u64).sum(axis=1, keepdims=True) * u64) / nz
    return loss, dz.T @ q / len(q)


def fit_adapter(Q: np.ndarray, targets, V: np.ndarray, *, tau: float, lr: float, epochs: int, ridge: float,
                batch: int = 128, seed: int = 0, each_epoch=None, keyword=None, hybrid: float = 0.0,
                alpha: float = 0.5, tau_h: float = 0.02) -> np.ndarray:
    """A linear map W of the query vector (q' = unit(W q), W from the identity) minimising the
    cross-entropy of the relevant titles (gain-weighted) under a softmax of q'·v/τ over every title
    (the whole catalog as negatives: exact, 54,667 rows), plus ridge·‖W − I‖²; Adam (Kingma & Ba
    2015). Titles frozen, so the index is not re-embedded. ``each_epoch(W, epoch, loss)`` after each.
    ``hybrid`` > 0 adds that weight of a second cross-entropy: of the relevant titles under a
    softmax of the FUSED score (α·cos + (1−α)·BM25·m²/max, ``keyword`` per query) over the hybrid
    candidates (the keyword ones and the current dense top 200) at temperature ``tau_h``, so the
    cosine learns to order what BM25 leaves tied rather than to repeat it."""
    from qkv.search.adapter import fit

    keep = [i for i, (r, _) in enumerate(targets) if len(r)]
    Qk, tk = Q[keep], [targets[i] for i in keep]
    kk = None if keyword is None else [keyword[i] for i in keep]
    eye = np.eye(Q.shape[1])

    def loss(W, rows):
        value, grad = adapter_loss(W, Qk[rows].astype(np.float64), [tk[i] for i in rows], V, tau,
                                   None if kk is None else [kk[i] for i in rows], hybrid, alpha, tau_h)
        return value, grad + 2 * ridge * (W - eye)

    # qkv.search.adapter.fit: the same Adam passes (the kept queries in the same order for a seed)
    return fit(Qk, tk, V, epochs=epochs, tau=tau, lr=lr, batch=batch, seed=seed, each_epoch=each_epoch, loss=loss)


def expand(V: np.ndarray, Q: np.ndarray, targets, eta: float) -> np.ndarray:
    """Titles moved toward the queries that found them (the seller's pairs on the dense side,
    document expansion from a query log): v' = unit(v + η · Σ g·q / Σ g) over the training queries
    relevant to the title (gain g); other titles unchanged."""
    acc = np.zeros_like(V, dtype=np.float64)
    tot = np.zeros(len(V))
    for q, (rows, g) in zip(Q, targets):
        if len(rows):
            acc[rows] += g[:, None] * q[None, :]
            tot[rows] += g
    hit = tot > 0
    out = V.astype(np.float64, copy=True)
    out[hit] += eta * acc[hit] / tot[hit, None]
    return unit(out.astype(np.float32))


def query_tower(data: Path, judge: Judge, V: np.ndarray, model_dir: Path, train: str, epochs: int,
                each_epoch, batch: int = 64, lr: float = 2e-5, tau: float = 0.05, seed: int = 0) -> None:
    """The query side's encoder fine-tuned on the seller's pairs with the titles' vectors frozen
    (an asymmetric dual encoder: the index needs no re-embedding), torch, bench only: the
    gain-weighted cross-entropy of each query's relevant titles under a softmax of cos/τ over
    EVERY title (as ``fit_adapter``, but through all of MiniLM's weights), AdamW at ``lr`` (the
    sentence-transformers default) with 10% linear warm-up. ``each_epoch(vectors of all cached
    queries, epoch, loss)`` after each pass."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from qkv.search.evaluate import load_queries

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    rng = np.random.default_rng(seed)
    tokz = AutoTokenizer.from_pretrained(model_dir)
    net = AutoModel.from_pretrained(model_dir)
    queries = load_queries(data / "queries.dev.jsonl")
    texts = [queries[q] for q in judge.q["qids"]]
    tr = judge.qids(train)
    targets = relevant(judge, tr)
    keep = [i for i, (r, _) in enumerate(targets) if len(r)]
    Vt = torch.from_numpy(np.ascontiguousarray(V, np.float32))

    def embed(batch_texts: list[str]):
        x = tokz(batch_texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
        h = net(**x).last_hidden_state
        m = x["attention_mask"].unsqueeze(-1).float()
        return torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)

    steps = epochs * ((len(keep) + batch - 1) // batch)
    opt = torch.optim.AdamW(net.parameters(), lr=lr)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm))))
    t0 = time.perf_counter()
    for ep in range(1, epochs + 1):
        net.train()
        order = rng.permutation(keep)
        total = 0.0
        for a in range(0, len(order), batch):
            idx = order[a:a + batch]
            logp = torch.log_softmax(embed([texts[tr[i]] for i in idx]) @ Vt.T / tau, dim=1)
            loss = -sum((logp[k, torch.from_numpy(targets[i][0])] * torch.from_numpy(targets[i][1]).float()).sum()
                        for k, i in enumerate(idx)) / len(idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
        net.eval()
        out = np.zeros((len(texts), V.shape[1]), np.float32)
        with torch.inference_mode():
            for a in range(0, len(texts), 256):
                out[a:a + 256] = embed(texts[a:a + 256]).numpy()
        print(f"  epoch {ep}: loss {total / len(keep):.3f} ({time.perf_counter() - t0:.0f}s)", flush=True)
        each_epoch(out, ep, total / len(keep))


def adapt(Q: np.ndarray, W: np.ndarray) -> np.ndarray:
    return unit((Q.astype(np.float64) @ W.T).astype(np.float32))


def show(name: str, r: dict) -> str:
    return f"| {name} | " + " | ".join(f"{r[m][0]:.4f} / {r[m][1]:.4f}" for m in ("keyword", "dense", "hybrid") if m in r) + " |"


def floats(text: str | None) -> list[float]:
    return [float(x) for x in (text or "").split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", choices=("tokens", "queries", "check", "pool", "adapter", "expand", "tower"))
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--work", type=Path, default=Path("/tmp/densetw"))
    ap.add_argument("--model", default=MINILM)
    ap.add_argument("--plain", type=Path, help="a plain full-corpus index (`qkv index --model minilm`)")
    ap.add_argument("--weighted", type=Path, help="the same with --term-weights (the keyword side fused)")
    ap.add_argument("--weights", type=Path, help="the head's ŷ of every title (search_termweights.py's cache)")
    ap.add_argument("--half", choices=("a", "b", "all", "a1", "a2"), default="a", help="a1/a2: half a split in two")
    ap.add_argument("--side", choices=("plain", "weighted"), default="weighted", help="the keyword side fused")
    ap.add_argument("--betas", default="0.25", help="β in w = β + max(ŷ, 0) (comma-separated)")
    ap.add_argument("--others", default="1", help="s: weight β·s for tokens of no content word (comma-separated)")
    ap.add_argument("--mixes", default="1", help="μ: unit(μ·weighted + (1−μ)·mean) (comma-separated)")
    ap.add_argument("--alphas", default="0.5", help="fusion's dense weight (comma-separated; 0.5 is MiniLM's)")
    ap.add_argument("--train", default="a", help="adapter: the queries it is fitted on (a, or a1 to choose on a2)")
    ap.add_argument("--taus", default="0.05", help="adapter: softmax temperatures (comma-separated)")
    ap.add_argument("--lrs", default="0.001", help="adapter: Adam step sizes (comma-separated)")
    ap.add_argument("--ridges", default="0", help="adapter: ‖W − I‖² weights (comma-separated)")
    ap.add_argument("--epochs", type=int, default=10, help="adapter: passes over the training queries")
    ap.add_argument("--etas", default="0.5", help="expand: weights of the queries' mean (comma-separated)")
    ap.add_argument("--hybrids", default="0", help="adapter: weights of the fused-score loss (comma-separated)")
    ap.add_argument("--tau-h", type=float, default=0.02, help="adapter: the fused-score loss's temperature")
    ap.add_argument("--beta", type=float, help="adapter: titles pooled with this β (and --mixes' first μ); none: mean")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)

    if a.stage == "tokens":
        cache_tokens(a.data, a.work, a.model)
        return
    if a.stage == "queries":
        cache_queries(a.data, a.work, a.plain, a.weighted)
        return
    if a.stage == "check":
        from qkv.search.store import open_store

        tok_ids = json.loads((a.work / "tok" / "ids.json").read_text())
        judge = Judge(a.data, a.work, tok_ids)
        st = open_store(a.plain)
        try:
            V = np.asarray(st.get_vectors(tok_ids), np.float32)
        finally:
            st.close()
        for side in ("plain", "weighted"):
            print(show(f"index's own vectors, {side} keyword, half {a.half}", judge(V, a.half, side)), flush=True)
        tok = Tokens(a.work)
        print(show(f"mean of cached token vectors, {a.side} keyword, half {a.half}", judge(tok.pool(), a.half, a.side)))
        return

    tok = Tokens(a.work)
    judge = Judge(a.data, a.work, tok.ids)
    if a.weights is None and (a.stage == "pool" or a.beta is not None):
        sys.exit("--weights: the head's ŷ of every title (bench/search_termweights.py caches them)")
    yhat = load_yhat(a.weights, tok) if a.weights is not None else None
    mean = tok.pool()
    print(f"half {a.half}, keyword side {a.side}: keyword / dense / hybrid, NDCG@10 / Recall@100")
    for alpha in floats(a.alphas):
        print(show(f"mean pooling, α {alpha:g}", judge(mean, a.half, a.side, alpha)), flush=True)
    if a.stage == "pool":
        for beta in floats(a.betas):
            for s in floats(a.others):
                wv = tok.pool(tok.token_weights(yhat, beta, s))
                for mu in floats(a.mixes):
                    V = wv if mu == 1 else unit(mu * wv + (1 - mu) * mean)
                    for alpha in floats(a.alphas):
                        print(show(f"β {beta:g}, others {s:g}, μ {mu:g}, α {alpha:g}", judge(V, a.half, a.side, alpha)),
                              flush=True)
        return
    V = mean
    if a.beta is not None:
        mu = floats(a.mixes)[0]
        wv = tok.pool(tok.token_weights(yhat, a.beta, floats(a.others)[0]))
        V = wv if mu == 1 else unit(mu * wv + (1 - mu) * mean)
        print(show(f"titles: β {a.beta:g}, μ {mu:g}", judge(V, a.half, a.side, 0.5)), flush=True)
    tr = judge.qids(a.train)
    ev = judge.qids(a.half)
    Qall = judge.q["vecs"]
    targets = relevant(judge, tr)
    if a.stage == "tower":
        from qkv.model.hub import resolve

        def each(qv, ep, loss):
            for half in dict.fromkeys([a.half, "b"] if a.train == "a" else [a.half]):
                for alpha in floats(a.alphas):
                    print(show(f"query tower fitted on {a.train}, epoch {ep}, half {half}, α {alpha:g}",
                               judge(V, half, a.side, alpha, qvecs=qv[judge.qids(half)])), flush=True)

        query_tower(a.data, judge, V, resolve(a.model)[1], a.train, a.epochs, each, lr=floats(a.lrs)[0],
                    tau=floats(a.taus)[0])
        return
    if a.stage == "expand":
        for eta in floats(a.etas):
            X = expand(V, Qall[tr], targets, eta)
            for alpha in floats(a.alphas):
                print(show(f"titles + η {eta:g} × their {a.train} queries, α {alpha:g}", judge(X, a.half, a.side, alpha)),
                      flush=True)
        return
    print(f"adapter fitted on {a.train} ({sum(len(r) > 0 for r, _ in targets):,} queries with relevant titles)", flush=True)
    kw = keyword_parts(judge, tr, a.side)
    for tau, lr, ridge, hyb in [(t, l, r, h) for t in floats(a.taus) for l in floats(a.lrs) for r in floats(a.ridges)
                                for h in floats(a.hybrids)]:
        t0 = time.perf_counter()
        name = f"τ {tau:g}, lr {lr:g}, ridge {ridge:g}, hybrid {hyb:g}"

        def each(W, ep, loss):
            qv = adapt(Qall[ev], W)
            for alpha in floats(a.alphas):
                r = judge(V, a.half, a.side, alpha, qvecs=qv)
                print(show(f"{name}, epoch {ep}, α {alpha:g} (loss {loss:.3f}, {time.perf_counter() - t0:.0f}s)", r),
                      flush=True)

        W = fit_adapter(Qall[tr], targets, V, tau=tau, lr=lr, epochs=a.epochs, ridge=ridge, each_epoch=each,
                        keyword=kw, hybrid=hyb, tau_h=a.tau_h)
        np.save(a.work / f"adapter-{a.train}-t{tau:g}-lr{lr:g}-r{ridge:g}-h{hyb:g}-e{a.epochs}.npy", W.astype(np.float32))


if __name__ == "__main__":
    main()
