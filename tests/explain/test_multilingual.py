"""The tour and the explain views on multilingual-e5-small (4-bit weights, SentencePiece tokens)
work as on MiniLM: the hand computation equals the engine's trace, words are whole words."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.explain import tour

ZH = "运动鞋 跑步 轻便 透气"


@pytest.fixture(scope="module")
def e5():
    import qkv

    return qkv.load("multilingual-e5-small")


@pytest.mark.parametrize("layer,head", [(None, None), (0, 2), (11, 7)])
def test_tour_equals_engine_trace(e5, layer, head):
    t = tour(e5, ZH, layer, head)
    assert t.ok and len(t.checks) == 8
    tr = e5.trace([ZH], keep=[f"layers.{t.layer}.attn.*"])
    np.testing.assert_allclose(t.weights, tr.get(f"layers.{t.layer}.attn.weights", 0)[t.head], atol=1e-5)


def test_words_of_sentencepiece_tokens_are_whole_words(e5):
    """A bare "▁" word start joins the word after it; "▁word" spans hold no space."""
    t = e5.tokenize([ZH])[0]
    words = [w for w in t.words() if not w.special]
    assert [w.text for w in words] == ["运动鞋", "跑步", "轻便", "透气"]
    assert all(ZH[w.start:w.end] == w.text for w in words)
    t = e5.tokenize(["Nike Air Max 270, (black)"])[0]
    assert [w.text for w in t.words() if not w.special] == ["Nike", "Air", "Max", "270", ",", "(", "black", ")"]
    for tok, (s, e) in zip(t.tokens, t.offsets):
        assert not t.text[s:e].startswith(" "), tok


def test_explain_json_on_the_multilingual_model():
    res = CliRunner().invoke(app, ["explain", "-m", "multilingual-e5-small", ZH, "-q", "透气跑鞋", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["model"] == "intfloat/multilingual-e5-small" and out["num_layers"] == 12
    assert [w["text"] for w in out["words"] if not w["special"]] == ["运动鞋", "跑步", "轻便", "透气"]
    assert [w["word"] for w in out["occlusion"]["words"]] == ["运动鞋", "跑步", "轻便", "透气"]
