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
    batch = L.Blas if cpu.BLAS_WIDER else L.Float32Panels  # (a v3 build on an AVX-512 CPU: the next test)
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
def test_batches_go_to_blas_only_where_its_kernels_are_wider_than_the_librarys(monkeypatch):
    """A library built without AVX-512 on a CPU with it (cpu.blas_is_wider): OpenBLAS's AVX-512
    kernels take the float32 batches, the library keeps a few rows and every other precision; on
    an AVX2 CPU, or with an AVX-512 build, the library takes everything."""
    v3, v4 = {"avx", "avx2", "fma", "f16c"}, {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}
    assert cpu.blas_is_wider(v3, v4 | {"avx512_bf16"})
    assert not cpu.blas_is_wider(v4, v4) and not cpu.blas_is_wider(v3, v3 | {"sse4_2"})
    assert not cpu.blas_is_wider(v3, None) and not cpu.blas_is_wider(set(), v4)  # unknown: keep the library
    w = np.zeros((64, 96), np.float32)
    monkeypatch.setattr(cpu, "BLAS_WIDER", True)
    assert L.choose(w, "float32", L.FEW_ROWS + 1) is L.Blas and L.choose(w, "float32", 2048) is L.Blas
    assert L.choose(w, "float32", L.FEW_ROWS) is L.Float32Panels  # a lone query: the library's is faster
    assert L.choose(w, "float16", 1) is L.Float16Panels and L.choose(w, "int8", 2048) is L.Int8Panels
    monkeypatch.setattr(cpu, "BLAS_WIDER", False)
    assert L.choose(w, "float32", 2048) is L.Float32Panels


def test_dense_reads_arrays_and_packed_weights():
    x, w, b = _case(3)
    assert L.dense(w) is w
    assert np.array_equal(L.dense(L.Blas(w)), w)
