"""Clause units for Chinese, sentences for English, and the text they are joined into."""

from qkv.summarize import baselines as B
from qkv.summarize.core import _joiner
from qkv.summarize.tokens import get_counter
from qkv.summarize.units import close, compose, split_units, strip_connective


def test_chinese_sentences_are_cut_into_clauses_with_their_spans():
    text = "屏幕很清楚，电池不耐用，客服态度也很差。物流也非常快！"
    units = split_units(text)
    assert [u.text for u in units] == ["屏幕很清楚，", "电池不耐用，", "客服态度也很差。", "物流也非常快！"]
    for u in units:
        assert text[u.start:u.end].strip() == u.text
    # whole sentences when asked
    assert [u.text for u in split_units(text, "sentence")] == ["屏幕很清楚，电池不耐用，客服态度也很差。", "物流也非常快！"]


def test_short_clauses_merge_and_ascii_commas_only_between_han():
    units = [u.text for u in split_units("好，很好，屏幕非常清楚,电池很耐用。")]
    assert units == ["好，很好，屏幕非常清楚,", "电池很耐用。"]  # "好，很好，" alone is too light
    assert [u.text for u in split_units("价格3,000元的电视很清楚。")] == ["价格3,000元的电视很清楚。"]


def test_english_stays_at_sentence_level():
    text = "The lid sticks, and the handle gets hot. It boils very fast."
    assert [u.text for u in split_units(text)] == ["The lid sticks, and the handle gets hot.", "It boils very fast."]
    assert [u.text for u in split_units(text, "clause")] == [u.text for u in split_units(text)]


def test_compose_closes_clauses_and_drops_dangling_connectives():
    assert strip_connective("但是电池不耐用，") == "电池不耐用，"
    assert strip_connective("但是") == "但是"  # nothing would be left
    assert close("电池不耐用，") == "电池不耐用。" and close("很好") == "很好。" and close("Fine") == "Fine"
    # clause 1 of review 0 alone; clauses 1-2 of review 3 consecutive: the pair keeps its connective
    out = compose([("但是电池不耐用，", 0, 1), ("屏幕很清楚，", 3, 1), ("但是声音太小，", 3, 2)])
    assert out == ["电池不耐用。", "屏幕很清楚，", "但是声音太小。"]
    assert _joiner(out) == "电池不耐用。屏幕很清楚，但是声音太小。"


def test_fast_oracle_fits_the_budget_and_prefers_the_reference_words():
    units = ["电池不耐用", "今天天气晴朗", "屏幕清楚", "快递员很辛苦"]
    counter = get_counter("cl100k")
    chosen = B.oracle(units, ["屏幕清楚但电池不耐用"], 12, counter, _joiner, "unicode")
    assert set(chosen) <= {0, 2} and chosen
    assert counter.count(_joiner([units[i] for i in chosen])) <= 12


def test_dependent_clauses_stay_with_their_main_clause_and_enumerators_go():
    text = "如果你是学生或正在学习英语，请把它当一本工具书，印刷也很精美，纸张很好。"
    assert [u.text for u in split_units(text)] == ["如果你是学生或正在学习英语，请把它当一本工具书，", "印刷也很精美，",
                                                   "纸张很好。"]
    assert [u.text for u in split_units("再看视频的话，大黑边有点尴尬。")] == ["再看视频的话，大黑边有点尴尬。"]
    assert len(split_units("但如果你是学生或正在学习英语，请您把它当一本工具书。")) == 1
    assert compose([("1、待机时间太短，", 0, 0), ("2.屏幕不清楚。", 1, 3)]) == ["待机时间太短。", "屏幕不清楚。"]
