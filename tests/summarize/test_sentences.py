import re

from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.summarize.sentences import split_sentences


def texts(s):
    return [x.text for x in split_sentences(s)]


def test_english_boundaries_and_abbreviations():
    got = texts("I bought it e.g. for my wife. It costs approx. 5 dollars and is 3.5 inches wide. "
                "Dr. Smith recommended it on amazon.com last week. Works well!!! Would buy again.")
    assert got == ["I bought it e.g. for my wife.", "It costs approx. 5 dollars and is 3.5 inches wide.",
                   "Dr. Smith recommended it on amazon.com last week. Works well!!!", "Would buy again."]


def test_missing_space_after_period_and_lowercase_starts():
    got = texts("The bail is a ring instead of the usual one.I cannot say anything about the chain. "
                "the colour is fine though. it fits.")
    assert got[0] == "The bail is a ring instead of the usual one."
    assert got[1] == "I cannot say anything about the chain."
    assert got[2] == "the colour is fine though. it fits."  # "it fits." is short: merged


def test_initials_are_not_boundaries():
    assert texts("Made in the U.S. by J. Smith and sons. Great quality overall here.") == [
        "Made in the U.S. by J. Smith and sons.", "Great quality overall here."]


def test_emoji_stays_with_its_sentence():
    got = texts("Love the colour, it looks great 😍 The fit is perfect for me. Fast delivery too! 👍👍 "
                "Packaging was fine and neat.")
    assert got == ["Love the colour, it looks great 😍", "The fit is perfect for me.",
                   "Fast delivery too! 👍👍", "Packaging was fine and neat."]


def test_bullets_are_sentences_without_markers():
    got = texts("Pros:\n- fits well and looks great\n* cheap for the quality\n• battery lasts two days\n"
                "1. arrived on time, well packed")
    assert got == ["Pros: fits well and looks great", "cheap for the quality", "battery lasts two days",
                   "arrived on time, well packed"]


def test_short_fragments_are_merged():
    assert texts("Wow! This blender crushes ice in seconds. OK.") == ["Wow! This blender crushes ice in seconds. OK."]
    assert texts("Great.") == ["Great."]


def test_chinese_punctuation():
    got = texts("质量很好，物流也快。就是价格有点贵！客服态度不错；会回购的……好评")
    assert got == ["质量很好，物流也快。", "就是价格有点贵！", "客服态度不错；会回购的……好评"]
    # Full-width marks need no space after them; ASCII ones inside Chinese text work too.
    assert texts("屏幕很清晰?电池一般般.") != []
    assert texts("这个手机真的很好用！你们觉得呢？我觉得值得买。") == [
        "这个手机真的很好用！你们觉得呢？", "我觉得值得买。"]  # five characters: merged


def test_mixed_chinese_english():
    assert texts("The phone is great. 屏幕很清晰，电池也耐用。Battery lasts two days easily.") == [
        "The phone is great.", "屏幕很清晰，电池也耐用。", "Battery lasts two days easily."]


def test_spans_point_into_the_review():
    review = "First sentence here is fine. Second one follows it closely! 第三句是中文的句子。"
    for s in split_sentences(review):
        assert review[s.start:s.end] == s.text


def test_empty_and_blank():
    assert split_sentences("") == []
    assert split_sentences("   \n\n ") == []


_words = st.sampled_from(["good", "bad", "shoe", "fits", "Mr.", "e.g.", "3.5", "I", "very", "质量", "好",
                          "!", "?", "。", "！", "…", "😍", "\n", "ok", "The", "price"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_words, max_size=40).map(" ".join))
def test_no_words_are_lost(review):
    """Every word of the review appears in exactly one sentence, in order."""
    sents = split_sentences(review)
    norm = lambda s: re.findall(r"[^\W_]+", s)  # noqa: E731
    assert norm(" ".join(s.text for s in sents)) == norm(review)
    assert all(s.text.strip() == s.text and s.text for s in sents)
    assert all(a.end <= b.start for a, b in zip(sents, sents[1:]))
