"""The selling-points measure on a small BEIR set written here, AP values computed by hand."""

import json

import numpy as np
import pytest

from qkv.explain import evaluate_points as ep

TITLES = {
    "p1": "Acme Ceramic Floor Tiles in White 12 in.",   # acme ceramic floor tile white 12
    "p2": "Strong-Tie 18-Gauge Angle Brackets",          # strong-tie 18-gauge angle bracket
    "p3": "White Angle Tile Cutter",                     # judged 2.0 only: not scored
    "p4": "Hammer",                                      # fewer than 3 content words
    "p5": "Red Garden Hose",                             # every word searched: skipped
}
QUERIES = {"q1": "white floor tile", "q2": "simpson strong tie angle", "q3": "tile cutter",
           "q4": "hammer", "q5": "red garden hoses"}
QRELS = [("q1", "p1", 3), ("q2", "p2", 2.67), ("q3", "p3", 2), ("q4", "p4", 3), ("q5", "p5", 2.5)]


def write_beir(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": v, "text": ""}) + "\n"
                                               for k, v in TITLES.items()), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n"
                                                for k, v in QUERIES.items()), encoding="utf-8")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{p}\t{s}\n" for q, p, s in QRELS),
                                    encoding="utf-8")
    return root


@pytest.fixture()
def beir(tmp_path):
    return write_beir(tmp_path / "beir")


def judged(root):
    from qkv.search.evaluate import load_qrels, load_queries

    return ep.judged_titles(ep.load_corpus_titles(root / "corpus.jsonl"), load_queries(root / "queries.jsonl"),
                            load_qrels(root / "qrels.tsv"))


def test_words_are_folded_and_stop_words_left_out():
    tw = ep.title_words(TITLES["p1"])
    assert tw.words == ("acme", "ceramic", "floor", "tile", "white", "12")
    assert tw.surface[3] == "Tiles" and tw.spans[3] == ((19, 24),)
    assert ep.fold("Glass") == "glass" and ep.fold("Men's") == "men" and ep.fold("(Valve") == "valve"


def test_shopper_words_count_hyphen_parts():
    tw = ep.title_words(TITLES["p2"])
    assert ep.shopper_mask(tw, [QUERIES["q2"]]).tolist() == [True, False, True, False]
    # and the other way round: a query's hyphenated word finds the title's plain one
    assert ep.shopper_mask(ep.title_words("Angle Bracket Tie"), ["strong-tie"]).tolist() == [False, False, True]


def test_average_precision_by_hand():
    assert ep.average_precision(np.array([3, 2, 1, 0]), np.array([1, 0, 1, 0], bool)) == pytest.approx((1 + 2 / 3) / 2)
    # ties keep the given order
    assert ep.average_precision(np.zeros(3), np.array([0, 0, 1], bool)) == pytest.approx(1 / 3)


def test_protocol_skips_and_baselines_by_hand(beir):
    j = judged(beir)
    assert [t.id for t in j.titles] == ["p1", "p2"]
    assert j.skipped == {"fewer than 3 content words": 1, "all or none shopper words": 1}
    res = ep.evaluate(j, {}, random_seeds=3)
    ap = dict(res.rows)
    # p1 relevant floor, tile, white; p2 strong-tie, angle
    assert ap["title order"] == pytest.approx(((1 / 3 + 2 / 4 + 3 / 5) / 3 + (1 + 2 / 3) / 2) / 2)
    assert ap["reverse title order"] == pytest.approx(((1 / 2 + 2 / 3 + 3 / 4) / 3 + (1 / 2 + 2 / 4) / 2) / 2)
    # catalog DF: white, tile, angle 2 (p3 has them), every other word 1
    assert ap["IDF over the catalog (rare words first)"] == pytest.approx(((1 / 3 + 2 / 5 + 3 / 6) / 3 + (1 + 2 / 4) / 2) / 2)
    assert ap["DF (common catalog words first)"] == pytest.approx(((1 + 1 + 3 / 5) / 3 + 1) / 2)
    assert 0 < ap["random order (mean of 3 seeds)"] < 1 and res.titles == 2


def test_a_ranker_is_scored_and_from_spans_maps_pieces(beir):
    j = judged(beir)
    tw = j.titles[0].words
    # qkv-style words with offsets: "Tiles" split into pieces, the best piece counts
    s = ep.from_spans(tw, [0, 19, 22], [4, 22, 24], [0.1, 0.5, 0.9])
    assert s[0] == 0.1 and s[3] == 0.9 and np.isneginf(s[1])
    perfect = {"oracle": lambda w: next(t.shopper for t in j.titles if t.words == w).astype(float)}
    res = ep.evaluate(j, perfect)
    ap = dict(res.rows)
    assert ap["oracle"] == 1.0
    # the first row against every other one, paired over the two titles
    vs = {n: (d, se, p) for n, d, se, p in res.against}
    assert list(vs) == [n for n, _ in res.rows[1:]]
    d, se, p = vs["title order"]
    assert d == pytest.approx(1.0 - ap["title order"])
    # both titles gain, so 2 of the 4 sign patterns are as extreme: p = 1/2 (sampled, 10,000 flips)
    assert p == pytest.approx(0.5, abs=0.02)
    rows = res.to_json()["first_against"]["rows"]
    assert rows[0]["ranking"].startswith("random order") and rows[0]["gain"] > 0


def test_sample_and_bad_input(beir, tmp_path):
    j = judged(beir)
    assert len(ep.sample(j, 1, seed=0)) == 1
    with pytest.raises(ep.InputError, match="at least 1"):
        ep.sample(j, 0)
    (tmp_path / "empty.jsonl").write_text('{"_id": "1", "title": ""}\n', encoding="utf-8")
    with pytest.raises(ep.InputError, match="no record has a title"):
        ep.load_corpus_titles(tmp_path / "empty.jsonl")
    with pytest.raises(ep.InputError, match="no judged title"):
        ep.evaluate(ep.Judged([], j.df, 5), {})
