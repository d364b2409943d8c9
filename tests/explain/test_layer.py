"""The layer explain re-runs (value zeroing) is the engine's reference layer, equal to its fast path."""

import numpy as np
import pytest

from qkv.explain.layer import layer_input_name, pool, run_from, run_layer

from .conftest import BOTTLE, NIKE, score_bound


@pytest.fixture(scope="module")
def batch_trace(encoder):
    # two texts of different length, so padding and the mask are exercised
    return encoder.trace([NIKE, "red shoes"], keep=["embeddings", "layers.*.attn.*", "layers.*.out"])


@pytest.fixture(scope="module")
def fast_trace(encoder):
    # nothing inside attention traced: every layer runs the fast path, padding rows packed away
    return encoder.trace([NIKE, "red shoes"], keep=["embeddings", "layers.*.attn.out", "layers.*.attn.norm",
                                                   "layers.*.out"])


@pytest.mark.parametrize("layer", range(6))
def test_run_layer_equals_engine(encoder, batch_trace, fast_trace, layer):
    """run_layer is the engine's reference layer: it gives the traced engine's attention insides,
    and the row-wise outputs of the untraced fast path within float32 rounding (the scores within
    ``score_bound`` of the two passes' own q and k)."""
    for tr, names in ((batch_trace, ("attn.q", "attn.k", "attn.v", "attn.scores", "attn.weights", "attn.context",
                                     "attn.out", "out")),
                      (fast_trace, ("attn.out", "attn.norm", "out"))):
        mine = run_layer(encoder, layer, tr[layer_input_name(layer)], tr.attention_mask)
        for name in names:
            for i in range(2):
                ref = tr.get(f"layers.{layer}.{name}", i)
                n = len(tr.seqs[i])
                got = mine[name][i]
                got = got[:, :n, :n] if name in ("attn.scores", "attn.weights") else \
                    got[:, :n] if name.startswith("attn.") and got.ndim == 3 and name not in ("attn.out", "attn.norm") \
                    else got[:n]
                if name == "attn.scores":  # sums of 32 products: qkv's rounding bound, not a fixed 1e-5
                    bound = score_bound(mine["attn.q"][i][:, :n], mine["attn.k"][i][:, :n],
                                        tr.get(f"layers.{layer}.attn.q", i), tr.get(f"layers.{layer}.attn.k", i))
                    assert np.all(np.abs(got - ref) <= bound), f"layers.{layer}.{name} text {i}"
                    continue
                np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=f"layers.{layer}.{name} text {i}")


def test_run_from_and_pool_equal_encode(encoder, batch_trace):
    tr = batch_trace
    h = run_from(encoder, 0, tr["embeddings"], tr.attention_mask)
    np.testing.assert_allclose(pool(encoder, h, tr.attention_mask), encoder.encode([NIKE, "red shoes"]), atol=1e-5)


def test_value_scale_zeroes_only_that_tokens_value(encoder):
    tr = encoder.trace([BOTTLE], keep=["layers.1.out"])
    x = tr.get("layers.1.out", 0)[None]
    n = x.shape[1]
    scale = np.ones((1, n), dtype=np.float32)
    scale[0, 3] = 0
    base = run_layer(encoder, 2, x)
    zeroed = run_layer(encoder, 2, x, value_scale=scale)
    assert np.all(zeroed["attn.v"][0, :, 3] == 0)
    np.testing.assert_array_equal(zeroed["attn.v"][0, :, 4], base["attn.v"][0, :, 4])
    # the weights do not change (only values were touched), the context does by exactly w_i3 · v_3
    np.testing.assert_array_equal(zeroed["attn.weights"], base["attn.weights"])
    diff = base["attn.context"] - zeroed["attn.context"]
    expect = base["attn.weights"][..., :, 3:4] * base["attn.v"][..., 3:4, :]
    np.testing.assert_allclose(diff, expect, atol=1e-5)


def test_score_bound_catches_a_wrong_score(encoder, batch_trace):
    """``score_bound`` is tight enough to fail: the engine's scores hold it with room (under a
    quarter of it here), one score moved by 1e-3 or a row scaled by 1 + 1e-4 breaks it."""
    tr = batch_trace
    mine = run_layer(encoder, 1, tr[layer_input_name(1)], tr.attention_mask)
    n = len(tr.seqs[0])
    ref = tr.get("layers.1.attn.scores", 0)
    bound = score_bound(mine["attn.q"][0][:, :n], mine["attn.k"][0][:, :n],
                        tr.get("layers.1.attn.q", 0), tr.get("layers.1.attn.k", 0))
    got = mine["attn.scores"][0][:, :n, :n].astype(np.float64)
    assert np.all(np.abs(got - ref) <= bound / 4)
    moved = got.copy()
    moved[0, 1, 2] += 1e-3
    assert not np.all(np.abs(moved - ref) <= bound)
    scaled = got.copy()
    scaled[0, 0] *= 1 + 1e-4
    assert not np.all(np.abs(scaled - ref) <= bound)
