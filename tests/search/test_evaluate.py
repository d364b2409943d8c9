import json
import math

import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.search.evaluate import in_half, load_qrels, mrr, ndcg, recall, spearman


def test_metrics_by_hand():
    judged = {"a": 3.0, "b": 2.0, "c": 1.0}  # gain = score - 1: a=2, b=1, c=0
    assert ndcg(["a", "b", "c"], judged, 1.0) == pytest.approx(1.0)
    worst = ndcg(["c", "x", "b", "a"], judged, 1.0)
    ideal = 2 + 1 / math.log2(3)
    assert worst == pytest.approx((1 / math.log2(4) + 2 / math.log2(5)) / ideal)
    assert mrr(["x", "c", "b"], judged, 1.0) == pytest.approx(1 / 3)
    assert mrr(["x", "c"], judged, 1.0) == 0.0
    assert recall(["b", "z"], judged, 1.0) == 0.5
    assert math.isnan(ndcg(["a"], {"a": 1.0}, 1.0))
    assert spearman([3, 2, 1], [3, 2, 1]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_halves_split_the_queries():
    ids = [f"q{i:05d}" for i in range(400)]
    a = {q for q in ids if in_half(q, "a")}
    b = {q for q in ids if in_half(q, "b")}
    assert a.isdisjoint(b) and a | b == set(ids) and 150 < len(a) < 250


def test_qrels_header_and_errors(tmp_path):
    p = tmp_path / "q.tsv"
    p.write_text("query-id\tcorpus-id\tscore\nq1\td1\t2.33\n")
    assert load_qrels(p) == {"q1": {"d1": 2.33}}
    p.write_text("q1\td1\thigh\n")
    with pytest.raises(ValueError, match="not a number"):
        load_qrels(p)


@pytest.fixture()
def beir(tmp_path, sample_catalog):
    import csv

    rows = list(csv.DictReader(open(sample_catalog, encoding="utf-8")))[:40]
    (tmp_path / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": r["id"], "title": r["title"], "text": ""}, ensure_ascii=False) + "\n" for r in rows))
    qs = {"q1": "running shoes", "q2": "hiking boots waterproof", "q3": "wool sweater"}
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in qs.items()))
    lines = ["query-id\tcorpus-id\tscore"]
    for r in rows:
        t = r["title"].lower()
        for q, words in (("q1", ["running shoes", "跑鞋"]), ("q2", ["hiking boots", "登山靴"]), ("q3", ["sweater", "毛衣"])):
            lines.append(f"{q}\t{r['id']}\t{3 if any(w in t for w in words) else 1}")
    (tmp_path / "qrels.tsv").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_cli_index_search_delete_eval(tmp_path, beir):
    runner = CliRunner()
    idx = tmp_path / "idx"
    r = runner.invoke(app, ["index", str(beir / "corpus.jsonl"), "--index", str(idx), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout[r.stdout.index("{"):])["count"] == 40
    r = runner.invoke(app, ["search", "waterproof boots", "--index", str(idx), "-k", "3", "--json", "--explain"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["results"]) == 3 and "explanation" in out["results"][0]
    e = out["results"][0]["explanation"]
    assert abs(sum(map(sum, e["grid"])) - e["cosine"]) < 1e-4
    r = runner.invoke(app, ["search", "boots", "--index", str(idx), "--where", "price <"])
    assert r.exit_code != 0
    r = runner.invoke(app, ["search", "waterproof boots", "--index", str(idx), "-k", "3", "--json",
                            "--ef-search", "300"])  # accepted (an exact index ignores it): same top 3
    assert r.exit_code == 0, r.output
    assert [x["id"] for x in json.loads(r.stdout)["results"]] == [x["id"] for x in out["results"]]
    r = runner.invoke(app, ["search", "boots", "--index", str(idx), "--ef-search", "0"])
    assert r.exit_code != 0 and "ef_search must be a whole number" in f"{r.exception} {r.output}"
    first = out["results"][0]["id"]
    r = runner.invoke(app, ["delete", first, "--index", str(idx)])
    assert r.exit_code == 0 and "removed 1 of 1" in r.output
    r = runner.invoke(app, ["eval", "search", "--corpus", str(beir / "corpus.jsonl"), "--queries",
                            str(beir / "queries.jsonl"), "--qrels", str(beir / "qrels.tsv"), "--index",
                            str(tmp_path / "eval-idx"), "--json"])
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout[r.stdout.index("{"):])
    assert set(m) >= {"keyword", "dense", "hybrid"} and m["queries"] == 3
    for mode in ("keyword", "dense", "hybrid"):
        assert 0.3 < m[mode]["ndcg@10"] <= 1.0
    # 40 documents, 100 ranked: dense (and hybrid, which fuses it) rank every document, so find
    # every relevant one; the keyword side ranks only documents sharing a query word
    assert m["dense"]["recall@100"] == 1.0 and m["hybrid"]["recall@100"] == 1.0
    assert 0 < m["keyword"]["recall@100"] <= m["dense"]["recall@100"]
    r = runner.invoke(app, ["eval", "search", "--corpus", str(beir / "corpus.jsonl"), "--queries",
                            str(beir / "queries.jsonl"), "--qrels", str(beir / "qrels.tsv"), "--index",
                            str(tmp_path / "eval-idx"), "--json", "--rerank"])
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout[r.stdout.index("{"):])
    assert m["protocol"] == "rerank" and m["dense"]["spearman"] > 0.2


def test_chinese_queries_are_evaluated_through_their_translation(tmp_path, beir, encoder):
    from qkv.search import Index, build_index
    from qkv.search.evaluate import evaluate, load_queries

    zh = {"q1": ("跑鞋", "running shoes"), "q2": ("防水 登山靴", "hiking boots waterproof"), "q3": ("毛衣", "wool sweater")}
    (beir / "queries.zh.jsonl").write_text("".join(
        json.dumps({"_id": k, "text": t, "en": e}, ensure_ascii=False) + "\n" for k, (t, e) in zh.items()),
        encoding="utf-8")
    assert load_queries(beir / "queries.zh.jsonl", "en") == {k: e for k, (_, e) in zh.items()}
    with pytest.raises(ValueError, match="'nope'"):
        load_queries(beir / "queries.zh.jsonl", "nope")
    build_index(beir / "corpus.jsonl", tmp_path / "idx", encoder)
    qrels = load_qrels(beir / "qrels.tsv")
    queries = load_queries(beir / "queries.zh.jsonl")
    with Index.open(tmp_path / "idx", encoder) as idx:
        on = evaluate(idx, queries, qrels)
        off = evaluate(idx, queries, qrels, translate=False)
    assert on.settings["translated"] == 3 and off.settings["translated"] == 0
    # the English titles are reachable by keyword only through the translation
    assert on.metrics["keyword"]["recall@100"] > off.metrics["keyword"]["recall@100"]
    assert on.metrics["hybrid"]["ndcg@10"] > off.metrics["hybrid"]["ndcg@10"]


def test_an_evaluation_on_the_adapters_own_judgments_says_it_is_not_held_out(tmp_path, beir):
    from typer.testing import CliRunner

    from qkv.cli import app

    runner = CliRunner()
    idx = tmp_path / "idx"
    beir_args = ["--queries", str(beir / "queries.jsonl"), "--qrels", str(beir / "qrels.tsv")]
    assert runner.invoke(app, ["index", str(beir / "corpus.jsonl"), "--index", str(idx)]).exit_code == 0
    r = runner.invoke(app, ["terms", "adapt", "--index", str(idx), *beir_args, "--epochs", "2"])
    assert r.exit_code == 0 and "installed" in r.output, r.output
    ev = ["eval", "search", "--corpus", str(beir / "corpus.jsonl"), *beir_args, "--index", str(idx), "--json"]
    r = runner.invoke(app, ev)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout[r.stdout.index("{"):])
    assert d["settings"]["query_adapter"]["fitted_on_these_queries"] is True
    assert "not held out" in r.stderr
    r = runner.invoke(app, ev + ["--no-adapter"])
    assert json.loads(r.stdout[r.stdout.index("{"):])["settings"]["query_adapter"] is None and "not held out" not in r.stderr


def test_a_run_compared_with_a_baseline_file_pairs_its_queries(tmp_path, beir):
    runner = CliRunner()
    ev = ["eval", "search", "--corpus", str(beir / "corpus.jsonl"), "--queries", str(beir / "queries.jsonl"),
          "--qrels", str(beir / "qrels.tsv"), "--index", str(tmp_path / "idx")]
    base = tmp_path / "base.json"
    r = runner.invoke(app, ev + ["--no-coverage", "--per-query", str(base), "--json"])
    assert r.exit_code == 0, r.output
    before = json.loads(r.stdout[r.stdout.index("{"):])
    doc = json.loads(base.read_text())
    assert doc["queries"] == ["q1", "q2", "q3"]
    for mode in ("keyword", "dense", "hybrid"):  # the file's per-query values are the means' own
        vals = [x for x in doc["modes"][mode]["ndcg@10"] if x is not None]
        assert sum(vals) / len(vals) == pytest.approx(before[mode]["ndcg@10"])
    r = runner.invoke(app, ev + ["--baseline", str(base), "--json"])  # coverage on: only hybrid can move
    assert r.exit_code == 0, r.output
    now = json.loads(r.stdout[r.stdout.index("{"):])
    diffs = {(d["mode"], d["metric"]): d for d in now["baseline"]["differences"]}
    assert len(diffs) == 9 and all(d["n"] == 3 for d in diffs.values())
    for metric in ("ndcg@10", "mrr@10", "recall@100"):
        assert diffs[("keyword", metric)]["delta"] == 0 and diffs[("keyword", metric)]["p"] == 1.0
        h = diffs[("hybrid", metric)]
        assert h["delta"] == pytest.approx(now["hybrid"][metric] - before["hybrid"][metric])
    r = runner.invoke(app, ev + ["--baseline", str(base)])  # the table
    assert r.exit_code == 0 and f"against {base}" in r.output and "± SE" in r.output, r.output
    (tmp_path / "junk.json").write_text("[]")
    r = runner.invoke(app, ev + ["--baseline", str(tmp_path / "junk.json")])
    assert r.exit_code != 0 and "not a per-query file" in f"{r.exception} {r.output}"
    r = runner.invoke(app, ev + ["--baseline", str(base), "--rerank"])  # refused before the run
    assert r.exit_code != 0 and "protocol" in f"{r.exception} {r.output}"
    kept = tmp_path / "kept.json"
    r = runner.invoke(app, ev + ["--baseline", str(base), "--gain-offset", "0", "--per-query", str(kept)])
    assert r.exit_code != 0 and "--gain-offset" in f"{r.exception} {r.output}"
    assert json.loads(kept.read_text())["settings"]["gain_offset"] == 0.0  # the run itself is kept
