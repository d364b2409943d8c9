"""The tour's hand computation equals the engine's trace; defaults, languages, bad input."""

import json

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.explain import default_layer_head, tour

from .conftest import NIKE, ZH, score_bound


@pytest.mark.parametrize("layer,head", [(None, None), (0, 2), (3, 7)])
def test_tour_equals_engine_trace(encoder, layer, head):
    t = tour(encoder, NIKE, layer, head)
    assert t.ok
    assert [c.name.split(".", 2)[2] for c in t.checks] == ["attn.q", "attn.k", "attn.v", "attn.scores",
                                                             "attn.scaled_scores", "attn.weights", "attn.context",
                                                             "attn.out"]
    # independently of the tour's own checks: its per-head arrays are the engine's slices
    tr = encoder.trace([NIKE], keep=[f"layers.{t.layer}.attn.*", t.x_name])
    np.testing.assert_allclose(t.x, tr.get(t.x_name, 0))
    ref = {name: tr.get(f"layers.{t.layer}.attn.{name}", 0)[t.head] for name in
           ("q", "k", "v", "scores", "scaled_scores", "weights", "context")}
    for mine, name in ((t.q, "q"), (t.k, "k"), (t.v, "v"), (t.weights, "weights"), (t.context, "context")):
        np.testing.assert_allclose(mine, ref[name], rtol=1e-4, atol=1e-5)
    # scores are sums of 32 products: within qkv's rounding bound of the two passes' own q and k
    for mine, name, scale in ((t.scores, "scores", 1.0), (t.scaled, "scaled_scores", 1 / np.sqrt(t.q.shape[-1]))):
        assert np.all(np.abs(mine - ref[name]) <= score_bound(t.q, t.k, ref["q"], ref["k"], scale)), name
    np.testing.assert_allclose(t.attn_out, tr.get(f"layers.{t.layer}.attn.out", 0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(t.weights.sum(axis=1), 1.0, atol=1e-5)
    assert t.x_name == ("embeddings" if t.layer == 0 else f"layers.{t.layer - 1}.out")


def test_default_is_layer5_head11(encoder):
    assert default_layer_head(encoder) == (5, 11)
    t = tour(encoder, NIKE)
    assert (t.layer, t.head) == (5, 11)


def test_scaling_narrows_the_spread(encoder):
    sp = tour(encoder, NIKE).spread()
    np.testing.assert_allclose(sp["after"]["std"] * np.sqrt(32), sp["before"]["std"], rtol=1e-4)
    assert sp["top_weight_without_scaling"] > sp["top_weight_with_scaling"]


def test_steps_in_both_languages(encoder):
    t = tour(encoder, NIKE)
    en, zh = t.steps("en"), t.steps("zh")
    assert [s["id"] for s in en] == [s["id"] for s in zh] == ["tokens", "project", "scores", "scale", "softmax",
                                                               "heads", "check"]
    assert "mainly attends to" in en[4]["attends"][1]
    assert "主要关注" in zh[4]["attends"][1]
    assert len(en[4]["attends"]) == len(t.tokens)
    d = json.loads(json.dumps(t.to_dict("zh")))
    assert d["ok"] is True and "layers.5.attn.weights[11]" in d["arrays"]


def test_chinese_text_is_single_characters(encoder):
    t = tour(encoder, ZH, 0, 3)
    assert t.ok
    assert len(t.tokens) == 2 + sum(not c.isspace() for c in ZH)  # one token per character
    assert [w.text for w in t.words if not w.special] == ZH.split()
    assert t.n_cjk == 9
    from qkv.explain.tour_text import notes

    assert "lacks the script" in notes(t, "en")[0] and "缺少这段文字的字符" in notes(t, "zh")[0]


def test_bad_input(encoder):
    with pytest.raises(InputError, match="empty"):
        tour(encoder, "   ")
    with pytest.raises(InputError, match="layer 6 is out of range.*0..5"):
        tour(encoder, NIKE, layer=6)
    with pytest.raises(InputError, match="head 12 is out of range.*0..11"):
        tour(encoder, NIKE, head=12)
    with pytest.raises(InputError, match="limit of 512"):
        tour(encoder, "shoe " * 600)
    t = tour(encoder, "shoe " * 600, truncate=True)  # or cut, when asked
    assert len(t.tokens) == 512 and t.ok
