"""Rollout: rows sum to 1 and equal a direct matrix-product computation."""

import numpy as np

from qkv.explain.rollout import rollout


def test_rows_sum_to_one_and_equal_direct_product(nike_maps):
    w = nike_maps.weights.astype(np.float64)  # [layers, heads, n, n]
    r = nike_maps.rollout()
    n = w.shape[-1]
    np.testing.assert_allclose(r.sum(axis=-1), 1.0, atol=1e-12)
    assert (r >= 0).all()
    # direct: Â_l = ½(mean_h W) + ½I, rows renormalised; R_L = Â_L ··· Â_1 Â_0
    a = [0.5 * w[l].mean(axis=0) + 0.5 * np.eye(n) for l in range(w.shape[0])]
    a = [x / x.sum(axis=1, keepdims=True) for x in a]
    for l in range(w.shape[0]):
        direct = np.linalg.multi_dot(a[l::-1]) if l > 0 else a[0]
        np.testing.assert_allclose(r[l], direct, atol=1e-12)


def test_tiny_example_by_hand():
    # two layers, two tokens, one head: token 0 looks only at token 1, token 1 at itself
    w = np.array([[[[0.0, 1.0], [0.0, 1.0]]]] * 2)
    r = rollout(w)
    a = np.array([[0.5, 0.5], [0.0, 1.0]])
    np.testing.assert_allclose(r[0], a)
    np.testing.assert_allclose(r[1], a @ a)  # [[0.25, 0.75], [0, 1]]
    np.testing.assert_allclose(r[1], [[0.25, 0.75], [0.0, 1.0]])


def test_without_residual_for_value_zeroing(nike_maps):
    vz = nike_maps.value_zeroing()
    r = rollout(vz, residual=False)
    np.testing.assert_allclose(r[-1], np.linalg.multi_dot(list(vz[::-1])), atol=1e-10)
    np.testing.assert_allclose(r.sum(-1), 1.0, atol=1e-10)
