import numpy as np
import pytest

from qkv.summarize.rank import attention_matrix, importance, kmeans, received, stationary_power


def unit(rng, n, d=16):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("tau", [0.05, 0.3, 1.0])
def test_closed_form_equals_power_iteration(tau):
    e = unit(np.random.default_rng(0), 40)
    p = attention_matrix(e, tau)
    assert np.allclose(p.sum(axis=1), 1) and np.allclose(np.diag(p), 0)
    closed = importance(e, tau)
    assert np.allclose(closed @ p, closed, rtol=1e-4, atol=1e-12)  # π = π·P (float32 blocks)
    if tau >= 0.3:  # at small τ the chain mixes too slowly for a plain power iteration
        assert np.allclose(stationary_power(p), closed, atol=1e-6)


def test_blocks_and_mass():
    rng = np.random.default_rng(1)
    e = unit(rng, 30)
    assert np.allclose(importance(e, 0.3, block=7), importance(e, 0.3, block=1024), atol=1e-6)
    # A vector with mass 3 behaves like three copies of that vector... up to the copies not
    # attending to each other, which mass cannot tell; so compare against mass on distinct rows:
    # importance scales each key by its mass and each query by its mass.
    w = rng.integers(1, 4, size=30).astype(float)
    k = np.exp((e @ e.T - 1) / 0.3)
    np.fill_diagonal(k, 0)
    d = (w @ k) * w
    assert np.allclose(importance(e, 0.3, mass=w), d / d.sum(), atol=1e-6)


def test_sampled_queries_estimate_the_ranking():
    rng = np.random.default_rng(2)
    centres = unit(rng, 4)
    # 300 vectors around 4 centres of unequal size: the biggest group gets the most attention.
    sizes = [150, 80, 50, 20]
    e = np.concatenate([c + 0.3 * rng.standard_normal((s, 16)) for c, s in zip(centres, sizes)])
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    full = importance(e, 0.2)
    est = importance(e, 0.2, sample=100, seed=0)
    group = np.repeat(np.arange(4), sizes)
    means = [full[group == g].mean() for g in range(4)]
    assert means[0] == max(means) and means[0] > 2 * means[3]
    assert np.corrcoef(full, est)[0, 1] > 0.9


def test_received_is_a_distribution_and_deterministic():
    e = unit(np.random.default_rng(3), 12)
    r = received(e, 0.3)
    assert np.isclose(r.sum(), 1) and (r > 0).all()
    p = attention_matrix(e, 0.3)
    assert np.allclose(r, p.sum(axis=0) / p.sum(), atol=1e-9)
    assert np.array_equal(importance(e, 0.3), importance(e, 0.3))


def test_edge_sizes():
    assert importance(np.zeros((0, 4)), 0.3).shape == (0,)
    assert importance(np.ones((1, 4)) / 2, 0.3).tolist() == [1.0]
    # Tiny tau underflows every pair: uniform instead of NaN.
    e = unit(np.random.default_rng(4), 5)
    assert np.allclose(importance(e, 1e-6), 0.2)


def test_kmeans_separates_clear_groups():
    rng = np.random.default_rng(5)
    c = unit(rng, 3)
    x = np.concatenate([ci + 0.05 * rng.standard_normal((20, 16)) for ci in c])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    _, labels = kmeans(x, 3, seed=1)
    assert len({tuple(np.unique(labels[i * 20:(i + 1) * 20])) for i in range(3)}) == 3
    assert all(len(np.unique(labels[i * 20:(i + 1) * 20])) == 1 for i in range(3))
