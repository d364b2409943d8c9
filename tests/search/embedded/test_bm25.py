"""BM25 over learned term weights (``bm25.Scoring``): a term-weighted index's keyword plans score
tf = repeats / scale with the k1 and b its manifest records — checked against the formula worked by
hand from the weights themselves, and against FTS5's bm25() for the default scoring."""

import math

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.search.embedded import EmbeddedStore, bm25
from qkv.search.store import KEYWORD_TEXT, Manifest, open_store, title_hash

K1, B, SCALE = 0.5, 0.9, 10.0
# keyword documents as `qkv index --term-weights` writes them at scale 10: a word of weight w is
# repeated round(10 · w) times, so "faucet" weighs 0.7 in A and 0.1 in B
DOCS = {"A": ["faucet"] * 7 + ["kitchen"] * 3,   # faucet 0.7, kitchen 0.3: 1.0 in all
        "B": ["faucet"] + ["wrench"] * 5,        # faucet 0.1, wrench 0.5: 0.6
        "C": ["cabinet"] * 4 + ["hinge"] * 6,    # 1.0
        "D": ["lamp"] * 2 + ["shade"] * 2,       # 0.4
        "E": ["oak"] * 3 + ["tread"] * 5,        # 0.8
        "F": ["copper"] * 2 + ["elbow"] * 4}     # 0.6
WEIGHTING = {"head": "/nowhere/head.npz", "sha256": "0" * 64, "model": "m", "scale": SCALE, "keep_zero": True,
             "k1": K1, "b": B, "blend": 0.0, "floor": 0.05}


def _store(path, weighting):
    extra = {"term_weights": weighting} if weighting else {}
    st = EmbeddedStore.create(path, Manifest(model="m", fingerprint="f", dim=4, extra=extra))
    rows = [{"id": i, "title": " ".join(dict.fromkeys(d)), KEYWORD_TEXT: " ".join(d)} for i, d in DOCS.items()]
    v = np.eye(len(rows), 4, dtype=np.float32) + 0.1
    with st.writer() as w:
        w.upsert(rows, v / np.linalg.norm(v, axis=1, keepdims=True), [title_hash(r["title"]) for r in rows])
    st.close()
    return open_store(path)


@pytest.fixture(scope="module")
def weighted(tmp_path_factory):
    st = _store(tmp_path_factory.mktemp("bm25") / "idx", WEIGHTING)
    yield st
    st.close()


def _by_hand(weight: float, length: float, df: int, k1=K1, b=B) -> float:
    """Robertson & Zaragoza (2009) BM25 of one term from its real-valued weight and the row's
    total weight (avgdl: the mean of the rows' total weights)."""
    n = len(DOCS)
    avgdl = sum(len(d) for d in DOCS.values()) / SCALE / n  # (1.0 + 0.6 + 1.0 + 0.4 + 0.8 + 0.6) / 6
    idf = math.log((n - df + 0.5) / (df + 0.5))
    return idf * weight * (k1 + 1) / (weight + k1 * (1 - b + b * length / avgdl))


def test_real_valued_tf_bm25_equals_the_formula_by_hand(weighted):
    assert weighted.keyword.scoring == bm25.Scoring(K1, B, SCALE)  # read from the manifest
    ids, scores = zip(*[(h.id, h.score) for h in weighted.keyword_search("faucet", 10)])
    assert ids == ("A", "B")
    assert scores[0] == pytest.approx(_by_hand(0.7, 1.0, 2), rel=1e-12)
    assert scores[1] == pytest.approx(_by_hand(0.1, 0.6, 2), rel=1e-12)
    # two terms: the sum of their shares, and the explanation's shares add up to the score returned
    hits = {h.id: h.score for h in weighted.keyword_search("kitchen faucet", 10)}
    assert hits["A"] == pytest.approx(_by_hand(0.7, 1.0, 2) + _by_hand(0.3, 1.0, 1), rel=1e-12)
    parts = weighted.keyword_terms("kitchen faucet", list(hits))
    for pid, score in hits.items():
        assert sum(s for _, s in parts[pid]) == pytest.approx(score, rel=1e-12)
    assert dict(parts["A"])["kitchen"] == pytest.approx(_by_hand(0.3, 1.0, 1), rel=1e-12)


@pytest.mark.parametrize("budget", [1, 10_000])
def test_the_fts5_plans_score_with_the_recorded_formula_too(weighted, monkeypatch, budget):
    """Queries the postings cannot score (a term FTS5 splits) go through FTS5's own plans: the rows
    FTS5 picks are scored by the index's formula, so both plans agree (budget 1: the AND step and
    FTS5's bm25() picking rows; 10,000: the postings read through fts5vocab)."""
    from qkv.search.embedded import keyword as engine

    monkeypatch.setattr(weighted.keyword, "postings_cover", lambda terms: False)
    monkeypatch.setattr(engine, "KEYWORD_BUDGET", budget)
    monkeypatch.setattr(engine, "SCORE_BUDGET", budget)
    weighted.keyword.score_with(weighted.keyword.scoring)  # no shares memo from the other tests
    hits = {h.id: h.score for h in weighted.keyword_search("kitchen faucet", 5)}
    assert hits["A"] == pytest.approx(_by_hand(0.7, 1.0, 2) + _by_hand(0.3, 1.0, 1), rel=1e-12)
    if "B" in hits:
        assert hits["B"] == pytest.approx(_by_hand(0.1, 0.6, 2), rel=1e-12)


def test_the_recorded_scoring_is_not_fts5s(weighted):
    """The same documents under FTS5's bm25() (k1 = 1.2, b = 0.75 over the repeat counts) score
    otherwise: the manifest's k1/b are what ranks."""
    fts = dict(weighted.db.execute("SELECT p.id, -bm25(fts) FROM fts JOIN products p ON p.slot = fts.rowid "
                                   "WHERE fts MATCH 'faucet'"))
    ours = {h.id: h.score for h in weighted.keyword_search("faucet", 10)}
    assert fts["A"] != pytest.approx(ours["A"], rel=1e-3)
    # … and the FTS5 scoring reproduces FTS5 on them (the default for plain indexes)
    weighted.keyword.score_with(bm25.FTS5)
    try:
        again = {h.id: h.score for h in weighted.keyword_search("faucet", 10)}
    finally:
        weighted.keyword.score_with(bm25.Scoring(K1, B, SCALE))
    assert again == pytest.approx(fts, rel=1e-9)


def test_k1_saturates_and_b_normalises_length():
    idf = 2.0
    # tf → ∞ approaches idf · (k1 + 1) (MaxScore's bound); a weight 10× larger is worth less than 10×
    s = bm25.Scoring(0.3, 0.5, 1)
    assert bm25.weight(idf, 1e9, 10, 10, s) == pytest.approx(bm25.max_weight(idf, s))
    s = bm25.Scoring(0.3, 0.5, 100)
    assert bm25.weight(idf, 50, 100, 100, s) < 10 * bm25.weight(idf, 5, 100, 100, s)
    # b = 0: the row's length does not matter; b = 1: a row twice as long as average weighs its tf half
    s0 = bm25.Scoring(0.3, 0.0, 100)
    assert bm25.weight(idf, 50, 400, 100, s0) == bm25.weight(idf, 50, 100, 100, s0)
    s1 = bm25.Scoring(0.3, 1.0, 100)
    assert bm25.weight(idf, 100, 200, 100, s1) == pytest.approx(bm25.weight(idf, 50, 100, 100, s1))


def test_an_unreadable_recorded_scoring_is_refused_when_the_index_opens(tmp_path):
    with pytest.raises(InputError, match="k1 must be above 0"):
        _store(tmp_path / "bad", {**WEIGHTING, "k1": -1.0})
