"""Q4Panels, the packed product on 4-bit blocks, through the Linear interface the layers call."""

import numpy as np
import pytest

from qkv.kernels import cpu, q4
from qkv.model.linear import PackedWeights
from qkv.model.linear_q4 import Q4Panels
from qkv.model.weights.e5s1 import dequantize, quantize
from qkv.model.workers import Workers


@pytest.fixture
def unit_restored():
    before = cpu.ISA
    yield
    cpu.select(before)


def _blocks(rng, n_out, k_in):
    return quantize(rng.standard_normal((n_out, k_in)).astype(np.float32))


@pytest.mark.parametrize("rows", [1, 14, 60, 300])
@pytest.mark.parametrize("act", [None, "gelu", "relu"])
def test_q4_panels_equal_x_times_the_dequantized_matrix(rows, act, unit_restored):
    """On the exact 4-bit unit in use (tiles, else the float32 kernel; int8 blocks are held to their
    own bound in tests/kernels/test_q4.py)."""
    cpu.select(cpu.ISA, q4="amx" if cpu.ISA == "amx" else "float32")
    assert q4.unit() in q4.EXACT
    rng = np.random.default_rng(rows)
    blocks = _blocks(rng, 96, 128)
    lin = Q4Panels(blocks)
    assert lin.shape == (128, 96) and lin.precision == "q4_0" and lin.nbytes == 128 * 96 * 5 // 8
    w = dequantize(blocks, np.float64).T
    np.testing.assert_array_equal(lin.dense(), w.astype(np.float32))
    x = rng.standard_normal((rows, 128)).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    ref = x.astype(np.float64) @ w + b
    if act == "gelu":
        from scipy.special import erf

        ref = ref * 0.5 * (1 + erf(ref / np.sqrt(2)))
    elif act == "relu":
        ref = np.maximum(ref, 0)
    out = lin(x, np.empty((rows, 96), np.float32), bias=b, act=act)
    assert np.abs(out - ref).max() <= 1e-5 * max(1, np.abs(ref).max())


@pytest.mark.skipif(not cpu.available(), reason=cpu.STATUS)
@pytest.mark.parametrize("unit", cpu.q4_offered())
def test_two_threads_give_the_same_floats(unit, unit_restored):
    """Rows split between threads: the same floats on every unit (int8 blocks quantise each row
    on its own)."""
    cpu.select(cpu.ISA, q4=unit)
    assert q4.unit() == unit
    rng = np.random.default_rng(9)
    lin = Q4Panels(_blocks(rng, 64, 96))
    x = rng.standard_normal((400, 96)).astype(np.float32)
    one = lin(x, np.empty((400, 64), np.float32), act="gelu", bias=np.ones(64, np.float32))
    two = lin(x, np.empty((400, 64), np.float32), act="gelu", bias=np.ones(64, np.float32), workers=Workers(2))
    np.testing.assert_array_equal(one, two)


def test_packed_weights_use_a_reader_s_q4_panels_as_they_are():
    lin = Q4Panels(_blocks(np.random.default_rng(1), 32, 64))
    pw = PackedWeights()
    assert pw.linear(lin, "float32", 3) is lin and pw.linear(lin, "float16", 3) is lin
    with pytest.raises(TypeError, match="float32"):
        lin(np.zeros((2, 64)), np.zeros((2, 32)))
