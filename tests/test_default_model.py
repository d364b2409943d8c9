"""One rule picks the model when none is named (``qkv.model.default_model``): Chinese or mixed text
→ multilingual-e5-small, English → all-MiniLM-L6-v2, text not known yet (an index, a server) →
multilingual-e5-small; and every command run on Chinese text with no model named runs the
multilingual model, as its output says."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.model import default_model
from qkv.model.default import ENGLISH, MULTILINGUAL, is_english

runner = CliRunner()
E5 = "multilingual-e5-small"
TITLE = "耐克男士透气跑步鞋 Air Max 270 黑色 42码"


def test_the_rule():
    assert default_model(["Nike Air Max 270 Men's Running Shoes", "Café crème 2x4\" 18 in."]) == ENGLISH
    assert default_model("Đà Nẵng señor") == ENGLISH  # Latin letters with marks are still Latin
    assert default_model(["Running shoes", TITLE]) == MULTILINGUAL  # one Chinese text decides
    assert default_model("Nike 跑鞋") == MULTILINGUAL and default_model("кроссовки Nike") == MULTILINGUAL
    assert default_model(None) == MULTILINGUAL == default_model()  # an index, a server: queries not known yet
    assert is_english("42 · 2x4 — $9.99") and not is_english("ランニング")


def _ok(r):
    assert r.exit_code == 0, r.output
    return r.stdout


def test_encode_tour_explain_pick_the_multilingual_model_for_chinese():
    out = _ok(runner.invoke(app, ["encode", TITLE, "--json"]))
    assert E5 in json.loads(out)["model"]
    assert E5 in _ok(runner.invoke(app, ["tour", TITLE]))
    assert E5 in _ok(runner.invoke(app, ["explain", TITLE]))
    # and English text the English model (so the commands do pass their text to the rule)
    assert "all-MiniLM-L6-v2" in json.loads(_ok(runner.invoke(app, ["encode", "running shoes", "--json"])))["model"]
    assert "all-MiniLM-L6-v2" in _ok(runner.invoke(app, ["tour", "Nike running shoes"]))
    assert "all-MiniLM-L6-v2" in _ok(runner.invoke(app, ["explain", "Nike running shoes"]))


def _train(tmp_path, titles: dict[str, str]) -> str:
    rows = [{"input": t, "target_scores": {"brand": {b: 1}}} for t, b in titles.items()]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    out = _ok(runner.invoke(app, ["attrs", "train", "--data", str(tmp_path / "t.jsonl"), "--out",
                                  str(tmp_path / "m.qkvattr"), "--max-iter", "5", "--json"]))
    return json.loads(out)["encoder"]


def test_attrs_train_picks_it_for_chinese_titles(tmp_path):
    brands = ("耐克", "阿迪达斯", "李宁", "安踏")
    assert E5 in _train(tmp_path, {f"{b}男士透气跑步鞋 黑色 {s}码": b for b in brands for s in (40, 42)})
    brands = ("Nike", "Adidas", "Puma", "Asics")
    assert "all-MiniLM-L6-v2" in _train(tmp_path, {f"{b} men's running shoes size {s}": b for b in brands for s in (9, 10)})


def test_summarize_picks_it_for_chinese_reviews(tmp_path):
    f = tmp_path / "r.txt"
    f.write_text("鞋子很轻，跑步很舒服。\n尺码偏小，建议买大半码。\n透气性很好，夏天穿不闷脚。\n", encoding="utf-8")
    assert E5 in _ok(runner.invoke(app, ["summarize", str(f), "--budget", "20"]))
    assert E5 in json.loads(_ok(runner.invoke(app, ["summarize", str(f), "--budget", "20", "--json"])))["model"]
    f.write_text("Light and comfortable for running.\nRuns small, order half a size up.\nBreathable in summer.\n",
                 encoding="utf-8")
    assert "all-MiniLM-L6-v2" in _ok(runner.invoke(app, ["summarize", str(f), "--budget", "20"]))


def test_a_new_index_and_the_server_pick_it_and_a_stored_model_wins(tmp_path):
    cat = tmp_path / "c.csv"
    cat.write_text("id,title\n1,耐克男士透气跑步鞋\n2,不锈钢保温杯 500ml\n3,无线电钻 20V\n", encoding="utf-8")
    assert E5 in _ok(runner.invoke(app, ["index", str(cat), "--index", str(tmp_path / "i")]))
    pytest.importorskip("fastapi")
    from qkv.web.state import AppState

    assert E5 in AppState().encoder.name  # no index, no model: the rule's
    en = tmp_path / "en.csv"
    en.write_text("id,title\n1,running shoes\n2,steel water bottle\n", encoding="utf-8")
    _ok(runner.invoke(app, ["index", str(en), "--index", str(tmp_path / "en"), "--model", "minilm"]))
    assert "all-MiniLM-L6-v2" in AppState(index_dir=tmp_path / "en").encoder.name  # the index's own model
