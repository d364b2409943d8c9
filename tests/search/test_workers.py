"""Embedding in several processes (``build_index(workers=N)``, ``qkv index --workers N``) gives the
same index as one process."""

import json

import numpy as np
from typer.testing import CliRunner

from qkv.cli import app
from qkv.search import build_index
from qkv.search.store import open_store


def _vectors(path):
    with open_store(path) as st:
        ids = st.all_ids()
        return ids, st.get_vectors(ids)


def test_two_worker_processes_build_the_same_index(tmp_path, small_csv, encoder):
    one = build_index(small_csv, tmp_path / "one", encoder, batch_size=4)
    two = build_index(small_csv, tmp_path / "two", encoder, batch_size=4, workers=2)
    assert two.embedded == one.embedded == 12 and two.count == 12
    ids1, v1 = _vectors(tmp_path / "one")
    ids2, v2 = _vectors(tmp_path / "two")
    assert ids1 == ids2
    np.testing.assert_allclose(v2, v1, atol=1e-5)  # same weights, one BLAS thread in each process


def test_cli_index_with_workers(tmp_path, small_csv):
    res = CliRunner().invoke(app, ["index", str(small_csv), "--index", str(tmp_path / "idx"), "--workers", "2",
                                   "--batch-size", "4", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])  # after the progress bar
    assert rep["embedded"] == 12 and rep["count"] == 12
