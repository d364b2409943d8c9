"""bench/search_spelling.py on a small made-up BEIR set: ``words`` counts what search corrects and
``grid`` changes what it corrects by the module's settings."""

import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import search_spelling as sp  # noqa: E402  (bench/search_spelling.py)

from qkv.search import build_index, spelling  # noqa: E402

TITLES = ["Ceiling Fan with Light", "Ceiling Fan, Brushed Nickel", "Flush Mount Ceiling Light",
          "Refrigerator Water Filter", "Refrigerator Door Handle", "Ceiling Medallion"]
QUERIES = {"q1": "celing fan", "q2": "refrigeratr filter", "q3": "ceiling light"}


@pytest.fixture(scope="module")
def beir(tmp_path_factory, encoder):
    d = tmp_path_factory.mktemp("beir")
    (d / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"p{i}", "title": t}) + "\n" for i, t in enumerate(TITLES)))
    (d / "queries.dev.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
    (d / "qrels").mkdir()
    (d / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tp0\t3\nq1\tp1\t3\nq2\tp3\t3\nq3\tp2\t3\n")
    build_index(d / "corpus.jsonl", d / "idx", encoder)
    return d


def test_words_reports_the_corrections_search_makes(beir, capsys):
    sp.words(Namespace(data=beir, index=beir / "idx", half="all", show=5))
    out = capsys.readouterr().out
    assert "celing fan  →  ceiling fan" in out and "refrigeratr filter  →  refrigerator filter" in out
    assert "3 queries: 2 hold a word no title holds, 2 searched as a correction" in out


def test_grid_varies_a_setting_and_leaves_it_set(beir, capsys, monkeypatch):
    monkeypatch.setattr(spelling, "MAX_DISTANCE", spelling.MAX_DISTANCE)  # restored after the test
    sp.grid(Namespace(data=beir, index=beir / "idx", half="all", set=["MAX_DISTANCE=0,1"]))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("MAX_DISTANCE=0 corrected 0:") and lines[1].startswith("MAX_DISTANCE=1 corrected 2:")
    with pytest.raises(SystemExit, match="no setting NOPE"):
        sp.grid(Namespace(data=beir, index=beir / "idx", half="all", set=["NOPE=1"]))
