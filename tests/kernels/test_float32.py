"""The float32 kernels (qkv/kernels/float32/kernels.c) against their NumPy twins, and the build that makes them."""

import numpy as np
import pytest

from qkv.kernels import build, cpu, float32
from qkv.attention import chunked_attention, scaled_dot_product_attention

needs_lib = pytest.mark.skipif(not cpu.available(), reason=f"compiled kernels: {cpu.STATUS}")


@pytest.fixture
def numpy_only(monkeypatch):
    """Run the NumPy twins: as if the library had not been built."""
    monkeypatch.setattr(cpu, "lib", None)


def twin(fn, *args):
    """fn(*args) on copies, once compiled and once with the NumPy twin."""
    native = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    lib, cpu.lib = cpu.lib, None
    try:
        plain = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    finally:
        cpu.lib = lib
    return native, plain


def test_the_library_is_built_where_a_compiler_exists():
    if build.compiler() is None:
        pytest.skip("no C compiler on this machine: qkv runs the NumPy twins")
    if cpu.STATUS.startswith("disabled"):
        pytest.skip("QKV_KERNELS=0 is set")
    assert cpu.available(), cpu.STATUS


def test_build_writes_a_loadable_library(tmp_path):
    if build.compiler() is None:
        pytest.skip("no C compiler on this machine")
    out = build.build(out=tmp_path / "k.so", log=lambda m: None)
    assert out == tmp_path / "k.so" and out.stat().st_size > 0
    import ctypes

    assert hasattr(ctypes.CDLL(str(out)), "qkv_bias_gelu")


def test_build_without_a_compiler_reports_and_builds_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "compiler", lambda: None)
    said = []
    assert build.build(out=tmp_path / "k.so", log=said.append) is None
    assert "NumPy" in said[0] and not (tmp_path / "k.so").exists()


@needs_lib
def test_gelu_matches_the_exact_formula_and_the_twin():
    from scipy.special import erf

    rng = np.random.default_rng(0)
    h = (rng.standard_normal((37, 1536)) * 3).astype(np.float32)
    h[0, :8] = [0, -0.0, 1e-30, -1e-30, 30, -30, 1e20, -1e20]
    b = rng.standard_normal(1536).astype(np.float32) * 0.1
    native, plain = twin(float32.bias_gelu, h, b)
    x = h.astype(np.float64) + b
    exact = x * 0.5 * (1 + erf(x / np.sqrt(2)))
    assert np.abs(native - exact).max() <= 1e-6 * max(1, np.abs(exact[:, 8:]).max())
    np.testing.assert_allclose(native[:, 8:], plain[:, 8:], rtol=2e-6, atol=1e-6)
    assert native[0, 4] == pytest.approx(exact[0, 4]) and abs(native[0, 5]) < 1e-30 and np.isfinite(native).all()


@needs_lib
@pytest.mark.parametrize("with_res,with_bias", [(True, True), (True, False), (False, True), (False, False)])
def test_add_layer_norm_matches_the_twin(with_res, with_bias):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((50, 384)) * 4 + 2).astype(np.float32)
    res = rng.standard_normal((50, 384)).astype(np.float32) if with_res else None
    bias = rng.standard_normal(384).astype(np.float32) if with_bias else None
    g, beta = rng.standard_normal(384).astype(np.float32), rng.standard_normal(384).astype(np.float32)
    native, plain = twin(float32.add_layer_norm, x, res, bias, g, beta, 1e-12)
    np.testing.assert_allclose(native, plain, rtol=1e-5, atol=2e-5)
    y = x.astype(np.float64) + (0 if res is None else res) + (0 if bias is None else bias)
    y = (y - y.mean(1, keepdims=True)) / y.std(1, keepdims=True) * g + beta
    assert np.abs(native - y).max() < 2e-5


@needs_lib
def test_softmax_rows_with_lengths_matches_the_twin():
    rng = np.random.default_rng(2)
    s = (rng.standard_normal((4, 3, 7, 9)) * 20).astype(np.float32)
    valid = np.array([9, 4, 0, 1])
    native, plain = twin(float32.softmax_rows, s, 0.25, valid)
    np.testing.assert_allclose(native, plain, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(native[0].sum(-1), 1, rtol=1e-6)
    assert (native[1, ..., 4:] == 0).all() and (native[2] == 0).all() and (native[3, ..., 0] == 1).all()
    with pytest.raises(ValueError, match="positive"):
        float32.softmax_rows(s, -1.0)
    with pytest.raises(ValueError, match="one length"):
        float32.softmax_rows(s, 1.0, np.array([1, 2]))


def test_softmax_rows_twin_alone(numpy_only):
    s = np.array([[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]], dtype=np.float32)
    out = float32.softmax_rows(s.copy(), 1.0, np.array([2]))
    np.testing.assert_allclose(out[0, 0], [1 / (1 + np.e), np.e / (1 + np.e), 0], rtol=1e-6)
    assert not cpu.available()


@needs_lib
def test_exp_tile_adds_row_sums():
    s = np.array([[0.0, 1.0, -np.inf, 80.0], [-3.0, 2.0, 0.5, -90.0]], dtype=np.float32)
    l = np.array([1.0, 0.0], np.float32)
    t = s.copy()
    assert float32.exp_tile(t, l)
    np.testing.assert_allclose(t, np.exp(s.astype(np.float64)), rtol=2e-7, atol=1e-37)  # below e^-87.3: 0
    np.testing.assert_allclose(l, [1 + np.exp(s[0].astype(np.float64)).sum(), np.exp(s[1].astype(np.float64)).sum()],
                               rtol=1e-6)


@needs_lib
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_panel_matmul_matches_blas_for_every_row_count(with_bias, dtype):
    """Rows 1..19 cover every register block (8 rows at a time, then 1-7) and more than one block;
    float16 panels give the product of the rounded weights."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((48, 96), dtype=np.float32)
    panels = float32.pack_panels(w, dtype)
    assert panels.shape == (3, 48, 32) and panels.dtype == dtype
    np.testing.assert_array_equal(float32.unpack_panels(panels), w.astype(dtype).astype(np.float32))
    bias = rng.standard_normal(96, dtype=np.float32) if with_bias else None
    rounded = w.astype(dtype).astype(np.float64)
    for rows in range(1, 20):
        x = rng.standard_normal((rows, 48), dtype=np.float32)
        expect = x.astype(np.float64) @ rounded + (0 if bias is None else bias)
        native, plain = twin(float32.panel_matmul, x, panels, bias, np.full((rows, 96), np.nan, np.float32))
        np.testing.assert_allclose(native, expect, rtol=1e-5, atol=2e-5)
        np.testing.assert_allclose(plain, expect, rtol=1e-5, atol=2e-5)


def test_panel_matmul_refuses_what_it_cannot_run():
    w = np.ones((8, 40), np.float32)
    assert float32.pack_panels(w) is None  # 40 columns are not whole panels: callers use BLAS
    assert float32.pack_panels(np.ones((8, 64))) is None  # float64
    assert float32.pack_panels(np.ones((8, 64), np.float32), np.int8) is None
    panels = np.ones((2, 8, 32), np.float32)
    with pytest.raises(ValueError, match="do not fit"):
        float32.panel_matmul(np.ones((3, 9), np.float32), panels, None, np.empty((3, 64), np.float32))


def _gelu64(z):
    from math import erf

    return z * 0.5 * (1 + np.vectorize(erf)(z / np.sqrt(2)))


@needs_lib
@pytest.mark.parametrize("gelu", [False, True])
@pytest.mark.parametrize("with_bias", [True, False])
def test_gemm_matches_float64_at_every_block_edge(with_bias, gelu):
    """The blocked product: rows in register blocks of 12 with tails 1-11 and blocks of 120,
    inner dimension in blocks of 384 (a tail of 1 and a second block), columns in blocks of 384
    (416 = one block and one panel); bias added and GELU applied once, after the last block."""
    rng = np.random.default_rng(9)
    for rows in (1, 5, 11, 12, 13, 119, 120, 121, 250):
        for K, N in ((7, 32), (384, 64), (385, 416), (800, 96)):
            x = rng.standard_normal((rows, K), dtype=np.float32)
            w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
            bias = rng.standard_normal(N, dtype=np.float32) if with_bias else None
            expect = x.astype(np.float64) @ w + (0 if bias is None else bias)
            if gelu:
                expect = _gelu64(expect)
            native, plain = twin(lambda *a: float32.gemm(*a, gelu=gelu), x, float32.pack_panels(w), bias,
                                 np.full((rows, N), np.nan, np.float32))
            np.testing.assert_allclose(native, expect, rtol=1e-5, atol=1e-5, err_msg=f"{rows}x{K}x{N}")
            np.testing.assert_allclose(plain, expect, rtol=1e-5, atol=1e-5, err_msg=f"{rows}x{K}x{N}")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_aligned_arrays_start_on_a_cache_line(dtype):
    for shape in [(1,), (7, 3), (3, 48, 32), 5]:
        for _ in range(4):  # numpy's own allocations land at varying offsets
            a = float32.aligned_empty(shape, dtype)
            assert a.ctypes.data % float32.ALIGN == 0 and a.dtype == dtype and a.flags.c_contiguous
            assert a.shape == (shape if isinstance(shape, tuple) else (shape,))
            a[...] = 1
    assert float32.aligned_empty((0, 3), dtype).shape == (0, 3)
    if cpu.available():  # panels exist only with the compiled library
        assert float32.pack_panels(np.ones((5, 64), np.float32)).ctypes.data % float32.ALIGN == 0


def test_gemm_refuses_what_it_cannot_run():
    panels = np.ones((2, 8, 32), np.float32)
    with pytest.raises(ValueError, match="do not fit"):
        float32.gemm(np.ones((40, 9), np.float32), panels, None, np.empty((40, 64), np.float32))
    with pytest.raises(ValueError, match="do not fit"):
        float32.gemm(np.ones((40, 8), np.float32), panels, None, np.empty((40, 32), np.float32))


@needs_lib
@pytest.mark.parametrize("n", [1, 5, 8, 9, 33, 77, 256])
@pytest.mark.parametrize("heads,d", [(12, 32), (2, 16), (3, 64)])
def test_fused_attention_matches_the_five_steps(n, heads, d):
    """Every query-block tail (n not a multiple of 8), key tail (n not a multiple of 32) and head
    size the kernel takes; rows of qkv further apart than 3·H (a view into a wider buffer)."""
    rng = np.random.default_rng(n + d)
    H = heads * d
    wide = (rng.standard_normal((n, 3 * H + 7)) * 1.5).astype(np.float32)
    qkv = wide[:, :3 * H]
    q, k, v = qkv.astype(np.float64).reshape(n, 3, heads, d).transpose(1, 2, 0, 3)
    expect = scaled_dot_product_attention(q, k, v).transpose(1, 0, 2).reshape(n, H)
    native, plain = twin(lambda a, c: float32.attention_text(a, heads, 1 / np.sqrt(d), c),
                         qkv, np.full((n, H), np.nan, np.float32))
    np.testing.assert_allclose(native, expect, atol=1e-5)  # float32 rounding of sums over d and n
    np.testing.assert_allclose(plain, expect, atol=1e-5)


@needs_lib
def test_fused_attention_shifts_when_scores_are_large():
    """Scores far beyond exp's range need the running maximum (the Cauchy-Schwarz bound fails)."""
    rng = np.random.default_rng(3)
    qkv = (rng.standard_normal((40, 3 * 32)) * 30).astype(np.float32)
    q, k, v = qkv.astype(np.float64).reshape(40, 3, 1, 32).transpose(1, 2, 0, 3)
    expect = scaled_dot_product_attention(q, k, v).transpose(1, 0, 2).reshape(40, 32)
    out = float32.attention_text(qkv, 1, 1 / np.sqrt(32), np.zeros((40, 32), np.float32))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expect, atol=1e-4)
    with pytest.raises(ValueError, match="do not fit"):
        float32.attention_text(qkv, 5, 0.1, np.zeros((40, 32), np.float32))


@needs_lib
@pytest.mark.parametrize("heads,d", [(12, 32), (2, 16)])
def test_attention_texts_is_each_text_alone_bit_for_bit(heads, d):
    """One call for several texts of a packed batch (empty ones, tails of every kind, rows of qkv
    further apart than 3·H) gives each text exactly attention_text's bits for it alone; rows no
    span covers are left as they were; the NumPy twin agrees to float32 rounding."""
    rng = np.random.default_rng(d)
    H = heads * d
    lens = [24, 1, 0, 9, 33, 16]
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) + 2  # rows 0, 1 belong to no text
    rows = 2 + sum(lens)
    qkv = (rng.standard_normal((rows, 3 * H + 5)) * 1.5).astype(np.float32)[:, :3 * H]
    alone = np.full((rows, H), 7.0, np.float32)
    for s, n in zip(starts, lens):
        float32.attention_text(qkv[s:s + n], heads, 0.2, alone[s:s + n])
    spans = list(zip(starts, lens))
    native, plain = twin(lambda a, c: float32.attention_texts(a, spans, heads, 0.2, c), qkv,
                         np.full((rows, H), 7.0, np.float32))
    np.testing.assert_array_equal(native, alone)
    assert (native[:2] == 7.0).all()
    np.testing.assert_allclose(plain, alone, atol=1e-5)
    with pytest.raises(ValueError, match="within"):
        float32.attention_texts(qkv, [(rows - 3, 4)], heads, 0.2, native)


@needs_lib
@pytest.mark.parametrize("nq,nk,d,dv,spread", [(9, 1100, 32, 32, 1.0), (9, 1100, 32, 32, 12.0),
                                              (20, 513, 24, 16, 1.0), (1, 3, 64, 64, 30.0), (5, 0, 32, 32, 1.0)])
def test_fused_attention_over_key_chunks(nq, nk, d, dv, spread):
    """Cross-attention over more keys than one chunk (512): the online softmax carries max and
    sum across chunks, with the shift (spread 12, 30: scores beyond exp's range) or without it;
    heads taken as strided views; no keys gives zeros."""
    rng = np.random.default_rng(nk + d)
    q = (rng.standard_normal((nq, 3, d)) * spread).astype(np.float32).transpose(1, 0, 2)
    k = (rng.standard_normal((3, nk, d)) * spread).astype(np.float32)
    v = rng.standard_normal((3, nk, dv)).astype(np.float32)
    out = np.full((3, nq, dv + 5), np.nan, np.float32)[:, :, :dv]
    assert float32.fused_attention(q, k, v, 1 / np.sqrt(d), out)
    if nk == 0:
        assert (out == 0).all()
        return
    expect = scaled_dot_product_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64))
    np.testing.assert_allclose(out, expect, atol=2e-5)


def test_fused_attention_declines_what_it_cannot_run():
    q = np.ones((2, 4, 32), np.float32)
    assert not float32.fused_attention(q, q, np.ones((2, 4, 24), np.float32), 0.1, np.empty((2, 4, 24), np.float32))
    assert not float32.fused_attention(q.astype(np.float64), q, q, 0.1, np.empty((2, 4, 32), np.float32))
    assert not float32.fused_attention(q, q, q, 0.1, np.empty((2, 4, 64), np.float32)[:, :, ::2])


@needs_lib
def test_online_tiles_give_the_softmax_and_masked_entries_zero():
    """Feeding a row's scores tile by tile, with the running rescale, gives softmax weights·V."""
    rng = np.random.default_rng(3)
    s = (rng.standard_normal((5, 40)) * 10).astype(np.float32)
    s[0, :20] = -np.inf  # the first tile of row 0 is fully masked
    s[1, 7] = -np.inf
    v = rng.standard_normal((40, 3)).astype(np.float32)
    m = np.full(5, -np.inf, np.float32)
    l = np.zeros(5, np.float32)
    corr = np.empty(5, np.float32)
    acc = np.zeros((5, 3), np.float32)
    for ks in range(0, 40, 20):
        t = s[:, ks:ks + 20].copy()
        assert float32.online_softmax_tile(t, m, l, corr)
        acc = acc * corr[:, None] + t @ v[ks:ks + 20]
        if ks == 0:
            assert (t[0] == 0).all() and t[1, 7] == 0
    w = np.exp(s - s.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    np.testing.assert_allclose(acc / l[:, None], w @ v, rtol=1e-5, atol=1e-6)
    assert not float32.online_softmax_tile(s.astype(np.float64), m, l, corr)  # not float32: declined


@needs_lib
@pytest.mark.parametrize("size", [1.0, 30.0])  # small scores: exp without a shift; large: the online max
def test_chunked_attention_is_the_same_with_and_without_the_kernel(size):
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 3, 70, 16)).astype(np.float32) for _ in range(3))
    q *= size
    mask = rng.random((2, 1, 1, 70)) > 0.3
    plain = scaled_dot_product_attention(q, k, v, mask=mask, causal=True, return_weights=True)[0]
    native, numpy_path = twin(lambda *a: chunked_attention(*a, mask=mask, causal=True, chunk_size=16, q_chunk=32),
                              q, k, v)
    np.testing.assert_allclose(native, plain, atol=2e-5 * size)
    np.testing.assert_allclose(numpy_path, plain, atol=2e-5 * size)


@needs_lib
def test_encoder_is_the_same_with_and_without_the_kernels(encoder):
    texts = ["Stainless Steel Electric Kettle 1.7L", "kettle", "a long review of a kettle " * 12]
    b = encoder._pad(encoder.tokenize(texts))
    native, plain = twin(lambda ids, mask: encoder.forward(ids, mask), b.ids, b.mask)
    np.testing.assert_allclose(native[b.mask], plain[b.mask], atol=2e-5)
    assert b.ids.shape[1] >= 64  # the long text takes the per-text attention path


@needs_lib
def test_encoder_on_two_threads_is_the_same_float_for_float(encoder, monkeypatch):
    """Every product runs in float32.gemm with its bias (and, for the first feed-forward one, the
    GELU) fused; at two threads each product's rows are split between the threads and the texts'
    attention dealt out, which changes no sum: the hidden states are identical."""
    from qkv.model.encoder import Encoder

    texts = ["Stainless Steel Electric Kettle 1.7L"] * 3 + ["a long review of a kettle " * 12] * 4
    b = encoder._pad(encoder.tokenize(texts))
    monkeypatch.setattr(cpu, "BLAS_BATCHES", False)  # the compiled product, also where batches would go to BLAS
    calls = []
    real = float32.gemm
    monkeypatch.setattr(float32, "gemm", lambda x, *a, **k: calls.append((len(x), k.get("gelu"))) or real(x, *a, **k))
    layers = encoder.config.num_layers
    one = Encoder(encoder.config, encoder.weights, encoder.tokenizer, threads=1).forward(b.ids, b.mask)
    rows = int(b.mask.sum())  # padding rows are not computed
    assert len(calls) == 4 * layers and {n for n, _ in calls} == {rows}
    assert [g for _, g in calls].count(True) == layers
    calls.clear()
    two = Encoder(encoder.config, encoder.weights, encoder.tokenizer, threads=2).forward(b.ids, b.mask)
    assert rows >= 2 * 96 and len(calls) == 8 * layers  # each product in two parts
    assert sorted({n for n, _ in calls}) == sorted({-(-rows // 24) * 12, rows - -(-rows // 24) * 12})
    np.testing.assert_array_equal(one, two)


def test_rows_and_texts_are_shared_out_between_threads():
    from qkv.model.workers import deal as _deal
    from qkv.model.workers import row_cuts as _row_cuts

    assert _row_cuts(2048, 2) == [0, 1032, 2048]  # whole 12-row blocks
    assert _row_cuts(9, 2) == [0, 9] and _row_cuts(150, 2) == [0, 150]  # too few rows to split
    assert _row_cuts(2048, 3) == [0, 684, 1368, 2048] and _row_cuts(0, 2) == [0, 0]
    groups = _deal([256 ** 2, 40 ** 2, 250 ** 2, 30 ** 2, 60 ** 2], 2)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4] and len(groups) == 2
    assert {0, 2} not in [set(g) for g in groups]  # the two long texts go to different threads
    assert _deal([5], 4) == [[0]]


@pytest.mark.parametrize("fused", [True, False])
def test_chunked_attention_on_two_threads_is_the_same(fused, monkeypatch):
    """Spreading (batch, head) pairs over threads changes nothing, compiled steps or NumPy."""
    if not fused:
        monkeypatch.setattr(cpu, "lib", None)
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 3, 70, 16)).astype(np.float32) for _ in range(3))
    mask = rng.random((2, 1, 1, 70)) > 0.3
    one = chunked_attention(q, k, v, mask=mask, causal=True, chunk_size=16, q_chunk=32)
    two = chunked_attention(q, k, v, mask=mask, causal=True, chunk_size=16, q_chunk=32, threads=2)
    np.testing.assert_array_equal(one, two)


@needs_lib
@pytest.mark.parametrize("dv", [32, 24])  # 24: the fused kernel declines, the tiles run
@pytest.mark.parametrize("threads", [1, 2])
def test_unmasked_chunked_attention_runs_fused_or_declines_to_tiles(dv, threads, monkeypatch):
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 3, 40, 32)).astype(np.float32)
    k = rng.standard_normal((1, 3, 600, 32)).astype(np.float32)  # broadcast over the batch
    v = rng.standard_normal((1, 3, 600, dv)).astype(np.float32)
    calls = []
    fused = float32.fused_attention
    monkeypatch.setattr(float32, "fused_attention", lambda *a: calls.append(fused(*a)) or calls[-1])
    out = chunked_attention(q, k, v, threads=threads)
    plain = scaled_dot_product_attention(q, k, v, return_weights=True)[0]
    np.testing.assert_allclose(out, plain, atol=1e-5)
    assert len(calls) == 6 and all(calls) == (dv == 32)
