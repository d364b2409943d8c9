"""The match grid across languages: "透气跑鞋" against "Breathable Mesh Running Shoes" on the
multilingual model, with the E5 prefixes search uses. The grid explains the vectors actually
compared (its sum is their cosine), and reads at word level in both scripts, prefix tokens apart."""

import numpy as np
import pytest

from qkv.search.explain import explain_titles

QUERY, TITLE = "透气跑鞋", "Breathable Mesh Running Shoes"
OTHER = "Trailridge 男士防水登山靴 中帮徒步鞋"


@pytest.fixture(scope="module")
def pair(e5):
    return explain_titles(e5, QUERY, [TITLE, OTHER], query_prefix="query: ", passage_prefix="passage: ")


def test_grid_sums_to_the_cosine_of_the_prefixed_vectors(e5, pair):
    q = e5.encode([QUERY], role="query")[0]
    t = e5.encode([TITLE, OTHER], role="passage")
    for e, v in zip(pair, t):
        assert e.exact
        assert e.parts_sum == pytest.approx(float(q @ v), abs=2e-6)  # the cosine search compares
        assert e.cosine == pytest.approx(e.parts_sum, abs=1e-6)
        c = e.context()
        assert e.word_grid().sum() + c["prefix"] + c["special"] == pytest.approx(e.parts_sum, abs=1e-6)
        assert c["prefix"] != 0 and c["special"] != 0
    # without the prefixes the grid explains a different pair of vectors
    (bare,) = explain_titles(e5, QUERY, [TITLE])
    assert abs(bare.parts_sum - pair[0].parts_sum) > 1e-3
    assert bare.context()["prefix"] == 0 and "prefix" not in bare.query_token_kinds


def test_words_in_both_scripts_with_prefix_tokens_apart(pair):
    e = pair[0]
    assert [(w.text, w.kind) for w in e.query_words] == [
        ("<s>", "special"), ("query", "prefix"), (":", "prefix"), ("透气", "word"), ("跑鞋", "word"), ("</s>", "special")]
    words = [w for w in e.title_words if w.kind == "word"]
    assert [w.text for w in words] == ["Breathable", "Mesh", "Running", "Shoes"]
    for w in words:  # offsets into the title as typed, not the prefixed text
        assert TITLE[w.start:w.end] == w.text
    for w in e.query_words:
        if w.kind == "word":
            assert QUERY[w.start:w.end] == w.text
    assert all(w.special for w in e.title_words if w.kind != "word")
    assert e.title_token_kinds[:3] == ("special", "prefix", "prefix")
    assert e.word_grid().shape == (2, 4)
    d = e.to_json()
    assert d["word_grid"]["rows"] == ["透气", "跑鞋"] and d["word_grid"]["cols"] == [w.text for w in words]
    assert d["context"]["query_prefix"] == "query: " and len(d["pairs"]) == 5


def test_which_chinese_words_met_which_english_words(pair):
    e, other = pair
    answers = {w.text: w.best_query_word for w in e.title_words if w.kind == "word"}
    assert answers["Running"] == answers["Shoes"] == "跑鞋" and answers["Breathable"] == "透气"
    ct = e.contrast()
    assert ct.shape == (2, 4) and abs(ct.sum()) < 1e-9  # an interaction: it sums to zero
    # the pieces: 跑 met ▁Run and 鞋 met ▁Sho more than any other pair of word pieces
    g = e.grid.astype(np.float64)
    rows = [i for i, k in enumerate(e.query_token_kinds) if k == "word"]
    cols = [j for j, k in enumerate(e.title_token_kinds) if k == "word"]
    sub = g[np.ix_(rows, cols)]
    d = sub - sub.mean(1, keepdims=True) - sub.mean(0, keepdims=True) + sub.mean()
    i, j = np.unravel_index(np.argmax(d), d.shape)
    assert (e.query_tokens[rows[i]], e.title_tokens[cols[j]]) == ("跑", "▁Run")


def test_english_query_against_a_chinese_title(e5):
    (e,) = explain_titles(e5, "waterproof hiking boots", [OTHER], query_prefix="query: ", passage_prefix="passage: ")
    answers = {w.text: w.best_query_word for w in e.title_words if w.kind == "word"}
    assert answers["防水"] == "waterproof" and answers["靴"] == "boots" and answers["登山"] == "hiking"
    assert e.parts_sum == pytest.approx(e.cosine, abs=1e-6)


def test_index_explains_with_the_prefixes_its_manifest_records(sample_index, encoder, monkeypatch):
    from qkv.search.index import Index

    with Index.open(sample_index, encoder) as idx:
        (r,) = idx.search("running shoes", k=1, mode="dense", explain=True)  # MiniLM's index: no prefixes
        assert r.explanation.query_prefix == "" and r.explanation.parts_sum == pytest.approx(r.score, abs=2e-5)
        extra = idx.store.manifest.extra
        monkeypatch.setitem(extra, "query_prefix", "query: ")
        monkeypatch.setitem(extra, "passage_prefix", "passage: ")
        (e,) = idx.explain_titles("running shoes", [r.title])
        assert e.query_prefix == "query: " and e.passage_prefix == "passage: "
        assert e.query_token_kinds[1] == "prefix" and e.title_token_kinds[1] == "prefix"
