"""Value zeroing and occlusion: definitions checked on small cases, and on a real pair."""

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.explain import occlusion, pair_occlusion, pair_value_zeroing, title_value_zeroing
from qkv.explain.attribution import value_zeroing_layer, without_word
from qkv.explain.layer import run_layer

from .conftest import NIKE


def test_value_zeroing_matches_its_definition(encoder, nike_maps):
    layer = 4
    x = nike_maps.inputs[layer].astype(np.float64)
    c = value_zeroing_layer(encoder, layer, x, max_batch_tokens=40)  # several chunks
    np.testing.assert_allclose(c.sum(1), 1.0, atol=1e-9)
    assert (c >= 0).all()
    # one column by hand: zero token 6's value vectors in every head, compare every output row
    n = x.shape[0]
    base = run_layer(encoder, layer, x[None])["out"][0].astype(np.float64)
    scale = np.ones((1, n), dtype=np.float32)
    scale[0, 6] = 0
    y = run_layer(encoder, layer, x[None], value_scale=scale)["out"][0].astype(np.float64)
    dist = 1 - (base * y).sum(1) / (np.linalg.norm(base, axis=1) * np.linalg.norm(y, axis=1))
    raw = np.stack([1 - (base * run_layer(encoder, layer, x[None], value_scale=np.where(
        np.arange(n) == j, 0, 1).astype(np.float32)[None])["out"][0]).sum(1)
        / (np.linalg.norm(base, axis=1) * np.linalg.norm(run_layer(encoder, layer, x[None], value_scale=np.where(
            np.arange(n) == j, 0, 1).astype(np.float32)[None])["out"][0], axis=1)) for j in range(n)], axis=1)
    np.testing.assert_allclose(raw[:, 6], dist, atol=1e-9)
    np.testing.assert_allclose(c, np.maximum(raw, 0) / np.maximum(raw, 0).sum(1, keepdims=True), atol=1e-9)


def test_occlusion_removes_each_word(encoder):
    ws = occlusion(encoder, NIKE)
    assert ws.words == ("Nike", "Air", "Max", "270", "Men's", "Running", "Shoes", "Breathable", "Lightweight")
    seq = encoder.tokenize([NIKE])[0]
    w = [x for x in seq.words() if not x.special][7]
    assert without_word(NIKE, w) == "Nike Air Max 270 Men's Running Shoes Lightweight"
    e = encoder.encode([NIKE, without_word(NIKE, w)])
    assert ws.scores[7] == pytest.approx(1 - float(e[0] @ e[1]), abs=1e-5)
    assert (ws.scores > 0).all()


def test_pair_attribution(encoder):
    q = "running shoes for men"
    p = pair_occlusion(encoder, q, NIKE)
    e = encoder.encode([q, NIKE])
    assert p.similarity == pytest.approx(float(e[0] @ e[1]), abs=1e-5)
    qs = dict(zip(p.query_words.words, p.query_words.scores))
    assert qs["shoes"] > 0.1 and qs["shoes"] > qs["for"]  # the product word carries the match, "for" does not
    v = pair_value_zeroing(encoder, q, NIKE)
    assert v.similarity == pytest.approx(p.similarity, abs=1e-5)
    vs = dict(zip(v.query_words.words, v.query_words.scores))
    assert vs["shoes"] > vs["for"]
    ts = dict(zip(v.title_words.words, v.title_words.scores))
    assert ts["Shoes"] > ts["Max"]
    with pytest.raises(InputError, match="query is empty"):
        pair_occlusion(encoder, "", NIKE)


def test_title_value_zeroing(encoder):
    ws = title_value_zeroing(encoder, NIKE)
    assert len(ws.words) == 9 and (ws.scores > 0).all() and (ws.scores < 1).all()
