"""qkv tour and qkv explain through the command line."""

import json

import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.errors import InputError
from qkv.explain import tour

from .conftest import NIKE, ZH

runner = CliRunner()


def test_tour_en_and_zh():
    r = runner.invoke(app, ["tour", NIKE])
    assert r.exit_code == 0, r.output
    assert "layer 5 · head 11" in r.output and "all equal" in r.output and "✓ equal" in r.output
    r = runner.invoke(app, ["tour", ZH, "--lang", "zh", "--layer", "0", "--head", "3", "--model", "minilm"])
    assert r.exit_code == 0, r.output
    assert "缺少这段文字的字符" in r.output and "手算" in r.output  # the English model's [UNK] note
    r = runner.invoke(app, ["tour", ZH, "--lang", "zh", "--layer", "0", "--head", "3"])  # no model: the rule's
    assert r.exit_code == 0, r.output
    assert "multilingual-e5-small" in r.output and "缺少这段文字的字符" not in r.output and "手算" in r.output


def test_tour_json():
    r = runner.invoke(app, ["tour", NIKE, "--json", "--layer", "1", "--head", "8"])
    d = json.loads(r.output)
    assert d["ok"] and d["layer"] == 1 and "layers.1.attn.weights[8]" in d["arrays"]


@pytest.mark.parametrize("args,match", [
    (["tour", ""], "empty"),
    (["tour", NIKE, "--layer", "6"], "layer 6 is out of range"),
    (["tour", NIKE, "--head", "99"], "head 99 is out of range"),
    (["tour", NIKE, "--lang", "fr"], "--lang"),
    (["explain", "shoe " * 600], "limit of 512"),
    (["explain"], "give one TEXT"),
    (["explain", NIKE, "--format", "gif"], "--format"),
])
def test_bad_input_one_clear_message(args, match):
    r = runner.invoke(app, args)
    assert isinstance(r.exception, InputError)
    assert match in str(r.exception)


def test_explain_console_and_json():
    r = runner.invoke(app, ["explain", NIKE, "--level", "word", "--hide-special"])
    assert r.exit_code == 0, r.output
    assert "Selling points" in r.output and "norm-weighted" in r.output and "Caveat" in r.output
    r = runner.invoke(app, ["explain", NIKE, "--json"])
    d = json.loads(r.output)
    assert {"layers.0.attn.weights", "layers.5.attn.weighted_norms", "rollout.5",
            "layers.3.value_zeroing"} <= set(d["maps"])
    assert d["heatmap"]["name"] == "layers.5.attn.weights"


def test_explain_writes_pictures(tmp_path):
    from PIL import Image

    r = runner.invoke(app, ["explain", NIKE, "--out", str(tmp_path), "--format", "png", "-q", "running shoes"])
    assert r.exit_code == 0, r.output
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert {"head_L5_H11.png", "layer_L5.png", "model.png", "compare_L5.png", "selling_points.png",
            "pair_occlusion.png"} <= set(pngs)
    for p in tmp_path.glob("*.png"):
        with Image.open(p) as im:
            im.verify()


def test_batch_with_index(tmp_path):
    titles = tmp_path / "titles.txt"
    titles.write_text(f"{NIKE}\n\nWireless Earbuds with Charging Case\n{'shoe ' * 600}\n", encoding="utf-8")
    out = tmp_path / "out"
    r = runner.invoke(app, ["explain", "--file", str(titles), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert (out / "index.html").is_file()
    pages = sorted(p.name for p in out.glob("0*.html"))
    assert pages == ["001-nike-air-max-270-men-s-running-shoes-bre.html", "002-wireless-earbuds-with-charging-case.html"]
    index = (out / "index.html").read_text()
    assert pages[0] in index and pages[1] in index
    assert "skipped line 4" in r.output and "limit of 512" in r.output


def test_tour_view_is_complete(encoder):
    """The terminal renderer (qkv.cli.tour_view) draws every step of a tour."""
    from rich.console import Console

    from qkv.cli.tour_view import render

    console = Console(record=True, width=160)
    for r in render(tour(encoder, NIKE), "en"):
        console.print(r)
    text = console.export_text()
    for needle in ("1 · Tokens", "2 · Project", "3 · Score", "4 · Scale", "5 · Softmax", "all equal",
                   "layers.5.attn.out", "✓ equal", "mainly attends to"):
        assert needle in text

