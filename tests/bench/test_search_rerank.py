"""bench/search_rerank.py (a cross-encoder re-ranking hybrid search's top candidates): how the top
K is re-ordered by the blend of the two scores, and which titles a training group holds — on
small made-up data."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench scripts import each other by name
import search_rerank as rr  # noqa: E402  (bench/search_rerank.py)


def test_rerank_reorders_only_the_top_k_by_the_blend():
    lst = [("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)]
    ce = np.array([0.0, 1.0, 5.0, 9.0])  # the cross-encoder prefers the reverse order
    got = rr.rerank([lst], [ce], [3], [0.0, 100.0])
    assert got[(3, 0.0)] == [["c", "b", "a", "d"]]  # CE alone over the top 3; "d" keeps its place
    assert got[(3, 100.0)] == [["a", "b", "c", "d"]]  # the fused score dominates
    # λ 1: z(ce) + z(fused) over a, b, c: ce (0, 1, 5) against fused (4, 3, 2)
    z = rr.zscore(np.array([0.0, 1.0, 5.0])) + rr.zscore(np.array([4.0, 3.0, 2.0]))
    want = [["a", "b", "c"][j] for j in np.argsort(-z, kind="stable")] + ["d"]
    assert rr.rerank([lst], [ce], [3], [1.0])[(3, 1.0)] == [want]


def test_rerank_leaves_a_one_item_list_alone():
    assert rr.rerank([[("a", 1.0)]], [np.array([3.0])], [10], [0.5])[(10, 0.5)] == [["a"]]


class FakeJudge:
    def __init__(self, qrels):
        self.q = {"qids": list(qrels)}
        self.qrels = qrels


def test_groups_hold_the_relevant_and_hard_negatives_with_gain_targets():
    qrels = {"q0": {"p1": 3.0, "p2": 2.0, "p3": 1.0}, "q1": {"p5": 1.0}}  # q1: nothing relevant
    lists = [[("p9", 1.0), ("p3", 0.9), ("p1", 0.8), ("p8", 0.7), ("p7", 0.6)], [("p5", 1.0)]]
    gs = rr.groups(FakeJudge(qrels), lists, [0, 1], np.random.default_rng(0), size=4, pool=4)
    assert len(gs) == 1  # a query with no relevant title gives no group
    n, ids, t = gs[0]
    assert n == 0 and ids[:2] == ["p1", "p2"]  # the relevant, highest gain first
    # negatives from the top 4 only (p7 is fifth), relevant ones never: p9, p3 (judged 1: gain 0), p8
    assert set(ids[2:]) <= {"p9", "p3", "p8"} and len(ids) == 4
    np.testing.assert_allclose(t, [2 / 3, 1 / 3, 0, 0])


def test_ceiling_counts_unjudged_orders_by_judgment_and_judges_twins_alike(capsys, monkeypatch):
    # one query; p1 is judged relevant but ranked last, p0 is an unjudged twin of it (same title)
    qrels = {"q0": {"p1": 3.0}}
    lists = [[("p0", 3.0), ("p2", 2.0), ("p1", 1.0)]]
    title = {"p0": "Blue Rug", "p1": "blue rug", "p2": "Red Lamp"}
    seen = []
    monkeypatch.setattr(rr, "metrics", lambda judge, ns, ranks: (seen.append(ranks) or (0.5, 1.0)))
    rr.ceiling(FakeJudge(qrels), lists, [0], title, ks=(2, 3))
    out = capsys.readouterr().out
    assert "2 of 3 titles never judged" in out
    # top 2 in the judgments' order leaves p1 third; top 3 puts it first
    assert seen == [[["p0", "p2", "p1"]], [["p1", "p0", "p2"]]]
    # p0 judged as its twin p1: both relevant, at ranks 1 and 3 against the ideal 1, 2
    want = (1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3))
    assert f"identical titles judged alike: NDCG@10 {want:.4f}" in out
    assert "(2 catalog titles share their title with another)" in out
