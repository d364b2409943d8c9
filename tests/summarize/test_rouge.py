from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer, tokenizers

from qkv.summarize.rouge import UnicodeTokenizer, rouge

PAIRS = [
    ("The necklace is elegant and unique. It makes a great gift.",
     ["This necklace is attractive, unique, and looks nice for the price.",
      "An elegant sterling silver necklace; a great gift for any woman."]),
    ("Running shoes that are light, comfortable and true to size.",
     ["These shoes are comfortable and lightweight.", "Light running shoes that fit true to size."]),
]


def test_matches_rouge_score_on_english():
    ref = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    for pred, refs in PAIRS:
        ours = rouge(pred, refs)
        for t in ("rouge1", "rouge2", "rougeL"):
            expect = 100 * sum(ref.score(r, pred)[t].fmeasure for r in refs) / len(refs)
            assert abs(ours[t] - expect) < 1e-9
        assert ours == rouge(pred, refs, tokenizer="unicode")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=80))
def test_unicode_tokenizer_equals_default_on_ascii(text):
    assert UnicodeTokenizer().tokenize(text) == tokenizers.DefaultTokenizer(use_stemmer=True).tokenize(text)


def test_unicode_keeps_chinese_and_accents():
    zh_pred, zh_ref = "质量很好，物流很快。", "质量不错，物流快。"
    assert rouge(zh_pred, [zh_ref])["rouge1"] == 0  # rouge-score's tokenizer erases Chinese
    assert rouge(zh_pred, [zh_ref], tokenizer="unicode")["rouge1"] > 50
    assert UnicodeTokenizer().tokenize("Très confortable, café") == ["très", "confort", "café"]
    assert rouge("très bien", ["très bon"], tokenizer="unicode")["rouge1"] == 50
