"""The Milvus store (Milvus Lite, embedded, offline): the search suite's scenarios run on it and on the
embedded store; filters agree with the reference evaluator; writes are all-or-nothing per block."""

import csv
import importlib.util
import inspect
from pathlib import Path

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.scale.milvus_store import MilvusStore, parse_uri
from qkv.search import Index, build_index
from qkv.search.store import title_hash
from qkv.search.filters import parse_filter
from qkv.search.index import delete_products
from qkv.search.store import Manifest, WriterBusy, open_store

# the search area's own scenarios (tests/search/test_index.py), reused as-is against every store
_spec = importlib.util.spec_from_file_location(
    "search_scenarios", Path(__file__).resolve().parents[1] / "search" / "test_index.py")
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)
SCENARIOS = [S.test_dense_scores_are_cosines, S.test_semantic_match_without_shared_words,
             S.test_chinese_queries_match_through_keywords, S.test_keyword_mode_and_bm25_terms_sum,
             S.test_explanation_parts_sum_to_the_dense_score, S.test_hybrid_fuses_both_sides, S.test_filters]


@pytest.fixture(scope="module")
def idx(any_index, encoder):
    with Index.open(any_index, encoder) as i:
        yield i


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__[5:])
def test_search_scenario(scenario, idx, encoder):
    kwargs = {"idx": idx, "encoder": encoder}
    scenario(**{k: kwargs[k] for k in inspect.signature(scenario).parameters})


@pytest.mark.parametrize("query, k, mode", [("", 5, "hybrid"), ("shoes", 0, "hybrid"), ("shoes", 5, "fuzzy")])
def test_bad_queries_are_refused(idx, query, k, mode):
    with pytest.raises(InputError):
        idx.search(query, k=k, mode=mode)


def test_dense_ranking_matches_the_embedded_store(embedded_index, milvus_index, encoder):
    q = encoder.encode(["warm waterproof jacket"])[0]
    a, b = open_store(embedded_index), open_store(milvus_index[0])
    ha, hb = a.dense_search(q, 10), b.dense_search(q, 10)
    assert [h.id for h in ha] == [h.id for h in hb]
    np.testing.assert_allclose([h.score for h in ha], [h.score for h in hb], atol=1e-5)
    assert isinstance(b, MilvusStore) and b.manifest.backend == "milvus"


FILTERS = ["price < 20", "price >= 50 and rating > 4.2", "colour = RED", "colour != red", "brand in (Velora, northpeak)",
           "not category = toys", "title contains waterproof", "size contains 'ml'", "(category = toys or category = beauty) and price < 15",
           "id = p0001", "brand = 'No Such Brand'", "not (colour in (red, blue) or price > 100)", "size = 42"]


@pytest.mark.parametrize("text", FILTERS)
def test_filter_expressions_agree_with_the_reference(text, milvus_index, sample_catalog):
    st = open_store(milvus_index[0])
    flt = parse_filter(text)
    kinds = {f.name: f.kind for f in st.fields()}
    rows = []
    for r in csv.DictReader(open(sample_catalog, encoding="utf-8")):
        rows.append({k: (float(v) if kinds.get(k) == "number" and v != "" else (v if v != "" else None))
                     for k, v in r.items()})
    expected = sorted(r["id"] for r in rows if flt.matches(r))
    got = sorted(str(x["id"]) for x in st.client.query(st.collection, filter=st.filter_expr(flt), output_fields=["id"],
                                                        limit=16384))
    assert got == expected
    # and a filtered dense search returns exactly the allowed products, best first
    hits = st.dense_search(np.ones(st.manifest.dim, np.float32) / np.sqrt(st.manifest.dim), 500, flt)
    assert sorted(h.id for h in hits) == expected


def _manifest(dim=8):
    return Manifest(model="m", fingerprint="f", dim=dim)


def _rows(n, start=0):
    return [{"id": f"p{i}", "title": f"product {i} colour {['red', 'blue'][i % 2]}", "shade": ["Red", "Blue"][i % 2],
             "n": float(i)} for i in range(start, start + n)]


def _vecs(n, dim=8, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_writer_is_all_or_nothing_and_single(tmp_path):
    st = MilvusStore.create(tmp_path / "h", _manifest(), uri=f"milvus://{tmp_path}/w.db#wtest")
    rows, v = _rows(30), _vecs(30)
    with st.writer(reset=True) as w:
        w.upsert(rows, v, [title_hash(r["title"]) for r in rows])
    assert st.count() == 30 and st.manifest.count == 30
    first = st.collection
    with pytest.raises(RuntimeError):
        with st.writer() as w:
            w.upsert(_rows(5, 100), _vecs(5, seed=1), ["h"] * 5)
            w.delete(["p0", "p1"])
            raise RuntimeError("crash inside the block")
    assert st.count() == 30 and st.get_rows(["p100"]) == [None]
    with pytest.raises(RuntimeError):  # a failed rebuild leaves the previous collection searchable
        with st.writer(reset=True) as w:
            w.upsert(_rows(3), _vecs(3), ["h"] * 3)
            raise RuntimeError("crash during rebuild")
    st = open_store(tmp_path / "h")
    assert st.collection == first and st.count() == 30
    assert [h.id for h in st.dense_search(v[7], 1)] == ["p7"]
    with st.writer() as w:
        with pytest.raises(WriterBusy):
            with open_store(tmp_path / "h").writer():
                pass
        assert w.delete(["p0", "p1", "nope"]) == 2
        w.update_fields([{"id": "p2", "shade": "GREEN"}])
    st = open_store(tmp_path / "h")
    assert st.count() == 28 and st.get_rows(["p2"])[0]["shade"] == "GREEN"
    np.testing.assert_allclose(st.get_vectors(["p2"])[0], v[2], atol=1e-7)  # fields changed, vector kept
    assert [h.id for h in st.dense_search(v[3], 3, parse_filter("shade = green"))] == ["p2"]
    with st.writer(reset=True) as w:  # a rebuild switches to a new collection and drops the old one
        w.upsert(_rows(4), _vecs(4), ["h"] * 4)
    st = open_store(tmp_path / "h")
    assert st.count() == 4 and st.collection != first and not st.client.has_collection(first)


def test_every_commit_is_a_new_generation_a_reader_can_reopen_to(tmp_path):
    """A committed write (update or rebuild) bumps the manifest's generation, so a reader opened
    before it gets a store on the new one from ``reopen_if_changed`` (None when nothing changed),
    the same contract as the embedded store's; the writer lock is search's (same message)."""
    st = MilvusStore.create(tmp_path / "h", _manifest(), uri=f"milvus://{tmp_path}/g.db#gtest")
    with st.writer(reset=True) as w:
        w.upsert(_rows(10), _vecs(10), ["h"] * 10)
    reader = open_store(tmp_path / "h")
    assert reader.reopen_if_changed() is None
    gen = reader.generation
    with open_store(tmp_path / "h").writer() as w:
        w.delete(["p0"])
        with pytest.raises(WriterBusy, match="another process is writing to the index at"):
            with open_store(tmp_path / "h").writer():
                pass
    new = reader.reopen_if_changed()
    assert new is not None and new.generation != gen and new.manifest.count == 9
    assert new.reopen_if_changed() is None
    with open_store(tmp_path / "h").writer(reset=True) as w:
        w.upsert(_rows(3), _vecs(3), ["h"] * 3)
    newer = new.reopen_if_changed()
    assert newer is not None and newer.count() == 3 and newer.collection != new.collection


def test_build_upsert_delete_through_the_index_api(tmp_path, small_csv, encoder):
    uri = f"milvus://{tmp_path}/b.db"
    r = build_index(small_csv, tmp_path / "idx", encoder, backend="milvus", uri=uri)
    assert r.embedded == r.count == 12
    lines = small_csv.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace(lines[1].split(",")[1], "Brand New Title For A Kettle", 1)
    small_csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = build_index(small_csv, tmp_path / "idx", encoder, upsert=True)
    assert (r.embedded, r.unchanged, r.count) == (1, 11, 12)
    with Index.open(tmp_path / "idx", encoder) as i:
        assert i.search("new kettle title", k=1, mode="keyword")[0].title == "Brand New Title For A Kettle"
    pid = lines[2].split(",")[0]
    assert delete_products(tmp_path / "idx", [pid, "missing"]) == 1
    assert open_store(tmp_path / "idx").count() == 11


@pytest.mark.parametrize("uri, msg", [("", "empty"), ("ftp://x", "unknown store URI"), ("milvus://x.sqlite", ".db"),
                                      ("milvus://a.db#bad-name", "collection name")])
def test_bad_uris_are_refused(uri, msg):
    with pytest.raises(InputError, match=msg):
        parse_uri(uri)


def test_existing_collection_is_not_overwritten(tmp_path):
    uri = f"milvus://{tmp_path}/c.db#taken"
    MilvusStore.create(tmp_path / "a", _manifest(), uri=uri)
    with pytest.raises(InputError, match="already exists"):
        MilvusStore.create(tmp_path / "b", _manifest(), uri=uri)
