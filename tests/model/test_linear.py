"""Every packed product equals x·W + b (then the activation), and the dispatcher picks by
precision, rows and what the machine offers."""

import numpy as np
import pytest

from qkv.kernels import cpu
from qkv.errors import InputError
from qkv.model import linear as L
from qkv.model.workers import Workers

needs_lib = pytest.mark.skipif(not cpu.available(), reason=f"compiled kernels not in use: {cpu.STATUS}")


def _case(rows, k=64, n=96, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    w = (rng.standard_normal((k, n)) / 8).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return x, w, b


def _expect(x, w, b, act):
    y = x.astype(np.float64) @ w + b
    if act == "gelu":
        from scipy.special import erf

        y = y * 0.5 * (1 + erf(y / np.sqrt(2)))
    elif act == "relu":
        y = np.maximum(y, 0)
    return y


@pytest.mark.parametrize("act", [None, "gelu", "relu"])
@pytest.mark.parametrize("rows", [1, 9, 200])
@pytest.mark.parametrize("kind", ["Blas", "Float32Panels", "Float16Panels"])
def test_each_product_is_x_times_w_plus_b(kind, rows, act):
    cls = getattr(L, kind)
    if kind != "Blas" and not cpu.available():
        pytest.skip("panels need the compiled kernels")
    x, w, b = _case(rows)
    lin = cls(w)
    assert lin.shape == w.shape
    out = np.empty((rows, w.shape[1]), np.float32)
    got = lin(x, out, bias=b, act=act, workers=Workers(2))
    assert got is out
    tol = 2e-2 if kind == "Float16Panels" else 1e-4  # float16 weights: 11 significant bits
    np.testing.assert_allclose(got, _expect(x, w, b, act), rtol=tol, atol=tol)
    np.testing.assert_allclose(lin.dense(), w, rtol=1e-3 if kind == "Float16Panels" else 0,
                               atol=1e-6 if kind == "Float16Panels" else 0)
    assert lin.precision == ("float16" if kind == "Float16Panels" else "float32")


@needs_lib
def test_the_dispatcher_chooses_by_precision_rows_and_shape():
    w = np.zeros((64, 96), np.float32)
    assert L.choose(w, "float32", 5) is L.Float32Panels
    assert L.choose(w, "float16", L.FEW_ROWS) is L.Float16Panels
    batch = L.Blas if cpu.BLAS_BATCHES else L.Float32Panels  # (a v3 build: the next test)
    assert L.choose(w, "float16", L.FEW_ROWS + 1) is batch  # many rows: bound by arithmetic
    assert L.choose(np.zeros((64, 90), np.float32), "float32", 5) is L.Blas  # not whole panels
    assert L.choose(w.astype(np.float64), "float32", 5) is L.Blas
    packed = L.Float32Panels(w)
    assert L.choose(packed, "float16", 1) is None  # a reader's own packed weight is used as it is
    pw = L.PackedWeights()
    assert pw.linear(packed, "float16", 1) is packed
    assert pw.linear(w, "float32", 5) is pw.linear(w, "float32", 20)  # packed once, kept
    assert type(L.PackedWeights(force=L.Blas).linear(w)) is L.Blas
    with pytest.raises(InputError, match="precision must be one of"):
        pw.linear(w, "int3")


@needs_lib
def test_batches_go_to_blas_only_where_the_library_was_built_without_avx512(monkeypatch):
    """A library built without AVX-512 (cpu.blas_takes_batches), on a CPU with it (OpenBLAS's
    AVX-512 kernels) or on an AVX2 CPU (OpenBLAS's AVX2 kernels, faster than the v3 build's on a
    Zen 3): BLAS takes the float32 batches, the library keeps a few rows and every other
    precision; an AVX-512 build takes everything."""
    v3, v4 = {"avx", "avx2", "fma", "f16c"}, {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
    assert cpu.blas_takes_batches(v3, v4 | {"avx512_bf16"}) and cpu.blas_takes_batches(v3, v3 | {"sse4_2"})
    assert not cpu.blas_takes_batches(v4, v4)
    assert not cpu.blas_takes_batches(v3, None) and not cpu.blas_takes_batches(set(), v4)  # unknown: keep the library
    w = np.zeros((64, 96), np.float32)
    monkeypatch.setattr(cpu, "BLAS_BATCHES", True)
    assert L.choose(w, "float32", L.FEW_ROWS + 1) is L.Blas and L.choose(w, "float32", 2048) is L.Blas
    assert L.choose(w, "float32", L.FEW_ROWS) is L.Float32Panels  # a lone query: the library's is faster
    assert L.choose(w, "float16", 1) is L.Float16Panels and L.choose(w, "int8", 2048) is L.Int8Panels
    monkeypatch.setattr(cpu, "BLAS_BATCHES", False)
    assert L.choose(w, "float32", 2048) is L.Float32Panels


def test_dense_reads_arrays_and_packed_weights():
    x, w, b = _case(3)
    assert L.dense(w) is w
    assert np.array_equal(L.dense(L.Blas(w)), w)


def test_blas_batches_run_in_fixed_blocks_so_threads_do_not_change_the_floats():
    """OpenBLAS's bits for a row depend on the rows sharing its call and on its own threads, so
    Blas runs batches as one-thread calls of BLAS_BLOCK rows (the tail shorter), shared out
    between qkv's threads: one thread, two and three give the same floats, those of the blocks."""
    from qkv.kernels.blas import blas_threads

    rng = np.random.default_rng(3)
    w = rng.standard_normal((384, 1536)).astype(np.float32)
    b = rng.standard_normal(1536).astype(np.float32)
    rows = 2 * L.BLAS_BLOCK + 45
    x = rng.standard_normal((rows, 384)).astype(np.float32)
    lin = L.Blas(w)
    one = lin(x, np.empty((rows, 1536), np.float32), bias=b)
    with blas_threads(1):
        blocks = np.concatenate([x[a:a + L.BLAS_BLOCK] @ w for a in range(0, rows, L.BLAS_BLOCK)]) + b
    np.testing.assert_array_equal(one, blocks)
    for n in (2, 3):
        np.testing.assert_array_equal(lin(x, np.empty((rows, 1536), np.float32), bias=b, workers=Workers(n)), one)
    exact = x.astype(np.float64) @ w + b  # and it is x·W + b, within float32's bound for a sum of 385 terms
    assert np.all(np.abs(one - exact) <= 1.01 * 385 * 2.0 ** -24 * (np.abs(x) @ np.abs(w) + np.abs(b)))
