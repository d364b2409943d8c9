"""The re-implemented layer (used for value zeroing) reproduces the engine's trace."""

import numpy as np
import pytest

from qkv.explain.layer import layer_input_name, pool, run_from, run_layer

from .conftest import BOTTLE, NIKE


@pytest.fixture(scope="module")
def batch_trace(encoder):
    # two texts of different length, so padding and the mask are exercised
    return encoder.trace([NIKE, "red shoes"], keep=["embeddings", "layers.*.attn.*", "layers.*.out"])


@pytest.mark.parametrize("layer", range(6))
def test_run_layer_equals_engine(encoder, batch_trace, layer):
    tr = batch_trace
    mine = run_layer(encoder, layer, tr[layer_input_name(layer)], tr.attention_mask)
    for name in ("attn.q", "attn.k", "attn.v", "attn.scores", "attn.weights", "attn.context", "attn.out",
                 "attn.norm", "out"):
        for i in range(2):
            ref = tr.get(f"layers.{layer}.{name}", i)
            n = len(tr.seqs[i])
            got = mine[name][i]
            got = got[:, :n, :n] if name in ("attn.scores", "attn.weights") else \
                got[:, :n] if name.startswith("attn.") and got.ndim == 3 and name != "attn.out" and name != "attn.norm" \
                else got[:n]
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
