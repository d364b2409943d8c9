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
