"""qkv eval selling-points through the command line, on a BEIR set written by the test."""

import json

import pytest
from typer.testing import CliRunner

from qkv.cli import app

from .test_evaluate_points import write_beir

runner = CliRunner()


def _args(root):
    return ["eval", "selling-points", "--corpus", str(root / "corpus.jsonl"), "--queries",
            str(root / "queries.jsonl"), "--qrels", str(root / "qrels.tsv")]


def test_eval_selling_points_prints_qkv_beside_baselines(tmp_path):
    root = write_beir(tmp_path / "b")
    r = runner.invoke(app, _args(root) + ["--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output[r.output.index("{"):])
    rows = {x["ranking"]: x["ap"] for x in d["rows"]}
    assert d["titles"] == 2 and len(rows) == 8  # catalog, title, rollout, random and four baselines
    assert rows["title order"] == pytest.approx(0.6556, abs=1e-4)
    assert rows["reverse title order"] == pytest.approx(0.5694, abs=1e-4)
    assert any(k.startswith("qkv selling points") and 0 < v <= 1 for k, v in rows.items())
    r = runner.invoke(app, _args(root))
    assert r.exit_code == 0 and "reverse title order" in r.output and "0.5694" in r.output


def test_eval_selling_points_missing_file(tmp_path):
    root = write_beir(tmp_path / "b")
    r = runner.invoke(app, _args(root)[:-1] + [str(tmp_path / "nope.tsv")])
    assert r.exit_code != 0 and "no qrels file" in str(r.exception or r.output)
