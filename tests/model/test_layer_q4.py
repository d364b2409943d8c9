"""The fast layer in one compiled call (qkv.model.layer_q4) on multilingual-e5-small's own 4-bit
layers, against the reference layer in float64 over the dequantized weights, on each 4-bit kernel
this CPU offers; and the cases it leaves to the step-by-step layer."""

import numpy as np
import pytest

from qkv import kernels, kernels_bf16, kernels_q4
from qkv.model import attend
from qkv.model.layer import fast_layer, reference_layer
from qkv.model.layer_q4 import FUSED_ROWS, fused_layer
from qkv.model.workers import Workers
from qkv.model.workspace import Workspace

HAS_AMX = kernels.available() and "amx" in kernels_bf16.offered() and kernels_bf16.request_amx()
UNITS = [pytest.param("float32"),
         pytest.param("amx", marks=pytest.mark.skipif(not HAS_AMX, reason=f"this CPU offers {kernels_bf16.offered()}"))]
needs_lib = pytest.mark.skipif(not kernels.available(), reason=kernels.STATUS)


@pytest.fixture
def unit_restored():
    before = kernels_bf16.ISA
    yield
    kernels_bf16.select(before)


def _one_text(n):
    mask = np.ones((1, n), bool)
    return attend.Batch(1, n, mask, attend.compiled_lengths(mask, np.float32))


@needs_lib
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("n", [1, 2, 14, 16, 17, 32])
def test_one_call_equals_the_reference_layer(e5, unit, n, unit_restored):
    kernels_bf16.select(unit)
    assert kernels_q4.unit() == unit
    cfg = e5.config
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, cfg.hidden_size)).astype(np.float32)
    ws = Workspace()
    for i in (0, 11):
        p = e5.weights.layers[i]
        y = fused_layer(p, cfg, x, _one_text(n), "batched", ws, float(e5._scale))
        assert y is not None and y.shape == (n, cfg.hidden_size) and not np.shares_memory(y, x)
        ref = reference_layer(p, cfg, x.astype(np.float64)[None], None)["out"][0]
        assert np.abs(y - ref).max() <= 2e-5 * max(1.0, np.abs(ref).max())
        again = fused_layer(p, cfg, y, _one_text(n), "batched", ws, float(e5._scale))  # x is the last output
        assert not np.shares_memory(again, y)


@needs_lib
def test_the_fast_layer_takes_it_and_gives_what_the_steps_give(e5):
    cfg, p = e5.config, e5.weights.layers[3]
    x = np.random.default_rng(0).standard_normal((12, cfg.hidden_size)).astype(np.float32)
    linear = lambda w, rows: e5._packed.linear(w, "float32", rows)  # noqa: E731
    one = fast_layer(p, cfg, x, _one_text(12), "batched", linear, Workspace(), Workers(1), e5._scale).copy()
    steps = fast_layer(p, cfg, x, _one_text(12), "batched", linear, Workspace(), Workers(1), e5._scale,
                       want=lambda name: False, emit=lambda n, a: None)  # a trace (keeping nothing) runs the steps
    np.testing.assert_allclose(one, steps, rtol=0, atol=2e-5)


@needs_lib
def test_what_it_leaves_to_the_step_by_step_layer(e5):
    cfg, p = e5.config, e5.weights.layers[0]
    ws, scale = Workspace(), float(e5._scale)
    x = np.zeros((FUSED_ROWS + 1, cfg.hidden_size), np.float32)
    assert fused_layer(p, cfg, x, _one_text(FUSED_ROWS + 1), "batched", ws, scale) is None  # a long text
    two = np.ones((2, 5), bool)
    batch = attend.Batch(2, 5, two, attend.compiled_lengths(two, np.float32))
    assert fused_layer(p, cfg, np.zeros((10, cfg.hidden_size), np.float32), batch, "batched", ws, scale) is None
    assert fused_layer(p, cfg, x[:5], _one_text(5), "tiles", ws, scale) is None  # bfloat16 attention asked for
    dense = e5.astype(np.float64).weights.layers[0]  # float32/float64 arrays, not 4-bit panels
    assert fused_layer(dense, cfg, x[:5], _one_text(5), "batched", ws, scale) is None
