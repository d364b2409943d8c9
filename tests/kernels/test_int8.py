"""int8 products for float32 weights (qkv/kernels/int8): the packing, the NumPy twin, each compiled
unit this CPU has (AVX-512 VNNI, AVX2) against the twin and against the stated error bound, at the
edges of the row tiles, column groups, blocks of BLOCK (64) inputs and of the 32-input steps within
one, and row chunks; and which unit runs."""

import numpy as np
import pytest

from qkv.kernels import cpu, int8
from qkv.kernels.int8 import BLOCK, error_bound, int8_matmul, pack_int8, quantize_rows, unpack_int8

needs_lib = pytest.mark.skipif(not cpu.available(), reason=f"compiled kernels: {cpu.STATUS}")


def _cpu_units() -> list[str]:
    """The compiled int8 units this CPU has, whatever QKV_ISA says (each is tested)."""
    bits = int(cpu.lib.qkv_q4_int_cpu()) if cpu.lib is not None else 0
    return [u for u, bit in (("vnni", 1), ("avx2", 2)) if bits & bit]


UNITS = _cpu_units()


def _case(rng, R, K, N, outlier=True):
    x = rng.standard_normal((R, K)).astype(np.float32)
    if outlier and K > 3:  # BERT's hidden states: a few features far larger than the rest
        x[:, 3] *= 40
    w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    return x, w, b


def _twin(x, packed, b, gelu=False):
    return int8._twin(x, packed, b, np.empty((x.shape[0], packed.shape[1]), np.float32), gelu)


# ------------------------------------------------------------------------------------- packing
@pytest.mark.parametrize("K,N", [(1, 16), (37, 48), (BLOCK, 64), (BLOCK + 1, 80), (130, 32), (384, 1152)])
def test_weights_are_quantised_per_column_and_block_and_the_layout_round_trips(K, N):
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((K, N)) * rng.uniform(0.01, 3, N)).astype(np.float32)
    w[:, 5] = 0  # a zero column: scale 0, no division by it
    if K > BLOCK:
        w[0, 6] = 100  # an outlier weight sets the step of its own block only
    p = pack_int8(w)
    wq, s = int8.quantize_columns(w)
    nb = int8.padded(K) // BLOCK
    assert np.array_equal(unpack_int8(p), wq) and np.array_equal(p.scale, s) and s.shape == (nb, N)
    assert np.abs(wq).max() <= 127 and not s[:, 5].any() and not wq[:, 5].any()
    step = np.repeat(s, BLOCK, axis=0)[:K]
    assert np.all(np.abs(int8.dense(p) - w) <= step * 0.5000001 + 1e-30)
    if K > BLOCK:
        assert s[0, 6] == np.float32(100) / np.float32(127) and s[1, 6] < 0.1
    # the per-block column sums the units take back with the zero point
    full = np.zeros((int8.padded(K), N), np.int64)
    full[:K] = wq
    assert p.colsum.dtype == np.float32 and np.array_equal(p.colsum, full.reshape(-1, BLOCK, N).sum(axis=1))
    assert p.q.ctypes.data % 64 == 0


def test_pack_refuses_what_it_cannot_pack():
    with pytest.raises(ValueError, match="multiple of 16"):
        pack_int8(np.zeros((8, 20), np.float32))
    with pytest.raises(ValueError, match="float32"):
        pack_int8(np.zeros((8, 16), np.float64))


def _dequantised(xq, sx, z, K):
    return (np.repeat(sx, BLOCK, axis=1) * (xq.astype(np.float64) - np.repeat(z, BLOCK, axis=1)))[:, :K]


def test_rows_are_quantised_per_block_with_their_own_scale_and_zero_point():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 130)).astype(np.float32)
    x[1] = 0  # a zero row: scale 0, every byte its zero point
    x[2, 70] = 500  # an outlier sets the step of its own block only
    xq, sx, z = quantize_rows(x)
    kp = int8.padded(130)
    assert kp % BLOCK == 0 and kp - BLOCK < 130 <= kp
    assert xq.shape == (3, kp) and sx.shape == z.shape == (3, kp // BLOCK)
    assert np.array_equal(xq[:, 130:], np.repeat(z[:, -1:], kp - 130, axis=1))  # past K: zeros
    assert not sx[1].any() and np.array_equal(xq[1], np.full(kp, -128))
    assert sx[2, 70 // BLOCK] > 500 / 255 and sx[2, 0] < 0.05
    err = np.abs(x - _dequantised(xq, sx, z, 130))
    assert np.all(err <= np.repeat(sx, BLOCK, axis=1)[:, :130] * int8.EPS)


def test_a_one_sided_block_uses_every_level():
    """Post-GELU inputs (≥ −0.17): the zero point puts all 256 levels on [lo, hi], half the step of
    a symmetric ±max|x| scale."""
    rng = np.random.default_rng(3)
    x = np.abs(rng.standard_normal((4, 3 * BLOCK))).astype(np.float32) * 3 - 0.17
    x[:, ::BLOCK] = -0.17  # each block's low end
    xq, sx, z = quantize_rows(x)
    assert xq.min() == -128 and xq.max() == 127
    amax = np.abs(x.reshape(4, 3, BLOCK)).max(axis=2)
    assert np.all(sx <= amax / 127 * 0.55)  # (max + 0.17) / 255 against max / 127
    assert np.all(np.abs(x - _dequantised(xq, sx, z, 3 * BLOCK)) <= np.repeat(sx, BLOCK, axis=1) * int8.EPS)


# ------------------------------------------------------------------------------ the products
# K at every edge of a block (BLOCK ± 1, 2·BLOCK ± 1) and of the 32-input steps the rows are
# quantised in (31, 32, 33), 1 and 3 (a short first block), 130; rows at the tiles' and chunks' edges
SHAPES = [(1, 384, 384), (5, 64, 64), (25, 32, 64), (6, 31, 48), (7, 33, 80), (4, 63, 32), (8, 65, 16), (13, 1, 16),
          (3, BLOCK - 1, 48), (9, BLOCK, 32), (10, BLOCK + 1, 16), (11, 2 * BLOCK - 1, 32), (2, 2 * BLOCK, 48),
          (23, 2 * BLOCK + 1, 16), (95, 130, 32), (96, 384, 1536), (97, 1536, 384), (200, 3, 16)]


@pytest.mark.parametrize("R,K,N", SHAPES)
def test_the_twin_holds_the_stated_bound(R, K, N):
    rng = np.random.default_rng(R * 7 + K)
    x, w, b = _case(rng, R, K, N)
    y = _twin(x, pack_int8(w), b)
    exact = x.astype(np.float64) @ w + b
    bound = error_bound(x, w, b)
    assert np.all(np.abs(y - exact) <= bound)
    # and the bound is not vacuous: the error reaches a visible part of it, well below |y| (with
    # fewer inputs than a block most are their block's largest, quantised exactly)
    if K >= BLOCK:
        assert np.abs(y - exact).max() > 0.01 * bound.max() and bound.max() < 0.5 * np.abs(exact).max()


@needs_lib
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("R,K,N", SHAPES)
def test_each_unit_computes_the_twins_numbers_within_the_bound(unit, R, K, N):
    rng = np.random.default_rng(R * 11 + K + N)
    x, w, b = _case(rng, R, K, N)
    p = pack_int8(w)
    y = int8_matmul(x, p, b, np.empty((R, N), np.float32), isa=unit)
    twin = _twin(x, p, b)
    # the same integers and the same float32 operations: equal but for the twin's rare double
    # rounding of a fused multiply-add (one unit in the last place)
    assert np.all(np.abs(y - twin) <= 2.0 ** -23 * (np.abs(twin) + np.abs(b)))
    assert np.all(np.abs(y - (x.astype(np.float64) @ w + b)) <= error_bound(x, w, b))


@needs_lib
@pytest.mark.parametrize("unit", UNITS)
def test_units_agree_and_fuse_gelu_without_bias(unit):
    rng = np.random.default_rng(5)
    x, w, b = _case(rng, 20, 384, 1536)
    p = pack_int8(w)
    for bias in (b, None):
        y = int8_matmul(x, p, bias, np.empty((20, 1536), np.float32), gelu=True, isa=unit)
        twin = _twin(x, p, bias, gelu=True)
        assert np.allclose(y, twin, rtol=1e-6, atol=1e-6)
    # every unit makes the same bits (exact integer sums, the same float order)
    ys = [int8_matmul(x, p, b, np.empty((20, 1536), np.float32), isa=u) for u in UNITS]
    assert all(np.array_equal(ys[0], y) for y in ys)


@needs_lib
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("rows", [1, 6, 97])
def test_a_product_writes_only_its_rows_and_handles_zero_and_huge_rows(unit, rows):
    rng = np.random.default_rng(6)
    x, w, b = _case(rng, rows, 128, 64)
    x[0] = 0  # a padding-like zero row
    x[-1] *= 1e6  # a huge row: its scale grows, its integers do not
    big = np.full((rows + 40, 64), 7.0, np.float32)
    int8_matmul(x, pack_int8(w), b, big[:rows], isa=unit)
    assert np.all(big[rows:] == 7.0) and np.isfinite(big[:rows]).all()
    assert np.array_equal(big[0], b)
    assert np.all(np.abs(big[:rows] - (x.astype(np.float64) @ w + b)) <= error_bound(x, w, b))


@needs_lib
@pytest.mark.skipif(not UNITS, reason="this CPU has no compiled int8 unit")
def test_the_library_runs_this_modules_block_and_refuses_another():
    """kernels.c's BLOCK is a compile-time constant: the caller passes its own, and a library built
    for another block answers -1 (the twin runs) instead of reading the scales wrongly."""
    rng = np.random.default_rng(8)
    x, w, b = _case(rng, 4, 2 * BLOCK, 32)
    p = pack_int8(w)
    y = np.empty((4, 32), np.float32)
    unit = int8.UNIT_CODE[UNITS[0]]
    for block, answer in ((BLOCK, 0), (BLOCK // 2, -1), (2 * BLOCK, -1)):
        got = cpu.lib.qkv_i8_gemm(x.ctypes.data, 4, 2 * BLOCK, p.q.ctypes.data, p.scale.ctypes.data,
                                  p.colsum.ctypes.data, 32, b.ctypes.data, 0, y.ctypes.data, unit, block)
        assert got == answer
    assert np.array_equal(y, int8_matmul(x, p, b, np.empty((4, 32), np.float32), isa=UNITS[0]))


def test_a_shape_mismatch_is_refused():
    p = pack_int8(np.ones((64, 16), np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        int8_matmul(np.ones((2, 63), np.float32), p, None, np.empty((2, 16), np.float32))


# --------------------------------------------------------------------------------- dispatch
@needs_lib
@pytest.mark.parametrize("want", ["amx", "avx512bf16", "float32"])
def test_the_int8_unit_follows_the_isa_ceiling(want, monkeypatch):
    """VNNI wherever AVX-512 is allowed (QKV_ISA=avx512bf16: a Zen 4 stand-in), AVX2 where
    QKV_ISA=float32 stands in for a CPU without AVX-512; STATUS and `qkv info` name it."""
    monkeypatch.delenv("QKV_INT8", raising=False)
    monkeypatch.delenv("QKV_ISA", raising=False)
    before = cpu.ISA
    try:
        cpu.select(want)
        expect = ("vnni" if "vnni" in UNITS and want != "float32" else
                  "avx2" if "avx2" in UNITS else "numpy")
        assert int8.unit() == expect and f"int8 products: {cpu.I8_WORDS[expect]}" in cpu.STATUS
        from qkv.cli.info import info_dict

        assert info_dict()["int8_unit"] == expect
    finally:
        cpu.select(before)


@needs_lib
@pytest.mark.parametrize("unit", ["vnni", "avx2", "numpy"])
def test_an_int8_unit_can_be_forced_and_falls_to_the_next_one_down(unit, monkeypatch):
    monkeypatch.delenv("QKV_ISA", raising=False)
    before = cpu.ISA
    try:
        monkeypatch.setenv("QKV_INT8", unit)
        cpu.select(None)
        have = UNITS + ["numpy"]
        expect = next(u for u in cpu.I8_UNITS[cpu.I8_UNITS.index(unit):] if u in have)
        assert int8.unit() == expect == int8.unit(unit)
        cpu.select(None, i8="numpy")
        assert int8.unit() == "numpy"
    finally:
        cpu.select(before)
    with pytest.raises(ValueError, match="vnni, avx2, numpy"):
        int8.unit("int4")
