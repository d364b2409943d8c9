"""The embedded store on its own, with synthetic unit vectors (no encoder): ANN kinds, tombstones,
compaction."""

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.search.embedded import EmbeddedStore
from qkv.search.filters import parse_filter
from qkv.search.store import Manifest, open_store, title_hash

DIM = 32


def _vecs(n, seed=0):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _fill(path, n, ann="auto", dtype="float32", **opts):
    st = EmbeddedStore.create(path, Manifest(model="m", fingerprint="f", dim=DIM, ann=ann, dtype=dtype), **opts)
    rows = [{"id": f"p{i}", "title": f"product {i} colour {i % 5}", "shade": ["red", "blue"][i % 2], "n": float(i)}
            for i in range(n)]
    v = _vecs(n)
    with st.writer() as w:
        w.upsert(rows, v, [title_hash(r["title"]) for r in rows])
    return open_store(path), v


def _exact(v, q, k):
    return [f"p{i}" for i in np.argsort(-(v @ q))[:k]]


# random vectors are the hardest case for IVF (no clusters to find); real embeddings do better
@pytest.mark.parametrize("ann, min_recall", [("flat", 1.0), ("hnsw", 0.95), ("ivfpq", 0.4)])
def test_ann_kinds_against_exact(tmp_path, ann, min_recall):
    st, v = _fill(tmp_path / ann, 2000, ann=ann, ivfpq_min=1000)
    assert st.manifest.extra["ann_kind"] == ann
    qs = _vecs(20, seed=1)
    rec = np.mean([len({h.id for h in st.dense_search(q, 10)} & set(_exact(v, q, 10))) / 10 for q in qs])
    assert rec >= min_recall
    hits = st.dense_search(qs[0], 5)
    assert all(abs(h.score - float(v[int(h.id[1:])] @ qs[0])) < 1e-5 for h in hits)


def test_ef_search_trades_time_for_recall_and_refuses_nonsense(tmp_path):
    from qkv.search.index import Index

    st, v = _fill(tmp_path / "h", 2000, ann="hnsw")
    qs = _vecs(30, seed=2)

    def recall():
        return np.mean([len({h.id for h in st.dense_search(q, 10)} & set(_exact(v, q, 10))) / 10 for q in qs])

    assert st.ef_search == 96 and st.dense.ann.hnsw.efSearch == 96
    st.ef_search = 10
    narrow = recall()
    st.ef_search = 400
    assert st.dense.ann.hnsw.efSearch == 400
    wide = recall()
    assert wide >= 0.99 and wide > narrow
    for bad in (0, -5, 2.5, "many", True):
        with pytest.raises(InputError, match="ef_search must be a whole number"):
            st.ef_search = bad
    assert st.ef_search == 400  # a refused value changes nothing
    st.close()
    with Index.open(tmp_path / "h", ef_search=200) as idx:
        assert idx.store.ef_search == 200 and idx.store.dense.ann.hnsw.efSearch == 200
    with pytest.raises(InputError, match="ef_search"):
        Index.open(tmp_path / "h", ef_search=0)


def test_filtered_hnsw_widens_its_search_and_remembers_the_filter(tmp_path, monkeypatch):
    """Past EXACT_SUBSET allowed rows, a filter runs on the graph with efSearch scaled by the
    allowed share; the allowed rows are read from SQLite once per open store and filter."""
    from qkv.search.embedded import vectors

    monkeypatch.setattr(vectors, "EXACT_SUBSET", 10)
    st, v = _fill(tmp_path / "h", 2000, ann="hnsw")
    flt = parse_filter("n < 100")  # 5 % of the rows
    assert st.dense.params(None, 0.05).efSearch == 768 and st.dense.params(None, 1.0).efSearch == 96
    qs = _vecs(20, seed=4)
    allowed = np.arange(100)
    rec = []
    for q in qs:
        hits = st.dense_search(q, 10, flt)
        assert all(float(st.get_rows([h.id])[0]["n"]) < 100 for h in hits[:3])
        exact = [f"p{i}" for i in allowed[np.argsort(-(v[allowed] @ q))[:10]]]
        rec.append(len({h.id for h in hits} & set(exact)) / 10)
    assert np.mean(rec) >= 0.95
    assert len(st.rows._filters) == 1 and st.rows._filters[next(iter(st.rows._filters))][1] is not None
    assert [h.id for h in st.dense_search(qs[0], 5, flt)] == [h.id for h in st.dense_search(qs[0], 5, flt)]


def test_auto_switches_to_hnsw_above_threshold(tmp_path):
    st, _ = _fill(tmp_path / "a", 600, flat_threshold=500)
    assert st.manifest.extra["ann_kind"] == "hnsw"


def test_graph_is_built_on_build_threads_then_searches_go_back_to_one(tmp_path, monkeypatch):
    """Publishing builds the ANN graph on QKV_BUILD_THREADS faiss threads (default: every core the
    process may use; the encoder is done by then), and leaves faiss at qkv's thread count for
    the one-query searches that follow. A graph built on two threads is as good as on one."""
    import faiss

    from qkv.model.threads import default_threads
    from qkv.search.embedded import vectors

    seen = []
    real = faiss.IndexHNSWFlat.add
    monkeypatch.setattr(faiss.IndexHNSWFlat, "add", lambda self, x: seen.append(faiss.omp_get_max_threads()) or real(self, x))
    monkeypatch.setenv("QKV_BUILD_THREADS", "2")
    two, v = _fill(tmp_path / "two", 600, ann="hnsw")
    assert seen and set(seen) == {2} and faiss.omp_get_max_threads() == default_threads()
    monkeypatch.setenv("QKV_BUILD_THREADS", "1")
    one, _ = _fill(tmp_path / "one", 600, ann="hnsw")
    q = _vecs(20, seed=3)
    for st in (one, two):
        assert np.mean([len({h.id for h in st.dense_search(x, 10)} & set(_exact(v, x, 10))) / 10 for x in q]) >= 0.95
    monkeypatch.delenv("QKV_BUILD_THREADS")
    assert vectors.build_threads() >= 1
    monkeypatch.setenv("QKV_BUILD_THREADS", "many")
    with pytest.raises(InputError, match="QKV_BUILD_THREADS"):
        vectors.build_threads()
    with pytest.raises(InputError, match="QKV_BUILD_THREADS"):  # refused before anything is written
        one.writer()
    assert open_store(tmp_path / "one").count() == 600


def test_float16_halves_the_vectors(tmp_path):
    st32, v = _fill(tmp_path / "f32", 500)
    st16, _ = _fill(tmp_path / "f16", 500, dtype="float16")
    assert st16.vectors.dtype == np.float16 and st16.vectors.nbytes * 2 == st32.vectors.nbytes
    q = _vecs(1, seed=3)[0]
    assert [h.id for h in st16.dense_search(q, 3)] == _exact(v, q, 3)


def test_tombstones_excluded_then_compacted(tmp_path):
    st, v = _fill(tmp_path / "c", 3000)
    q = v[7]
    with st.writer() as w:
        assert w.delete(["p7", "p8", "nope"]) == 2
    st = open_store(tmp_path / "c")
    assert st.count() == 2998 and st.manifest.extra["slots"] == 3000
    assert "p7" not in {h.id for h in st.dense_search(q, 20)}
    with st.writer() as w:
        w.delete([f"p{i}" for i in range(100, 1100)])  # past a quarter of the slots: compact
    st = open_store(tmp_path / "c")
    assert st.manifest.extra["slots"] == st.count() == 1998
    top = st.dense_search(v[2000], 1)[0]
    assert top.id == "p2000" and abs(top.score - 1.0) < 1e-5
    assert st.keyword_search("product 2000", 1)[0].id == "p2000"
    np.testing.assert_allclose(st.get_vectors(["p2999"])[0], v[2999], atol=1e-6)


def test_filtered_dense_search_is_exact_and_complete(tmp_path):
    st, v = _fill(tmp_path / "f", 1000)
    q = _vecs(1, seed=5)[0]
    hits = st.dense_search(q, 10, parse_filter("shade = red and n >= 500"))
    ok = [i for i in range(1000) if i % 2 == 0 and i >= 500]
    want = [f"p{ok[j]}" for j in np.argsort(-(v[ok] @ q))[:10]]
    assert [h.id for h in hits] == want
    with pytest.raises(InputError):
        st.dense_search(q, 0)
    with pytest.raises(InputError, match="dimensions"):
        st.dense_search(np.ones(5), 3)


def test_rolled_back_writer_changes_nothing(tmp_path):
    st, _ = _fill(tmp_path / "r", 200)
    gen = st.manifest.extra["generation"]
    with pytest.raises(RuntimeError):
        with st.writer() as w:
            w.delete(["p1"])
            raise RuntimeError("boom")
    st2 = open_store(tmp_path / "r")
    assert st2.manifest.extra["generation"] == gen and st2.count() == 200


def test_crash_between_rename_and_manifest_swap(tmp_path, monkeypatch):
    """A writer dying after its generation is renamed into place but before manifest.json is swapped
    leaves the previous state readable; the next writer replaces the orphan."""
    import qkv.search.embedded.generations as emb

    st, v = _fill(tmp_path / "x", 300)
    gen = st.manifest.extra["generation"]

    def boom(*a, **k):
        raise OSError("simulated crash")

    monkeypatch.setattr(emb.os, "replace", boom)
    with pytest.raises(OSError):
        with st.writer() as w:
            w.delete(["p1"])
    monkeypatch.undo()
    again = open_store(tmp_path / "x")
    assert again.manifest.extra["generation"] == gen and again.count() == 300
    assert again.dense_search(v[1], 1)[0].id == "p1"
    with again.writer() as w:
        w.delete(["p2"])
    after = open_store(tmp_path / "x")
    assert after.count() == 299 and after.manifest.extra["generation"] != gen


def test_coverage_weighting_prefers_titles_matching_all_words():
    from qkv.search import fusion

    bm25 = {"rare-word-only": 6.0, "all-words": 5.0}
    w = fusion.coverage_weighted(bm25, {"rare-word-only": 1, "all-words": 3})
    assert w["all-words"] > w["rare-word-only"]
    fused = fusion.score_fusion({"rare-word-only": 0.5, "all-words": 0.5}, w, alpha=0.5)
    assert fusion.ranked(fused, 1)[0][0] == "all-words"
    assert fusion.rrf([["a", "b"], ["b", "c"]])["b"] == pytest.approx(1 / 62 + 1 / 61)
