"""The tour on multilingual-e5-small: real SentencePiece pieces (no unknown tokens), the tutorial's
question (how much does 运动鞋 attend to 跑步?) answered at word level from the real weights of every
head, the measured default head, and a script warning only when the tokenizer really lacks the script."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.explain import tour
from qkv.explain.tour import DEFAULTS, MEASURED_E5, default_layer_head
from qkv.explain.tour_text import notes
from qkv.explain.words import merge_attention

ZH = "运动鞋 跑步 轻便 透气"


@pytest.fixture(scope="module")
def zh_tour(e5):
    return tour(e5, ZH)


def test_real_pieces_and_the_measured_default_head(e5, zh_tour):
    t = zh_tour
    assert (t.layer, t.head) == MEASURED_E5 == default_layer_head(e5)
    assert ("multilingual-e5-small", 12, 12) in DEFAULTS
    assert t.n_unknown == 0 and e5.tokenizer.unk_id is not None
    assert e5.tokenizer.unk_id not in e5.tokenize([ZH])[0].ids
    assert "跑步" in t.tokens and "[UNK]" not in t.tokens and "<unk>" not in t.tokens
    assert [w.text for w in t.words if not w.special] == ["运动鞋", "跑步", "轻便", "透气"]
    assert t.ok


def test_the_question_is_answered_from_the_engine_trace(e5, zh_tour):
    t = zh_tour
    a = t.answer()
    assert (a["from"], a["to"]) == ("运动鞋", "跑步")
    tr = e5.trace([ZH], keep=[f"layers.{t.layer}.attn.weights"])
    w = tr.get(f"layers.{t.layer}.attn.weights", 0).astype(np.float64)  # [heads, n, n]
    words = tr.seqs[0].words(segment=True)
    i, j = [x.text for x in words].index("运动鞋"), [x.text for x in words].index("跑步")
    # by hand: the mean over 运动鞋's pieces (▁, 运动, 鞋) of the sum over 跑步's pieces (▁, 跑步)
    rows, cols = list(words[i].tokens), list(words[j].tokens)
    by_hand = w[:, rows][:, :, cols].sum(-1).mean(-1)
    np.testing.assert_allclose(a["per_head"], by_hand, atol=1e-6)
    np.testing.assert_allclose(t.word_weights, merge_attention(w, words), atol=1e-6)
    np.testing.assert_allclose(t.word_weights.sum(-1), 1, atol=1e-5)
    assert a["weight"] == pytest.approx(by_hand[t.head], abs=1e-6)
    assert a["top_head"] == int(np.argmax(by_hand))
    assert 1 <= a["rank"] <= a["of"] == 4


def test_asking_other_words_and_a_word_that_is_not_there(e5):
    t = tour(e5, ZH, 3, 2, ask=("透气", "轻便"))
    assert t.answer()["from"] == "透气" and t.answer()["to"] == "轻便"
    from qkv.errors import InputError

    with pytest.raises(InputError, match="not a word of the text; its words are: 运动鞋, 跑步"):
        tour(e5, ZH, ask=("运动", "跑步"))


def test_no_script_warning_when_the_model_has_the_script(zh_tour):
    assert not zh_tour.lacks_script and notes(zh_tour, "zh") == [] and notes(zh_tour, "en") == []


def test_script_warning_when_the_model_lacks_it(encoder):
    t = tour(encoder, ZH)  # MiniLM: nearly every Chinese character is [UNK]
    assert t.lacks_script and t.unknown_rate >= 0.2
    (note,) = notes(t, "en")
    assert "lacks the script" in note and f"{t.n_unknown} of its {t.n_content}" in note and "运动鞋" in note
    assert "缺少" in notes(t, "zh")[0]


def test_a_few_unknown_characters_get_a_note_not_the_script_warning(e5):
    t = tour(e5, "运动鞋 𓀀 跑步 轻便 透气")  # one hieroglyph e5's vocabulary lacks (its id is <unk>)
    assert t.n_unknown == 1 and t.unknown_chars == "𓀀" and not t.lacks_script
    (note,) = notes(t, "en")
    assert "lacks" not in note and "𓀀" in note
    assert any(lab.startswith("𓀀→") for lab in t.labels)


def test_cli_tour_in_chinese_on_e5():
    res = CliRunner().invoke(app, ["tour", ZH, "--lang", "zh", "--model", "multilingual-e5-small"],
                             env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    assert "问题：运动鞋 对 跑步 的关注有多少？" in res.output and "⚠" not in res.output
    assert "词级" in res.output
    res = CliRunner().invoke(app, ["tour", ZH, "--model", "multilingual-e5-small", "--json"])
    out = json.loads(res.output)
    assert out["question"]["from"] == "运动鞋" and len(out["question"]["per_head"]) == 12
    assert out["unknown"] == {"tokens": 0, "rate": 0.0, "chars": "", "lacks_script": False}
    assert [w["text"] for w in out["words"] if not w["special"]] == ["运动鞋", "跑步", "轻便", "透气"]


def test_selling_points_leave_bare_metaspace_pieces_out(e5):
    """A bare "▁" holds no character of the title; its rollout share is left out like [SEP]'s."""
    from qkv.explain import attention_maps, selling_points
    from qkv.explain.salience import token_salience

    title = "Stridewell 男士透气网面跑鞋 轻便运动鞋 藏青色 US 9"
    m = attention_maps(e5, title)
    sp = selling_points(m, method="rollout")
    s = token_salience(m.rollout()[-1])
    marker = [i for i, ((a, b), x) in enumerate(zip(m.seq.offsets, m.seq.special)) if not x and b <= a]
    assert len(marker) == 3 and all(m.tokens[i] == "▁" for i in marker)
    words = [w for w in m.words if not w.special]
    by_hand = np.array([sum(s[t] for t in w.tokens if t not in marker) for w in words])
    np.testing.assert_allclose(sp.salience, by_hand / by_hand.sum(), atol=1e-6)
    assert sp.special_share == pytest.approx(1 - by_hand.sum(), abs=1e-6)
    assert sp.ranked()[0][0] == "Stridewell"  # as occlusion and value zeroing rank it


@pytest.mark.parametrize("unit", ["vnni", "avx2"])
def test_the_tour_rounds_x_as_the_int8_products_do(e5, unit):
    """Without AMX tiles e5's 4-bit products read x in int8 blocks (the default there); the tour's
    hand computation reads the same x̂ (``Q4Panels.seen``), so its checks still hold to 1e-4, while
    X·W unrounded would be further from the trace than the whole tolerance."""
    from qkv.attention import project
    from qkv.kernels import cpu

    if unit not in cpu.q4_offered():
        pytest.skip(f"this CPU (up to QKV_ISA) offers {cpu.q4_offered()}")
    before = cpu.ISA
    try:
        cpu.select(before, q4=unit)
        t = tour(e5, ZH)
        assert t.ok, [(c.name, c.max_abs_diff) for c in t.checks if not c.ok]
        plain = project(t.x, t.wq, t.bq)
        assert np.abs(plain - t.q).max() > 1e-4 * max(1.0, np.abs(t.q).max())
        assert t.x_rounded and "round X to int8" in t.steps("en")[1]["text"]  # and the page says so
        cpu.select(before, q4="float32")
        assert not tour(e5, ZH).x_rounded
    finally:
        cpu.select(before)
