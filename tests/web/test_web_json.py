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
    (The scores beside them may differ in the last digits: with ``--explain`` the CLI encodes the
    query in float32 so that the grid sums to the score; the web searches on float16 copies and
    explains afterwards.)"""
    cli, web = _cli(sample_index, "hybrid", "--explain"), _web(client, "hybrid", True)
    assert [x["id"] for x in cli] == [x["id"] for x in web]
    for c, w in zip(cli, web):
        assert c["explanation"] == w["explanation"]
        assert len(c["explanation"]["grid"]) == len(c["explanation"]["query_tokens"])
