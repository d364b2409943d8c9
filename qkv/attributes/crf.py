"""A linear-chain CRF over BIO tags, in NumPy, trained with SciPy's L-BFGS.

Emissions are linear in the token features (dense encoder vectors and sparse binary features, in
one weight matrix each); transitions are a learned K×K table restricted to valid BIO moves (I-x
only after B-x or I-x), so decoded sequences are always well-formed spans.

The log-partition and marginals come from the scaled forward-backward recursion (Rabiner 1989;
Sutton & McCallum, "An Introduction to Conditional Random Fields", 2012, §4.1): probabilities are
renormalised at every position instead of working in log space, so each step is one small matrix
product over the whole batch. ``mode="softmax"`` trains the same emissions with a per-token
softmax and no transitions (decoded with the same BIO constraints) — the comparison the docs report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from qkv.progress import Count


def bio_labels(attrs: list[str]) -> list[str]:
    return ["O"] + [f"{p}-{a}" for a in attrs for p in ("B", "I")]


def allowed_transitions(K: int) -> tuple[np.ndarray, np.ndarray]:
    """(M [K,K], start [K]) boolean: which moves are valid BIO. Label 2a+1 = B-a, 2a+2 = I-a."""
    M = np.ones((K, K), dtype=bool)
    start = np.ones(K, dtype=bool)
    for a in range((K - 1) // 2):
        b, i = 2 * a + 1, 2 * a + 2
        M[:, i] = False
        M[b, i] = M[i, i] = True
        start[i] = False
    return M, start


@dataclass
class Batch:
    """Tokens of many titles packed row after row."""

    dense: np.ndarray  # float32 [N, D]
    sparse: sp.csr_matrix  # [N, F] binary
    lengths: np.ndarray  # int64 [S], all > 0
    labels: np.ndarray | None = None  # int64 [N]

    def __post_init__(self):
        self.seq = np.repeat(np.arange(len(self.lengths)), self.lengths)
        self.pos = np.arange(len(self.seq)) - np.repeat(np.cumsum(self.lengths) - self.lengths, self.lengths)
        self.L = int(self.lengths.max()) if len(self.lengths) else 0
        self._buckets = None

    def buckets(self, n: int = 4) -> list[tuple[np.ndarray, "Batch"]]:
        """Titles grouped by length (token rows, sub-batch), so the recursions pad less."""
        if self._buckets is None:
            order = np.argsort(self.lengths, kind="stable")
            starts = np.cumsum(self.lengths) - self.lengths
            out = []
            for grp in np.array_split(order, min(n, max(1, len(order)))):
                if len(grp) == 0:
                    continue
                rows = np.concatenate([np.arange(starts[g], starts[g] + self.lengths[g]) for g in grp])
                sub = Batch.__new__(Batch)
                sub.dense, sub.sparse, sub.labels = None, None, None
                sub.lengths = self.lengths[grp]
                Batch.__post_init__(sub)
                out.append((rows, sub))
            self._buckets = out
        return self._buckets


class CRF:
    """Weights of the tagger; ``fit`` learns them, ``decode`` / ``marginals`` use them."""

    def __init__(self, K: int, D: int, F: int, mode: str = "crf"):
        if mode not in ("crf", "softmax"):
            raise ValueError("mode is 'crf' or 'softmax'")
        self.K, self.D, self.F, self.mode = K, D, F, mode
        self.Wd = np.zeros((D, K), dtype=np.float32)
        self.Ws = np.zeros((F, K), dtype=np.float32)
        self.b = np.zeros(K, dtype=np.float32)
        self.T = np.zeros((K, K), dtype=np.float32)
        self.start = np.zeros(K, dtype=np.float32)
        self.end = np.zeros(K, dtype=np.float32)
        self.M, self.Mstart = allowed_transitions(K)

    # ------------------------------------------------------------------ parameters as one vector
    def _shapes(self):
        return [(self.D, self.K), (self.F, self.K), (self.K,), (self.K, self.K), (self.K,), (self.K,)]

    def _pack(self) -> np.ndarray:
        return np.concatenate([a.ravel().astype(np.float64) for a in
                               (self.Wd, self.Ws, self.b, self.T, self.start, self.end)])

    def _unpack(self, theta: np.ndarray):
        out, k = [], 0
        for s in self._shapes():
            n = int(np.prod(s))
            out.append(theta[k:k + n].reshape(s))
            k += n
        return out

    def _set(self, theta):
        Wd, Ws, b, T, st, en = self._unpack(theta)
        self.Wd, self.Ws, self.b = Wd.astype(np.float32), Ws.astype(np.float32), b.astype(np.float32)
        self.T, self.start, self.end = T.astype(np.float32), st.astype(np.float32), en.astype(np.float32)

    # ------------------------------------------------------------------ scores
    def emissions(self, batch: Batch, Wd=None, Ws=None, b=None) -> np.ndarray:
        Wd = self.Wd if Wd is None else Wd
        Ws = self.Ws if Ws is None else Ws
        b = self.b if b is None else b
        E = (batch.dense @ Wd.astype(batch.dense.dtype)).astype(np.float64) if self.D else np.zeros((len(batch.seq), self.K))
        if self.F:
            E += batch.sparse @ Ws
        E += b
        return E

    def _pad(self, batch: Batch, E: np.ndarray, fill=0.0) -> np.ndarray:
        P = np.full((len(batch.lengths), batch.L, self.K), fill, dtype=np.float64)
        P[batch.seq, batch.pos] = E
        return P

    def _trans(self, T, start, end):
        if self.mode == "softmax":
            z = np.zeros_like(T)
            return np.where(self.M, z, -np.inf), np.where(self.Mstart, 0.0, -np.inf), np.zeros_like(end)
        return np.where(self.M, T, -np.inf), np.where(self.Mstart, start, -np.inf), end

    def forward_backward(self, batch: Batch, E: np.ndarray, T, start, end, pairs: bool = True):
        """As ``_forward_backward``, over length buckets (logZ in bucket order: only its sum is used
        in training)."""
        if len(batch.lengths) < 64:
            return self._forward_backward(batch, E, T, start, end, pairs)
        logZ, P, pair = [], np.empty_like(E), 0.0
        for rows, sub in batch.buckets():
            z, p, pr = self._forward_backward(sub, E[rows], T, start, end, pairs)
            logZ.append(z)
            P[rows] = p
            pair = pair + pr
        return np.concatenate(logZ), P, pair

    def _forward_backward(self, batch: Batch, E: np.ndarray, T, start, end, pairs: bool = True):
        """log Z per title, token marginals [N, K] (packed), and summed pair marginals [K, K]
        (only with ``pairs``: training needs them, decoding does not)."""
        S, L, K = len(batch.lengths), batch.L, self.K
        Ep = self._pad(batch, E)
        m = Ep.max(axis=2, keepdims=True)
        psi = np.exp(Ep - m)
        Tm, st, en = self._trans(T, start, end)
        A = np.exp(Tm)
        es, ee = np.exp(st), np.exp(en)
        valid = np.arange(L)[None, :] < batch.lengths[:, None]  # [S, L]
        alpha = np.empty((S, L, K))
        logc = np.zeros((S, L))
        c = np.ones((S, L))
        a = es * psi[:, 0]
        c[:, 0] = a.sum(1)
        alpha[:, 0] = a / c[:, 0:1]
        for t in range(1, L):
            a = (alpha[:, t - 1] @ A) * psi[:, t]
            ct = a.sum(1)
            v = valid[:, t]
            c[:, t] = np.where(v, ct, 1.0)
            alpha[:, t] = np.where(v[:, None], a / c[:, t:t + 1], alpha[:, t - 1])
        logc = np.log(c)
        Zp = alpha[:, L - 1] @ ee
        logZ = logc.sum(1) + (m[..., 0] * valid).sum(1) + np.log(Zp)
        beta = np.empty((S, L, K))
        tail = ee[None, :] / Zp[:, None]
        beta[:, L - 1] = tail
        pair = np.zeros((K, K))
        for t in range(L - 2, -1, -1):
            v = valid[:, t + 1]
            nxt = psi[:, t + 1] * beta[:, t + 1] / c[:, t + 1:t + 2]
            nxt = np.where(v[:, None], nxt, 0.0)
            beta[:, t] = np.where(v[:, None], nxt @ A.T, tail)
            if pairs:
                pair += alpha[:, t].T @ nxt
        pair *= A
        P = (alpha * beta)[batch.seq, batch.pos]
        return logZ, P, pair

    # ------------------------------------------------------------------ training
    def _objective(self, theta, batch: Batch, l2: float, l2_sparse: float):
        Wd, Ws, b, T, st, en = self._unpack(theta)
        E = self.emissions(batch, Wd, Ws, b)
        y = batch.labels
        N = len(y)
        if self.mode == "softmax":
            Z = E - E.max(1, keepdims=True)
            lse = np.log(np.exp(Z).sum(1))
            loss = float((lse - Z[np.arange(N), y]).sum())
            G = np.exp(Z - lse[:, None])
            G[np.arange(N), y] -= 1
            dT = np.zeros_like(T)
            dst = np.zeros_like(st)
            den = np.zeros_like(en)
        else:
            logZ, P, pair = self.forward_backward(batch, E, T, st, en)
            first = np.cumsum(batch.lengths) - batch.lengths
            last = np.cumsum(batch.lengths) - 1
            same = np.ones(N, dtype=bool)
            same[last] = False  # pairs (t, t+1) within a title
            idx = np.nonzero(same)[0]
            gold = E[np.arange(N), y].sum() + T[y[idx], y[idx + 1]].sum() + st[y[first]].sum() + en[y[last]].sum()
            loss = float(logZ.sum() - gold)
            G = P
            G[np.arange(N), y] -= 1
            gp = np.zeros_like(T)
            np.add.at(gp, (y[idx], y[idx + 1]), 1.0)
            dT = np.where(self.M, pair - gp, 0.0)
            dst = np.where(self.Mstart, G[first].sum(0) + 0, 0.0)
            den = G[last].sum(0)
            # d/dstart = P_first - onehot(y_first) = G[first]; same for end with G[last]
        dWd = (batch.dense.T @ G.astype(batch.dense.dtype)).astype(np.float64) if self.D else np.zeros_like(Wd)
        dWs = (batch.sparse.T @ G) if self.F else np.zeros_like(Ws)
        db = G.sum(0)
        loss += 0.5 * l2 * (Wd * Wd).sum() + 0.5 * l2_sparse * (Ws * Ws).sum() + 0.5 * l2 * (T * T).sum()
        dWd = dWd + l2 * Wd
        dWs = dWs + l2_sparse * Ws
        dT = dT + l2 * T
        grad = np.concatenate([dWd.ravel(), np.asarray(dWs).ravel(), db, dT.ravel(), dst, den])
        return loss, grad

    def fit(self, batch: Batch, *, l2: float = 1.0, l2_sparse: float = 0.1, max_iter: int = 200,
            progress=None) -> dict:
        """Minimise the negative log-likelihood (+ L2). Returns optimiser facts. ``progress``
        (``qkv.progress``) counts stage "fit" in optimiser iterations, of at most ``max_iter``."""
        count = Count(progress, "fit", max_iter)

        def cb(_):
            count.add()

        res = minimize(self._objective, self._pack(), args=(batch, l2, l2_sparse), jac=True,
                       method="L-BFGS-B", callback=cb, options={"maxiter": max_iter, "maxfun": max_iter * 2})
        self._set(res.x)
        return {"iterations": int(res.nit), "loss": float(res.fun), "converged": bool(res.success)}

    # ------------------------------------------------------------------ inference
    def log_potentials(self, batch: Batch, E: np.ndarray | None = None):
        E = self.emissions(batch) if E is None else E
        if self.mode == "softmax":
            E = E - E.max(1, keepdims=True)
            E = E - np.log(np.exp(E).sum(1, keepdims=True))
        return E

    def decode(self, batch: Batch, emissions: np.ndarray | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Viterbi labels of each title and each token's marginal probability of its label.

        ``emissions``: the packed [N, K] scores if the caller computed them (``batch`` then only
        needs its lengths). The confidence of a token is P(y_t = its decoded label | title), from
        forward-backward (CRF) or the token's softmax."""
        if len(batch.lengths) == 0:
            return [], []
        E = self.emissions(batch) if emissions is None else emissions
        LP = self.log_potentials(batch, E)
        T, st, en = self.T.astype(np.float64), self.start.astype(np.float64), self.end.astype(np.float64)
        packed = np.empty(len(LP), dtype=np.int64)
        groups = batch.buckets() if len(batch.lengths) >= 64 else [(slice(None), batch)]
        for rows, sub in groups:  # similar lengths together: the recursion pads less
            packed[rows] = self._viterbi(sub, LP[rows], *self._trans(T, st, en))
        if self.mode == "softmax":
            Pk = np.exp(LP)
        else:
            _, Pk, _ = self.forward_backward(batch, E, T, st, en, pairs=False)
        conf = Pk[np.arange(len(packed)), packed]
        ends = np.cumsum(batch.lengths)[:-1]
        return np.split(packed, ends), np.split(conf, ends)

    def _viterbi(self, batch: Batch, E: np.ndarray, Tm, st, en) -> np.ndarray:
        """Best valid BIO labelling (packed [N]) by max-product in float32.

        O and B-x may follow any label (a K-way max each), I-x only B-x or I-x (a 2-way max), so
        a step costs about half a dense K×K one. Only the running scores are kept, not argmax
        tables: the backtrack recomputes, for the one label chosen at each position, which
        predecessor gave its score (the same float32 sums, first maximum on ties, so the same
        path as storing back-pointers)."""
        S, L, K = len(batch.lengths), batch.L, self.K
        Ep = np.zeros((S, L, K), dtype=np.float32)
        Ep[batch.seq, batch.pos] = E
        valid = np.arange(L)[None, :] < batch.lengths[:, None]
        A = (K - 1) // 2
        free = np.concatenate([[0], 2 * np.arange(A) + 1])  # O, B-*
        ib, ii = 2 * np.arange(A) + 1, 2 * np.arange(A) + 2  # B-a, I-a
        T32 = Tm.astype(np.float32)  # -inf on invalid moves
        into_free = np.ascontiguousarray(T32[:, free].T)  # [1+A, K]: scores of moves into O / B-*
        t_bi, t_ii = T32[ib, ii], T32[ii, ii]
        hist = np.empty((S, L, K), dtype=np.float32)  # running score at each position
        score = (st + Ep[:, 0]).astype(np.float32)
        for t in range(1, L):
            hist[:, t - 1] = score
            new = np.empty_like(score)
            new[:, free] = (score[:, None, :] + into_free[None]).max(-1)
            new[:, ii] = np.maximum(score[:, ib] + t_bi, score[:, ii] + t_ii)
            new += Ep[:, t]
            score = np.where(valid[:, t][:, None], new, score)
        cur = (score + en).argmax(1)
        labels = np.empty((S, L), dtype=np.int64)
        into = np.ascontiguousarray(T32.T)  # [K to, K from]
        for t in range(L - 1, 0, -1):
            labels[:, t] = cur
            prev = (hist[:, t - 1] + into[cur]).argmax(1)
            cur = np.where(t < batch.lengths, prev, cur)
        labels[:, 0] = cur
        return labels[batch.seq, batch.pos]
