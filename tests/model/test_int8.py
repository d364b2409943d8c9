"""precision="int8" on all-MiniLM-L6-v2 (float32 weights): embeddings near float32 ones on titles
and on review-length texts, a lone query as in a batch, a real product within the stated bound,
the same vectors on every int8 unit, packing on first use only, and a clear error for a wrong
precision. Quality figures: docs/engine.md, "int8 for float32 models"."""

import csv

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.kernels import cpu, int8
from qkv.model.linear import PRECISIONS, Int8Panels, PackedWeights, effective_precision

COSINE = 0.995  # issue 25's floor, worst case (ONNX Runtime's dynamic int8: 0.885 per tensor, 0.988 per channel)
# what blocks of 64 with a zero point and per-block weight scales hold (measured 0.99940-0.99944
# worst / 0.99967-0.99968 mean on the sample titles, 0.99952-0.99956 worst on the reviews below, on
# every unit and attention route here; blocks of 32 held 0.99960 and 0.99955, the symmetric blocks
# of 64 with one weight scale a column 0.9981 and 0.9989)
TITLES_WORST, TITLES_MEAN, REVIEWS_WORST = 0.9993, 0.9996, 0.9993


def _titles(sample_catalog) -> list[str]:
    with open(sample_catalog, encoding="utf-8") as f:
        return [r["title"] for r in csv.DictReader(f)]


_OPENERS = ["I bought this for my daughter and", "After three weeks of daily use", "Honestly,", "To be fair,",
            "My husband says", "Compared with the one I had before,", "Out of the box", "Customer service told me"]
_PARTS = ["the battery lasts far longer than the listing promised", "the stitching came loose on the left strap",
          "it heats up evenly and cleans in seconds", "the colour is darker than in the photos",
          "setup took five minutes with the app", "the lid does not seal, so coffee spills in the bag",
          "the fabric breathes well on long runs in summer", "it was delivered two days late in a torn box",
          "the sound is clear but the bass is thin at high volume", "the size chart runs small, order one up",
          "the handle feels cheap yet has survived two drops", "it replaced three gadgets on my counter",
          "the instructions were only in German and French", "the charger gets hot after an hour",
          "the zipper snagged on the first trip", "my kids love the bright colours and it is easy to wash"]


def _reviews(n: int, words: int, seed: int = 0) -> list[str]:
    """Invented reviews of about ``words`` words (around 256 tokens for MiniLM at 190 words)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        s = []
        while sum(len(t.split()) for t in s) < words:
            s.append(f"{_OPENERS[rng.integers(len(_OPENERS))]} {_PARTS[rng.integers(len(_PARTS))]}.")
        out.append(" ".join(s))
    return out


def _cosines(a, b):
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_int8_is_a_precision_and_a_wrong_one_names_the_choices(encoder):
    assert "int8" in PRECISIONS and effective_precision("int8", encoder) == "int8"
    with pytest.raises(InputError, match="float32, float16, bfloat16, int8.*'int4'"):
        encoder.encode(["red shoes"], precision="int4")


def test_titles_stay_near_float32(encoder, sample_catalog):
    titles = _titles(sample_catalog)
    c = _cosines(encoder.encode(titles), encoder.encode(titles, precision="int8"))
    assert c.min() >= TITLES_WORST and c.mean() >= TITLES_MEAN, (c.min(), c.mean())


def test_review_length_texts_stay_near_float32(encoder):
    texts = _reviews(12, 190)
    lens = [len(t.ids) for t in encoder.tokenize(texts)]
    assert min(lens) >= 200 and max(lens) <= encoder.config.window_tokens  # one window each, near 256 tokens
    c = _cosines(encoder.encode(texts, batch_size=4), encoder.encode(texts, batch_size=4, precision="int8"))
    assert c.min() >= REVIEWS_WORST, c


def test_a_lone_query_is_embedded_as_in_a_batch(encoder, sample_catalog):
    """x is quantised per row and block: a text's numbers never depend on the texts beside it."""
    q = "waterproof hiking boots for women"
    batch = [q, *_titles(sample_catalog)[:20]]
    alone = encoder.encode([q], precision="int8")
    together = encoder.encode(batch, precision="int8")[:1]
    assert np.allclose(alone, together, atol=1e-6)
    assert _cosines(alone, encoder.encode([q]))[0] >= COSINE


def test_a_real_product_holds_the_stated_bound(encoder, sample_catalog):
    """The feed-forward's first product of layer 1 on real hidden states (BERT's outlier features
    included), against float64, within ``int8.error_bound``."""
    tr = encoder.trace(_titles(sample_catalog)[:8], keep=["layers.1.attn.norm"])
    x = np.ascontiguousarray(tr["layers.1.attn.norm"][tr.attention_mask], np.float32)
    p = encoder.weights.layers[1]
    lin = Int8Panels(p.w_in)
    y = lin(x, np.empty((len(x), p.w_in.shape[1]), np.float32), bias=p.b_in)
    err = np.abs(y - (x.astype(np.float64) @ p.w_in + p.b_in))
    bound = int8.error_bound(x, p.w_in, p.b_in)
    assert np.all(err <= bound) and err.max() > 0.01 * bound.max()


def _units() -> list[str]:
    bits = int(cpu.lib.qkv_q4_int_cpu()) if cpu.lib is not None else 0
    return [u for u, bit in (("vnni", 1), ("avx2", 2)) if bits & bit] + ["numpy"]


def test_every_int8_unit_gives_the_same_vectors(encoder, monkeypatch):
    monkeypatch.delenv("QKV_INT8", raising=False)
    texts = ["stainless steel water bottle 1 l", "kids' rain jacket with hood, yellow, age 6"]
    before, got = cpu.ISA, {}
    try:
        for u in _units():
            cpu.select(before, i8=u)
            got[u] = encoder.encode(texts, precision="int8")
    finally:
        cpu.select(before)
    first = next(iter(got.values()))
    assert all(np.array_equal(first, v) for v in got.values()), {u: float(np.abs(v - first).max()) for u, v in got.items()}


def test_the_int8_pack_is_made_on_first_use_only():
    import qkv

    enc = qkv.load()
    enc.encode(["a first title"])
    assert not any(isinstance(lin, Int8Panels) for lin in enc._packed.made())
    enc.encode(["a first title"], precision="int8")
    made = [lin for lin in enc._packed.made() if isinstance(lin, Int8Panels)]
    assert len(made) == 4 * enc.config.num_layers
    # int8 weights are a quarter of float32's bytes, plus a float32 scale and block sum per column
    # and block of 64 (8 bytes per 64 weights): 0.28125 of float32
    f32 = sum(p.w_qkv.nbytes + p.w_o.nbytes + p.w_in.nbytes + p.w_out.nbytes for p in enc.weights.layers)
    assert sum(lin.packed.nbytes for lin in made) <= 0.2813 * f32
    assert isinstance(PackedWeights().linear(enc.weights.layers[0].w_o, "int8"), Int8Panels)
