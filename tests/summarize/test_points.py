"""What buyers say, counted (issue 27 item 5): exact counts, labels taken from the units."""

import json

from typer.testing import CliRunner

from qkv.cli import app
from qkv.summarize import Params, get_counter, prepare, select, summarize

from .test_balance import WATER_HEATER

RATED = [5, 5, 5, None, 5, 5, 2, 1, 1, 2]


def test_points_count_reviews_exactly_and_quote_the_units(e5):
    s = summarize(WATER_HEATER, budget=120, encoder=e5, ratings=RATED, points=True)
    praise = s.points["praise"]
    assert praise and not s.points["complaints"]  # each complaint here is made by one review only
    heat = praise[0]
    # reviews 0, 2 and 5 say it heats fast ("加热很快", "加热速度快", "加热也快"); nobody else does
    assert heat.reviews == (0, 2, 5) and heat.count == 3 and heat.side == "praise"
    assert heat.label in WATER_HEATER[5] and "加热" in heat.label
    assert any(heat.example in WATER_HEATER[r] for r in heat.reviews)
    assert not heat.example.endswith(("，", ",")), heat.example  # a clause is quoted closed, not on its comma
    assert s.model == e5.name and s.to_dict()["model"] == e5.name  # the summary says which model read it
    d = s.to_dict()["points"]
    assert d["praise"][0]["count"] == 3 and d["praise"][0]["reviews"] == [0, 2, 5]


def test_identical_complaints_are_all_counted_on_the_clustered_path(e5):
    reviews = ["噪音很大，晚上睡不着。"] * 4 + ["加热很快，洗澡很方便。"] * 3 + [f"第{i}天用，外观还可以。" for i in range(8)]
    ratings = [1] * 4 + [5] * 3 + [4] * 8
    for params in (Params(), Params(full_limit=4, clusters=6)):
        doc = prepare(reviews, ratings=ratings, encoder=e5, params=params)
        s = select(doc, 60, get_counter("cl100k"), params, points=True)
        (noise,) = [p for p in s.points["complaints"] if "噪音" in p.label]
        assert noise.count == 4 and noise.reviews == (0, 1, 2, 3)
        for side in s.points.values():
            for p in side:
                assert p.count == len(p.reviews) >= 2


def test_cli_points_and_json(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("review,rating\n" + "\n".join(f"{t},{'' if r is None else r}" for t, r in zip(
        [t.replace(",", "，") for t in WATER_HEATER], RATED)), encoding="utf-8")
    runner = CliRunner()
    r = runner.invoke(app, ["summarize", str(f), "--budget", "120", "--model", "multilingual-e5-small", "--points"])
    assert r.exit_code == 0, r.output
    assert "praise" in r.stdout and "3 reviews" in r.stdout
    r = runner.invoke(app, ["summarize", str(f), "--budget", "120", "--model", "multilingual-e5-small", "--points",
                            "--json"])
    out = json.loads(r.stdout)["summaries"][0]
    assert out["points"]["praise"][0]["count"] == 3
    r = runner.invoke(app, ["summarize", str(f), "--budget", "120", "--model", "multilingual-e5-small", "--json"])
    assert "points" not in json.loads(r.stdout)["summaries"][0]
