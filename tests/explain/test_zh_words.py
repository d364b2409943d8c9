"""Words of SentencePiece pieces: "▁" starts a word, Chinese runs are cut by the segmenter search uses
(qkv.text.zh), a piece is never split, and every token belongs to exactly one word."""

import numpy as np
import pytest

from qkv.explain.words import word_matrix
from qkv.model.tokenizer import Tokens, group_words


def _tokens(text, pieces):
    """Tokens from (piece, start, end) triples between <s> and </s>, as the tokenizer builds them."""
    toks = ["<s>"] + [p for p, _, _ in pieces] + ["</s>"]
    offs = [(0, 0)] + [(s, e) for _, s, e in pieces] + [(0, 0)]
    special = [True] + [False] * len(pieces) + [True]
    return Tokens(text, np.arange(len(toks)), tuple(toks), tuple(offs), tuple(special))


def _texts(t, segment=True):
    return [w.text for w in group_words(t, segment) if not w.special]


def test_chinese_run_is_cut_at_segmenter_boundaries_between_pieces():
    t = _tokens("透气跑鞋", [("▁", 0, 0), ("透", 0, 1), ("气", 1, 2), ("跑", 2, 3), ("鞋", 3, 4)])
    words = [w for w in group_words(t, True) if not w.special]
    assert [w.text for w in words] == ["透气", "跑鞋"]
    assert words[0].tokens == (1, 2, 3)  # the bare "▁" goes with the first word
    assert _texts(t, segment=False) == ["透气跑鞋"]  # without the segmenter: one run


def test_a_piece_across_a_segmenter_boundary_keeps_both_words_together():
    # jieba cuts 透气|跑鞋; a piece "气跑" spans the cut, so the words cannot be separated
    t = _tokens("透气跑鞋", [("▁透", 0, 1), ("气跑", 1, 3), ("鞋", 3, 4)])
    assert _texts(t) == ["透气跑鞋"]


def test_english_words_from_metaspace_starts():
    text = "Breathable Mesh Running Shoes"
    t = _tokens(text, [("▁Breath", 0, 6), ("able", 6, 10), ("▁Mes", 11, 14), ("h", 14, 15), ("▁Run", 16, 19),
                       ("ning", 19, 23), ("▁Sho", 24, 27), ("es", 27, 29)])
    assert _texts(t) == ["Breathable", "Mesh", "Running", "Shoes"]


def test_mixed_script_run():
    text = "Nike跑鞋，黑色"
    t = _tokens(text, [("▁Nike", 0, 4), ("跑", 4, 5), ("鞋", 5, 6), (",", 6, 7), ("黑色", 7, 9)])
    assert _texts(t) == ["Nike", "跑鞋", "，", "黑色"]


def test_metaspace_only_pieces_join_the_next_word():
    text = "运动鞋 跑步"
    t = _tokens(text, [("▁", 0, 0), ("运动", 0, 2), ("鞋", 2, 3), ("▁", 4, 4), ("跑步", 4, 6)])
    words = [w for w in group_words(t, True) if not w.special]
    assert [(w.text, w.tokens) for w in words] == [("运动鞋", (1, 2, 3)), ("跑步", (4, 5))]
    m = word_matrix(group_words(t, True), len(t))
    np.testing.assert_array_equal(m.sum(axis=0), 1)


def test_traditional_characters_are_segmented_after_folding():
    t = _tokens("運動鞋透氣", [("▁", 0, 0)] + [(c, i, i + 1) for i, c in enumerate("運動鞋透氣")])
    assert _texts(t) == ["運動鞋", "透氣"]  # words keep the characters as typed


@pytest.mark.parametrize("text,words", [
    ("透气跑鞋", ["透气", "跑鞋"]),
    ("运动鞋 跑步 轻便 透气", ["运动鞋", "跑步", "轻便", "透气"]),
    ("男士透气网面跑鞋轻便运动鞋", ["男士", "透气", "网面", "跑鞋", "轻便", "运动鞋"]),
    ("DEWALT 20V 无线电钻", ["DEWALT", "20V", "无线电", "钻"]),
    ("Breathable Mesh Running Shoes", ["Breathable", "Mesh", "Running", "Shoes"]),
    ("Nike跑鞋，黑色(42码)", ["Nike", "跑鞋", "，", "黑色", "(", "42", "码", ")"]),
])
def test_real_sentencepiece_tokens(e5, text, words):
    t = e5.tokenize([text])[0]
    ws = t.words(segment=True)
    assert [w.text for w in ws if not w.special] == words
    np.testing.assert_array_equal(word_matrix(ws, len(t)).sum(axis=0), 1)
    for w in ws:
        if not w.special:
            assert text[w.start:w.end] == w.text


def test_wordpiece_chinese_is_segmented_too(encoder):
    t = encoder.tokenize(["透气跑鞋 Running"])[0]
    assert [w.text for w in t.words(segment=True) if not w.special] == ["透气", "跑鞋", "Running"]
    assert [w.text for w in t.words() if not w.special] == ["透气跑鞋", "Running"]  # default unchanged
