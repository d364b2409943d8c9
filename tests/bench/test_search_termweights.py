"""bench/search_termweights.py: the split of half a into a1/a2 and a search-term report read as
document expansion (``report_expansions``) — on small made-up judgments."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench scripts import each other by name
import search_termweights as tw  # noqa: E402  (bench/search_termweights.py)

from qkv.search.evaluate import in_half  # noqa: E402


def test_a1_and_a2_split_half_a_and_nothing_else():
    qids = [f"q{n:05d}" for n in range(400)]
    a = {q for q in qids if in_half(q, "a")}
    a1 = {q for q in qids if tw.in_part(q, "a1")}
    a2 = {q for q in qids if tw.in_part(q, "a2")}
    assert a1 and a2 and not a1 & a2
    assert a1 | a2 == a
    assert {q for q in qids if tw.in_part(q, "b")} == set(qids) - a


def _part_queries(part: str, n: int) -> list[str]:
    return [q for q in (f"q{k:05d}" for k in range(1000)) if tw.in_part(q, part)][:n]


def test_report_expansion_weights_words_by_their_graded_share_of_the_queries():
    q1, q2, q3 = _part_queries("a", 3)
    (qb,) = _part_queries("b", 1)
    queries = {q1: "Toilet seat", q2: "the elongated toilet", q3: "toilet seat", qb: "bidet"}
    qrels = {q1: {"p": 3.0, "r": 1.67}, q2: {"p": 2.0}, q3: {"s": 1.0}, qb: {"p": 3.0}}
    got = dict(tw.report_expansions(queries, qrels, "a"))
    # p: q1 at gain 1, q2 at gain 0.5 → toilet in both (1), seat in q1 only (1/1.5), elongated 0.5/1.5;
    # "the" is a stop word; r's and s's grades are below 2; qb is in half b, not the report
    assert set(got) == {"p"}
    w = dict(got["p"])
    assert w == pytest.approx({"toilet": 1.0, "seat": 2 / 3, "elongated": 1 / 3})
    assert [t for t, _ in got["p"]] == ["toilet", "seat", "elongated"]
    # the least grade read is a setting
    assert set(tw.report_expansions(queries, qrels, "a", least=1.5)) == {"p", "r"}


def test_report_expansion_can_keep_only_the_words_a_title_lacks():
    q1, q2 = _part_queries("a", 2)
    queries = {q1: "elongated toilet seat", q2: "toliet"}
    qrels = {q1: {"p": 3.0}, q2: {"p": 3.0}}
    corpus = {"p": "Elongated Closed Front Toilet Seat in White"}
    got = dict(tw.report_expansions(queries, qrels, "a", corpus=corpus))
    assert dict(got["p"]) == pytest.approx({"toliet": 0.5})  # the shopper's spelling, which the title lacks
