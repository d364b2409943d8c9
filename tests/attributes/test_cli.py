import csv
import json

from typer.testing import CliRunner

from qkv.attributes.data import write_jsonl
from qkv.cli import app

runner = CliRunner()


def test_train_extract_eval(tmp_path, synthetic):
    train, test = synthetic
    write_jsonl(train, tmp_path / "train.jsonl")
    write_jsonl(test, tmp_path / "test.jsonl")
    model = tmp_path / "m.qkvattr"
    r = runner.invoke(app, ["attrs", "train", "--data", str(tmp_path / "train.jsonl"), "--out", str(model),
                            "--max-iter", "40", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["train"]["titles"] == len(train) and model.is_file()

    title = test[0].title
    r = runner.invoke(app, ["attrs", "extract", title, "--model", str(model), "--json"])
    assert r.exit_code == 0, r.output
    (res,) = json.loads(r.stdout)["results"]
    assert res["title"] == title and res["attributes"]
    for a in res["attributes"]:
        assert title[a["start"]:a["end"]] == a["value"]

    r = runner.invoke(app, ["attrs", "eval", "--model", str(model), "--data", str(tmp_path / "test.jsonl"), "--json"])
    assert r.exit_code == 0, r.output
    ev = json.loads(r.stdout)["exact"]
    assert ev["offers"] == len(test) and ev["micro"]["f1"] > 80
    assert set(ev["per_attribute"]) >= {"Brand", "Type"}

    r = runner.invoke(app, ["attrs", "eval", "--model", str(model), "--data", str(tmp_path / "test.jsonl")])
    assert r.exit_code == 0 and "per attribute" in r.stdout and "micro" in r.stdout

    rows = tmp_path / "catalog.csv"
    with open(rows, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["sku", "name"])
        for i, ex in enumerate(test[:5]):
            w.writerow([i, ex.title])
        w.writerow([99, ""])
    out = tmp_path / "attrs.jsonl"
    r = runner.invoke(app, ["attrs", "extract", "--file", str(rows), "--column", "name", "--out", str(out),
                            "--model", str(model)])
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 6 and lines[-1] == {"title": "", "attributes": []}

    r = runner.invoke(app, ["attrs", "extract", "--file", str(rows), "--column", "title", "--model", str(model)])
    assert r.exit_code != 0 and "no column 'title'" in str(r.exception)


def test_model_is_required():
    r = runner.invoke(app, ["attrs", "extract", "Zorvex Backpack"])
    assert r.exit_code != 0 and "--model FILE is required" in str(r.exception)


def test_malformed_training_file(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"input": "a", "target_scores": {}}\nnot json\n', encoding="utf-8")
    r = runner.invoke(app, ["attrs", "train", "--data", str(p), "--out", str(tmp_path / "m")])
    assert r.exit_code != 0 and "bad.jsonl:2" in str(r.exception)
