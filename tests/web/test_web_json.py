"""The web API and the CLI's --json answer through one converter (qkv.jsonable)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

QUERY = "breathable running shoes"


def _cli(index, mode, *extra):
    from qkv.cli import app as cli

    r = CliRunner().invoke(cli, ["search", QUERY, "--index", str(index), "-k", "5", "--mode", mode, "--json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)["results"]


def _web(client, mode, explain):
    w = client.post("/api/search", json={"query": QUERY, "k": 5, "mode": mode, "explain": explain})
    assert w.status_code == 200, w.text
    return w.json()["results"]


@pytest.mark.parametrize("mode", ["hybrid", "dense", "keyword"])
def test_cli_json_and_web_api_give_the_same_numbers(client, sample_index, mode):
    """One converter behind both faces: the same search, the same JSON, number for number (scores,
    per-side scores and ranks, fields)."""
    cli, web = _cli(sample_index, mode), _web(client, mode, False)
    assert len(cli) == 5
    assert cli == web
    assert all(x["score"] == round(x["score"], 6) for x in cli)  # rounded once, the same way


def test_match_explanations_are_the_same_numbers_too(client, sample_index):
    """The match grid, cosine and word shares of each result, from ``--explain`` and from the API.
    With ``--explain`` the CLI encodes the query in float32 so that the grid sums to the float32
    score; the web reuses its search's own query pass (``query_precision()``: bfloat16 or float16),
    so its grid sums to that pass's cosine. Both go through one converter: the same tokens and
    words, numbers within the query precision's distance, each grid exactly its own cosine."""
    cli, web = _cli(sample_index, "hybrid", "--explain"), _web(client, "hybrid", True)
    assert [x["id"] for x in cli] == [x["id"] for x in web]
    for c, w in zip(cli, web):
        ce, we = c["explanation"], w["explanation"]
        assert ce["query_tokens"] == we["query_tokens"] and ce["title_tokens"] == we["title_tokens"]
        assert [x["text"] for x in ce["title_words"]] == [x["text"] for x in we["title_words"]]
        assert abs(ce["cosine"] - we["cosine"]) < 2e-3
        for e in (ce, we):
            assert e["cosine"] == round(e["cosine"], 6)  # rounded once, the same way
            assert len(e["grid"]) == len(e["query_tokens"])
            assert abs(sum(map(sum, e["grid"])) - e["cosine"]) < 1e-4
