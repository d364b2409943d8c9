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


def test_terms_train_advise_and_eval_with_the_head(tmp_path):
    root = write_beir(tmp_path / "b")
    head = tmp_path / "seller" / "head.npz"
    r = runner.invoke(app, ["terms", "train", "--out", str(head), "--corpus", str(root / "corpus.jsonl"),
                            "--queries", str(root / "queries.jsonl"), "--qrels", str(root / "qrels.tsv")])
    assert r.exit_code == 0, r.output
    assert head.is_file() and "trained on 4 titles" in r.output  # p1, p2, p4, p5 have a query judged ≥ 2.5
    r = runner.invoke(app, _args(root) + ["--terms", str(head), "--method", "learned", "--json"])
    assert r.exit_code == 0, r.output
    rows = {x["ranking"]: x["ap"] for x in json.loads(r.output[r.output.index("{"):])["rows"]}
    assert any(k.startswith("qkv selling points (learned)") for k in rows) and len(rows) == 6
    report = tmp_path / "report.csv"
    report.write_text("search term,title,orders\nwhite floor tile,Acme Ceramic Floor Tiles in White 12 in.,4\n"
                      "angle bracket,Strong-Tie 18-Gauge Angle Brackets,2\n", encoding="utf-8")
    r = runner.invoke(app, ["terms", "train", "--out", str(tmp_path / "r.npz"), "--report", str(report)])
    assert r.exit_code == 0 and "trained on 2 titles" in r.output
    r = runner.invoke(app, ["terms", "advise", "Red Floor Tiles", "--terms", str(head),
                            "--catalog", str(root / "corpus.jsonl"), "--k", "3", "--json"])
    assert r.exit_code == 0, r.output
    adv = json.loads(r.output[r.output.index("{"):])["advice"]
    assert adv and all(a["word"].lower() not in ("red", "floor", "tile", "tiles") for a in adv)
    # trained on BEIR, the head read the corpus's neighbour share and brands: scoring needs the catalog
    r = runner.invoke(app, ["explain", "Acme Ceramic Floor Tiles", "--terms", str(head), "--json"])
    assert r.exit_code != 0 and "reads the catalog" in str(r.exception)
    r = runner.invoke(app, ["explain", "Acme Ceramic Floor Tiles", "--terms", str(head), "--catalog",
                            str(root / "corpus.jsonl"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["selling_points"]["method"] == "learned"
    r = runner.invoke(app, ["terms", "train", "--out", str(tmp_path / "t.npz"), "--no-catalog-features", "--corpus",
                            str(root / "corpus.jsonl"), "--queries", str(root / "queries.jsonl"), "--qrels",
                            str(root / "qrels.tsv")])
    assert r.exit_code == 0
    r = runner.invoke(app, ["explain", "Acme Ceramic Floor Tiles", "--terms", str(tmp_path / "t.npz"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["selling_points"]["method"] == "learned"


@pytest.mark.parametrize("args,match", [
    (["terms", "train", "--out", "h.npz"], "give --report"),
    (["terms", "train", "--out", "h.npz", "--qrels", "q.tsv"], "needs all three"),
    (["eval", "selling-points", "--corpus", "c", "--queries", "q", "--qrels", "r", "--method", "learned"], "needs --terms"),
    (["eval", "selling-points", "--corpus", "c", "--queries", "q", "--qrels", "r", "--half", "c"], "--half"),
    (["explain", "Angle Bracket", "--method", "catalog"], "needs a catalog"),
])
def test_bad_options(args, match):
    r = runner.invoke(app, args)
    assert r.exit_code != 0 and match in str(r.exception)
