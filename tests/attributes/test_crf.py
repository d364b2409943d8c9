"""The CRF's maths against brute force on problems small enough to enumerate."""

import itertools

import numpy as np
import scipy.sparse as sp

from qkv.attributes.crf import CRF, Batch


def _problem(seed=0, lengths=(3, 1, 4), D=5, F=7, K=5):
    rng = np.random.default_rng(seed)
    N = sum(lengths)
    dense = rng.normal(size=(N, D))  # float64: finite differences need the precision
    sparse = sp.csr_matrix((rng.random((N, F)) < 0.3).astype(np.float64))
    crf = CRF(K, D, F)
    # a labelling that respects BIO: O or B-x anywhere
    labels = rng.choice([0, 1, 3], size=N)
    batch = Batch(dense, sparse, np.asarray(lengths), labels)
    crf.Wd = rng.normal(size=(D, K)).astype(np.float32) * 0.5
    crf.Ws = rng.normal(size=(F, K)).astype(np.float32) * 0.5
    crf.T = rng.normal(size=(K, K)).astype(np.float32)
    crf.start = rng.normal(size=K).astype(np.float32)
    crf.end = rng.normal(size=K).astype(np.float32)
    return crf, batch


def _brute(crf, batch):
    E = crf.emissions(batch)
    out, k = [], 0
    for n in batch.lengths:
        e = E[k:k + n]
        k += n
        best, scores = None, {}
        for ys in itertools.product(range(crf.K), repeat=int(n)):
            if not crf.Mstart[ys[0]] or any(not crf.M[a, b] for a, b in zip(ys, ys[1:])):
                continue
            s = crf.start[ys[0]] + crf.end[ys[-1]] + sum(e[t, y] for t, y in enumerate(ys))
            s += sum(crf.T[a, b] for a, b in zip(ys, ys[1:]))
            scores[ys] = s
        vals = np.array(list(scores.values()))
        logZ = np.log(np.exp(vals - vals.max()).sum()) + vals.max()
        marg = np.zeros((int(n), crf.K))
        for ys, s in scores.items():
            for t, y in enumerate(ys):
                marg[t, y] += np.exp(s - logZ)
        out.append((logZ, marg, max(scores, key=scores.get)))
    return out


def test_forward_backward_and_viterbi_match_enumeration():
    crf, batch = _problem()
    logZ, P, _ = crf.forward_backward(batch, crf.emissions(batch), crf.T.astype(np.float64),
                                      crf.start.astype(np.float64), crf.end.astype(np.float64))
    labels, conf = crf.decode(batch)
    k = 0
    for i, (z, marg, best) in enumerate(_brute(crf, batch)):
        n = len(marg)
        assert np.isclose(logZ[i], z, atol=1e-6)
        assert np.allclose(P[k:k + n], marg, atol=1e-6)
        assert tuple(labels[i]) == best
        assert np.allclose(conf[i], marg[np.arange(n), list(best)], atol=1e-6)
        k += n


def test_gradient_matches_finite_differences():
    for mode in ("crf", "softmax"):
        crf, batch = _problem(1)
        crf.mode = mode
        theta = crf._pack() * 0.3
        loss, grad = crf._objective(theta, batch, 0.5, 0.2)
        rng = np.random.default_rng(2)
        for j in rng.choice(len(theta), size=25, replace=False):
            h = 1e-5
            tp, tm = theta.copy(), theta.copy()
            tp[j] += h
            tm[j] -= h
            num = (crf._objective(tp, batch, 0.5, 0.2)[0] - crf._objective(tm, batch, 0.5, 0.2)[0]) / (2 * h)
            assert abs(num - grad[j]) < 1e-3 * max(1.0, abs(num)), (mode, j, num, grad[j])


def test_fit_learns_a_separable_problem():
    rng = np.random.default_rng(3)
    lengths = np.full(40, 6)
    N = lengths.sum()
    labels = []
    for n in lengths:  # valid BIO: I only after B or I
        prev = 0
        for _ in range(n):
            y = int(rng.choice([0, 1, 2])) if prev else int(rng.choice([0, 1]))
            labels.append(y)
            prev = y
    labels = np.asarray(labels)
    onehot = np.eye(3)[labels].astype(np.float32)
    dense = onehot + 0.1 * rng.normal(size=onehot.shape).astype(np.float32)
    batch = Batch(dense, sp.csr_matrix((N, 0)), lengths, labels)
    crf = CRF(3, 3, 0)
    facts = crf.fit(batch, l2=0.01, max_iter=100)
    pred, _ = crf.decode(Batch(dense, sp.csr_matrix((N, 0)), lengths))
    assert facts["iterations"] > 0
    assert (np.concatenate(pred) == labels).mean() > 0.97


def test_length_buckets_give_the_same_answer():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 20, size=100)
    N, K = lengths.sum(), 7
    crf = CRF(K, 4, 0)
    crf.Wd = rng.normal(size=(4, K)).astype(np.float32)
    crf.T = rng.normal(size=(K, K)).astype(np.float32)
    b = Batch(rng.normal(size=(N, 4)), sp.csr_matrix((N, 0)), lengths)
    E = crf.emissions(b)
    args = (crf.T.astype(float), crf.start.astype(float), crf.end.astype(float))
    plain, bucketed = crf._forward_backward(b, E, *args), crf.forward_backward(b, E, *args)
    assert len(b.buckets()) > 1
    assert np.isclose(plain[0].sum(), bucketed[0].sum())
    assert np.allclose(plain[1], bucketed[1]) and np.allclose(plain[2], bucketed[2])


def test_viterbi_over_many_titles_matches_enumeration():
    """Enough titles for the length-bucketed path (≥ 64), lengths 1-4 so every labelling can be
    enumerated; ties are made likely by rounding the weights."""
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 5, size=70)
    N, K = int(lengths.sum()), 7
    crf = CRF(K, 3, 0)
    crf.Wd = np.round(rng.normal(size=(3, K)), 0).astype(np.float32)
    crf.T = np.round(rng.normal(size=(K, K)), 0).astype(np.float32)
    crf.start = np.round(rng.normal(size=K), 0).astype(np.float32)
    crf.end = np.round(rng.normal(size=K), 0).astype(np.float32)
    batch = Batch(np.round(rng.normal(size=(N, 3)), 0), sp.csr_matrix((N, 0)), lengths)
    labels, _ = crf.decode(batch)
    E = crf.emissions(batch)
    k = 0
    for n, lab in zip(lengths, labels):
        e = E[k:k + n]
        k += n
        def total(ys):
            return (crf.start[ys[0]] + crf.end[ys[-1]] + sum(e[t, y] for t, y in enumerate(ys))
                    + sum(crf.T[a, b] for a, b in zip(ys, ys[1:])))
        valid = [ys for ys in itertools.product(range(K), repeat=int(n))
                 if crf.Mstart[ys[0]] and all(crf.M[a, b] for a, b in zip(ys, ys[1:]))]
        best = max(total(ys) for ys in valid)
        assert crf.Mstart[lab[0]] and all(crf.M[a, b] for a, b in zip(lab, lab[1:]))
        assert np.isclose(total(tuple(lab)), best, atol=1e-4)
