"""Word level: pieces merged into words by the tokenizer's offsets; maps keep rows summing to 1."""

import numpy as np
import pytest

from qkv.explain.words import merge_attention, merge_scores, word_matrix


@pytest.mark.parametrize("text,words", [
    ("Breathable running shoes", ["Breathable", "running", "shoes"]),          # ## pieces
    ("Men's shoes, size 42 (EU)", ["Men's", "shoes", ",", "size", "42", "(", "EU", ")"]),  # punctuation
    ("运动鞋 跑步", ["运动鞋", "跑步"]),                                          # Chinese characters
    ("Gift 🎁 box 👟", ["Gift", "🎁", "box", "👟"]),                              # emoji
])
def test_words(encoder, text, words):
    seq = encoder.tokenize([text])[0]
    ws = seq.words()
    assert [w.text for w in ws if not w.special] == words
    assert ws[0].special and ws[-1].special
    # every token belongs to exactly one word
    m = word_matrix(ws, len(seq))
    np.testing.assert_array_equal(m.sum(axis=0), 1)
    for w in ws:
        if not w.special:
            assert seq.text[w.start:w.end] == w.text


def test_hash_pieces_merge(encoder):
    seq = encoder.tokenize(["Breathable"])[0]
    assert seq.tokens[1:-1] == ("breath", "##able")
    assert [w.tokens for w in seq.words()] == [(0,), (1, 2), (3,)]


def test_merge_attention_by_hand():
    from qkv.model.tokenizer import Word

    words = [Word("[CLS]", 0, 0, (0,), True), Word("ab", 0, 2, (1, 2)), Word("[SEP]", 0, 0, (3,), True)]
    a = np.array([[0.1, 0.2, 0.3, 0.4],
                  [0.5, 0.1, 0.1, 0.3],
                  [0.2, 0.2, 0.2, 0.4],
                  [0.25, 0.25, 0.25, 0.25]])
    m = merge_attention(a, words)
    # attention *to* "ab" = sum over its pieces; *from* "ab" = mean over its pieces
    np.testing.assert_allclose(m[0], [0.1, 0.5, 0.4])
    np.testing.assert_allclose(m[1], [(0.5 + 0.2) / 2, (0.2 + 0.4) / 2, (0.3 + 0.4) / 2])
    np.testing.assert_allclose(m.sum(axis=1), 1.0)
    np.testing.assert_allclose(merge_scores(np.array([1.0, 2.0, 3.0, 4.0]), words), [1, 5, 4])
    np.testing.assert_allclose(merge_scores(np.array([1.0, 2.0, 3.0, 4.0]), words, "mean"), [1, 2.5, 4])


def test_word_level_maps_of_a_real_title(nike_maps):
    hm = nike_maps.heatmap(5, 11, level="word")
    assert hm.rows == ("[CLS]", "Nike", "Air", "Max", "270", "Men's", "Running", "Shoes", "Breathable",
                       "Lightweight", "[SEP]")
    np.testing.assert_allclose(hm.values.sum(axis=1), 1.0, atol=1e-5)
