"""The keyword side's planner and its own BM25: scores must equal FTS5's bm25() exactly, and a
planned (budget-bounded) search must return exact OR-BM25 scores for what it returns."""

import shutil
import sqlite3

import numpy as np
import pytest

from qkv.search import embedded
from qkv.search.catalog import read_catalog
from qkv.search.embedded import EmbeddedStore, _quote, title_hash
from qkv.search.filters import parse_filter
from qkv.search.store import Manifest, open_store

QUERIES = ["waterproof hiking boots", "boot boots", "透气跑鞋", "stainless steel 1/2 in. x 10 ft.",
           "women's running shoes size 8", "black", "usb-c charger 65w", "cotton t-shirt pack of 3"]


@pytest.fixture(scope="module")
def store(tmp_path_factory, sample_catalog):
    rows = read_catalog(sample_catalog).rows
    extra = [{"id": f"x{i}", "title": f"black cotton t-shirt pack of {i % 7} boots {'boot ' * (i % 3)}size {i % 13}",
              "price": float(i)} for i in range(400)]
    rows = [{"id": r["id"], "title": r["title"], "price": r.get("price")} for r in rows] + extra
    path = tmp_path_factory.mktemp("kw") / "idx"
    st = EmbeddedStore.create(path, Manifest(model="m", fingerprint="f", dim=8))
    v = np.random.default_rng(0).normal(size=(len(rows), 8)).astype(np.float32)
    with st.writer() as w:
        w.upsert(rows, v / np.linalg.norm(v, axis=1, keepdims=True), [title_hash(r["title"]) for r in rows])
    st.close()
    st = open_store(path)
    yield st
    st.close()


def _fts_or(st, query, k=10_000):
    terms = st.query_terms(query)
    expr = " OR ".join(map(_quote, terms))
    return st.db.execute("SELECT p.id, -bm25(fts) FROM fts JOIN products p ON p.slot = fts.rowid "
                         "WHERE fts MATCH ? ORDER BY bm25(fts), p.id LIMIT ?", (expr, k)).fetchall()


@pytest.mark.parametrize("query", QUERIES)
def test_own_bm25_shares_equal_fts5(store, query):
    exact = dict(_fts_or(store, query))
    assert exact, query
    parts = store.keyword_terms(query, list(exact))
    for pid, score in exact.items():
        assert parts[pid], pid
        assert sum(s for _, s in parts[pid]) == pytest.approx(score, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("query", QUERIES)
def test_unbounded_plan_is_the_exact_or_query(store, query):
    k = 15
    want = _fts_or(store, query)
    got = store.keyword_search(query, k)
    # exact but for terms in over half the rows, whose idf FTS5 floors at 1e-6 (scores ~1e-6)
    assert [h.score for h in got] == pytest.approx([s for _, s in want[:k]], rel=1e-9, abs=1e-5)
    cut = want[min(k, len(want)) - 1][1]  # ties at the cut may come in any order
    assert {h.id for h in got if h.score > cut + 1e-5} == {i for i, s in want[:k] if s > cut + 1e-5}


@pytest.mark.parametrize("query", QUERIES)
def test_budgeted_plan_returns_exact_scores_in_order(store, query, monkeypatch):
    monkeypatch.setattr(embedded, "KEYWORD_BUDGET", 40)
    monkeypatch.setattr(embedded, "SCORE_BUDGET", 25)
    exact = dict(_fts_or(store, query))
    got = store.keyword_search(query, 30)
    assert got
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    for h in got:
        assert h.score == pytest.approx(exact[h.id], rel=1e-9)


def test_budgeted_plan_prefers_products_matching_every_word(store, monkeypatch):
    monkeypatch.setattr(embedded, "KEYWORD_BUDGET", 40)
    got = store.keyword_search("black cotton boots", 10)
    assert len(got) == 10
    rows = store.get_rows([h.id for h in got])
    assert all(all(w in r["title"].lower() for w in ("black", "cotton", "boots")) for r in rows)


def test_budgeted_plan_with_a_filter(store, monkeypatch):
    monkeypatch.setattr(embedded, "KEYWORD_BUDGET", 40)
    monkeypatch.setattr(embedded, "SCORE_BUDGET", 25)
    flt = parse_filter("price < 100")
    got = store.keyword_search("black cotton t-shirt", 20, flt)
    assert got and all(r["price"] < 100 for r in store.get_rows([h.id for h in got]))
    exact = dict(_fts_or(store, "black cotton t-shirt"))
    assert all(h.score == pytest.approx(exact[h.id], rel=1e-9) for h in got)


def test_index_written_before_the_planner_tables_searches_the_same(store, tmp_path):
    """Generations written before term_df, keyword_stats and doclen.npy existed still work."""
    old = tmp_path / "old"
    shutil.copytree(store.path, old)
    gen = old / store.manifest.extra["generation"]
    (gen / "doclen.npy").unlink()
    con = sqlite3.connect(gen / "catalog.sqlite")
    con.execute("DROP TABLE term_df")
    con.execute("DROP TABLE keyword_stats")
    con.commit()
    con.close()
    with open_store(old) as st:
        for q in QUERIES:
            assert [(h.id, round(h.score, 9)) for h in st.keyword_search(q, 12)] == \
                   [(h.id, round(h.score, 9)) for h in store.keyword_search(q, 12)]
