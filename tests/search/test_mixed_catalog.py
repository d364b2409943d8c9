"""A bilingual catalog (the sample's): English queries reach the Chinese listings of the same
product, and a seller's words are never dropped from a Chinese query (issue 30, items 3 and 4)."""

import pytest

from qkv.search import Index
from qkv.search import plan as planmod

CHINESE_RUNNING_SHOES = "男士透气网面跑鞋"


@pytest.fixture(scope="module")
def sample(sample_index, encoder):
    return Index.open(sample_index, encoder=encoder)


def _chinese_shoes(res):
    return [r.rank for r in res if CHINESE_RUNNING_SHOES in r.title]


def test_running_shoes_finds_the_chinese_running_shoes_in_the_top_five(sample):
    res = sample.search("running shoes", k=10)
    assert _chinese_shoes(res) and min(_chinese_shoes(res)) <= 5, [r.title for r in res]
    # the English listings stay on top: the Chinese words are added, nothing is taken away
    assert all("Running Shoes" in r.title for r in res[:3])
    assert res.translation is None and res.searched_as is None  # an English query is no translation
    assert any("跑鞋" in terms for group in res.plan.groups for _, terms in group)


def test_a_longer_english_query_reaches_every_chinese_listing(sample):
    res = sample.search("breathable running shoes for men", k=10)
    assert len(_chinese_shoes(res)) == 3, [r.title for r in res]


def test_without_the_chinese_words_the_english_query_misses_them(sample, monkeypatch):
    """What the measure's "before" is (bench/mixed_catalog.py): the query as typed."""
    monkeypatch.setattr(planmod, "ENGLISH_TO_CHINESE", False)
    res = sample.search("running shoes", k=10)
    assert _chinese_shoes(res) == [] and res.plan.groups == ()


def test_the_chinese_listing_is_not_ranked_down_for_its_language(sample):
    """Calibrated groups: the best Chinese holder of 跑鞋 scores on the keyword side what the best
    English holder of "running shoes" does."""
    from qkv.search import crosslingual

    plan = sample.plan("running shoes")
    calibrated = dict(crosslingual.structured_keyword(sample.store, list(plan.groups), 50, calibrate=True)[0])
    raw = dict(crosslingual.structured_keyword(sample.store, list(plan.groups), 50)[0])
    title = {r["id"]: r["title"] for r in sample.store.get_rows(list(raw))}
    chinese = [i for i in raw if CHINESE_RUNNING_SHOES in title[i]]
    english = [i for i in raw if "Running Shoes" in title[i]]
    assert len(chinese) == 3 and len(english) == 3
    # raw, the Chinese titles' BM25 is below the English ones' (longer in terms); calibrated, the best is equal
    assert max(raw[i] for i in chinese) < max(raw[i] for i in english)
    assert max(calibrated[i] for i in chinese) == pytest.approx(max(calibrated[i] for i in english))
    assert all(calibrated[i] == raw[i] for i in english)  # the English side is left as it was


def test_keyword_and_dense_modes_search_an_english_query_as_typed(sample):
    for mode in ("keyword", "dense"):
        res = sample.search("running shoes", k=5, mode=mode)
        assert _chinese_shoes(res) == [] and all("Running Shoes" in r.title for r in res[:3])


def test_a_brand_with_no_translation_is_searched_as_typed(sample):
    res = sample.search("安踏跑鞋", k=10)
    assert res.searched_as == "安踏 running shoes"
    assert ("安踏", "", "untranslated") in res.translation.pieces
    assert "安踏" in res.plan.keyword.split()  # the keyword side searches it as typed
    assert res.plan.dense[1] == "running shoes"  # the English beside the original's own vector


def test_a_size_is_a_size(sample):
    res = sample.search("女款登山鞋 37码", k=5)
    assert "weight" not in res.searched_as and res.searched_as.endswith("37 size")
    assert res.searched_as.startswith("女款 ")
    assert "weight" not in res.plan.keyword and "size" not in res.plan.keyword.split()


def test_words_with_no_chinese_do_not_sink_the_chinese_listing(sample, monkeypatch):
    """"backpacking" has no Chinese in the catalog, so a Chinese tent can match "tent" only: scaled
    by language (crosslingual.LANGUAGE_SCALE) its best match stands beside the English ones'."""
    from qkv.search import crosslingual

    def chinese_tents(res):
        return [r.rank for r in res if "帐篷" in r.title]

    assert chinese_tents(sample.search("backpacking tent", k=10))
    monkeypatch.setattr(crosslingual, "LANGUAGE_SCALE", False)
    assert chinese_tents(sample.search("backpacking tent", k=10)) == []
