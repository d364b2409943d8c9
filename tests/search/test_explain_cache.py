"""Explanations at about a search's cost (issue 17): the query's token vectors come from the
search's own pass, titles' from a bounded cache; the grids still sum exactly to their cosine."""

from __future__ import annotations

import numpy as np
import pytest

from qkv.search import Index, build_index
from qkv.search.explain import TokenVectorCache, explain_titles
from qkv.search.index import query_precision


@pytest.fixture(scope="module")
def idx(sample_index, encoder):
    with Index.open(sample_index, encoder) as i:
        yield i


def _counting(encoder, monkeypatch):
    """Count the texts the encoder's forward passes and token_vectors calls run."""
    calls = {"forward": 0, "token_vectors": []}
    real_fwd, real_tv = encoder.forward, encoder.token_vectors

    def forward(ids, *a, **kw):
        calls["forward"] += ids.shape[0]
        return real_fwd(ids, *a, **kw)

    def token_vectors(texts, **kw):
        calls["token_vectors"].append(list(texts))
        return real_tv(texts, **kw)

    monkeypatch.setattr(encoder, "forward", forward)
    monkeypatch.setattr(encoder, "token_vectors", token_vectors)
    return calls


def test_cache_is_bounded_by_bytes_and_least_recently_used_goes_first():
    c = TokenVectorCache(max_bytes=3 * 400)
    for k in "abc":
        c.put(k, (k, np.zeros(100, np.float32)))  # 400 bytes each
    assert len(c) == 3 and c.bytes == 1200
    assert c.get("a")[0] == "a"  # a is now the most recent
    c.put("d", ("d", np.zeros(100, np.float32)))
    assert c.get("b") is None and c.get("a") is not None and c.get("d") is not None and len(c) == 3
    c.put("huge", ("huge", np.zeros(1000, np.float32)))  # larger than the whole cache: not kept
    assert c.get("huge") is None and c.bytes == 1200
    c.put("a", ("a2", np.zeros(50, np.float32)))  # replacing an entry counts its new size
    assert c.bytes == 1000 and c.get("a")[0] == "a2"
    entries = TokenVectorCache(max_bytes=10**9, max_entries=2)
    for k in "xyz":
        entries.put(k, (k, np.zeros(1, np.float32)))
    assert len(entries) == 2 and entries.get("x") is None
    c.clear()
    assert len(c) == 0 and c.bytes == 0


def test_explaining_a_searchs_results_reuses_its_query_pass_and_cached_titles(idx, encoder, monkeypatch):
    q = "lightweight breathable trainers"
    idx._title_vectors.clear()
    calls = _counting(encoder, monkeypatch)
    res = idx.search(q, k=5, mode="dense")
    assert calls["forward"] == 1  # the query's one pass
    exps = idx.explain_titles(q, [r.title for r in res[:3]])
    # the query was not run again; the three titles ran once, in one batch
    assert calls["forward"] == 1 + 3 and calls["token_vectors"] == [[r.title for r in res[:3]]]
    again = idx.explain_titles(q, [r.title for r in res[:4]])  # three cached, one new
    assert calls["token_vectors"][-1] == [res[3].title]
    for e, r in zip(again, res):
        # the grid decomposes the cosine of the search's own query pass with the float32 title:
        # exactly its parts, and the score the search returned within the index's precision
        assert e.exact and abs(e.parts_sum - e.cosine) < 1e-6
        assert abs(sum(w.share for w in e.title_words) - e.cosine) < 1e-6
        assert abs(e.cosine - r.score) < 2e-3
    for a, b in zip(exps, again):
        np.testing.assert_array_equal(a.grid, b.grid)


def test_cached_explanations_equal_a_fresh_float32_pass(idx, encoder):
    """With the query in float32 (search(explain=True)), cached title vectors give the grid of one
    fresh float32 pass over the query and titles: same tokens, shares and best words."""
    q = "warm jacket for winter"
    res = idx.search(q, k=3, mode="dense", explain=True)
    fresh = explain_titles(encoder, q, [r.title for r in res])
    for r, f in zip(res, fresh):
        e = r.explanation
        assert e.query_tokens == f.query_tokens and e.title_tokens == f.title_tokens
        np.testing.assert_allclose(e.grid, f.grid, atol=1e-6)
        assert abs(e.parts_sum - r.score) < 2e-5
        assert [w.best_query_word for w in e.title_words] == [w.best_query_word for w in f.title_words]
        np.testing.assert_allclose([w.share for w in e.title_words], [w.share for w in f.title_words], atol=1e-6)


def test_the_query_pass_gives_the_encoders_vector(idx, encoder):
    for exact in (False, True):
        v = idx.encode_query("non-stick frying pan", exact=exact)
        want = encoder.encode(["non-stick frying pan"], precision="float32" if exact else query_precision())[0]
        assert abs(float(np.linalg.norm(v)) - 1) < 1e-5
        np.testing.assert_allclose(v, want, atol=1e-5)


def test_a_new_generation_empties_the_title_cache(tmp_path, small_csv, encoder):
    path = tmp_path / "idx"
    build_index(small_csv, path, encoder)
    with Index.open(path, encoder) as idx:
        res = idx.search("mug", k=2)
        idx.explain_titles("mug", [r.title for r in res])
        assert len(idx._title_vectors) == 2
        extra = tmp_path / "more.csv"
        extra.write_text("id,title,price\nnew1,Zyzzyva lantern with brass handle,12\n", encoding="utf-8")
        build_index(extra, path, encoder, upsert=True)
        assert idx.refresh() is True
        assert len(idx._title_vectors) == 0
        e = idx.explain_titles("zyzzyva lantern", ["Zyzzyva lantern with brass handle"])[0]
        assert abs(e.parts_sum - e.cosine) < 1e-6


def test_word_grid_and_contrast_are_the_pairs_sums_and_means(idx):
    """The indicator products give each word pair's sum of the grid and mean of the interaction D."""
    e = idx.search("merino wool sweater", k=1, mode="dense", explain=True)[0].explanation
    qw = [w for w in e.query_words if w.kind == "word"]
    tw = [w for w in e.title_words if w.kind == "word"]
    g = e.grid.astype(np.float64)
    want = np.asarray([[g[np.ix_(list(a.tokens), list(b.tokens))].sum() for b in tw] for a in qw])
    np.testing.assert_allclose(e.word_grid(), want, atol=1e-12)
    rows = [i for i, k in enumerate(e.query_token_kinds) if k == "word"]
    cols = [j for j, k in enumerate(e.title_token_kinds) if k == "word"]
    sub = g[np.ix_(rows, cols)]
    d = sub - sub.mean(axis=1, keepdims=True) - sub.mean(axis=0, keepdims=True) + sub.mean()
    at_r, at_c = {t: i for i, t in enumerate(rows)}, {t: i for i, t in enumerate(cols)}
    want = np.asarray([[d[np.ix_([at_r[t] for t in a.tokens], [at_c[t] for t in b.tokens])].mean() for b in tw]
                       for a in qw])
    np.testing.assert_allclose(e.contrast(), want, atol=1e-12)
    assert e.to_json()["pairs"] == e.pairs()
