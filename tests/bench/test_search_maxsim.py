"""bench/search_maxsim.py (late interaction over the hybrid top candidates) and the benches built
on its pieces — search_prior.py, search_ensemble.py, search_feedback.py, search_rerank.py: the
re-ordering, the MaxSim score of the learned map at its start and after training, the prior's
counts, the ensemble's fusion, the feedback vector and the per-query NDCG behind the cross-encoder's
paired SE — on small made-up data."""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench scripts import each other by name
import search_ensemble as ens  # noqa: E402  (bench/search_ensemble.py)
import search_maxsim as ms  # noqa: E402  (bench/search_maxsim.py)
import search_prior as pr  # noqa: E402  (bench/search_prior.py)
from search_rerank import zscore  # noqa: E402


def test_rerank_lists_reorders_only_the_top_k():
    lst = [("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)]
    score = np.array([0.0, 0.0, 9.0, 100.0])  # favours c, then d (outside the top 3)
    assert ms.rerank_lists([lst], [score], 3, 100.0) == [["c", "a", "b", "d"]]
    assert ms.rerank_lists([lst], [score], 3, 0.0) == [["a", "b", "c", "d"]]
    z = zscore(np.array([4.0, 3.0, 2.0])) + 0.5 * zscore(np.array([0.0, 0.0, 9.0]))
    assert ms.rerank_lists([lst], [score], 3, 0.5) == [[["a", "b", "c"][j] for j in np.argsort(-z, kind="stable")] + ["d"]]
    assert ms.rerank_lists([[("a", 1.0)]], [np.array([5.0])], 10, 1.0) == [["a"]]


def test_learned_maxsim_starts_as_the_mean_of_each_query_tokens_best_cosine():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, 8)).astype(np.float32)
    titles = [rng.normal(size=(n, 8)).astype(np.float32) for n in (2, 5, 1)]
    m = ms.LearnedMaxSim(8)
    with torch.no_grad():
        got = m.score(torch.from_numpy(q), [torch.from_numpy(t) for t in titles]).numpy()
    want = [(ms.unit_rows(q) @ ms.unit_rows(t).T).max(1).mean() for t in titles]  # identity map, equal weights
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class Judge:
    """What the benches read of ``search_densepool.Judge``: qids, qrels, ids, rows, halves, cached queries."""

    def __init__(self, qrels, halves, ids=()):
        self.q = {"qids": list(qrels)}
        self.qrels = qrels
        self.halves = halves
        self.ids = np.asarray(ids)
        self.row = {i: r for r, i in enumerate(ids)}

    def qids(self, half):
        return [n for n, q in enumerate(self.q["qids"]) if q in self.halves[half]]


def test_training_the_map_lifts_the_relevant_title_above_the_negatives():
    # every query asks for word 0 (and a little of word 1); the relevant title p0 holds word 0, the
    # negatives only word 1: p0 starts ahead, and fitting must widen its lead (a map that never
    # moved, or a wrong gradient, leaves the margin where it was)
    rng = np.random.default_rng(1)
    H = 6
    e = np.eye(H, dtype=np.float32)
    noise = lambda n: 0.05 * rng.normal(size=(n, H)).astype(np.float32)  # noqa: E731

    class Tok:
        vecs = np.concatenate([e[[0, 2]] + 0.6 * e[1] + noise(2),  # p0: relevant for every query
                               e[[1, 3]] + noise(2), e[[1, 4]] + noise(2)]).astype(np.float16)
        widx = np.zeros(6, np.int16)
        starts, lens = np.array([0, 2, 4]), np.array([2, 2, 2])
        row = {"p0": 0, "p1": 1, "p2": 2}

    qrels = {f"q{k}": {"p0": 3.0, "p1": 1.0, "p2": 1.0} for k in range(8)}
    judge = Judge(qrels, {"t": set(qrels)})
    qt = {"vecs": [(e[[0]] + 0.9 * e[1] + noise(1)).astype(np.float32) for _ in qrels]}
    lists = {n: [("p1", 3.0), ("p2", 2.0), ("p0", 1.0)] for n in range(8)}
    ns = judge.qids("t")
    before = ms.learned_scores(ms.LearnedMaxSim(H), Tok, qt, ns, [lists[n] for n in ns], 3)
    m = ms.train_learned(Tok, judge, qt, lists, ns, epochs=30, lr=0.05, group=3)
    after = ms.learned_scores(m, Tok, qt, ns, [lists[n] for n in ns], 3)
    margin = lambda s: np.mean([x[2] - max(x[0], x[1]) for x in s])  # noqa: E731  p0 is third in each list
    assert margin(after) > margin(before) + 0.05


def test_prior_counts_judged_pairs_or_relevant_gains_of_the_training_half():
    qrels = {"q0": {"p1": 3.0, "p2": 1.0}, "q1": {"p1": 2.0}, "q2": {"p2": 3.0}}
    judge = Judge(qrels, {"a": {"q0", "q1"}})
    assert pr.counts(judge, "a", relevant_only=False) == {"p1": 2.0, "p2": 1.0}
    assert pr.counts(judge, "a", relevant_only=True) == {"p1": 3.0}  # gains 2 + 1; p2 judged 1: no gain


def test_ensemble_fuses_two_cosines_and_bm25_over_the_union_of_candidates(monkeypatch):
    monkeypatch.setattr("qkv.search.index.CANDIDATES", 1)  # each model's top 1
    ids = ["p0", "p1", "p2", "p3"]
    judge = Judge({"q0": {"p2": 3.0}}, {"b": {"q0"}}, ids)
    judge.q["text"] = ["rug"]
    judge.q["weighted"] = [([("p3", 4.0)], {"p3": 4.0})]
    Vm = np.eye(4, dtype=np.float32)
    Ve = np.eye(4, dtype=np.float32)
    Qm = np.array([[0.9, 0.0, 0.4, 0.0]], np.float32)  # MiniLM's best: p0
    Qe = np.array([[0.0, 0.0, 0.8, 0.1]], np.float32)  # e5's best: p2
    (n, rows, cm, ce, kw), = ens.candidates(judge, [0], Vm, Ve, Qm, Qe, "weighted")
    assert [ids[r] for r in rows] == ["p0", "p2", "p3"]  # the union: p0, p2 and the keyword hit p3
    np.testing.assert_allclose(cm, [0.9, 0.4, 0.0])
    np.testing.assert_allclose(ce, [0.0, 0.8, 0.1])
    np.testing.assert_allclose(kw, [0.0, 0.0, 1.0])  # BM25 / its max
    # MiniLM alone ranks p0 first; e5 with the larger weight puts the relevant p2 first
    only_m = ens.score(judge, [(n, rows, cm, ce, kw)], 0.9, 0.0)
    both = ens.score(judge, [(n, rows, cm, ce, kw)], 0.3, 0.6)
    assert both[0] == 1.0 and only_m[0] < 1.0


def test_feedback_moves_each_query_toward_the_mean_of_its_first_titles():
    import search_feedback as fb  # bench/search_feedback.py

    V = np.eye(3, dtype=np.float32)
    judge = Judge({"q0": {}, "q1": {}}, {}, ["p0", "p1", "p2"])
    Q = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
    first = [[("p1", 2.0), ("p2", 1.0), ("p0", 0.5)], []]  # q1 found nothing: stays as it was
    got = fb.feedback(V, judge, first, Q.copy(), 2, 0.5)
    want = np.array([1.0, 0.25, 0.25]) / np.linalg.norm([1.0, 0.25, 0.25])
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
    np.testing.assert_allclose(got[1], Q[1])


def test_paired_standard_error_skips_unscored_queries():
    x = np.array([0.5, 0.2, np.nan, 0.4])
    y = np.array([0.6, 0.2, 0.9, 0.7])
    d = np.array([0.1, 0.0, 0.3])  # the NaN query left out
    assert np.isclose(ens.paired_se(x, y), d.std(ddof=1) / np.sqrt(3))


def test_rerank_per_query_ndcg_is_what_metrics_averages():
    import search_rerank as rr

    qrels = {"q0": {"p1": 3.0, "p2": 1.0}, "q1": {"p2": 2.0}, "q2": {"p9": 1.0}}  # q2: nothing relevant
    judge = Judge(qrels, {"b": set(qrels)})
    ns = judge.qids("b")
    ranks = [["p2", "p1"], ["p1", "p2"], ["p1"]]
    per = rr.per_query_ndcg(judge, ns, ranks)
    assert per.shape == (3,) and np.isnan(per[2])
    assert per[0] < 1.0 and 0.0 < per[1] < 1.0  # both relevant titles listed, neither first
    assert np.isclose(np.nanmean(per), rr.metrics(judge, ns, ranks)[0])
    assert rr.per_query_ndcg(judge, ns, [["p1", "p2"], ["p2"], []])[:2].tolist() == [1.0, 1.0]


def test_rerank_scores_each_pair_once_and_reuses_known_pairs():
    import search_rerank as rr

    class CE:  # scores a pair by its title's length, and records what it was asked
        asked: list = []

        def score(self, qs, ts):
            self.asked += list(zip(qs, ts))
            return np.array([float(len(t)) for t in ts], np.float32)

    ce = CE()
    qtext = ["q zero", "q one"]
    title = {"a": "aa", "b": "bbbb", "c": "c"}
    heads = [[("a", 0.9), ("b", 0.5)], [("b", 0.7), ("c", 0.1)]]
    got = rr.score_lists(ce, qtext, title, [0, 1], heads, known={(1, "b"): -5.0})
    assert [g.tolist() for g in got] == [[2.0, 4.0], [-5.0, 1.0]]
    assert sorted(ce.asked) == [("q one", "c"), ("q zero", "aa"), ("q zero", "bbbb")]


def test_ensemble_lists_follow_the_fused_order():
    judge = Judge({"q0": {}}, {}, ids=["p0", "p1", "p2"])
    cands = [(0, np.array([0, 1, 2]), np.array([0.1, 0.9, 0.5]), np.array([0.2, 0.1, 0.9]), np.array([1.0, 0.0, 0.5]))]
    got = ens.fused_lists(judge, cands, 0.1, 0.6, depth=2)[0]
    s = 0.1 * cands[0][2] + 0.6 * cands[0][3] + 0.3 * cands[0][4]
    assert [i for i, _ in got] == ["p2", "p0"] and np.allclose([x for _, x in got], s[[2, 0]])
