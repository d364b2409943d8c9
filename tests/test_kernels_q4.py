"""The products on 4-bit blocks (qkv/_kernels_q4.c) against a float64 product over the same
weights dequantized, at every block edge, and against their NumPy twin."""

import numpy as np
import pytest
from scipy.special import erf

from qkv import kernels, kernels_q4
from qkv.kernels_q4 import Q4Rows, pack_q4, q4_matmul, q4_rows, unpack_q4
from qkv.model.weights.e5s1 import dequantize, quantize

needs_lib = pytest.mark.skipif(not kernels.available(), reason=f"compiled kernels: {kernels.STATUS}")


def _weights(rng, n_out, k_in):
    """Q4_0 blocks [out, in / 32] with every nibble 0..15 present, a zero block and a negative scale."""
    blocks = quantize(rng.standard_normal((n_out, k_in)).astype(np.float32))
    blocks["qs"][0, 0] = np.arange(16, dtype=np.uint8) * 17  # every nibble value, both halves
    if blocks.shape[1] > 1:
        blocks["d"][1 % n_out, 1] = 0  # an all-zero block
    blocks["d"][-1, -1] = -abs(blocks["d"][-1, -1])
    return blocks


def _reference(x, blocks, bias, gelu):
    y = x.astype(np.float64) @ dequantize(blocks, np.float64).T
    if bias is not None:
        y = y + bias
    return y * 0.5 * (1 + erf(y / np.sqrt(2))) if gelu else y


def test_packing_round_trips_to_the_dequantized_matrix():
    blocks = _weights(np.random.default_rng(0), 96, 128)
    panels = pack_q4(blocks)
    assert panels.shape == (3, 4, kernels_q4.BLOCK_BYTES) and panels.ctypes.data % kernels.ALIGN == 0
    np.testing.assert_array_equal(unpack_q4(panels), dequantize(blocks).T)


def test_dequantize_is_q_minus_8_times_d():
    b = np.zeros(1, dtype=kernels_q4.Q4_BLOCK)
    b["d"] = 0.5
    b["qs"][0] = np.arange(16) | (np.arange(16)[::-1] << 4)  # low nibbles 0..15, high 15..0
    w = dequantize(b)
    np.testing.assert_array_equal(w[:16], (np.arange(16) - 8) * 0.5)
    np.testing.assert_array_equal(w[16:], (np.arange(16)[::-1] - 8) * 0.5)


@needs_lib
@pytest.mark.parametrize("rows", [1, 2, 7, 11, 12, 13, 24, 25, 47, 48, 49, 121])
@pytest.mark.parametrize("k_in, n_out", [(32, 32), (64, 96), (384, 64), (96, 416)])
@pytest.mark.parametrize("bias, gelu", [(False, False), (True, False), (True, True), (False, True)])
def test_product_equals_float64_over_dequantized_weights(rows, k_in, n_out, bias, gelu):
    """Row counts around the 12-row tile and the expand threshold (48), blocks of K and panels of N
    from one to thirteen; compiled, then the NumPy twin."""
    rng = np.random.default_rng(rows * 1000 + k_in + n_out)
    blocks = _weights(rng, n_out, k_in)
    x = rng.standard_normal((rows, k_in)).astype(np.float32)
    b = rng.standard_normal(n_out).astype(np.float32) if bias else None
    ref = _reference(x, blocks, b, gelu)
    tol = 2e-6 * max(1.0, np.abs(ref).max()) * np.sqrt(k_in / 32)
    panels = pack_q4(blocks)
    out = kernels.aligned_empty((rows, n_out))
    q4_matmul(x, panels, b, out, gelu=gelu)
    assert np.abs(out - ref).max() <= tol
    lib, kernels._lib = kernels._lib, None
    try:
        plain = q4_matmul(x, panels, b, np.empty((rows, n_out), np.float32), gelu=gelu)
    finally:
        kernels._lib = lib
    assert np.abs(plain - ref).max() <= tol
    np.testing.assert_allclose(out, plain, rtol=0, atol=tol)


@needs_lib
def test_both_ways_through_give_the_same_floats_as_the_float32_product():
    """Few rows (expanded in registers) and many rows (expanded, then the blocked float32 product)
    both sum over k in order, bias last: the same floats as kernels.gemm on the dequantized panels."""
    rng = np.random.default_rng(5)
    blocks = _weights(rng, 128, 384)
    w32 = kernels.pack_panels(dequantize(blocks).T.copy())
    panels = pack_q4(blocks)
    bias = rng.standard_normal(128).astype(np.float32)
    for rows in (5, 60):
        x = rng.standard_normal((rows, 384)).astype(np.float32)
        a = q4_matmul(x, panels, bias, kernels.aligned_empty((rows, 128)))
        b = kernels.gemm(x, w32, bias, kernels.aligned_empty((rows, 128)))
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_bad_shapes_are_refused():
    panels = pack_q4(_weights(np.random.default_rng(1), 64, 64))
    with pytest.raises(ValueError, match="do not fit"):
        q4_matmul(np.zeros((2, 96), np.float32), panels, None, np.zeros((2, 64), np.float32))
    with pytest.raises(ValueError, match="whole panels"):
        pack_q4(_weights(np.random.default_rng(1), 40, 64))


@pytest.mark.parametrize("compiled", [True, False])
def test_embedding_rows_are_expanded_only_when_looked_up(compiled, monkeypatch):
    if compiled and not kernels.available():
        pytest.skip(kernels.STATUS)
    if not compiled:
        monkeypatch.setattr(kernels, "_lib", None)
    blocks = _weights(np.random.default_rng(2), 50, 96)
    ids = np.array([[0, 49, 7], [7, 7, 1]])
    table = Q4Rows(blocks)
    rows = table[ids]
    assert rows.shape == (2, 3, 96) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, dequantize(blocks)[ids])
    assert table.astype(np.float64)[ids].dtype == np.float64
    with pytest.raises(IndexError):
        q4_rows(blocks, np.array([50]))

