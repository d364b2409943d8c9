"""bench/search_densepool.py (learned term weights on the dense side): the token cache's pooling
(plain mean and term-weighted), the token weights read from a head's ŷ, the query adapter's
gradient and fit, and the titles' expansion toward their queries — on small made-up data."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench scripts import each other by name
import search_densepool as dp  # noqa: E402  (bench/search_densepool.py)


def cache(tmp_path, lens=(4, 3, 5), widx=None, words=None, seed=0) -> dp.Tokens:
    """A token cache of len(lens) titles written as `tokens` writes it (one chunk)."""
    rng = np.random.default_rng(seed)
    n = sum(lens)
    vecs = rng.normal(size=(n, 6)).astype(np.float16)
    if widx is None:  # [CLS] word0 word1 … [SEP]
        widx = np.concatenate([np.r_[-1, np.arange(k - 2), -1] for k in lens]).astype(np.int16)
    words = words or [[f"w{t}{j}" for j in range(k - 2)] for t, k in enumerate(lens)]
    d = tmp_path / "tok"
    d.mkdir()
    (d / "ids.json").write_text(json.dumps([f"p{t}" for t in range(len(lens))]))
    np.savez(d / "chunk-000.npz", vecs=vecs, widx=widx, lens=np.array(lens, np.int32), words=np.array(json.dumps(words)))
    return dp.Tokens(tmp_path)


def unit(v):
    return v / np.linalg.norm(v)


def test_pool_is_the_mean_and_the_weighted_mean(tmp_path):
    tok = cache(tmp_path)
    h = tok.vecs.astype(np.float32)
    mean = tok.pool()
    for t, (a, k) in enumerate(zip(tok.starts, tok.lens)):
        np.testing.assert_allclose(mean[t], unit(h[a:a + k].mean(axis=0)), atol=1e-6)
    w = np.linspace(0.1, 2.0, len(h)).astype(np.float32)
    got = tok.pool(w)
    for t, (a, k) in enumerate(zip(tok.starts, tok.lens)):
        np.testing.assert_allclose(got[t], unit((w[a:a + k, None] * h[a:a + k]).sum(axis=0)), atol=1e-6)


def test_pool_adds_titles_cut_across_steps(tmp_path, monkeypatch):
    """A title whose tokens fall in two of pool's steps is summed whole."""
    tok = cache(tmp_path, lens=(3, 7, 2, 6))
    want, w = tok.pool(), np.linspace(0.5, 1.5, 18).astype(np.float32)
    weighted = tok.pool(w)
    monkeypatch.setattr(dp, "POOL_STEP", 4)
    np.testing.assert_allclose(tok.pool(), want, atol=1e-6)
    np.testing.assert_allclose(tok.pool(w), weighted, atol=1e-6)


def test_token_weights_spread_each_word_to_its_pieces(tmp_path):
    # title 0: [CLS] a a' b [SEP] (word 0 in two pieces); title 1: [CLS] c , [SEP] ("," no content word)
    widx = np.array([-1, 0, 0, 1, -1, -1, 0, -1, -1], np.int16)
    tok = cache(tmp_path, lens=(5, 4), widx=widx, words=[["a", "b"], ["c"]])
    yhat = [np.array([0.6, -0.2]), np.array([0.3])]
    w = tok.token_weights(yhat, beta=0.1, others=0.5)
    np.testing.assert_allclose(w, [0.05, 0.7, 0.7, 0.1, 0.05, 0.05, 0.4, 0.05, 0.05], atol=1e-7)
    np.testing.assert_allclose(tok.token_weights(yhat, beta=0.0, others=1.0), [0, .6, .6, 0, 0, 0, .3, 0, 0], atol=1e-7)


def test_load_yhat_refuses_weights_of_other_words(tmp_path):
    tok = cache(tmp_path, lens=(3, 3), words=[["a"], ["b"]])
    f = tmp_path / "w.jsonl"
    f.write_text('{"id": "p0", "words": ["a"], "w": [0.5]}\n{"id": "p1", "words": ["B"], "w": [0.1]}\n')
    with pytest.raises(SystemExit, match="p1"):
        dp.load_yhat(f, tok)
    f.write_text('{"id": "p0", "words": ["a"], "w": [0.5]}\n{"id": "p1", "words": ["b"], "w": [0.1]}\n')
    assert [list(y) for y in dp.load_yhat(f, tok)] == [[0.5], [0.1]]


def problem(seed=1, n=40, d=6, queries=8):
    rng = np.random.default_rng(seed)
    V = dp.unit(rng.normal(size=(n, d)).astype(np.float32))
    Q = dp.unit(rng.normal(size=(queries, d)).astype(np.float32))
    targets = [(np.array([i, (i + 7) % n]), np.array([0.75, 0.25])) for i in range(queries)]
    keyword = [(np.array([i, (i + 3) % n, (i + 5) % n]), np.array([0.5, 1.0, 0.2])) for i in range(queries)]
    return Q, V, targets, keyword


@pytest.mark.parametrize("hybrid", [0.0, 1.0])
def test_adapter_gradient_matches_finite_differences(hybrid):
    Q, V, targets, keyword = problem()
    rng = np.random.default_rng(2)
    W = np.eye(6) + 0.1 * rng.normal(size=(6, 6))
    q = Q.astype(np.float64)
    args = dict(tau=0.5, keyword=keyword, hybrid=hybrid, tau_h=0.5)
    _, grad = dp.adapter_loss(W, q, targets, V, **args)
    eps = 1e-3
    for i, j in [(0, 0), (1, 3), (5, 2), (4, 4)]:
        E = np.zeros_like(W)
        E[i, j] = eps
        num = (dp.adapter_loss(W + E, q, targets, V, **args)[0] - dp.adapter_loss(W - E, q, targets, V, **args)[0]) / (2 * eps)
        assert grad[i, j] * len(q) == pytest.approx(num, rel=2e-2, abs=2e-3)


def test_fit_adapter_learns_a_rotation_of_the_queries():
    """Queries that are their target titles turned by a fixed rotation: the adapter learns to turn
    them back (top-1 hits rise); a step size of 0 leaves the identity."""
    rng = np.random.default_rng(3)
    n, d = 60, 6
    V = dp.unit(rng.normal(size=(n, d)).astype(np.float32))
    R, _ = np.linalg.qr(rng.normal(size=(d, d)))
    rows = np.arange(n)
    Q = dp.unit((V[rows] @ R.T + 0.05 * rng.normal(size=(n, d))).astype(np.float32))
    targets = [(np.array([r]), np.array([1.0])) for r in rows]

    def hits(W):
        return float(np.mean(np.argmax(dp.adapt(Q, W) @ V.T, axis=1) == rows))

    assert hits(np.eye(d)) < 0.3
    W = dp.fit_adapter(Q, targets, V, tau=0.1, lr=0.05, epochs=60, ridge=0.0, batch=16)
    assert hits(W) > 0.9
    np.testing.assert_array_equal(dp.fit_adapter(Q, targets, V, tau=0.1, lr=0.0, epochs=2, ridge=0.0), np.eye(d))


def test_expand_moves_found_titles_toward_their_queries_only():
    Q, V, targets, _ = problem()
    X = dp.expand(V, Q, targets, 1.0)
    found = sorted({int(r) for rows, _ in targets for r in rows})
    others = sorted(set(range(len(V))) - set(found))
    np.testing.assert_allclose(X[others], V[others], atol=1e-7)
    for i, (rows, _) in enumerate(targets):
        assert X[rows[0]] @ Q[i] > V[rows[0]] @ Q[i]
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-6)
