"""Chinese reviews with the multilingual encoder: sentence splitting on Chinese punctuation, the hard
budget in cl100k and o200k, identical sentences encoded once, and centring of anisotropic vectors.
The reviews are written here (nothing from ../shared)."""

import numpy as np
import pytest

from qkv.summarize import Params, get_counter, prepare, select, summarize
from qkv.summarize.core import CENTRE_MIN, _centre
from qkv.summarize.sentences import split_sentences

# Hotel and kettle reviews written for these tests: a few points said many ways, some repeated word
# for word (as short reviews are), positive (1) and negative (0).
POS = ["房间很干净，床也很舒服。", "服务员态度很好，很热情！", "位置很方便，离地铁站很近。", "早餐种类丰富，味道不错。",
       "性价比很高，下次还会再来。", "前台办理入住很快，服务周到。", "房间很大，窗外风景很好。", "不错，值得推荐！"]
NEG = ["隔音太差了，晚上很吵。", "卫生间有异味，毛巾也不干净。", "空调坏了，找了两次都没人来修。",
       "早餐太简单了，没什么可吃的。", "价格偏贵，设施比较旧。"]


def _corpus(n: int, seed: int = 0) -> tuple[list[str], list[int]]:
    rnd = np.random.default_rng(seed)
    reviews, labels = [], []
    for _ in range(n):
        good = rnd.random() < 0.6
        pool = POS if good else NEG
        k = int(rnd.integers(1, 4))
        reviews.append("".join(rnd.choice(pool, size=k, replace=False)))
        labels.append(1 if good else 0)
    return reviews, labels


@pytest.fixture(scope="module")
def e5():
    import qkv

    return qkv.load("multilingual-e5-small")


def texts(s):
    return [x.text for x in split_sentences(s)]


def test_full_width_and_ascii_marks_between_chinese():
    assert texts("第一句话比较长的．第二句话很长的｡第三句话也很长！") == ["第一句话比较长的．", "第二句话很长的｡", "第三句话也很长！"]
    assert texts("物流很快很快⋯包装也很好很好") == ["物流很快很快⋯", "包装也很好很好"]
    # an ASCII mark written between Chinese characters ends a sentence, with or without a space
    assert texts("质量很好，物流很快.下次还会来这家店买东西!客服态度非常好") == [
        "质量很好，物流很快.", "下次还会来这家店买东西!", "客服态度非常好"]
    assert texts("下次还会去住. 服务人员态度很好") == ["下次还会去住.", "服务人员态度很好"]
    # but not a decimal point, nor a period inside English
    assert texts("屏幕是5.5英寸的，分辨率很高。") == ["屏幕是5.5英寸的，分辨率很高。"]


def test_quotes_stay_whole():
    # a mark inside a quotation is not a boundary; a closing quote stays with its sentence
    got = texts("他说：“好。不错”然后就买了很多次了。第二句话在这里比较长。")
    assert got == ["他说：“好。不错”然后就买了很多次了。", "第二句话在这里比较长。"]
    got = texts("店家说：“七天无理由退货！”结果根本不给退。太让人失望了，再也不来了。")
    assert got[0].endswith("！”") and not any(s.startswith("”") for s in got)
    assert "".join(got) == "店家说：“七天无理由退货！”结果根本不给退。太让人失望了，再也不来了。"
    # a stray opening quote does not swallow the review
    many = "“" + "很好。" * 40 + "最后一句话也很好。"
    assert len(texts(many)) > 1
    for review in ("他说：“好。不错”然后就买了很多次了。第二句话在这里比较长。", many):
        for s in split_sentences(review):
            assert review[s.start:s.end] == s.text


def test_budget_is_never_exceeded_with_the_multilingual_encoder(e5):
    reviews, labels = _corpus(120)
    for params in (Params(), Params(full_limit=10, clusters=12)):  # the full and the clustered path
        doc = prepare(reviews, ratings=labels, encoder=e5, params=params)
        for tok in ("cl100k", "o200k"):
            counter = get_counter(tok)
            for budget in (5, 15, 23, 40, 61, 100, 150):
                s = select(doc, budget, counter, params, allow_cut=budget < 9)
                assert counter.count(s.text) == s.tokens_after <= budget
                for x in s.sentences:
                    assert reviews[x.review][x.start:x.end] == x.text
    assert any("clusters" in n for n in doc.notes)


def test_identical_sentences_are_encoded_once(e5):
    calls = []

    class Counting:
        def __init__(self, real):
            self.tokenizer, self.weights, self.threads = real.tokenizer, real.weights, real.threads
            self._real = real

        def encode(self, texts, **kw):
            calls.extend(texts)
            return self._real.encode(texts, **kw)

    reviews = ["不错，值得推荐！", "不错，值得推荐！", "房间很干净，床也很舒服。", "不错，值得推荐！隔音太差了，晚上很吵。"]
    doc = prepare(reviews, encoder=Counting(e5), params=Params(units="sentence"))
    assert doc.n == 5 and len(calls) == len(set(calls)) == 3
    assert sorted(doc.mass.tolist()) == [1, 1, 3]
    assert any("2 repeated sentences" in n for n in doc.notes)
    off = prepare(reviews, encoder=Counting(e5), params=Params(dedup=False, units="sentence"))
    assert len(off.cand) == 5


def test_centring_only_where_vectors_are_anisotropic():
    rng = np.random.default_rng(0)
    base = rng.standard_normal(32)
    near = base + 0.4 * rng.standard_normal((60, 32))  # every pair at cosine ~0.85
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    notes: list[str] = []
    out = _centre(near.astype(np.float32), np.ones(60), "auto", notes)
    assert notes and abs(float((out @ out.T)[np.triu_indices(60, 1)].mean())) < 0.05
    spread = rng.standard_normal((60, 32))
    spread /= np.linalg.norm(spread, axis=1, keepdims=True)
    assert _centre(spread.astype(np.float32), np.ones(60), "auto", []) is not None
    assert np.array_equal(_centre(spread.astype(np.float32), np.ones(60), "auto", []), spread.astype(np.float32))
    few = near[:CENTRE_MIN - 1].astype(np.float32)
    assert np.array_equal(_centre(few, np.ones(len(few)), "auto", []), few)  # too few for a background
    assert not np.array_equal(_centre(few, np.ones(len(few)), "on", []), few)
    with pytest.raises(Exception, match="unknown center"):
        _centre(few, np.ones(len(few)), "whiten", [])


def test_chinese_category_summary_covers_both_sides(e5):
    reviews, labels = _corpus(300, seed=1)
    s = summarize(reviews, ratings=labels, budget=120, encoder=e5)
    assert any("centred" in n for n in s.notes)  # e5's raw cosines sit near 0.85 here
    assert len(s.sentences) >= 4
    assert {x.rating for x in s.sentences} == {0.0, 1.0}
    assert len({x.text for x in s.sentences}) == len(s.sentences)
    assert " " not in s.text


def test_chinese_sentences_without_a_closing_mark_do_not_run_together():
    from qkv.summarize.core import _joiner

    assert _joiner(["房间很干净。", "服务很好！", "暖气不热", "下次不会再去了"]) == "房间很干净。服务很好！暖气不热 下次不会再去了"
    assert _joiner(["Fast and quiet.", "很好。", "Great."]) == "Fast and quiet. 很好。 Great."
