"""The search's match grid in `qkv explain --query` (terminal, JSON, picture) on the multilingual
model: embedded with the model's own prefixes, words in both scripts, parts summing to the cosine."""

import json

import pytest
from typer.testing import CliRunner

from qkv.cli import app

TITLE, QUERY = "Breathable Mesh Running Shoes", "透气跑鞋"


def test_json_has_the_match_grid_with_its_context(e5):
    res = CliRunner().invoke(app, ["explain", TITLE, "-q", QUERY, "-m", "multilingual-e5-small", "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.output)["match"]
    assert m["word_grid"]["rows"] == ["透气", "跑鞋"] and m["word_grid"]["cols"] == TITLE.split()
    c = m["context"]
    assert (c["query_prefix"], c["passage_prefix"]) == ("query: ", "passage: ")
    total = sum(map(sum, m["word_grid"]["values"])) + c["prefix"] + c["special"]
    assert total == pytest.approx(m["parts_sum"], abs=1e-5) and m["parts_sum"] == pytest.approx(m["cosine"], abs=1e-6)
    v = e5.encode(["query: " + QUERY, "passage: " + TITLE])
    assert m["cosine"] == pytest.approx(float(v[0] @ v[1]), abs=2e-6)


def test_terminal_and_picture(tmp_path):
    res = CliRunner().invoke(app, ["explain", TITLE, "-q", QUERY, "-m", "multilingual-e5-small", "-o", str(tmp_path),
                                   "-f", "png"], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    assert "Match grid" in res.output and "跑鞋" in res.output and "prefix tokens" in res.output
    assert (tmp_path / "match.png").stat().st_size > 10_000


def test_match_figure_labels(e5):
    from qkv.explain.figures import _font_for, match_figure
    from qkv.search.explain import explain_titles

    (e,) = explain_titles(e5, QUERY, [TITLE], query_prefix="query: ", passage_prefix="passage: ")
    fig = match_figure(e)
    left, right = fig.axes[:2]
    assert [t.get_text() for t in left.get_yticklabels()] == ["透气", "跑鞋"]
    assert [t.get_text() for t in right.get_xticklabels()] == TITLE.split()
    assert _font_for(["透气"])[0] != "DejaVu Sans" or not _cjk_font_installed()


def _cjk_font_installed() -> bool:
    from matplotlib import font_manager

    return any(k in p.lower() for p in font_manager.findSystemFonts() for k in ("wqy", "notosanscjk", "noto-cjk"))
