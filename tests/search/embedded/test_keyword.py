"""The keyword side's planner and its own BM25: scores must equal FTS5's bm25() exactly, and a
planned (budget-bounded) search must return exact OR-BM25 scores for what it returns."""

import shutil
import sqlite3

import numpy as np
import pytest

from qkv.search.catalog import read_catalog
from qkv.search.embedded import EmbeddedStore
from qkv.search.embedded import keyword as engine
from qkv.search.embedded.vocabulary import quote as _quote
from qkv.search.filters import parse_filter
from qkv.search.store import Manifest, open_store, title_hash

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
    monkeypatch.setattr(store.keyword, "postings_cover", lambda terms: False)  # the SQL plan (phrase terms)
    monkeypatch.setattr(engine, "KEYWORD_BUDGET", 40)
    monkeypatch.setattr(engine, "SCORE_BUDGET", 25)
    exact = dict(_fts_or(store, query))
    got = store.keyword_search(query, 30)
    assert got
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    for h in got:
        assert h.score == pytest.approx(exact[h.id], rel=1e-9)


@pytest.mark.parametrize("postings", [True, False])
def test_budgeted_plan_prefers_products_matching_every_word(store, monkeypatch, postings):
    if not postings:
        monkeypatch.setattr(store.keyword, "postings_cover", lambda terms: False)
    monkeypatch.setattr(engine, "KEYWORD_BUDGET", 40)
    monkeypatch.setattr(engine, "POSTINGS_BUDGET", 40)
    got = store.keyword_search("black cotton boots", 10)
    assert len(got) == 10
    rows = store.get_rows([h.id for h in got])
    assert all(all(w in r["title"].lower() for w in ("black", "cotton", "boots")) for r in rows)


def test_budgeted_plan_with_a_filter(store, monkeypatch):
    monkeypatch.setattr(engine, "KEYWORD_BUDGET", 40)
    monkeypatch.setattr(engine, "SCORE_BUDGET", 25)
    flt = parse_filter("price < 100")
    got = store.keyword_search("black cotton t-shirt", 20, flt)
    assert got and all(r["price"] < 100 for r in store.get_rows([h.id for h in got]))
    exact = dict(_fts_or(store, "black cotton t-shirt"))
    assert all(h.score == pytest.approx(exact[h.id], rel=1e-9) for h in got)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("where", ["price < 100", "price >= 150 and price < 260"])
def test_filtered_postings_plan_is_the_exact_filtered_or_query(store, query, where):
    """A filter on an index with postings arrays runs the postings plan over the allowed rows only
    (a mask after the rare terms are scored): the same top k, with the same scores, as FTS5's OR
    query over the filtered rows; every hit passes the filter."""
    flt = parse_filter(where)
    got = store.keyword_search(query, 15, flt)
    assert store.keyword.postings.arrays() is not None and store.rows._filters  # the masked plan, its rows cached
    sql, params = store.rows.where(flt)
    terms = store.query_terms(query)
    want = store.db.execute(
        "SELECT p.id, -bm25(fts) AS s FROM fts JOIN products p ON p.slot = fts.rowid "
        f"WHERE fts MATCH ?{sql} ORDER BY s DESC, p.slot LIMIT 15", [" OR ".join(map(_quote, terms)), *params]).fetchall()
    assert [h.score for h in got] == pytest.approx([v for _, v in want], rel=1e-9)  # rows may differ at ties
    exact = dict(store.db.execute(
        "SELECT p.id, -bm25(fts) FROM fts JOIN products p ON p.slot = fts.rowid "
        f"WHERE fts MATCH ?{sql}", [" OR ".join(map(_quote, terms)), *params]).fetchall())
    assert all(h.score == pytest.approx(exact[h.id], rel=1e-9) for h in got)  # only allowed rows, exact scores


def test_index_of_an_older_format_is_refused_with_how_to_rebuild_it(store, tmp_path):
    """An index written before the current layout (format 1: no postings arrays, term_df,
    keyword_stats or doclen.npy) is refused when opened, with the command that rebuilds it; a
    rebuild in place then works and the index searches as a new one does."""
    import json

    from qkv.search.build import open_target
    from qkv.search.store import IndexError_

    old = tmp_path / "old"
    shutil.copytree(store.path, old)
    gen = old / store.manifest.extra["generation"]
    for f in ("doclen.npy", "postings.npy", "postings_tf.npy"):
        (gen / f).unlink()
    con = sqlite3.connect(gen / "catalog.sqlite")
    for t in ("term_postings", "term_df", "keyword_stats"):
        con.execute(f"DROP TABLE {t}")
    con.commit()
    con.close()
    m = json.loads((old / "manifest.json").read_text())
    m["version"] = 1
    (old / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexError_, match=r"older qkv \(index format 1.*--rebuild"):
        open_store(old)
    rows = store.get_rows(store.all_ids())
    st = open_target(old, lambda: None, rebuild=True)
    with st.writer(reset=True) as w:
        w.upsert(rows, store.get_vectors([r["id"] for r in rows]), [title_hash(r["title"]) for r in rows])
    with open_store(old) as st:
        assert st.manifest.version == 2 and st.count() == store.count()
        for q in QUERIES:
            a, b = st.keyword_search(q, 12), store.keyword_search(q, 12)
            assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-12)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("budget", [1, 40, 400])
def test_postings_plan_is_exact_where_maxscore_says_so(store, query, budget, monkeypatch):
    """With few postings allowed, the in-memory plan still returns exact OR-BM25 scores, best
    first; and whenever its k-th score is at least what the common terms alone could add up to,
    the top k is the exact OR query's (rows with a rare term are complete by MaxScore's bound)."""
    import math

    monkeypatch.setattr(engine, "POSTINGS_BUDGET", budget)
    assert store.keyword.postings.arrays() is not None
    k = 12
    want = _fts_or(store, query)
    exact = dict(want)
    got = store.keyword_search(query, k)
    assert got and [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    for h in got:
        assert h.score == pytest.approx(exact[h.id], rel=1e-9, abs=1e-9)
    parts = store.keyword_terms(query, [h.id for h in got])  # shares from the plan's memo
    for h in got:
        assert sum(v for _, v in parts[h.id]) == pytest.approx(h.score, rel=1e-9, abs=1e-9)
    dfs = store.keyword.vocab.query_dfs(query)
    terms = sorted(dfs, key=lambda t: (dfs[t], t))
    common = terms[len(engine.rare_terms(terms, dfs, budget)):]
    n, _ = store.keyword.postings.stats()
    bound = sum(max(math.log((n - dfs[t] + 0.5) / (dfs[t] + 0.5)), 1e-6) * 2.2 for t in common)
    if len(got) == k and got[-1].score >= bound:
        cut = want[k - 1][1]
        assert {h.id for h in got if h.score > cut + 1e-9} == {i for i, s in want[:k] if s > cut + 1e-9}


def test_postings_arrays_match_fts5(store):
    docs, tfs = store.keyword.postings.arrays()
    assert len(docs) == store.db.execute("SELECT sum(doc) FROM fts_vocab").fetchone()[0]
    for term in ("boot", "black", "3", "跑鞋"):  # Chinese terms are words and bigrams (qkv.text.zh)
        rows, tf = store.keyword._term_postings(term)
        want = store.db.execute("SELECT doc, count(*) FROM temp.fts_inst WHERE term = ? GROUP BY doc ORDER BY doc",
                                (store.keyword.vocab.stem(term),)).fetchall() if store.keyword._inst else None
        if want is None:
            store.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_inst USING fts5vocab(main, fts, 'instance')")
            store.keyword._inst = True
            want = store.db.execute("SELECT doc, count(*) FROM temp.fts_inst WHERE term = ? GROUP BY doc ORDER BY doc",
                                    (store.keyword.vocab.stem(term),)).fetchall()
        assert want and [(int(r), int(t)) for r, t in zip(rows, tf)] == want


def test_postings_plan_widens_its_pool_for_rows_lifted_by_common_terms(tmp_path, monkeypatch):
    """Rows whose rare-term score is low but whose common terms lift them to the top are found:
    the first pool holds only the rows best on the rare term, so the plan must widen it."""
    rows = [{"id": f"s{i}", "title": "zork"} for i in range(20)]  # best on the rare term alone
    rows += [{"id": f"l{i}", "title": "zork plum plum quux frob nib"} for i in range(10)]  # lifted by plum
    rows += [{"id": f"p{i}", "title": f"plum filler{i % 9} more"} for i in range(90)]
    rows += [{"id": f"f{i}", "title": f"filler{i % 9} other words"} for i in range(880)]
    st = EmbeddedStore.create(tmp_path / "idx", Manifest(model="m", fingerprint="f", dim=4))
    v = np.random.default_rng(1).normal(size=(len(rows), 4)).astype(np.float32)
    with st.writer() as w:
        w.upsert(rows, v, [title_hash(r["title"]) for r in rows])
    st.close()
    with open_store(tmp_path / "idx") as st:
        monkeypatch.setattr(engine, "POSTINGS_BUDGET", 30)  # zork's 30 postings fit, plum's 100 do not
        want = _fts_or(st, "zork plum", 2)
        assert {i for i, _ in want} <= {f"l{i}" for i in range(10)}
        got = st.keyword_search("zork plum", 2)
        assert [(h.id, h.score) for h in got] == [(i, pytest.approx(s, rel=1e-9)) for i, s in want]


def test_postings_follow_upserts_and_deletes(store, tmp_path):
    """Every write rewrites the postings arrays from FTS5: a replaced title's old words and a deleted
    product stop matching, and the plan still equals FTS5's exact OR query."""
    path = tmp_path / "copy"
    shutil.copytree(store.path, path)
    with open_store(path) as st:
        with st.writer() as w:
            w.upsert([{"id": "x1", "title": "zzyzx lantern"}], np.ones((1, 8), np.float32) / np.sqrt(8),
                     [title_hash("zzyzx lantern")])
            w.delete(["x2"])
    with open_store(path) as st:
        assert st.keyword.postings.arrays() is not None
        ids = {h.id for h in st.keyword_search("black cotton boots", 1000)}
        assert "x2" not in ids and "x1" not in ids and "x3" in ids
        assert [h.id for h in st.keyword_search("zzyzx", 5)] == ["x1"]
        for q in QUERIES:
            want = _fts_or(st, q)
            got = st.keyword_search(q, 15)
            assert [h.score for h in got] == pytest.approx([s for _, s in want[:15]], rel=1e-9, abs=1e-5)


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_damaged_postings_arrays_are_refused(store, tmp_path, damage):
    from qkv.search.store import IndexError_

    bad = tmp_path / "bad"
    shutil.copytree(store.path, bad)
    f = bad / store.manifest.extra["generation"] / "postings.npy"
    if damage == "delete":
        f.unlink()
    else:
        docs = np.load(f)
        np.save(f, docs[:-3])
    with open_store(bad) as st:
        with pytest.raises(IndexError_, match="postings arrays.*rebuild"):
            st.keyword_search("black boots", 5)


def test_stems_are_right_when_many_threads_stem_at_once(store):
    """One in-memory FTS5 table stems the query words of every thread that searches a generation:
    filled by two threads at once it collided on rowids or handed one thread another's stems."""
    import threading

    from qkv.search.embedded.vocabulary import Vocabulary

    vocab = Vocabulary(store.gen)
    words = [f"{w}{i}" for i in range(300) for w in ("running", "boots", "lanterns")]
    single = {w: Vocabulary(store.gen).stem(w) for w in words[:30]}  # one thread: the truth
    errors, got = [], []

    def worker(part):
        try:
            for i in range(0, len(part), 3):
                got.append(vocab.stems(part[i:i + 3]))
        except Exception as e:  # noqa: BLE001 - collected for the assertion below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(words[j::4],)) for j in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    merged = {w: s for d in got for w, s in d.items()}
    assert len(merged) == len(words)
    assert all(merged[w] == s for w, s in single.items())
    assert all(merged[w] is not None and merged[w].startswith(w[:4]) for w in words)
