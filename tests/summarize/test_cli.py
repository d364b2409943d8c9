import json

from typer.testing import CliRunner

from qkv.cli import app
from qkv.errors import InputError

from .conftest import SHOE_RATINGS, SHOE_REVIEWS

runner = CliRunner()


def _reviews(tmp_path):
    f = tmp_path / "reviews.txt"
    f.write_text("\n".join(SHOE_REVIEWS) + "\n", encoding="utf-8")
    return f


def test_summarize_table_and_json(tmp_path):
    f = _reviews(tmp_path)
    r = runner.invoke(app, ["summarize", str(f), "--budget", "40"])
    assert r.exit_code == 0, r.output
    assert "saving" in r.stdout and "cl100k tokens (budget 40)" in r.stdout
    r = runner.invoke(app, ["summarize", str(f), "--budget", "40", "--tokenizer", "o200k", "--order", "score",
                            "--json"])
    assert r.exit_code == 0, r.output
    (s,) = json.loads(r.stdout)["summaries"]
    assert s["tokenizer"] == "o200k" and s["tokens_after"] <= 40 and s["order"] == "score"
    assert s["tokens_before"] > s["tokens_after"] and s["saving"] > 0
    assert all(SHOE_REVIEWS[x["review"]][x["start"]:x["end"]] == x["text"] for x in s["sentences"])


def test_summarize_csv_groups_and_ratings(tmp_path):
    f = tmp_path / "r.csv"
    lines = ["product,review,rating"] + [f'P{i % 2},"{t}",{r}' for i, (t, r) in enumerate(zip(SHOE_REVIEWS, SHOE_RATINGS))]
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = runner.invoke(app, ["summarize", str(f), "--group", "product", "--budget", "30", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["summaries"]
    assert [s["product"] for s in out] == ["P0", "P1"]
    assert all(x["rating"] is not None for s in out for x in s["sentences"])
    r = runner.invoke(app, ["summarize", str(f), "--column", "body"])
    assert isinstance(r.exception, InputError) and "no review column 'body'" in str(r.exception)


def test_summarize_errors(tmp_path):
    f = _reviews(tmp_path)
    r = runner.invoke(app, ["summarize", str(f), "--budget", "3"])
    assert isinstance(r.exception, InputError) and "smaller than every sentence" in str(r.exception)
    r = runner.invoke(app, ["summarize", str(f), "--budget", "3", "--allow-cut", "--json"])
    assert r.exit_code == 0, r.output
    (s,) = json.loads(r.stdout)["summaries"]
    assert s["cut"] and s["tokens_after"] <= 3
    b = tmp_path / "x.bin"
    b.write_bytes(bytes(range(256)))
    r = runner.invoke(app, ["summarize", str(b)])
    assert isinstance(r.exception, InputError) and "binary" in str(r.exception)
    r = runner.invoke(app, ["summarize", str(f), "--tokenizer", "gpt2"])
    assert isinstance(r.exception, InputError) and "unknown tokenizer" in str(r.exception)


def test_eval_summarize(tmp_path):
    head = ["cat", "group_id"] + [f"rev{i}" for i in range(1, 4)] + ["summ1", "summ2"] + [f"rating{i}" for i in range(1, 4)]
    rows = [
        ["shoes", "P1", SHOE_REVIEWS[0], SHOE_REVIEWS[1], SHOE_REVIEWS[4],
         "Light, comfortable running shoes that fit true to size.", "Comfortable and light, but the sole may come off.",
         "5", "4", "1"],
        ["shoes", "P2", SHOE_REVIEWS[2], SHOE_REVIEWS[3], SHOE_REVIEWS[5],
         "Comfortable and good value, though quality is poor for some.", "Light shoes; the sole can come off.",
         "4", "5", "2"],
    ]
    f = tmp_path / "dev.csv"
    f.write_text("\n".join("\t".join(r) for r in [head, *rows]) + "\n", encoding="utf-8")
    r = runner.invoke(app, ["eval", "summarize", "--data", str(f), "--budget", "20,40", "--seeds", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["n_products"] == 2 and out["references_per_product"] == 2
    systems = {row["system"] for row in out["rows"]}
    assert systems == {"qkv", "lead", "random", "lexrank", "textrank", "centroid", "oracle"}
    for row in out["rows"]:
        assert row["max_tokens"] <= row["budget"] and 0 <= row["rouge1"] <= 100
    r = runner.invoke(app, ["eval", "summarize", "--data", str(f), "--budget", "40", "--systems", "qkv,lead"])
    assert r.exit_code == 0 and "qkv" in r.stdout and "R-1@40" in r.stdout
    r = runner.invoke(app, ["eval", "summarize", "--data", str(f), "--budget", "x"])
    assert isinstance(r.exception, InputError)
    r = runner.invoke(app, ["eval", "summarize", "--data", str(tmp_path / "none.csv")])
    assert isinstance(r.exception, InputError)
