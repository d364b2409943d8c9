"""The bfloat16 products (qkv/kernels/bfloat16/kernels.c) against their float64 twins, and the choice of unit.

Bounds (derived in the C file's opening comment): bfloat16 keeps 8 significant bits, u_b = 2^-8;
products of two bfloat16 values are exact in float32 and summed in float32 (u = 2^-24), so
against the float64 product of the ROUNDED inputs |y - ŷ| ≤ γ_(K+2)·(|x̂|·|ŵ| + |b|), and against
the exact product of the unrounded inputs an extra (2u_b + u_b²)·|x|·|w|. Each unit this CPU
offers is run (QKV_ISA-style forcing through ``isa=``); the others are skipped with the reason.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qkv.kernels import bfloat16 as bf16, cpu, float32

U32, UB = 2.0 ** -24, 2.0 ** -8
EXP2_ERR = 7.5e-5  # the 2^f polynomial of softmax and GELU, relative (exp2_soft in qkv/kernels/bfloat16/kernels.c)
GELU_EXP_ERR = EXP2_ERR + 1.1e-5  # and GELU's t = -x²·log2(e)/2 rounded twice (ln2·2^-23·|t|, |t| ≤ 130)
UNITS = [u for u in ("amx", "avx512bf16") if u in cpu.offered()]
needs_lib = pytest.mark.skipif(not cpu.available(), reason=f"compiled kernels: {cpu.STATUS}")


def gamma(n: int) -> float:
    return n * U32 / (1 - n * U32)


def unit_param():
    """Every bfloat16 unit; those this CPU lacks are skipped, saying so."""
    return [pytest.param(u, marks=pytest.mark.skipif(u not in UNITS, reason=f"this CPU offers {cpu.offered()}"))
            for u in ("amx", "avx512bf16")]


@pytest.fixture(autouse=True)
def restore_unit():
    """Tests that re-choose the unit put the process's choice back."""
    before = cpu.ISA
    yield
    cpu.select(before)


# ----------------------------------------------------------------------------------- packing
def test_rounding_is_to_nearest_even():
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, -2.5, 3.0e38, 1e-30], np.float32)
    got = bf16.round_bf16(x)
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1); 1 + 3·2^-8 to 1 + 2^-6
    assert got[:4].tolist() == [1.0, 1.0, 1 + 2 ** -6, 1.0]
    assert got[4] == -2.5
    assert np.all(np.abs(got - x) <= UB * np.abs(x))


def test_pack_and_unpack_give_w_rounded_with_k_padded():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((45, 96)).astype(np.float32)
    p = bf16.pack_bf16(w)
    assert p.shape == (3, 32, 32, 2) and p.dtype == np.uint16 and p.ctypes.data % 64 == 0
    np.testing.assert_array_equal(bf16.unpack_bf16(p, 45), bf16.round_bf16(w))
    assert not p[:, 45 // 2 + 1:].any()  # the padded rows of W are zero
    assert bf16.pack_bf16(w[:, :40]) is None  # not whole panels: callers keep float32


# ----------------------------------------------------------------------------------- product
EDGES = [  # rows across the 12-row and 32-row tiles, K across the 32-deep tile, N across column blocks
    (1, 384, 384), (11, 33, 64), (12, 31, 32), (13, 64, 288), (16, 1, 32), (17, 800, 96),
    (31, 32, 416), (32, 384, 1152), (33, 50, 256), (47, 1536, 384), (250, 384, 1536),
]


def _bound_check(y, x, w, b, gelu=False):
    xr, wr = bf16.round_bf16(x).astype(np.float64), bf16.round_bf16(w).astype(np.float64)
    exact_rounded = xr @ wr + b
    mag = np.abs(xr) @ np.abs(wr) + np.abs(b)
    bound = gamma(x.shape[1] + 2) * mag
    exact = x.astype(np.float64) @ w.astype(np.float64) + b
    bound_exact = bound + (2 * UB + UB ** 2) * (np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)))
    if gelu:  # GELU's slope is at most 1.13; the compiled erf is within 1.5e-7 absolute (so Φ within
        # 7.5e-8, GELU within 7.5e-8·|z|), and its e^(-x²/2) (exp2_soft) within GELU_EXP_ERR relative,
        # which moves GELU by ≤ GELU_EXP_ERR·|GELU|; float32 evaluation 2e-7 relative, 1e-7 absolute
        from scipy.special import erf

        g = lambda z: z * 0.5 * (1 + erf(z / np.sqrt(2)))  # noqa: E731
        erf_r, erf_e = 7.5e-8 * np.abs(exact_rounded), 7.5e-8 * np.abs(exact)
        exact_rounded, exact = g(exact_rounded), g(exact)
        rel = 2e-7 + GELU_EXP_ERR
        slack = 1.13 * bound + rel * np.abs(exact_rounded) + erf_r + 1e-7
        bound, bound_exact = slack, 1.13 * bound_exact + rel * np.abs(exact) + erf_e + 1e-7
    err = np.abs(y - exact_rounded)
    assert np.all(err <= bound), f"max error {err.max():.3g} over the bound by {(err / bound).max():.3g}×"
    assert np.all(np.abs(y - exact) <= bound_exact)


@needs_lib
@pytest.mark.parametrize("unit", unit_param())
@pytest.mark.parametrize("R,K,N", EDGES)
def test_product_within_the_bfloat16_bound_at_every_block_edge(unit, R, K, N):
    rng = np.random.default_rng(R * 1000 + K + N)
    x = rng.standard_normal((R, K)).astype(np.float32)
    w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    p = bf16.pack_bf16(w)
    y = np.full((R, N), np.nan, np.float32)
    bf16.gemm_bf16(x, p, b, y, isa=unit)
    _bound_check(y, x, w, b)
    y2 = np.full((R, N), np.nan, np.float32)
    bf16.gemm_bf16(x, p, None, y2, gelu=True, isa=unit)
    _bound_check(y2, x, w, np.zeros(N), gelu=True)


@needs_lib
@pytest.mark.parametrize("unit", unit_param())
@pytest.mark.parametrize("R,K,N", [e for e in EDGES if e[1] % 32 == 0])
def test_bfloat16_bits_in_and_out_at_every_block_edge(unit, R, K, N):
    """A product may write its result as bfloat16 bits and the next read them without a float32
    round trip: the bound above plus the output's own rounding (u_b·|y|); a bits x is read as it is,
    its padding rows (NaN here) never reach the result."""
    rng = np.random.default_rng(R * 7 + K + N)
    x = rng.standard_normal((R, K)).astype(np.float32)
    w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    p = bf16.pack_bf16(w)
    for gelu in (False, True):
        yb = np.zeros((R, N), np.uint16)
        bf16.gemm_bf16(x, p, b, yb, gelu=gelu, isa=unit)
        y = np.empty((R, N), np.float32)
        bf16.gemm_bf16(x, p, b, y, gelu=gelu, isa=unit)
        assert np.all(np.abs(bf16.from_bf16_bits(yb) - y) <= UB * np.abs(y))  # y rounded, nearest
        np.testing.assert_array_equal(yb, bf16.to_bf16_bits(y))
    xb = np.full((bf16.rows_padded(R), K), 0x7FC0, np.uint16)  # NaN past row R
    xb[:R] = bf16.to_bf16_bits(x)
    y = np.full((R, N), np.nan, np.float32)
    bf16.gemm_bf16(xb, p, b, y, isa=unit)
    _bound_check(y, x, w, b)
    with pytest.raises(ValueError, match="rows"):
        bf16.gemm_bf16(xb[:R + 1], p, b, y, isa=unit)


@needs_lib
@pytest.mark.parametrize("unit", unit_param())
@pytest.mark.parametrize("n", [1, 7, 9, 15, 17, 48, 100, 256])
def test_attention_reads_and_writes_bfloat16_bits_as_it_rounds(unit, n):
    """Q | K | V handed in as bfloat16 bits give what float32 ones give (the kernel rounds them the
    same way); the output written as bits is the float32 output rounded to nearest even."""
    rng = np.random.default_rng(n)
    qkv = rng.standard_normal((n, 3 * 64)).astype(np.float32)
    ctx = np.empty((n, 64), np.float32)
    assert bf16.attention_text_bf16(qkv, 2, 0.17, ctx, isa=unit)
    from_bits = np.empty((n, 64), np.float32)
    assert bf16.attention_text_bf16(bf16.to_bf16_bits(qkv), 2, 0.17, from_bits, isa=unit)
    np.testing.assert_array_equal(from_bits, ctx)
    out_bits = np.empty((n, 64), np.uint16)
    assert bf16.attention_text_bf16(qkv, 2, 0.17, out_bits, isa=unit)
    np.testing.assert_array_equal(out_bits, bf16.to_bf16_bits(ctx))


@needs_lib
@pytest.mark.parametrize("unit", ["amx", "avx512bf16", "float32"])
def test_layer_norm_with_bits_is_layer_norm_then_rounded(unit):
    cpu.select(unit)  # a unit the CPU lacks falls to the next: each path that runs here is checked
    rng = np.random.default_rng(8)
    x, res = rng.standard_normal((2, 37, 384)).astype(np.float32)
    bias, g, beta = rng.standard_normal((3, 384)).astype(np.float32)
    want = float32.add_layer_norm(x.copy(), res, bias, g, beta, 1e-12)
    bits = np.zeros((37, 384), np.uint16)
    got = bf16.add_layer_norm_bf16(x.copy(), res, bias, g, beta, 1e-12, bits)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(bits, bf16.to_bf16_bits(want))


@needs_lib
@pytest.mark.parametrize("unit", unit_param())
def test_a_product_writes_only_its_rows(unit):
    """Tiles past the last row are computed on zero rows and never stored."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20, 64)).astype(np.float32)
    p = bf16.pack_bf16(rng.standard_normal((64, 64)).astype(np.float32))
    big = np.full((40, 64), 7.0, np.float32)
    bf16.gemm_bf16(x, p, None, big[:20], isa=unit)
    assert np.all(big[20:] == 7.0)


def test_the_numpy_twin_is_the_same_rounding():
    """QKV_ISA=float32 (or no library) runs the twin: the same bfloat16 inputs, float32 sums."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((9, 70)).astype(np.float32), rng.standard_normal((70, 64)).astype(np.float32)
    y = np.empty((9, 64), np.float32)
    bf16.gemm_bf16(x, bf16.pack_bf16(w), None, y, isa="float32")
    _bound_check(y, x, w, np.zeros(64))


def test_misfit_shapes_are_refused():
    p = bf16.pack_bf16(np.ones((64, 32), np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        bf16.gemm_bf16(np.ones((2, 100), np.float32), p, None, np.empty((2, 32), np.float32))


# --------------------------------------------------------------------------------- attention
def _attention64(qkv, heads, scale):
    n, width = qkv.shape
    H = width // 3
    q, k, v = qkv.astype(np.float64).reshape(n, 3, heads, H // heads).transpose(1, 2, 0, 3)
    s = scale * q @ k.transpose(0, 2, 1)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(n, H), q, k, v


@needs_lib
@pytest.mark.parametrize("unit", unit_param())
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 256, 511])
def test_attention_within_the_bfloat16_bound(unit, n):
    """Both units (AMX tiles, AVX-512 BF16 dot products) round alike and are held to one bound.
    Bound: q, k rounded move each score by at most Δ = scale·(2u_b + u_b²)·Σ|q||k| (+ float32
    sums), so each normalised weight by a factor within [(1-u_b)e^-2Δ, (1+u_b)e^2Δ] (its own
    bfloat16 rounding included); the output moves by at most max|v|·((1+u_b)e^2Δ - 1) from the
    weights, u_b·max|v| from v's rounding, and γ_n·max|v| from the float32 sums.
    The kernel's exp (exp2_soft: 2^t, t = log2(e)·scale·(s - max), a degree-3 polynomial on
    [-1/2, 1/2]) is within a relative ε of e^(scale·(s - max)): EXP2_ERR = 7.5e-5 for the
    polynomial, plus ln2·2^-24·|t| for the one rounding of t. A weight's numerator and the row sum
    each carry it, so the factor (1 + u_b) above becomes (1 + u_b)(1 + ε)/(1 - ε)."""
    rng = np.random.default_rng(n)
    heads, scale = 12, 1 / np.sqrt(32)
    qkv = (rng.standard_normal((n, 3 * 384)) * 1.5).astype(np.float32)
    ctx = np.full((n, 384), np.nan, np.float32)
    assert bf16.attention_text_bf16(qkv, heads, scale, ctx, isa=unit)
    ref, q, k, v = _attention64(qkv, heads, scale)
    delta = scale * ((2 * UB + UB ** 2) + gamma(33)) * (np.abs(q) @ np.abs(k).transpose(0, 2, 1)).max(axis=-1)
    vmax = np.abs(v).max(axis=1, keepdims=True)  # [heads, 1, d]
    s = scale * q @ k.transpose(0, 2, 1)
    eps = EXP2_ERR + np.log(2) * U32 * np.log2(np.e) * (s.max(axis=-1) - s.min(axis=-1))  # [heads, n]
    bound = vmax * ((1 + UB) * (1 + eps[..., None]) / (1 - eps[..., None]) * np.exp(2 * delta)[..., None]
                    - 1 + UB + gamma(n + 2))
    err = np.abs(ctx.astype(np.float64) - ref).reshape(n, heads, 32).transpose(1, 0, 2)
    assert np.all(err <= bound), (err / bound).max()
    assert err.max() < 0.05 * np.abs(ref).max()  # and the bound itself is not vacuous here


@needs_lib
@pytest.mark.parametrize("unit", ["amx", "avx512bf16"])
def test_attention_in_bfloat16_refuses_what_it_cannot_run(unit):
    """Head size 64, or the float32 unit (no bfloat16 attention): False, ctx untouched, and the
    caller runs float32. (Refusals come before any instruction runs: tested for units this CPU lacks too.)"""
    qkv = np.zeros((4, 3 * 128), np.float32)  # head size 64
    ctx = np.full((4, 128), 7.0, np.float32)
    assert not bf16.attention_text_bf16(qkv, 2, 0.125, ctx, isa=unit)
    ctx = np.full((4, 384), 7.0, np.float32)
    assert not bf16.attention_text_bf16(np.zeros((4, 3 * 384), np.float32), 12, 0.2, ctx, isa="float32")
    assert not bf16.attention_text_bf16(np.zeros((4, 3 * 384), np.float32), 12, 0.2, ctx[:3], isa=unit)
    assert np.all(ctx == 7.0)


@pytest.mark.parametrize("unit", ["avx512bf16", "float32"])
def test_qkv_info_says_where_bfloat16_attention_runs(unit, monkeypatch):
    import json

    assert bf16.attention_unit("float32") == "float32"
    for u in ("amx", "avx512bf16"):
        assert bf16.attention_unit(u) == (f"{u}: {bf16.ATTENTION_HOW[u]}, head size 32" if cpu.available() else "float32")
    monkeypatch.delenv("QKV_ISA", raising=False)
    env = dict(os.environ, QKV_ISA=unit)
    out = subprocess.run([sys.executable, "-c", "import sys; from qkv.cli import main; sys.argv = ['qkv', 'info', "
                          "'--json']; main()"], capture_output=True, text=True, env=env, check=True).stdout
    d = json.loads(out)
    assert d["bfloat16_attention"] == bf16.attention_unit(d["bfloat16_unit"])
    if unit in cpu.offered():  # forced to a unit this CPU has: that unit's attention, or float32's
        assert d["bfloat16_unit"] == unit
        assert d["bfloat16_attention"] == ("float32" if unit == "float32" else f"{unit}: {bf16.ATTENTION_HOW[unit]}, head size 32")


# ---------------------------------------------------------------------------------- dispatch
def test_the_unit_in_use_is_named_in_status():
    assert cpu.ISA in cpu.ISAS
    assert f"bfloat16 products: {cpu.ISA}" in cpu.STATUS


@needs_lib
@pytest.mark.parametrize("unit", ["amx", "avx512bf16", "float32"])
def test_each_unit_can_be_forced_and_a_missing_one_falls_to_the_next(unit):
    got = cpu.select(unit)
    order = cpu.ISAS[cpu.ISAS.index(unit):]
    expected = next(u for u in order if u in cpu.offered())
    if unit == "amx" and "amx" in cpu.offered() and not cpu.request_amx():
        expected = "avx512bf16"
    assert got == expected == cpu.ISA
    if got != unit:
        assert unit in cpu.WHY and unit in cpu.STATUS


@needs_lib
def test_a_refused_amx_permission_falls_to_avx512bf16(monkeypatch):
    monkeypatch.delenv("QKV_ISA", raising=False)
    monkeypatch.setattr(cpu, "request_amx", lambda: False)
    monkeypatch.setattr(cpu, "cpu_bits", lambda: 1 | 2 | 4)  # as if the CPU had both units
    assert cpu.select("amx") == "avx512bf16"
    assert "refused" in cpu.WHY


@needs_lib
def test_a_cpu_without_either_unit_runs_float32(monkeypatch):
    monkeypatch.delenv("QKV_ISA", raising=False)
    monkeypatch.setattr(cpu, "cpu_bits", lambda: 0)
    assert cpu.select(None) == "float32"
    assert "amx" in cpu.WHY and "avx512bf16" in cpu.WHY


def test_without_the_library_float32_and_a_bad_name_is_ignored(monkeypatch):
    monkeypatch.setattr(cpu, "lib", None)
    assert cpu.choose("amx")[0] == "float32"
    monkeypatch.setenv("QKV_ISA", "tpu")
    assert "ignored" in cpu.choose()[1]


@needs_lib
@pytest.mark.parametrize("unit", ["amx", "avx512bf16", "float32"])
def test_qkv_isa_in_the_environment_chooses_at_import(unit, monkeypatch):
    monkeypatch.delenv("QKV_ISA", raising=False)  # the child's QKV_ISA, not this process's ceiling
    env = dict(os.environ, QKV_ISA=unit)
    out = subprocess.run([sys.executable, "-c", "from qkv.kernels import cpu; print(cpu.ISA); "
                          "print(cpu.STATUS)"], capture_output=True, text=True, env=env, check=True).stdout
    isa, status = out.splitlines()
    assert isa in cpu.ISAS[cpu.ISAS.index(unit):] and f"bfloat16 products: {isa}" in status
    if unit in cpu.offered():
        assert isa == unit


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the units are x86-64's")
@pytest.mark.parametrize("march", ["x86-64", "x86-64-v4"])
def test_the_library_compiles_for_a_cpu_without_the_units(tmp_path, march):
    """CI may build on a CPU without AMX (-march=native then lacks it): the tile code must still
    compile (per-function target attributes) and the library load."""
    from qkv.kernels import build

    cc = build.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path / "k.so"
    cmd = [cc, *build.FLAGS, f"-march={march}", *map(str, build.SOURCES), "-o", str(out), "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    import ctypes

    assert ctypes.CDLL(str(out)).qkv_bf16_cpu() >= 0


@needs_lib
@pytest.mark.parametrize("cap", ["avx512bf16", "float32"])
def test_qkv_isa_is_a_ceiling_as_on_a_cpu_without_the_better_units(cap, monkeypatch):
    """QKV_ISA=avx512bf16 makes an AMX machine a stand-in for one without tiles (Zen 4), float32
    for one with neither: nothing above it is offered or chosen, even when asked for."""
    monkeypatch.setenv("QKV_ISA", cap)
    assert cpu.ISAS.index(cpu.offered()[0]) >= cpu.ISAS.index(cap)
    got = cpu.select("amx")
    assert got in cpu.ISAS[cpu.ISAS.index(cap):] and "amx" not in cpu.offered()
    assert f"above QKV_ISA={cap}" in cpu.WHY and "4-bit products: amx" not in cpu.STATUS
    if cap in cpu.offered():
        assert got == cap
    capped = cpu.offered()
    monkeypatch.delenv("QKV_ISA")
    assert set(capped) <= set(cpu.offered())  # no ceiling: every unit the CPU has


def test_without_the_library_qkv_imports_and_runs_float32():
    env = dict(os.environ, QKV_KERNELS="0")
    out = subprocess.run([sys.executable, "-c", "from qkv.kernels import cpu; print(cpu.ISA)"],
                         capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "float32"


def test_qkv_info_names_the_unit_and_each_precision():
    import json

    env = dict(os.environ, QKV_ISA="float32")
    out = subprocess.run([sys.executable, "-c", "import sys; from qkv.cli import main; sys.argv = ['qkv', 'info', "
                          "'--json']; main()"], capture_output=True, text=True, env=env, check=True).stdout
    d = json.loads(out)
    assert d["bfloat16_unit"] == "float32" and "bfloat16 products: float32" in d["kernels"]
    assert d["bfloat16_attention"] == "float32"
    # forced to float32, no batch work claims bfloat16
    assert d["precision"]["qkv index (titles)"] == "float32" and d["precision"]["search queries"] == "float16"


def test_the_softmax_exp_polynomial_is_within_its_stated_error():
    """exp2_soft's degree-3 polynomial for 2^f on [-1/2, 1/2], evaluated as the kernel does (float32
    coefficients, Horner in float32), is within EXP2_ERR of 2^f: the figure the attention bound
    above adds. (The coefficients are those in qkv/kernels/bfloat16/kernels.c.)"""
    c = np.float32([0.9999280571937561, 0.6932609677314758, 0.24261116981506348, 0.05517167970538139])
    src = (Path(bf16.__file__).parent / "kernels.c").read_text()
    for v in c[1:]:
        assert f"{float(v)!r}f" in src, f"coefficient {float(v)!r} is not the kernel's"
    f = np.linspace(-0.5, 0.5, 200_001).astype(np.float32)
    p = np.full_like(f, c[3])
    for k in (2, 1, 0):
        p = (p * f + c[k]).astype(np.float32)
    assert np.abs(p.astype(np.float64) / 2.0 ** f.astype(np.float64) - 1).max() <= EXP2_ERR
    assert EXP2_ERR < UB / 50  # far below the bfloat16 rounding of the weights that follows


@needs_lib
@pytest.mark.parametrize("unit", unit_param())
def test_gelu_on_a_dense_grid_within_its_bound(unit):
    """GELU alone (x·I with x exact in bfloat16) at 131,072 points of [-12, 12], against float64:
    within the bound _bound_check uses (erf 1.5e-7 absolute, the exp's GELU_EXP_ERR relative), and
    in the negative tail (|GELU| > 1e-6) within 0.2 % relative: Φ(x) for x < 0 is formed directly,
    not as ½ - (½ - ½·erfc), whose float32 cancellation reached 4 % there."""
    from scipy.special import erf

    x = bf16.round_bf16(np.linspace(-12, 12, 32 * 4096).astype(np.float32)).reshape(-1, 32)
    y = np.empty_like(x)
    bf16.gemm_bf16(x, bf16.pack_bf16(np.eye(32, dtype=np.float32)), None, y, gelu=True, isa=unit)
    x64 = x.astype(np.float64)
    g = x64 * 0.5 * (1 + erf(x64 / np.sqrt(2)))
    err = np.abs(y - g)
    assert np.all(err <= (2e-7 + GELU_EXP_ERR) * np.abs(g) + 7.5e-8 * np.abs(x64) + 1e-7)
    tail = (x64 < 0) & (np.abs(g) > 1e-6)
    assert (err[tail] / np.abs(g[tail])).max() < 2e-3
