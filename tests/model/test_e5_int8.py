"""multilingual-e5-small on the 4-bit products without tiles (x in int8 blocks, integer dot products:
qkv/kernels/q4/int8.c, "vnni" and "avx2") against the float64 forward over the dequantized weights:
the issue's quality bar, sentence embeddings at cosine ≥ 0.9995, on product titles (each a batch
and, alone, a lone query through the one-call layer stack) and on 256-token texts. The per-product
bound is tested in tests/kernels/test_q4.py; this is what it costs the model."""

import numpy as np
import pytest

from qkv.kernels import cpu, q4
from qkv.model.pooling import normalize, pool
from qkv.model.weights.e5s1 import E5S1

INT_UNITS = [pytest.param(u, marks=pytest.mark.skipif(u not in cpu.q4_offered(), reason=f"this CPU (up to QKV_ISA) "
                                                      f"offers {cpu.q4_offered()}")) for u in ("vnni", "avx2")]
TITLES = ["Nike Air Max 270 Men's Running Shoes Breathable Lightweight", "运动鞋 跑步 轻便 透气",
          "stainless steel water bottle insulated 750ml", "小米 Redmi Note 13 Pro 5G 手机 8GB+256GB",
          "query: 透气跑鞋", "passage: Breathable lightweight running shoes", "무선 블루투스 이어폰 노이즈 캔슬링",
          "Zapatillas de running transpirables para hombre", "⭐⭐⭐⭐⭐ 五星好评 🔥", "a", "",
          "LEGO 乐高 city 城市系列 60337", "100% COTTON, 2-PACK; size: XL/XXL (US 10-12)"]
COSINE = 0.9995


def _long_ids(e5) -> tuple[np.ndarray, np.ndarray]:
    """Three texts of exactly 256 tokens with the special ones, as ids [3, 256] and their mask."""
    rng = np.random.default_rng(5)
    words = ("comfortable light breathable sole size fits true runs small great value would recommend delivery "
             "fast quality stitching came apart after two weeks 这双鞋非常舒服 跑步 透气性也很好 Laufschuhe bequem").split()
    toks = e5.tokenize([" ".join(rng.choice(words, 300)) for _ in range(3)])
    ids = np.asarray([list(t.ids[:255]) + list(t.ids[-1:]) for t in toks])  # the first 254 words' tokens, then [SEP]
    assert ids.shape == (3, 256) and all(len(t.ids) > 256 for t in toks)
    return ids, np.ones(ids.shape, bool)


@pytest.fixture
def unit_restored():
    before = cpu.ISA
    yield
    cpu.select(before)


def _reference_vectors(e5, f, e5_reference, ids, mask):
    ref, _ = e5_reference(f, ids, mask)
    return normalize(pool(ref, mask, e5.config.pooling).astype(np.float64))


@pytest.mark.parametrize("unit", INT_UNITS)
def test_e5_embeddings_on_int8_blocks_stay_within_cosine_of_the_float64_model(e5, e5_path, e5_reference, unit,
                                                                             unit_restored, monkeypatch):
    from qkv.model import encoder as encoder_module

    calls = []
    real = encoder_module.fused_stack
    monkeypatch.setattr(encoder_module, "fused_stack", lambda *a: calls.append(real(*a)) or calls[-1])
    cpu.select(None, q4=unit)
    assert q4.unit() == unit and unit in cpu.STATUS
    f = E5S1(e5_path)
    worst = 1.0
    b = e5._pad(e5.tokenize(TITLES))
    for ids, mask in ((b.ids, b.mask), _long_ids(e5)):
        ours = normalize(pool(e5.forward(ids, mask), mask, e5.config.pooling).astype(np.float64))
        cos = (ours * _reference_vectors(e5, f, e5_reference, ids, mask)).sum(1)
        worst = min(worst, cos.min())
        assert cos.min() >= COSINE, f"worst cosine {cos.min():.6f} (row {int(cos.argmin())}, {ids.shape[1]} tokens)"
    calls.clear()
    for text in TITLES[:5]:  # a lone query: the one-call stack (q4/layer.c) on the same unit
        t = e5.tokenize([text])[0]
        ids, mask = np.asarray([t.ids]), np.ones((1, len(t.ids)), bool)
        ours = normalize(pool(e5.forward(ids, mask), mask, e5.config.pooling).astype(np.float64))
        cos = float((ours * _reference_vectors(e5, f, e5_reference, ids, mask)).sum())
        assert cos >= COSINE, (text, cos)
    assert len(calls) == 5 and all(c is not None for c in calls)  # each ran as one compiled call
    print(f"{unit}: worst cosine {worst:.6f}")
    assert worst < 1 - 1e-7  # the products really were quantised (a float32 path would be ~1 − 1e-12)


@pytest.mark.parametrize("unit", INT_UNITS)
def test_a_text_gets_the_same_bits_alone_in_any_batch_and_threads(e5, unit, unit_restored):
    """x quantised per block is a step function of x, so last-bit differences between ways through
    would show as whole quanta. Every way a text goes untraced (alone: the one-call layer stack; in a
    padded or packed batch beside texts of other lengths; in batches of another size; on two
    threads) runs attention per text in one kernel and every other step row by row: the same bits."""
    cpu.select(None, q4=unit)
    assert e5.weights.layers[0].w_qkv.quantises
    texts = TITLES[:4] + ["query: " + TITLES[0], "a " * 40 + "b"]  # 5 to ~45 tokens: padded and packed batches
    alone = np.stack([e5.encode([t])[0] for t in texts])
    together = e5.encode(texts)
    in_twos = e5.encode(texts, batch_size=2)
    tv = e5.token_vectors(texts)
    threads = e5.threads
    try:
        e5.threads = 2
        two = e5.encode(texts)
    finally:
        e5.threads = threads
    for got in (together, in_twos, two):
        np.testing.assert_array_equal(got, alone)
    for (_, T), t in zip(tv, texts):
        np.testing.assert_array_equal(normalize(T.mean(0, keepdims=True)), normalize(
            e5.token_vectors([t])[0][1].mean(0, keepdims=True)))


def test_seen_is_x_as_the_product_reads_it(e5, unit_restored):
    """``Q4Panels.seen``: x̂·W (float64, the dequantized W) is the product to float32 rounding on an
    int8 unit, and x itself on an exact one."""
    rng = np.random.default_rng(3)
    w = e5.weights.layers[2].w_in
    x = rng.standard_normal((7, w.shape[0])).astype(np.float32)
    W = w.dense().astype(np.float64)
    for unit in [u for u in ("vnni", "avx2") if u in cpu.q4_offered()]:
        cpu.select(None, q4=unit)
        y = w(x, np.empty((7, w.shape[1]), np.float32))
        xs = w.seen(x.astype(np.float64))
        err = np.abs(y - xs @ W)
        assert np.all(err <= (w.shape[0] // 32 + 3) * 2.0 ** -24 * (np.abs(xs) @ np.abs(W)))  # float32 rounding
        assert np.abs(y - x.astype(np.float64) @ W).max() > 10 * err.max()  # x itself is not what it reads
    cpu.select(None, q4="float32")
    assert not w.quantises and w.seen(x) is x
