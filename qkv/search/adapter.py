"""A query adapter: the seller's own search terms, fitted into the dense side of an index.

A search-term report (query, product, clicks or orders) or BEIR judgments say which products
shoppers found with which queries. The titles' vectors stay as they are (nothing is re-embedded,
an upsert needs nothing new); only the query vector moves:

    q' = unit(W q),  W [d, d], fitted from the identity,

so that each training query's products come first among the catalog's titles: the loss is the
cross-entropy of the query's products (weighted by their clicks, or judgments' gains, summing to 1)
under softmax(q'·v / τ) over every title — the whole catalog as negatives, not a batch's — with
Adam (Kingma & Ba 2015) on batches of queries. The idea of a linear map on frozen query embeddings
is the linear adapter of LlamaIndex's embedding fine-tuning (``AdapterEmbeddingModel``, which
transforms the query embeddings only); dense retrieval's
softmax over a document set is DPR's (Karpukhin et al. 2020). Home Depot dev (docs/search.md,
"A query adapter"): dense NDCG@10 +0.02 on held-out queries, hybrid a fifth of that.

How many passes: a tenth of the training queries (by a hash of their text) is held out, W is
fitted on the rest pass by pass, and the pass with the best held-out dense NDCG@10 is the count
used to fit W on all of them; the held-out figures before and after are the report a seller reads.
No pass better than none: nothing is installed (unless told to: then the best pass's count).

The explanation grid stays exact: with mean pooling, W q̄ = mean(W Q_i), so the parts
(W Q_i)·T_j / (n_q n_t |W q̄| |t̄|) still add up to the cosine searched (``Index.explain_titles``
maps the query's token vectors).

The adapter is the index's (``DIR/query-adapter.npz``, written atomically under the index's
writer lock; ``remove`` deletes it) and holds the fingerprint of the model it was fitted for: an
index rebuilt with another model ignores it and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from qkv.errors import InputError

FILE = "query-adapter.npz"
FORMAT = 1
# The softmax temperature over cosines: the one the model was trained with, so that the fit need
# not reshape the cosines' spread to make the softmax sharp. all-MiniLM-L6-v2: sentence-transformers'
# MultipleNegativesRankingLoss, scale 20 (τ 0.05; also the best of the bench's on Home Depot a1 → a2);
# multilingual-e5-small: τ 0.01 (Wang et al. 2022, E5's contrastive pre-training and fine-tuning)
TAU = 0.05
TAU_BY_MODEL = {"intfloat/multilingual-e5-small": 0.01}


def tau_for(model: str | None) -> float:
    return TAU_BY_MODEL.get(model or "", TAU)
LR = 1e-3  # Adam step
BATCH = 128  # queries a step
MAX_EPOCHS = 6
HOLD_OUT = 0.1  # share of the training queries that chooses the number of passes
MIN_HELD_OUT = 10  # fewer held-out queries than this: no choice, DEFAULT_EPOCHS passes
DEFAULT_EPOCHS = 3
NEGATIVES = 200_000  # a larger catalog trains against its queries' products and this many others

Pairs = Mapping[str, Mapping[str, float]]  # query text → {product id: weight > 0}


@dataclass
class QueryAdapter:
    W: np.ndarray  # float32 [d, d]
    model: str
    fingerprint: str
    info: dict = field(default_factory=dict)  # training counts, settings, held-out figures

    @property
    def spread(self) -> float:
        """How many times wider than the plain cosines the adapted ones spread (median over the
        training queries of cos@1 − cos@31 over the catalog, after ÷ before): fusion's weight and
        the weak-result margin are put in these units (``fusion.alpha_for``, ``qkv.search.floor``)."""
        return float(self.info.get("spread", 1.0))

    def fits(self, query: str) -> bool:
        """Whether to apply to ``query``: a Chinese one (Han characters: its vector is the original's,
        mixed with its English) only when Chinese queries were among those fitted on — an adapter
        fitted on English terms moved Chinese queries' hybrid search down (docs/search.md)."""
        from qkv.text import zh

        return not zh.has_han(query) or self.info.get("han_queries", 0) > 0

    def apply(self, v: np.ndarray) -> np.ndarray:
        """unit(W v) for a vector or rows of vectors (float32)."""
        v = np.asarray(v, np.float32)
        z = v @ self.W.T
        n = np.linalg.norm(z, axis=-1, keepdims=True)
        return (z / np.maximum(n, 1e-12)).astype(np.float32)

    def tokens(self, Q: np.ndarray) -> np.ndarray:
        """The query's token vectors mapped by W (their mean is W q̄: the grid stays exact)."""
        return (np.asarray(Q, np.float32) @ self.W.T).astype(np.float32)

    def save(self, path: Path) -> None:
        """Write to ``path`` atomically (a temporary file, fsync, ``os.replace``)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}-{os.getpid()}.tmp")
        meta = {"format": FORMAT, "model": self.model, "fingerprint": self.fingerprint, "info": self.info}
        with open(tmp, "wb") as f:
            np.savez(f, W=self.W.astype(np.float32), meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> "QueryAdapter":
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                W = np.asarray(z["W"], np.float32)
                meta = json.loads(bytes(z["meta"]).decode())
        except (OSError, KeyError, ValueError, UnicodeDecodeError) as e:
            raise InputError(f"{path} is not a readable query adapter ({e}); train it again with "
                             "`qkv terms adapt`, or delete the file") from None
        if meta.get("format") != FORMAT or W.ndim != 2 or W.shape[0] != W.shape[1]:
            raise InputError(f"{path} is not a query adapter this qkv reads (format {meta.get('format')}, "
                             f"shape {W.shape}); train it again with `qkv terms adapt`")
        return cls(W, meta["model"], meta["fingerprint"], meta.get("info", {}))


def adapter_path(root) -> Path:
    return Path(root) / FILE


def load_for(root, manifest) -> QueryAdapter | None:
    """The adapter of the index at ``root`` if it has one fitted for its model, else None (one
    fitted for another model is ignored, with a warning that says what to do)."""
    path = adapter_path(root)
    if not path.is_file():
        return None
    ad = QueryAdapter.load(path)
    if ad.fingerprint != manifest.fingerprint or ad.W.shape[0] != manifest.dim:
        warnings.warn(f"the query adapter at {path} was fitted for {ad.model} ({ad.fingerprint[:12]}), and the "
                      f"index now holds vectors of {manifest.model} ({manifest.fingerprint[:12]}): searching "
                      "without it; fit it again with `qkv terms adapt`", stacklevel=3)
        return None
    return ad


def install(root, adapter: QueryAdapter) -> Path:
    """Put ``adapter`` in the index at ``root`` (under its writer lock: never beside a build)."""
    from qkv.search.writelock import WriterLock

    with WriterLock(Path(root)):
        path = adapter_path(root)
        adapter.save(path)
    return path


def remove(root) -> bool:
    """Delete the index's adapter; False when it had none."""
    from qkv.search.writelock import WriterLock

    path = adapter_path(root)
    if not path.is_file():
        return False
    with WriterLock(Path(root)):
        path.unlink()
    return True


# ------------------------------------------------------------------ training data
def pairs_from_qrels(queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, float]], *, keep_query=None,
                     gain_offset: float = 1.0) -> dict[str, dict[str, float]]:
    """BEIR judgments → pairs: each judged query's products with gain = judgment − ``gain_offset``
    > 0 (as ``qkv eval search`` counts relevance). ``keep_query(qid)``: a split."""
    out: dict[str, dict[str, float]] = {}
    for qid, judged in qrels.items():
        if qid not in queries or (keep_query is not None and not keep_query(qid)):
            continue
        got = {pid: float(g) - gain_offset for pid, g in judged.items() if float(g) - gain_offset > 0}
        if got:
            t = out.setdefault(queries[qid].strip(), {})
            for pid, g in got.items():
                t[pid] = t.get(pid, 0.0) + g
    return out


def pairs_from_report(rows: Sequence[tuple[str, str, float]], ids: Sequence[str],
                      titles: Sequence[str]) -> tuple[dict[str, dict[str, float]], int]:
    """A report's (query, product, weight) rows (``qkv.explain.terms.report_rows``) → pairs over
    the index's products (``ids`` with their ``titles``), and how many rows named no product of
    it. The product column holds ids or titles, whichever more of its values are; a title held by
    several products counts for each."""
    known = set(ids)
    by_title: dict[str, list[str]] = {}
    for i, t in zip(ids, titles):
        by_title.setdefault(t.strip(), []).append(i)
    as_ids = sum(p in known for _, p, _ in rows) >= sum(p in by_title for _, p, _ in rows)
    out: dict[str, dict[str, float]] = {}
    unknown = 0
    for q, p, w in rows:
        hit = ([p] if p in known else []) if as_ids else by_title.get(p, [])
        if not hit:
            unknown += 1
            continue
        if w <= 0:
            continue
        t = out.setdefault(q, {})
        for i in hit:
            t[i] = t.get(i, 0.0) + float(w)
    return out, unknown


# ------------------------------------------------------------------ fitting
def _targets(pairs: list[dict[str, float]], row: Mapping[str, int]) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for p in pairs:
        rows = np.array([row[i] for i in p], np.int64)
        g = np.array(list(p.values()), np.float64)
        out.append((rows, g / g.sum()))
    return out


def loss_and_grad(W: np.ndarray, Q: np.ndarray, targets, V: np.ndarray, tau: float) -> tuple[float, np.ndarray]:
    """The summed cross-entropy over queries ``Q`` (float64 [B, d]) and its gradient in W,
    averaged over them. u = unit(W q); d loss / d u = Σ_v (softmax − target)_v v / τ, then back
    through the normalisation: dz = (du − (du·u) u) / |z|."""
    z = Q @ W.T
    nz = np.linalg.norm(z, axis=1, keepdims=True)
    u = z / nz
    S = (u.astype(np.float32) @ V.T) / tau  # [B, n]: the cost of a step
    S -= S.max(axis=1, keepdims=True)
    P = np.exp(S)
    P /= P.sum(axis=1, keepdims=True)
    loss = 0.0
    for k, (rows, g) in enumerate(targets):
        loss -= float(g @ np.log(np.maximum(P[k, rows], 1e-30)))
        np.subtract.at(P[k], rows, g)  # softmax − target (rows may repeat)
    du = (P @ V).astype(np.float64) / tau
    dz = (du - (du * u).sum(axis=1, keepdims=True) * u) / nz
    return loss, dz.T @ Q / len(Q)


def fit(Q: np.ndarray, targets, V: np.ndarray, *, epochs: int, tau: float = TAU, lr: float = LR,
        batch: int = BATCH, seed: int = 0, each_epoch=None, loss=None) -> np.ndarray:
    """W (float64) after ``epochs`` passes of Adam over the queries ``Q`` with their ``targets``
    (rows of ``V``, weights summing to 1). ``each_epoch(W, epoch, mean loss)`` after each pass.
    ``loss(W, rows)`` → (summed loss, gradient) over the queries at ``rows`` stands for
    ``loss_and_grad`` (the bench's variants: a second loss on the fused score, a ridge)."""
    rng = np.random.default_rng(seed)
    d = Q.shape[1]
    W = np.eye(d)
    m, v = np.zeros_like(W), np.zeros_like(W)
    step = 0
    for ep in range(1, epochs + 1):
        order = rng.permutation(len(Q))
        total = 0.0
        for a in range(0, len(order), batch):
            idx = order[a:a + batch]
            if loss is None:
                value, grad = loss_and_grad(W, Q[idx].astype(np.float64), [targets[i] for i in idx], V, tau)
            else:
                value, grad = loss(W, idx)
            total += value
            step += 1
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad * grad
            W -= lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
        if each_epoch is not None:
            each_epoch(W, ep, total / max(len(Q), 1))
    return W


def dense_figures(Q: np.ndarray, targets, V: np.ndarray, W: np.ndarray | None = None) -> dict[str, float]:
    """Dense NDCG@10 and Recall@100 of queries ``Q`` (adapted by ``W`` when given) over the rows
    of ``V``, the targets' weights as gains."""
    if W is not None:
        Q = Q @ W.T
        Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
    Q = np.asarray(Q, np.float32)
    nd, rc = [], []
    disc = 1.0 / np.log2(np.arange(2, 12))
    for a in range(0, len(Q), 256):
        S = Q[a:a + 256] @ V.T
        depth = min(100, V.shape[0])
        top = np.argpartition(-S, depth - 1, axis=1)[:, :depth]
        for r, (rows, g) in enumerate(targets[a:a + 256]):
            order = top[r][np.argsort(-S[r, top[r]], kind="stable")]
            gain = dict(zip(rows.tolist(), g.tolist()))
            got = np.array([gain.get(j, 0.0) for j in order[:10]])
            ideal = np.sort(g)[::-1][:10]
            nd.append(float(got @ disc[:len(got)]) / float(ideal @ disc[:len(ideal)]))
            rc.append(len(set(order.tolist()) & set(rows.tolist())) / len(set(rows.tolist())))
    return {"ndcg@10": float(np.mean(nd)) if nd else float("nan"),
            "recall@100": float(np.mean(rc)) if rc else float("nan")}


def _gap(Q: np.ndarray, V: np.ndarray, rank: int = 30) -> float:
    """Median over the queries of cos@1 − cos@(rank + 1) over the rows of V (the floor's background rank)."""
    Q = np.asarray(Q, np.float32)
    r = min(rank, V.shape[0] - 1)
    out = []
    for a in range(0, len(Q), 256):
        S = Q[a:a + 256] @ V.T
        part = -np.partition(-S, r, axis=1)
        out.append(S.max(axis=1) - part[:, r])
    return float(np.median(np.concatenate(out)))


def _held_out(query: str, share: float) -> bool:
    h = int.from_bytes(hashlib.blake2b(query.encode("utf-8"), digest_size=8).digest(), "big")
    return (h % 10_000) < share * 10_000


@dataclass
class AdaptReport:
    queries: int  # training queries with at least one product of the index
    products: int  # distinct products among them
    catalog: int  # titles the softmax ran over
    held_out: int  # queries that chose the number of passes (0: none held out)
    epochs: int  # passes of the installed fit
    before: dict  # held-out dense figures without the adapter
    after: dict  # … after the best pass (fitted without the held-out queries)
    per_epoch: list  # held-out dense NDCG@10 after each pass
    seconds: float
    helps: bool  # the best pass beat no adapter on the held-out queries (True when none were held out)
    spread: float = 1.0  # QueryAdapter.spread

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def train(index, pairs: Pairs, *, epochs: int | None = None, tau: float | None = None, lr: float = LR,
          max_epochs: int = MAX_EPOCHS, hold_out: float = HOLD_OUT, negatives: int = NEGATIVES, seed: int = 0,
          progress=None, source: str = "", fitted_on: dict | None = None) -> tuple[QueryAdapter, AdaptReport]:
    """Fit the query adapter of ``index`` (a ``qkv.search.Index``) on ``pairs`` (query text →
    {product id: weight}). Queries are planned and embedded as search does (spelling, translation,
    prefix; ``Index.plan_vectors`` without an adapter). ``epochs``: that many passes, no held-out
    choice. ``progress``: a ``qkv.progress`` reporter ("embed", "fit"). ``source`` and ``fitted_on``
    (BEIR: {"qrels": resolved path, "half": …}, so that an evaluation on the same judgments can say
    its figures are not held out) are recorded in the adapter's info."""
    from qkv.progress import Count

    tau = tau_for(index.store.manifest.model) if tau is None else tau
    if tau <= 0 or lr <= 0 or max_epochs < 1 or not 0 <= hold_out < 1 or (epochs is not None and epochs < 1):
        raise InputError("τ and the step must be above 0, passes at least 1 and the held-out share in [0, 1)")
    t0 = time.perf_counter()
    st = index.store
    ids = st.all_ids()
    known = set(ids)
    kept = {q: {i: float(w) for i, w in p.items() if i in known and w > 0} for q, p in pairs.items() if q.strip()}
    kept = {q: p for q, p in kept.items() if p}
    if not kept:
        raise InputError("none of the training queries names a product of this index; check that the report "
                         "or judgments belong to this catalog")
    queries = sorted(kept)
    wanted = sorted({i for p in kept.values() for i in p})
    rng = np.random.default_rng(seed)
    if len(ids) > negatives:  # the queries' products and a fixed sample of the rest
        rest = np.array(sorted(known - set(wanted)), dtype=object)
        use = wanted + rest[rng.choice(len(rest), min(negatives, len(rest)), replace=False)].tolist()
    else:
        use = list(ids)
    V = np.ascontiguousarray(st.get_vectors(use), np.float32)
    row = {i: r for r, i in enumerate(use)}
    count = Count(progress, "embed", len(queries))
    plans = [index.plan(q) for q in queries]
    Q = index.plan_vectors(plans, adapt=False, progress=count).astype(np.float64)
    targets = _targets([kept[q] for q in queries], row)
    held = np.array([_held_out(q, hold_out) for q in queries]) if epochs is None else np.zeros(len(queries), bool)
    if held.sum() < MIN_HELD_OUT or (~held).sum() < MIN_HELD_OUT:
        held[:] = False
    tr, ho = np.flatnonzero(~held), np.flatnonzero(held)
    ho_t = [targets[i] for i in ho]
    passes = epochs if epochs is not None else (max_epochs if len(ho) else DEFAULT_EPOCHS)
    fit_count = Count(progress, "fit", passes + (passes if len(ho) else 0))
    before = dense_figures(Q[ho], ho_t, V) if len(ho) else {}
    per_epoch: list[float] = []
    best = (-np.inf, 0, {})  # the best pass on the held-out queries
    if len(ho):
        def each(W, ep, loss):
            nonlocal best
            f = dense_figures(Q[ho], ho_t, V, W)
            per_epoch.append(round(f["ndcg@10"], 4))
            if f["ndcg@10"] > best[0]:
                best = (f["ndcg@10"], ep, f)
            fit_count.add(1)

        fit(Q[tr], [targets[i] for i in tr], V, epochs=passes, tau=tau, lr=lr, seed=seed, each_epoch=each)
        final, after = best[1], best[2]
        helps = best[0] > before["ndcg@10"]
    else:
        final, after, helps = passes, {}, True  # nothing to choose on: the default count, trusted
    fit_count.total = passes + final if len(ho) else final
    W = fit(Q, targets, V, epochs=final, tau=tau, lr=lr, seed=seed, each_epoch=lambda *_: fit_count.add(1))
    spread = _gap(Q @ W.T / np.linalg.norm(Q @ W.T, axis=1, keepdims=True), V) / max(_gap(Q, V), 1e-9)
    from qkv.text import zh

    info = {"spread": round(float(spread), 4), "queries": len(queries), "products": len(wanted), "catalog": len(use),
            "han_queries": sum(zh.has_han(q) for q in queries),
            "epochs": final, "tau": tau,
            "lr": lr, "held_out": int(len(ho)), "before": before, "after": after, "source": source,
            "fitted_on": fitted_on,
            "trained": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    rep = AdaptReport(len(queries), len(wanted), len(use), int(len(ho)), final, before, after, per_epoch,
                      time.perf_counter() - t0, helps, info["spread"])
    return QueryAdapter(W.astype(np.float32), st.manifest.model, st.manifest.fingerprint, info), rep
