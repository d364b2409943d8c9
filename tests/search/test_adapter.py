"""The query adapter (qkv.search.adapter): its gradient, its fit, what search, evaluation and the
explanation grid do with it, and how it is stored, refused and removed."""

import json
import shutil
import warnings

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.search import Index, adapter as A
from qkv.search.store import WriterBusy
from qkv.search.writelock import WriterLock


def test_the_gradient_is_the_losss():
    rng = np.random.default_rng(0)
    d, n = 6, 40
    V = rng.normal(size=(n, d)).astype(np.float32)
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    Q = rng.normal(size=(3, d))
    targets = [(np.array([1, 5]), np.array([0.75, 0.25])), (np.array([7]), np.array([1.0])),
               (np.array([2, 2]), np.array([0.5, 0.5]))]  # a product named twice counts twice
    W = np.eye(d) + 0.1 * rng.normal(size=(d, d))
    _, g = A.loss_and_grad(W, Q, targets, V, 0.5)
    num = np.zeros_like(W)
    for i in range(d):
        for j in range(d):
            E = np.zeros_like(W)
            E[i, j] = 1e-3
            num[i, j] = (A.loss_and_grad(W + E, Q, targets, V, 0.5)[0] - A.loss_and_grad(W - E, Q, targets, V, 0.5)[0]) / 2e-3
    np.testing.assert_allclose(g, num / len(Q), rtol=1e-2, atol=2e-3)  # float32 cosines: a wide step


def test_fitting_lowers_the_loss_and_moves_a_query_to_its_products():
    rng = np.random.default_rng(1)
    d, n = 16, 300
    V = rng.normal(size=(n, d)).astype(np.float32)
    V /= np.linalg.norm(V, axis=1, keepdims=True)
    # queries that point away from their products: only a fitted map brings them together
    M = np.linalg.qr(rng.normal(size=(d, d)))[0]
    rows = [rng.choice(n, 3, replace=False) for _ in range(200)]
    Q = np.stack([M @ V[r].mean(axis=0) for r in rows]).astype(np.float64)
    targets = [(r, np.full(3, 1 / 3)) for r in rows]
    losses = []
    W = A.fit(Q, targets, V, epochs=30, lr=0.01, batch=32, each_epoch=lambda W, ep, loss: losses.append(loss))
    assert losses[-1] < 0.5 * losses[0]
    before, after = A.dense_figures(Q, targets, V), A.dense_figures(Q, targets, V, W)
    assert after["ndcg@10"] > before["ndcg@10"] + 0.3 and after["recall@100"] > before["recall@100"]


def test_report_pairs_read_ids_or_titles():
    ids, titles = ["a", "b", "c"], ["Red Shoe", "Blue Shoe", "Red Shoe"]
    by_id, unknown = A.pairs_from_report([("shoe", "a", 2), ("shoe", "b", 1), ("x", "zz", 1), ("y", "c", 0)],
                                         ids, titles)
    assert by_id == {"shoe": {"a": 2.0, "b": 1.0}} and unknown == 1  # a weight of 0 teaches nothing
    by_title, unknown = A.pairs_from_report([("red shoe", "Red Shoe", 3), ("blue", "Blue Shoe", 1)], ids, titles)
    assert by_title == {"red shoe": {"a": 3.0, "c": 3.0}, "blue": {"b": 1.0}} and unknown == 0


def test_qrels_pairs_take_the_gain_as_evaluation_counts_it():
    got = A.pairs_from_qrels({"q1": "rug", "q2": "lamp", "q3": "rug"},
                             {"q1": {"a": 3, "b": 1}, "q2": {"c": 1}, "q3": {"a": 2}},
                             keep_query=lambda q: q != "q2")
    assert got == {"rug": {"a": 3.0}}  # 2 + 1; judgment 1 is not relevant


GIFTS = {  # what shoppers typed and which kind of product they bought: no title says "gift"
    "gift for a runner": "shoes", "present for my sister who cooks": "kitchen",
    "something for the living room": "home", "gadget for my dad": "electronics",
}


@pytest.fixture(scope="module")
def adapted(tmp_path_factory, sample_index, encoder):
    root = tmp_path_factory.mktemp("adapted") / "idx"
    shutil.copytree(sample_index, root)
    with Index.open(root, encoder) as idx:
        rows = idx.store.get_rows(idx.store.all_ids())
        pairs = {q: {r["id"]: 1.0 for r in rows if r["category"] == cat} for q, cat in GIFTS.items()}
        ad, rep = A.train(idx, pairs, epochs=40, lr=0.01)
    return root, pairs, ad, rep


def _found(idx, pairs, **kw):
    return sum(r.id in pairs[q] for q in pairs for r in idx.search(q, k=10, mode="dense", **kw))


def test_an_installed_adapter_is_what_search_and_evaluation_use(adapted, encoder):
    root, pairs, ad, rep = adapted
    assert rep.queries == 4 and rep.epochs == 40 and rep.held_out == 0  # too few queries to hold any out
    with Index.open(root, encoder) as idx:
        plain = _found(idx, pairs)
        assert idx.adapter() is None
        path = A.install(root, ad)
        assert idx.adapter() is not None  # picked up at the next search, no reopening
        fitted = _found(idx, pairs)
        plan = idx.plan("gift for a runner")
        v = idx.dense_vector(plan)
        np.testing.assert_allclose(v, ad.apply(idx.encode_query(plan.dense[0])), atol=1e-6)
        assert abs(float(np.linalg.norm(v)) - 1) < 1e-5
    assert fitted > plain
    with Index.open(root, encoder, adapter=False) as idx:
        assert idx.adapter() is None and _found(idx, pairs) == plain
    assert path == A.adapter_path(root)


def test_evaluation_reports_the_adapter_it_searched_with(adapted, encoder):
    from qkv.search.evaluate import evaluate

    root, pairs, ad, _ = adapted
    A.install(root, ad)
    queries = {f"q{n}": q for n, q in enumerate(pairs)}
    qrels = {f"q{n}": {i: 2 for i in pairs[q]} for n, q in enumerate(pairs)}
    with Index.open(root, encoder) as idx:
        on = evaluate(idx, queries, qrels)
    with Index.open(root, encoder, adapter=False) as idx:
        off = evaluate(idx, queries, qrels)
    assert on.settings["query_adapter"]["queries"] == 4 and off.settings["query_adapter"] is None
    assert on.metrics["dense"]["ndcg@10"] > off.metrics["dense"]["ndcg@10"]


def test_the_grid_still_sums_to_the_adapted_cosine(adapted, encoder):
    root, _, ad, _ = adapted
    A.install(root, ad)
    with Index.open(root, encoder) as idx:
        res = idx.search("gift for a runner", k=3, mode="dense", explain=True)
        for r in res:
            e = r.explanation
            assert e.exact and abs(e.parts_sum - e.cosine) < 1e-5
            assert abs(e.cosine - r.score) < 2e-3  # the score searched (query pass in its own precision)


def test_an_adapter_of_another_model_is_ignored_and_said(adapted, encoder):
    root, _, ad, _ = adapted
    A.install(root, A.QueryAdapter(ad.W, "other/model", "0" * 16, {}))
    with Index.open(root, encoder) as idx, warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert idx.adapter() is None
        assert any("fitted for other/model" in str(x.message) for x in w)
    A.install(root, ad)


def test_a_broken_adapter_file_is_refused_clearly(adapted, encoder, tmp_path):
    root, _, ad, _ = adapted
    bad = tmp_path / "idx"
    shutil.copytree(root, bad)
    A.adapter_path(bad).write_bytes(b"not a zip")
    with Index.open(bad, encoder) as idx, pytest.raises(InputError, match="not a readable query adapter"):
        idx.search("gift", mode="dense")
    assert A.remove(bad) and not A.remove(bad)
    with Index.open(bad, encoder) as idx:
        assert len(idx.search("gift", mode="dense")) > 0  # the index itself is untouched


def test_installing_waits_for_no_writer(adapted, tmp_path):
    root, _, ad, _ = adapted
    other = tmp_path / "idx"
    shutil.copytree(root, other)
    A.remove(other)
    with WriterLock(other), pytest.raises(WriterBusy):
        A.install(other, ad)
    assert not A.adapter_path(other).exists()


def test_training_refuses_data_of_another_catalog(sample_index, encoder):
    with Index.open(sample_index, encoder) as idx, pytest.raises(InputError, match="belong to this catalog"):
        A.train(idx, {"rug": {"no-such-id": 1.0}})
    with Index.open(sample_index, encoder) as idx, pytest.raises(InputError):
        A.train(idx, {"rug": {"P0001": 1.0}}, tau=0)


def test_a_large_catalog_trains_against_a_sample(adapted, encoder):
    root, pairs, _, _ = adapted
    with Index.open(root, encoder, adapter=False) as idx:
        _, rep = A.train(idx, pairs, epochs=1, negatives=50)
    assert rep.catalog == rep.products + 50


def test_the_file_holds_its_model_and_training(adapted, tmp_path):
    _, _, ad, _ = adapted
    p = tmp_path / "a.npz"
    ad.save(p)
    back = A.QueryAdapter.load(p)
    np.testing.assert_array_equal(back.W, ad.W)
    assert (back.model, back.fingerprint, back.info["queries"]) == (ad.model, ad.fingerprint, 4)
    assert json.loads(json.dumps(back.info)) == back.info


def test_no_better_pass_means_nothing_is_installed(adapted, encoder):
    root, pairs, _, _ = adapted
    many = _many_queries(root, encoder)
    with Index.open(root, encoder, adapter=False) as idx:
        _, rep = A.train(idx, many, lr=1e-12)  # W stays the identity: every pass equals none
    assert rep.held_out >= A.MIN_HELD_OUT and not rep.helps
    assert rep.after["ndcg@10"] == pytest.approx(rep.before["ndcg@10"], abs=1e-6)


def _many_queries(root, encoder) -> dict:
    with Index.open(root, encoder, adapter=False) as idx:
        rows = idx.store.get_rows(idx.store.all_ids())
    out: dict = {}
    for r in rows:
        for q in (f"{r['colour']} {r['category']}", f"{r['brand']} {r['category']}"):
            out.setdefault(q, {})[r["id"]] = 1.0
    return out


# ------------------------------------------------------------------ qkv terms adapt
def test_the_command_fits_installs_reports_and_removes(adapted, encoder, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from qkv.cli import app

    runner = CliRunner()
    root = tmp_path / "idx"
    shutil.copytree(adapted[0], root)
    A.remove(root)
    report = tmp_path / "report.csv"
    lines = ["search term,product id,clicks"] + [f"{q},{i},2" for q, ids in _many_queries(root, encoder).items()
                                                 for i in ids] + ["nothing,NO-SUCH-ID,1"]
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = runner.invoke(app, ["terms", "adapt", "--index", str(root), "--report", str(report), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output[r.output.index("{"):])
    assert d["installed"] == str(A.adapter_path(root)) and d["unknown_rows"] == 1
    assert d["held_out"] >= A.MIN_HELD_OUT and len(d["per_epoch"]) == A.MAX_EPOCHS and d["helps"]
    assert d["after"]["ndcg@10"] > d["before"]["ndcg@10"]

    def top(*extra):
        r = runner.invoke(app, ["search", "olive shoes", "--index", str(root), "--mode", "dense", "--json", *extra])
        assert r.exit_code == 0, r.output
        return json.loads(r.output[r.output.index("{"):])
    on, off = top(), top("--no-adapter")
    assert on["query_adapter"] is True and off["query_adapter"] is False
    assert [x["score"] for x in on["results"]] != [x["score"] for x in off["results"]]
    r = runner.invoke(app, ["terms", "adapt", "--index", str(root), "--remove"])
    assert r.exit_code == 0 and "removed" in r.output and not A.adapter_path(root).exists()

    # a fit that beats nothing is reported, not installed (unless --force)
    real = A.train
    monkeypatch.setattr(A, "train", lambda *a, **kw: real(*a, **{**kw, "lr": 1e-12}))
    r = runner.invoke(app, ["terms", "adapt", "--index", str(root), "--report", str(report)])
    assert r.exit_code == 0 and "not installed" in r.output and not A.adapter_path(root).exists()
    r = runner.invoke(app, ["terms", "adapt", "--index", str(root), "--report", str(report), "--force"])
    assert r.exit_code == 0 and A.adapter_path(root).exists()


@pytest.mark.parametrize("args, says", [
    ([], "give --report"),
    (["--queries", "q.jsonl"], "needs both --queries and --qrels"),
    (["--report", "r.csv", "--remove"], "give no training data"),
    (["--report", "missing.csv"], "no search-term report"),
    (["--report", "r.csv", "--epochs", "0"], "--epochs must be at least 1"),
    (["--report", "r.csv"], "names a product of"),
])
def test_the_command_says_what_was_wrong(adapted, tmp_path, monkeypatch, args, says):
    from typer.testing import CliRunner

    from qkv.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.csv").write_text("query,product id\nrug,NOPE\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["terms", "adapt", "--index", str(adapted[0]), *args])
    assert r.exit_code != 0
    assert says in str(r.exception) + r.output


def test_an_adapter_fitted_on_english_leaves_chinese_queries_alone(adapted, encoder):
    root, pairs, ad, _ = adapted
    A.install(root, ad)
    with Index.open(root, encoder) as idx, Index.open(root, encoder, adapter=False) as plain:
        assert ad.info["han_queries"] == 0 and idx.adapter(query="透气跑鞋") is None
        assert idx.adapter(query="gift for a runner") is not None
        zh_plan, en_plan = idx.plan("透气跑鞋"), idx.plan("gift for a runner")
        np.testing.assert_array_equal(idx.dense_vector(zh_plan), plain.dense_vector(zh_plan))
        assert idx.fusion_alpha(plan=zh_plan) == plain.fusion_alpha()
        assert not np.allclose(idx.dense_vector(en_plan), plain.dense_vector(en_plan))
        with_zh, _ = A.train(plain, {**pairs, "透气跑鞋": pairs["gift for a runner"]}, epochs=2, lr=0.01)
    assert with_zh.info["han_queries"] == 1 and with_zh.fits("透气跑鞋")


def test_the_weak_result_margin_is_put_in_the_adapted_units(adapted, encoder):
    from qkv.search.floor import BACKGROUND_RANK, MARGIN, weak_results

    root, _, ad, _ = adapted
    A.install(root, ad)
    q = "gift for a runner"
    with Index.open(root, encoder) as idx:
        res = idx.search(q, k=5, mode="dense")
        _, floor = weak_results(idx, q, res)
        bg = idx.retrieve(q, k=BACKGROUND_RANK + 1, mode="dense")[BACKGROUND_RANK][2]["dense_score"]
    assert ad.spread != 1.0
    assert floor == pytest.approx(bg + MARGIN[encoder.name] * ad.spread, abs=1e-6)
