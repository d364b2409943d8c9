"""``qkv store migrate``: embedded → Milvus Lite → embedded, verified by counts and sampled vectors."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.errors import InputError
from qkv.scale.migrate import MigrationMismatch, migrate, verify
from qkv.search.store import open_store


def test_migrated_copy_matches_the_source(embedded_index, milvus_index):
    handle, report = milvus_index
    a, b = open_store(embedded_index), open_store(handle)
    assert report.count == report.target_count == a.count() == b.count() == 276
    assert report.sampled == 50 and report.max_vector_diff == 0.0
    ids = a.all_ids()
    assert sorted(ids) == sorted(b.all_ids())
    np.testing.assert_array_equal(a.get_vectors(ids), b.get_vectors(ids))  # every vector, not only the sample
    assert a.get_rows(ids) == b.get_rows(ids)
    assert json.loads((handle / "manifest.json").read_text())["fingerprint"] == a.manifest.fingerprint


def test_round_trip_back_to_embedded_and_a_bad_copy_is_caught(tmp_path, milvus_index, embedded_index):
    handle, _ = milvus_index
    r = migrate(handle, str(tmp_path / "back"), sample=276)
    assert r.count == r.target_count == 276 and r.uri is None and r.max_vector_diff == 0.0
    back = open_store(tmp_path / "back")
    assert back.manifest.backend == "embedded"
    # damage one product in a copy: verification must notice
    copy = tmp_path / "copy"
    migrate(embedded_index, f"milvus://{tmp_path}/copy.db", copy, sample=10)
    st = open_store(copy)
    pid = st.all_ids()[0]
    with st.writer() as w:
        w.upsert(st.get_rows([pid]), -st.get_vectors([pid]), ["x"])
    with pytest.raises(MigrationMismatch, match="vectors differ"):
        verify(open_store(embedded_index), open_store(copy), sample=276)
    with st.writer() as w:
        w.delete([pid])
    with pytest.raises(MigrationMismatch, match="275 products"):
        verify(open_store(embedded_index), open_store(copy))


def test_cli_migrate(tmp_path, embedded_index):
    res = CliRunner().invoke(app, ["store", "migrate", "--from", str(embedded_index), "--to",
                                   f"milvus://{tmp_path}/cli.db#cli", "--index", str(tmp_path / "h"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert out["count"] == out["target_count"] == 276 and out["sampled"] > 0
    res = CliRunner().invoke(app, ["search", "waterproof boots", "--index", str(tmp_path / "h"), "-k", "2",
                                   "--mode", "keyword", "--json"])
    assert res.exit_code == 0, res.output
    assert "Waterproof" in res.output
    res = CliRunner().invoke(app, ["store", "migrate", "--from", str(embedded_index), "--to", "ftp://nowhere"])
    assert res.exit_code != 0 and isinstance(res.exception, InputError) and "unknown store URI" in str(res.exception)
    with pytest.raises(InputError, match="source itself"):
        migrate(embedded_index, str(embedded_index))


def test_cli_store_index_local_into_milvus_and_info(tmp_path, small_csv):
    uri = f"milvus://{tmp_path}/ci.db#cat"
    res = CliRunner().invoke(app, ["store", "index", str(small_csv), "--index", str(tmp_path / "h"), "--engine",
                                   "local", "--store", uri, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output[res.output.index("{"):])["count"] == 12
    res = CliRunner().invoke(app, ["store", "info", "--index", str(tmp_path / "h")])
    info = json.loads(res.output[res.output.index("{"):])
    assert info["backend"] == "milvus" and info["count"] == 12 and info["collection"] == "cat"
    assert info["fields"]["price"] == "number"
    res = CliRunner().invoke(app, ["store", "index", str(small_csv), "--index", str(tmp_path / "x"), "--engine", "spark"])
    assert isinstance(res.exception, InputError) and "ray or local" in str(res.exception)


def test_qkv_index_dispatches_store_and_engine(tmp_path, small_csv):
    """`qkv index --store URI` builds into Milvus through the same path as `qkv store index`, and a
    mode the Ray engine cannot do (upsert) or an unknown engine is refused clearly."""
    res = CliRunner().invoke(app, ["index", str(small_csv), "--index", str(tmp_path / "h"),
                                   "--store", f"milvus://{tmp_path}/d.db"])
    assert res.exit_code == 0, res.output
    assert "milvus://" in res.output and "12 products" in res.output
    res = CliRunner().invoke(app, ["store", "info", "--index", str(tmp_path / "h")])
    assert '"backend": "milvus"' in res.output
    res = CliRunner().invoke(app, ["index", str(small_csv), "--index", str(tmp_path / "r"), "--engine", "ray",
                                   "--upsert"])
    assert res.exit_code != 0 and "--upsert works with the local engine" in str(res.exception or res.output)
    res = CliRunner().invoke(app, ["index", str(small_csv), "--index", str(tmp_path / "x"), "--engine", "spark"])
    assert res.exit_code != 0 and "--engine must be local or ray" in str(res.exception or res.output)


def test_a_milvus_uri_names_its_index_wherever_an_index_is_named(tmp_path, embedded_index):
    """`qkv search --index milvus:///…` (and Index.open, store info, --from) find the index directory a
    Milvus Lite URI was created with; a URI with no index recorded gets an error naming what to pass."""
    from qkv.search import Index
    from qkv.search.store import IndexError_

    uri = f"milvus://{tmp_path}/named.db#named"
    migrate(embedded_index, uri, tmp_path / "handle", sample=5)
    res = CliRunner().invoke(app, ["search", "waterproof boots", "--index", uri, "-k", "2", "--mode", "keyword", "--json"])
    assert res.exit_code == 0, res.output
    assert "Waterproof" in res.output
    with Index.open(uri) as idx:
        assert len(idx) == 276 and idx.store.path == (tmp_path / "handle").resolve()
    res = CliRunner().invoke(app, ["store", "info", "--index", uri])
    assert res.exit_code == 0 and '"count": 276' in res.output
    res = CliRunner().invoke(app, ["search", "boots", "--index", f"milvus://{tmp_path}/named.db", "--mode", "keyword"])
    assert res.exit_code != 0 and isinstance(res.exception, IndexError_)
    msg = str(res.exception)
    assert "no qkv index is recorded for collection 'qkv_products'" in msg and "directory holding manifest.json" in msg
    with pytest.raises(IndexError_, match="Milvus server, where qkv records no index directory"):
        Index.open("http://localhost:1/#x")


def _dense(path, query, encoder=None):
    from qkv.search import Index

    with Index.open(path, encoder) as idx:
        return [(r.id, round(r.score, 5)) for r in idx.search(query, k=5, mode="dense")]


def test_a_copy_of_a_multilingual_index_embeds_its_queries_with_the_models_prefix(tmp_path, small_csv, e5):
    """multilingual-e5 embeds "query: …" against "passage: …" titles: a copy that lost the manifest's
    prefixes would search with bare queries (other scores, other order) and upsert bare titles."""
    from qkv.search import build_index

    build_index(small_csv, tmp_path / "src", e5)
    for to, handle in ((str(tmp_path / "dir"), None), (f"milvus://{tmp_path}/e5.db", tmp_path / "mh")):
        rep = migrate(tmp_path / "src", to, handle, sample=12)
        target = handle or tmp_path / "dir"
        m = open_store(target).manifest
        assert (m.extra["query_prefix"], m.extra["passage_prefix"]) == ("query: ", "passage: ")
        assert _dense(target, "waterproof hiking boots", e5) == _dense(tmp_path / "src", "waterproof hiking boots", e5)
        assert rep.notes == [] and not rep.query_adapter and not rep.term_weights


def test_the_query_adapter_goes_with_the_copy_and_a_broken_one_is_named(tmp_path, small_csv, encoder):
    from qkv.search import build_index
    from qkv.search.adapter import FILE, QueryAdapter, install

    src = tmp_path / "src"
    build_index(small_csv, src, encoder)
    m = open_store(src).manifest
    rng = np.random.default_rng(0)
    W = (np.eye(m.dim) + 0.3 * rng.standard_normal((m.dim, m.dim))).astype(np.float32)
    install(src, QueryAdapter(W, m.model, m.fingerprint, {"spread": 1.2}))
    q = "warm winter jacket"
    for to, handle in ((str(tmp_path / "dir"), None), (f"milvus://{tmp_path}/ad.db", tmp_path / "mh")):
        rep = migrate(src, to, handle, sample=5)
        target = handle or tmp_path / "dir"
        assert rep.query_adapter and rep.notes == []
        np.testing.assert_array_equal(QueryAdapter.load(target / FILE).W, W)
        assert _dense(target, q, encoder) == _dense(src, q, encoder)
    res = CliRunner().invoke(app, ["store", "migrate", "--from", str(src), "--to", str(tmp_path / "cli")])
    assert res.exit_code == 0 and "kept: query adapter" in res.output, res.output
    (src / FILE).write_bytes(b"not an adapter")  # the copy goes ahead, without it, and says why
    rep = migrate(src, str(tmp_path / "broken"), sample=5)
    assert not rep.query_adapter and not (tmp_path / "broken" / FILE).exists()
    assert len(rep.notes) == 1 and "query adapter was not copied" in rep.notes[0] and "qkv terms adapt" in rep.notes[0]


def test_an_embedded_copy_keeps_learned_term_weights_and_milvus_says_it_cannot(tmp_path, encoder):
    import csv

    from qkv.explain import terms as T
    from qkv.search import build_index

    report = [("kitchen faucet", "Glacier Bay Kitchen Faucet", 5), ("wrench", "Faucet Wrench Tool", 5),
              ("basin wrench", "Faucet Basin Wrench", 4), ("faucet", "Delta Chrome Shower Faucet", 4),
              ("hinge", "Cabinet Door Hinge", 3), ("lamp", "Desk Lamp Shade", 3)]
    with open(tmp_path / "report.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("search term", "product title", "clicks"), *report])
    head = T.train(encoder, T.examples_from_report(tmp_path / "report.csv")).save(tmp_path / "head.npz")
    (tmp_path / "cat.csv").write_text("id,title\nB,Faucet Wrench Tool Set\nA,Glacier Bay Kitchen Faucet\n"
                                      "C,Cabinet Door Hinge\nD,Desk Lamp Shade Kit\n", encoding="utf-8")
    src = tmp_path / "src"
    build_index(tmp_path / "cat.csv", src, encoder, term_weights=head)
    rep = migrate(src, str(tmp_path / "dir"), sample=4)
    a, b = open_store(src), open_store(tmp_path / "dir")
    ids = a.all_ids()
    assert rep.term_weights and rep.notes == []
    assert b.manifest.extra["term_weights"] == a.manifest.extra["term_weights"]
    assert b.keyword_texts(ids) == a.keyword_texts(ids) != [r["title"].lower() for r in a.get_rows(ids)]
    from qkv.search import Index

    for q in ("faucet", "kitchen faucet"):
        with Index.open(src, encoder) as x, Index.open(tmp_path / "dir", encoder) as y:
            assert [(r.id, r.score) for r in x.search(q, k=4, mode="keyword")] == \
                   [(r.id, r.score) for r in y.search(q, k=4, mode="keyword")]
    rep = migrate(src, f"milvus://{tmp_path}/tw.db", tmp_path / "mh", sample=4)
    assert not rep.term_weights and "term_weights" not in open_store(tmp_path / "mh").manifest.extra
    assert len(rep.notes) == 1 and "Milvus does not hold learned term weights" in rep.notes[0]
