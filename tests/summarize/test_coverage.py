"""Chinese units chosen by word coverage per token (SumBasic, qkv.summarize.coverage)."""

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.summarize import Params, get_counter, prepare, select
from qkv.summarize.core import _coverage
from qkv.summarize.coverage import Coverage, applies, content_words, word_shares

from .conftest import SHOE_REVIEWS


def test_content_words_keep_nouns_verbs_adjectives_and_drop_closed_classes():
    words = content_words("我觉得这个屏幕很清楚，屏幕也大")
    assert "屏幕" in words and "清楚" in words
    assert "我" not in words and "这个" not in words  # pronouns
    assert words.count("屏幕") == 1  # distinct words: a unit that repeats a word covers it once
    assert content_words("hello world, 3,000") == []  # no Han word, nothing to count


def test_word_shares_count_each_review_once():
    p = word_shares(["物流很快，物流服务好", "物流太慢", "屏幕很大"])
    # 物流 is used by two reviews (the first uses it twice: still one vote)
    assert p["物流"] == pytest.approx(2 * p["屏幕"])
    assert sum(p.values()) == pytest.approx(1.0)
    assert word_shares(["", "  "]) == {}


def test_word_shares_sample_large_inputs_with_a_fixed_seed():
    # 40 reviews praise the screen, 10 complain of noise: a sample of 20 sees both, the same ones each time
    reviews = ["屏幕清楚"] * 40 + ["噪音大"] * 10
    a, b = word_shares(reviews, sample=20), word_shares(reviews, sample=20)
    assert a == b
    full = word_shares(reviews)
    assert full["屏幕"] == pytest.approx(4 * full["噪音"])
    # the sample's counts are whole reviews out of 20: 屏幕's share is k / (2·20) for some k
    k = a["屏幕"] * 2 * 20
    assert abs(k - round(k)) < 1e-9 and 0 < round(k) < 20


def test_take_squares_the_covered_words_and_leaves_the_shares_alone():
    shares = {"加热": 0.5, "噪音": 0.3, "外观": 0.2}
    cov = Coverage(shares, [["加热"], ["加热", "外观"], ["噪音"]])
    assert np.allclose(cov.values(), [0.5, 0.7, 0.3])
    cov.take(0)
    assert np.allclose(cov.values(), [0.25, 0.45, 0.3])  # 加热 is covered: 0.5² = 0.25
    assert shares["加热"] == 0.5  # the document's shares are reused by the next selection


def test_applies_only_when_most_units_are_chinese():
    assert applies(["加热很快。", "噪音很大。", "Great."])
    assert not applies(["Great shoes.", "Too small.", "加热很快。"])
    assert not applies([])


def test_what_many_reviews_say_is_chosen_over_a_lone_remark(hash_encoder):
    reviews = ["加热很快，外形漂亮。", "加热很快，安装方便。", "加热速度快，价格便宜。", "加热快，物流快。",
               "昨天下午快递员敲门的时候我正在睡午觉。"]
    doc = prepare(reviews, encoder=hash_encoder)
    counter = get_counter("cl100k")
    flat = np.ones(len(doc.cand))  # equal attention: coverage alone decides
    s = select(doc, 10, counter, Params(balance=False), scores=flat)
    assert "加热" in s.text, s.text
    off = select(doc, 10, counter, Params(balance=False, coverage="off"), scores=flat)
    assert off.text != s.text  # MMR on flat attention takes the first unit instead


def test_a_unit_without_content_words_is_not_chosen_while_others_fit(hash_encoder):
    reviews = ["一个，两个，这个。", "质量很好，做工精细。", "质量不错，做工好。"]
    doc = prepare(reviews, encoder=hash_encoder)
    cov = _coverage(doc, Params())
    empty = [doc.texts[c] for c, w in zip(doc.cand, cov.words) if not w]
    assert empty  # the test needs such a unit
    s = select(doc, 60, get_counter("cl100k"), Params(balance=False), scores=np.ones(len(doc.cand)))
    assert not any(x.text in empty for x in s.sentences), s.text


def test_second_pick_covers_something_else(hash_encoder):
    reviews = ["质量很好。", "质量很好！", "质量好。", "物流很快。", "物流快。"]
    doc = prepare(reviews, encoder=hash_encoder, params=Params(dedup=False))
    s = select(doc, 12, get_counter("cl100k"), Params(balance=False, dedup=False, duplicate=1.01),
               scores=np.ones(len(doc.cand)))
    assert "质量" in s.text and "物流" in s.text, s.text


def test_english_keeps_attention_and_mmr(hash_encoder):
    doc = prepare(SHOE_REVIEWS, encoder=hash_encoder)
    counter = get_counter("cl100k")
    assert _coverage(doc, Params()) is None
    assert select(doc, 40, counter, Params()).text == select(doc, 40, counter, Params(coverage="off")).text


def test_unknown_coverage_mode_is_refused(hash_encoder):
    doc = prepare(["加热很快，外形漂亮。"], encoder=hash_encoder)
    with pytest.raises(InputError, match="coverage"):
        select(doc, 40, get_counter("cl100k"), Params(coverage="maybe"))
