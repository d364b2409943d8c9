"""The products on 4-bit blocks (qkv/kernels/q4/kernels.c, and on AMX tiles qkv/kernels/q4/amx.c)
against a float64 product over the same weights dequantized, at every block edge, and against
their NumPy twin; and the choice between the two kernels.

The tile kernel's bound (derived in its C file): products exact (x in three bfloat16 parts whose
sum is x), 96 of them summed per block in float32, one FMA per block into the running sum, so
|ŷ − y| ≤ γ_(96 + K/32 + 1)·(1 + 2^-7)·Σ|x||w| + γ_1·|b| against float64 over the dequantized W.
Each unit this CPU offers is run (``isa=``); AMX is skipped, saying why, where it is not.

Without tiles (q4/int8.c: "vnni", "avx2"), x is quantised per block of 32 to int8 (d_x =
max|x_block|/127), integer sums, one scale multiply a block: against float64 over the dequantized W,
|ŷ − y| ≤ (1/2 + 2^-15)·Σ_b d_x,b·Σ_{k∈b}|w_k| + γ_(K/32+2)·(Σ|x||w| + that sum + |b|); and against
float64 over the quantised x̂ (a NumPy model of the quantisation) within float32 rounding alone.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import erf

from qkv.kernels import bfloat16, cpu, float32, q4
from qkv.kernels.q4 import Q4Rows, pack_q4, q4_matmul, q4_rows, unpack_q4
from qkv.model.weights.e5s1 import dequantize, quantize

needs_lib = pytest.mark.skipif(not cpu.available(), reason=f"compiled kernels: {cpu.STATUS}")
HAS_AMX = cpu.available() and "amx" in cpu.offered() and cpu.request_amx()
UNITS = [pytest.param("float32"),  # the exact ones: x times the dequantized W to float32 rounding
         pytest.param("amx", marks=pytest.mark.skipif(not HAS_AMX, reason=f"this CPU offers {cpu.offered()}"))]
INT_UNITS = [pytest.param(u, marks=pytest.mark.skipif(u not in cpu.q4_offered(), reason=f"this CPU (up to QKV_ISA) "
                                                      f"offers {cpu.q4_offered()}")) for u in ("vnni", "avx2")]


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
    assert panels.shape == (3, 4, q4.BLOCK_BYTES) and panels.ctypes.data % float32.ALIGN == 0
    np.testing.assert_array_equal(unpack_q4(panels), dequantize(blocks).T)


def test_dequantize_is_q_minus_8_times_d():
    b = np.zeros(1, dtype=q4.Q4_BLOCK)
    b["d"] = 0.5
    b["qs"][0] = np.arange(16) | (np.arange(16)[::-1] << 4)  # low nibbles 0..15, high 15..0
    w = dequantize(b)
    np.testing.assert_array_equal(w[:16], (np.arange(16) - 8) * 0.5)
    np.testing.assert_array_equal(w[16:], (np.arange(16)[::-1] - 8) * 0.5)


@needs_lib
@pytest.mark.parametrize("isa", UNITS)
@pytest.mark.parametrize("rows", [1, 2, 7, 11, 12, 13, 24, 25, 47, 48, 49, 121])
@pytest.mark.parametrize("k_in, n_out", [(32, 32), (64, 96), (384, 64), (96, 416)])
@pytest.mark.parametrize("bias, gelu", [(False, False), (True, False), (True, True), (False, True)])
def test_product_equals_float64_over_dequantized_weights(rows, k_in, n_out, bias, gelu, isa):
    """Row counts around the 12-row tile and the expand threshold (48), blocks of K and panels of N
    from one to thirteen; compiled on each unit, then the NumPy twin."""
    rng = np.random.default_rng(rows * 1000 + k_in + n_out)
    blocks = _weights(rng, n_out, k_in)
    x = rng.standard_normal((rows, k_in)).astype(np.float32)
    b = rng.standard_normal(n_out).astype(np.float32) if bias else None
    ref = _reference(x, blocks, b, gelu)
    tol = 2e-6 * max(1.0, np.abs(ref).max()) * np.sqrt(k_in / 32)
    panels = pack_q4(blocks)
    out = float32.aligned_empty((rows, n_out))
    q4_matmul(x, panels, b, out, gelu=gelu, isa=isa)
    assert np.abs(out - ref).max() <= tol
    lib, cpu.lib = cpu.lib, None
    try:
        plain = q4_matmul(x, panels, b, np.empty((rows, n_out), np.float32), gelu=gelu)
    finally:
        cpu.lib = lib
    assert np.abs(plain - ref).max() <= tol
    np.testing.assert_allclose(out, plain, rtol=0, atol=tol)


@needs_lib
def test_both_ways_through_give_the_same_floats_as_the_float32_product():
    """Few rows (expanded in registers) and many rows (expanded, then the blocked float32 product)
    both sum over k in order, bias last: the same floats as float32.gemm on the dequantized panels."""
    rng = np.random.default_rng(5)
    blocks = _weights(rng, 128, 384)
    w32 = float32.pack_panels(dequantize(blocks).T.copy())
    panels = pack_q4(blocks)
    bias = rng.standard_normal(128).astype(np.float32)
    for rows in (5, 60):
        x = rng.standard_normal((rows, 384)).astype(np.float32)
        a = q4_matmul(x, panels, bias, float32.aligned_empty((rows, 128)), isa="float32")
        b = float32.gemm(x, w32, bias, float32.aligned_empty((rows, 128)))
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_bad_shapes_are_refused():
    panels = pack_q4(_weights(np.random.default_rng(1), 64, 64))
    with pytest.raises(ValueError, match="do not fit"):
        q4_matmul(np.zeros((2, 96), np.float32), panels, None, np.zeros((2, 64), np.float32))
    with pytest.raises(ValueError, match="whole panels"):
        pack_q4(_weights(np.random.default_rng(1), 40, 64))


@pytest.mark.parametrize("compiled", [True, False])
def test_embedding_rows_are_expanded_only_when_looked_up(compiled, monkeypatch):
    if compiled and not cpu.available():
        pytest.skip(cpu.STATUS)
    if not compiled:
        monkeypatch.setattr(cpu, "lib", None)
    blocks = _weights(np.random.default_rng(2), 50, 96)
    ids = np.array([[0, 49, 7], [7, 7, 1]])
    table = Q4Rows(blocks)
    rows = table[ids]
    assert rows.shape == (2, 3, 96) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, dequantize(blocks)[ids])
    assert table.astype(np.float64)[ids].dtype == np.float64
    with pytest.raises(IndexError):
        q4_rows(blocks, np.array([50]))



# ------------------------------------------------------------------------------ on AMX tiles
U32 = 2.0 ** -24


def _gamma(n: int) -> float:
    return n * U32 / (1 - n * U32)


needs_amx = pytest.mark.skipif(not HAS_AMX, reason=f"needs AMX tiles; this CPU offers {cpu.offered()}")


@needs_lib
@pytest.mark.parametrize("isa", UNITS)
@pytest.mark.parametrize("rows", [1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 64, 255, 256, 257, 300])
@pytest.mark.parametrize("k_in, n_out", [(32, 32), (64, 96), (384, 1152), (1536, 384), (96, 544)])
def test_4bit_product_within_its_bound_at_every_block_edge(rows, k_in, n_out, isa):
    """Rows across the 16-row tile, the 32-row block, the one-pass limit (32), the float32
    kernel's switch to expanding the matrix (EXPAND_FROM = 48) and the 256-row chunk; N across
    the 256-output column block; K from one block to 48. Scale by powers of ten so the three
    parts of x span their whole range. Tiles: the exact-split bound (amx.c); the float32 kernel
    (any CPU): float32 sums in any order, γ_(K+1)·(Σ|x||w| + |b|) (Higham §3.1)."""
    rng = np.random.default_rng(rows * 7 + k_in + n_out)
    blocks = _weights(rng, n_out, k_in)
    x = (rng.standard_normal((rows, k_in)) * 10.0 ** rng.integers(-3, 4, (rows, k_in))).astype(np.float32)
    b = rng.standard_normal(n_out).astype(np.float32)
    w = dequantize(blocks, np.float64).T
    exact = x.astype(np.float64) @ w + b
    xw = np.abs(x.astype(np.float64)) @ np.abs(w)
    if isa == "amx":
        bound = _gamma(96 + k_in // 32 + 1) * (1 + 2 ** -7) * xw + _gamma(1) * np.abs(b)
    else:
        bound = _gamma(k_in + 1) * (xw + np.abs(b))
    y = np.full((rows, n_out), np.nan, np.float32)
    q4_matmul(x, pack_q4(blocks), b, y, isa=isa)
    err = np.abs(y - exact)
    assert np.all(err <= bound), f"max error {err.max():.3g}, {(err / bound).max():.3g}× the bound"
    g = np.full((rows, n_out), np.nan, np.float32)  # GELU(x·W + b): slope ≤ 1.13, erf within 1.5e-7
    q4_matmul(x, pack_q4(blocks), b, g, gelu=True, isa=isa)
    gelu = exact * 0.5 * (1 + erf(exact / np.sqrt(2)))
    assert np.all(np.abs(g - gelu) <= 1.13 * bound + 2e-7 * np.abs(gelu) + 1e-7)


@needs_amx
def test_tiles_are_exact_where_float32_sums_are():
    """x of 18 significant bits (all three parts in use), q − 8 ∈ {−1, 0, 1}, d a power of two,
    K = 64: every partial sum fits 24 bits, so the tiles must give exactly the float64 result —
    a wrong or lost part, or a product rounded, would show."""
    rng = np.random.default_rng(11)
    blocks = _weights(rng, 64, 64)
    blocks["d"] = 0.25
    nib = rng.integers(7, 10, blocks["qs"].shape)
    blocks["qs"] = (nib | (rng.integers(7, 10, blocks["qs"].shape) << 4)).astype(np.uint8)
    m = rng.integers(2 ** 17, 2 ** 18, (20, 64)) * rng.choice([-1, 1], (20, 64))
    x = (m * 2.0 ** -10).astype(np.float32)
    assert np.array_equal(x.astype(np.float64), m * 2.0 ** -10)
    y = q4_matmul(x, pack_q4(blocks), None, np.empty((20, 64), np.float32), isa="amx")
    np.testing.assert_array_equal(y, x.astype(np.float64) @ dequantize(blocks, np.float64).T)
    two = x - bfloat16.round_bf16(x)  # dropping the third part would lose these bits:
    assert np.abs(two - bfloat16.round_bf16(two)).max() > 0


@pytest.fixture
def restore_vbmi():
    before = cpu.lib.qkv_q4_amx_vbmi(-1)
    yield
    cpu.lib.qkv_q4_amx_vbmi(before)


@needs_amx
@pytest.mark.parametrize("vbmi", [0, 1])
@pytest.mark.parametrize("k_in, n_out", [(32, 32), (64, 64), (96, 96), (384, 1152), (1536, 384)])
def test_a_lone_query_schedule_gives_the_bits_of_the_general_one(k_in, n_out, vbmi, restore_vbmi):
    """Up to 16 rows run their own schedule (few_rows: halves of a panel, C tiles turned over four
    at a time, B made a block ahead), with B made by VPERMB or by the permute way; the sums are
    the same in the same order, so each row must be bit for bit what the 17-row path gives it.
    K from one block (fewer halves than the drain lags) up; 1..16 rows."""
    if vbmi and not cpu.lib.qkv_q4_amx_vbmi(-1):
        pytest.skip("this CPU has no AVX-512 VBMI")
    rng = np.random.default_rng(k_in + n_out + vbmi)
    panels = pack_q4(_weights(rng, n_out, k_in))
    x = (rng.standard_normal((17, k_in)) * 10.0 ** rng.integers(-3, 4, (17, k_in))).astype(np.float32)
    b = rng.standard_normal(n_out).astype(np.float32)
    cpu.lib.qkv_q4_amx_vbmi(0)  # the reference: two row tiles (tile_rows), B by the permute way
    ref = {g: q4_matmul(x, panels, b, np.empty((17, n_out), np.float32), g, isa="amx") for g in (False, True)}
    assert cpu.lib.qkv_q4_amx_vbmi(vbmi) == vbmi
    for rows in (1, 2, 5, 13, 15, 16):
        for gelu in (False, True):
            want = ref[gelu]
            got = q4_matmul(x[:rows], panels, b, np.full((rows, n_out), np.nan, np.float32), gelu, isa="amx")
            np.testing.assert_array_equal(got, want[:rows])


@needs_lib
@pytest.mark.parametrize("isa", UNITS + INT_UNITS)
@pytest.mark.parametrize("rows", [9, 20, 70])
def test_a_4bit_product_writes_only_its_rows(rows, isa):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    big = np.full((rows + 40, 96), 7.0, np.float32)
    q4_matmul(x, pack_q4(_weights(rng, 96, 64)), None, big[:rows], isa=isa)
    assert np.all(big[rows:] == 7.0) and np.isfinite(big[:rows]).all()


# --------------------------------------------------------------------------------- dispatch
@pytest.fixture
def restore_unit():
    before = cpu.ISA
    yield
    cpu.select(before)


def _int_units() -> set[str]:
    """The integer 4-bit units this CPU has, whatever QKV_ISA says."""
    bits = int(cpu.lib.qkv_q4_int_cpu())
    return {u for u, bit in (("vnni", 1), ("avx2", 2)) if bits & bit}


@needs_lib
@pytest.mark.parametrize("want", ["amx", "avx512bf16", "float32"])
def test_the_4bit_unit_follows_the_bfloat16_unit(want, restore_unit, monkeypatch):
    """Tiles where the bfloat16 unit chosen is AMX (QKV_ISA forces it); without tiles, int8 blocks
    on VNNI where the CPU has it (AVX-512 BF16 alone, e.g. Zen 4), on AVX2 where QKV_ISA=float32
    stands in for a CPU without AVX-512; float32 where neither; QKV_Q4=float32 forces the exact
    float32 kernel; STATUS and `qkv info` name it."""
    monkeypatch.delenv("QKV_Q4", raising=False)
    got = cpu.select(want)
    ints = _int_units()
    as_avx2 = "float32" in (cpu.ceiling(), want)  # the stricter of QKV_ISA and the unit asked for
    if got == "amx":
        expect = "amx"
    elif "vnni" in ints and not as_avx2:
        expect = "vnni"
    else:
        expect = "avx2" if "avx2" in ints else "float32"
    assert q4.unit() == expect
    assert f"4-bit products: {cpu.Q4_WORDS[expect]}" in cpu.STATUS
    monkeypatch.setenv("QKV_Q4", "float32")
    cpu.select(want)
    assert q4.unit() == "float32" and "4-bit products: float32" in cpu.STATUS
    monkeypatch.delenv("QKV_Q4")
    cpu.select(want)
    from qkv.cli.info import info_dict

    assert info_dict()["4bit_unit"] == q4.unit()


@needs_lib
@pytest.mark.parametrize("unit", ["amx", "vnni", "avx2", "float32"])
def test_a_4bit_unit_can_be_forced_and_falls_to_the_next_one_down(unit, restore_unit):
    cpu.select(None, q4=unit)
    have = cpu.q4_offered()
    want = unit if unit in have else ("float32" if unit == "amx" else
                                      next(u for u in cpu.Q4_UNITS[cpu.Q4_UNITS.index(unit):] if u in have))
    assert q4.unit() == want == q4.unit(unit) and cpu.Q4_WORDS[want] in cpu.STATUS


@needs_lib
def test_a_refused_tile_permission_runs_the_float32_kernel(monkeypatch, restore_unit):
    monkeypatch.delenv("QKV_ISA", raising=False)
    monkeypatch.setattr(cpu, "request_amx", lambda: False)
    monkeypatch.setattr(cpu, "cpu_bits", lambda: 1 | 2 | 4)  # as if the CPU had AMX
    cpu.select("amx")
    assert q4.unit() != "amx" and q4.unit("amx") == "float32"
    rng = np.random.default_rng(4)
    blocks = _weights(rng, 32, 64)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    y = q4_matmul(x, pack_q4(blocks), None, np.empty((5, 32), np.float32), isa="amx")
    np.testing.assert_allclose(y, x.astype(np.float64) @ dequantize(blocks, np.float64).T, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="one of"):
        q4.unit("tpu")


@needs_lib
@pytest.mark.parametrize("isa", ["float32", "amx"])
def test_qkv_isa_in_the_environment_chooses_the_4bit_kernel(isa, monkeypatch):
    monkeypatch.delenv("QKV_ISA", raising=False)  # the child's QKV_ISA, not this process's ceiling
    tiles = "amx" in cpu.offered() and cpu.request_amx()
    env = dict(os.environ, QKV_ISA=isa)
    env.pop("QKV_Q4", None)
    out = subprocess.run([sys.executable, "-c", "from qkv.kernels import cpu, q4; print(q4.unit()); "
                          "print(cpu.STATUS)"], capture_output=True, text=True, env=env, check=True).stdout
    unit, status = out.splitlines()
    if isa == "amx" and tiles:
        assert unit == "amx"
    else:  # QKV_ISA=float32: as a CPU without AVX-512 (AVX2 where the CPU has it); amx without tiles: the best
        ints = _int_units() - ({"vnni"} if isa == "float32" else set())
        assert unit == next((u for u in ("vnni", "avx2") if u in ints), "float32")
    assert f"4-bit products: {cpu.Q4_WORDS[unit]}" in status
    if unit != "amx":  # QKV_Q4=float32 forces the exact float32 kernel
        env["QKV_Q4"] = "float32"
        unit = subprocess.run([sys.executable, "-c", "from qkv.kernels import q4; print(q4.unit())"],
                              capture_output=True, text=True, env=env, check=True).stdout.strip()
        assert unit == "float32"


# ------------------------------------------------------------------ without tiles: x in int8 blocks
def _q8(x: np.ndarray):
    """The kernel's quantisation of x [R, K] per block of 32 (``q4.int8_blocks``, NumPy): (x̂ = d_x·xq
    as float64, d_x [R, K/32] float64)."""
    xq, dx = q4.int8_blocks(x)
    dx = dx.astype(np.float64)
    return (xq.reshape(x.shape[0], -1, 32) * dx[..., None]).reshape(x.shape), dx


def _int8_inputs(rng, rows, k_in):
    """x spread over powers of ten, with an outlier block, an all-zero block and a block of one
    tiny value among zeros (its scale subnormal-free but small) where K allows."""
    x = (rng.standard_normal((rows, k_in)) * 10.0 ** rng.integers(-3, 4, (rows, k_in))).astype(np.float32)
    x[0, rng.integers(0, k_in)] = 3e4  # an outlier: its block's other inputs round to few levels
    if k_in >= 64:
        x[:, 32:64] = 0  # a zero block: d_x = 0
    x[-1, :32] = 0
    x[-1, 5] = -1e-6
    return x


@needs_lib
@pytest.mark.parametrize("isa", INT_UNITS)
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 6, 7, 11, 12, 13, 47, 100])
@pytest.mark.parametrize("k_in, n_out", [(32, 32), (64, 64), (96, 96), (128, 32), (384, 1152), (1536, 384)])
def test_int8_product_within_its_stated_bound_at_every_block_edge(rows, k_in, n_out, isa):
    """Rows across the 6-row (VNNI) and 2-row (AVX2) tiles, K from one block up (32, 64, 96, …),
    N from one panel to 36; with and without bias, then GELU. Two checks: the stated bound against
    float64 over the dequantized W (q4/int8.c), and float32 rounding alone against float64 over the
    quantised x̂ — which catches any wrong nibble, byte or scale the loose bound could hide."""
    rng = np.random.default_rng(rows * 31 + k_in + n_out)
    blocks = _weights(rng, n_out, k_in)
    x = _int8_inputs(rng, rows, k_in)
    b = rng.standard_normal(n_out).astype(np.float32)
    w = dequantize(blocks, np.float64).T  # [K, N]
    nb = k_in // 32
    xhat, dx = _q8(x)
    wblock = np.abs(w).reshape(nb, 32, n_out).sum(1)  # Σ_{k∈b} |w_k| per output
    quant = (0.5 + 2 ** -15) * (dx @ wblock)
    xw = np.abs(x.astype(np.float64)) @ np.abs(w)
    panels = pack_q4(blocks)
    for bias in (None, b):
        exact = x.astype(np.float64) @ w + (0 if bias is None else bias)
        babs = 0 if bias is None else np.abs(bias)
        bound = quant + _gamma(nb + 2) * (xw + quant + babs)
        y = q4_matmul(x, panels, bias, np.full((rows, n_out), np.nan, np.float32), isa=isa)
        err = np.abs(y - exact)
        assert np.all(err <= bound), f"max error {err.max():.3g}, {(err / bound).max():.3g}× the bound"
        model = xhat @ w + (0 if bias is None else bias)
        rounding = _gamma(nb + 2) * (np.abs(xhat) @ np.abs(w) + babs)
        assert np.all(np.abs(y - model) <= rounding), f"{(np.abs(y - model) / rounding).max():.3g}× float32 rounding"
    g = q4_matmul(x, panels, b, np.full((rows, n_out), np.nan, np.float32), gelu=True, isa=isa)
    exact = x.astype(np.float64) @ w + b
    gelu = exact * 0.5 * (1 + erf(exact / np.sqrt(2)))
    bound = quant + _gamma(nb + 2) * (xw + quant + np.abs(b))
    assert np.all(np.abs(g - gelu) <= 1.13 * bound + 2e-7 * np.abs(gelu) + 1e-7)


@needs_lib
def test_vnni_and_avx2_give_the_same_bits():
    """The same exact integer sums and the same float32 steps in the same order: bit for bit."""
    if not {"vnni", "avx2"} <= set(cpu.q4_offered()):
        pytest.skip(f"needs both; this CPU (up to QKV_ISA) offers {cpu.q4_offered()}")
    rng = np.random.default_rng(9)
    panels = pack_q4(_weights(rng, 96, 384))
    x = _int8_inputs(rng, 13, 384)
    b = rng.standard_normal(96).astype(np.float32)
    for gelu in (False, True):
        a = q4_matmul(x, panels, b, np.empty((13, 96), np.float32), gelu, isa="vnni")
        c = q4_matmul(x, panels, b, np.empty((13, 96), np.float32), gelu, isa="avx2")
        np.testing.assert_array_equal(a, c)


@needs_lib
def test_vnni_and_avx2_quantise_alike_at_rounding_ties():
    """Each unit quantises x its own way (AVX-512 on VNNI, AVX2 on AVX2) with the same steps: blocks
    whose scaled inputs land exactly on k + 1/2 (max 127: d_x = 1, round half to even), on ±127, a
    negative maximum, zeros and tiny values give the same bits through a product and through the
    feed-forward block (whose hidden layer each unit quantises too)."""
    if not {"vnni", "avx2"} <= set(cpu.q4_offered()):
        pytest.skip(f"needs both; this CPU (up to QKV_ISA) offers {cpu.q4_offered()}")
    rng = np.random.default_rng(21)
    x = _int8_inputs(rng, 7, 128)
    x[1, :32] = np.arange(-16, 16) + 0.5  # ties after scaling by 127 / 127
    x[1, 0] = 127.0
    x[2, 64:96] = np.linspace(-127, 3, 32)  # the maximum is negative
    x[3, 96:] = rng.choice([-1.5, 2.5, -0.5, 126.5, -127.0], 32) * 1e-3
    panels = pack_q4(_weights(rng, 64, 128))
    p_out = pack_q4(_weights(rng, 32, 64))
    b = rng.standard_normal(64).astype(np.float32)
    got = {u: (q4_matmul(x, panels, b, np.empty((7, 64), np.float32), isa=u),
               q4.q4_ffn(x, panels, b, p_out, None, np.empty((7, 32), np.float32), isa=u)) for u in ("vnni", "avx2")}
    for a, c in zip(got["vnni"], got["avx2"]):
        np.testing.assert_array_equal(a, c)


@needs_lib
@pytest.mark.parametrize("isa", INT_UNITS)
def test_int8_product_is_its_own_rows(isa):
    """Each row is quantised on its own (row-wise scales): a row's result does not depend on the
    rows beside it, nor on where the row tiles fall."""
    rng = np.random.default_rng(12)
    panels = pack_q4(_weights(rng, 64, 96))
    x = _int8_inputs(rng, 14, 96)
    whole = q4_matmul(x, panels, None, np.empty((14, 64), np.float32), isa=isa)
    for r in (0, 5, 13):
        one = q4_matmul(x[r:r + 1].copy(), panels, None, np.empty((1, 64), np.float32), isa=isa)
        np.testing.assert_array_equal(one[0], whole[r])


@needs_lib
@pytest.mark.parametrize("isa", UNITS + INT_UNITS)
@pytest.mark.parametrize("rows", [1, 5, 6, 7, 13, 50])
@pytest.mark.parametrize("k_in, inner, n_out", [(32, 32, 32), (64, 96, 64), (384, 1536, 384)])
def test_feed_forward_in_one_call_gives_the_two_products_bits(rows, k_in, inner, n_out, isa):
    """q4_ffn (on the int8-block units one compiled call whose hidden layer stays int8 blocks) equals
    GELU(x·W_in + b_in)·W_out + b_out made by two q4_matmul calls bit for bit: row tiles of every
    kind (6 rows VNNI, 2 AVX2, tails), one hidden panel to 48, with and without b_out."""
    rng = np.random.default_rng(rows + k_in + inner)
    p_in, p_out = pack_q4(_weights(rng, inner, k_in)), pack_q4(_weights(rng, n_out, inner))
    x = _int8_inputs(rng, rows, k_in)
    b_in, b_out = (rng.standard_normal(n).astype(np.float32) for n in (inner, n_out))
    for bias in (None, b_out):
        h = q4_matmul(x, p_in, b_in, np.empty((rows, inner), np.float32), gelu=True, isa=isa)
        two = q4_matmul(h, p_out, bias, np.empty((rows, n_out), np.float32), isa=isa)
        one = q4.q4_ffn(x, p_in, b_in, p_out, bias, np.full((rows, n_out), np.nan, np.float32), isa=isa)
        np.testing.assert_array_equal(one, two)
    with pytest.raises(ValueError, match="do not fit"):
        q4.q4_ffn(x, p_in, b_in, p_out, None, np.empty((rows, n_out + 32), np.float32), isa=isa)
