"""qkv.text.zh: folding, segmentation and the keyword terms of Han text."""

import pytest

from qkv.text import zh


def test_fold_turns_traditional_into_simplified_and_leaves_the_rest():
    assert zh.fold("運動鞋") == "运动鞋"
    assert zh.fold("馬桶蓋 浴室櫃") == "马桶盖 浴室柜"
    assert zh.fold("頭髮乾燥") == "头发干燥"  # phrase-aware: 髮 → 发, 乾 → 干
    assert zh.fold("运动鞋 保温杯") == "运动鞋 保温杯"
    assert zh.fold("DEWALT 20V 1/2 in.") == "DEWALT 20V 1/2 in."


def test_has_han_is_about_han_characters_only():
    assert zh.has_han("DEWALT 无线电钻")
    assert not zh.has_han("cordless drill 20V")
    assert not zh.has_han("カタカナ 한국어")  # kana and Hangul are not Han


def test_segment_finds_words_and_keeps_latin_as_typed():
    words = zh.segment("DEWALT 20V 保温杯 不锈钢")
    assert "保温杯" in words and "不锈钢" in words
    assert "DEWALT" in words and "20V" in words
    assert " " not in words


def test_spans_point_into_the_text():
    text = "不锈钢保温杯 500ml"
    sp = zh.spans(text)
    assert sp and all(text[s:e] == w for w, s, e in sp)
    assert "".join(w for w, _, _ in sp) == text.replace(" ", "")


def test_bigrams_overlap_and_a_single_character_is_its_own_term():
    assert zh.bigrams("保温杯") == ["保温", "温杯"]
    assert zh.bigrams("杯") == ["杯"]
    assert zh.bigrams("") == []


def test_default_terms_keep_thermos_and_moisturiser_apart():
    # the example: characters alone made 保温杯 (thermos) meet 保湿面霜 (moisturising cream) on 保
    assert set(zh.han_terms("保温杯", "chars")) & set(zh.han_terms("保湿面霜", "chars")) == {"保"}
    assert not set(zh.han_terms("保温杯")) & set(zh.han_terms("保湿面霜"))


def test_default_terms_hold_the_word_its_parts_and_the_bigrams():
    terms = zh.han_terms("不锈钢保温杯")
    assert {"不锈钢", "保温杯", "保温"} <= set(terms)  # search-mode words
    assert "钢保" in terms  # the bigram across the word boundary, for a differently segmented query
    assert len(terms) == len(set(terms))


@pytest.mark.parametrize("scheme", zh.SCHEMES)
def test_every_scheme_gives_a_query_term_found_among_the_title_terms(scheme):
    title = set(zh.han_terms("男士运动鞋透气", scheme))
    query = zh.han_terms("运动鞋", scheme, query=True)
    assert query and set(query) & title


def test_unknown_scheme_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="bigrams"):
        zh.han_terms("保温杯", "trigrams")


def test_keyword_text_folds_and_spaces_han_runs():
    out = zh.keyword_text("DEWALT 運動鞋")
    assert out.split()[0] == "DEWALT"
    assert "运动鞋" in out.split() and "運動鞋" not in out
