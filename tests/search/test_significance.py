"""qkv.search.significance: the paired randomization test against an exact enumeration, the
per-query file's round trip and refusals, and what a comparison refuses."""

import itertools
import json
import math

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.search import significance as sig


def exact_p(d):
    """Two-sided p of the sign-flip test by enumerating all 2^n flips."""
    obs = abs(sum(d))
    flips = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d))]
    return sum(f >= obs - 1e-12 for f in flips) / len(flips)


def test_randomization_p_matches_the_exact_enumeration():
    rng = np.random.default_rng(3)
    for _ in range(3):
        base = rng.random(10)
        new = base + rng.normal(0.1, 0.2, 10)
        n, delta, se, p = sig.paired_test(base, new, rounds=20_000)
        d = new - base
        assert n == 10 and delta == pytest.approx(d.mean())
        assert se == pytest.approx(d.std(ddof=1) / math.sqrt(10))
        assert p == pytest.approx(exact_p(d), abs=0.01)


def test_a_clear_shift_is_significant_noise_is_not_and_nan_pairs_are_left_out():
    rng = np.random.default_rng(0)
    base = rng.random(500)
    n, delta, _, p = sig.paired_test(base, base + 0.05 + rng.normal(0, 0.05, 500))
    assert n == 500 and delta > 0.04 and p < 0.001
    noise = rng.normal(0, 0.05, 500)
    assert sig.paired_test(base, base + noise - noise.mean())[3] > 0.5  # mean difference exactly 0
    assert sig.paired_test(base, base) == (500, 0.0, 0.0, 1.0)
    b, m = np.array([0.5, np.nan, 0.2]), np.array([0.7, 0.9, np.nan])
    n, delta, _, _ = sig.paired_test(b, m)
    assert n == 1 and delta == pytest.approx(0.2)
    assert sig.paired_test([np.nan], [1.0])[0] == 0


def run(qids, values, protocol="full-corpus", offset=1.0):
    return {"protocol": protocol, "settings": {"gain_offset": offset}, "queries": qids,
            "modes": {"hybrid": {"ndcg@10": values}}}


def test_the_file_round_trips_and_a_comparison_pairs_queries_by_id(tmp_path):
    p = tmp_path / "out" / "base.json"
    sig.save(p, "full-corpus", {"gain_offset": 1.0}, ["q1", "q2", "q3"], {"hybrid": {"ndcg@10": [0.5, float("nan"), 0.2]}})
    doc = sig.load(p)
    assert doc["modes"]["hybrid"]["ndcg@10"] == [0.5, None, 0.2]
    assert not list(p.parent.glob(".*.tmp"))  # nothing left beside it
    # the new run scored q3, q1 and q4 (another order, one query new): pairs q1 and q3 only
    diffs = sig.compare(doc, run(["q3", "q1", "q4"], [0.6, 0.5, 1.0]))
    (d,) = diffs
    assert (d.mode, d.metric, d.n) == ("hybrid", "ndcg@10", 2)
    assert d.base == pytest.approx(0.35) and d.new == pytest.approx(0.55) and d.delta == pytest.approx(0.2)
    assert json.dumps([x.to_json() for x in diffs])  # JSON-ready


def test_what_cannot_be_compared_is_refused_with_what_to_do(tmp_path):
    base = run(["q1"], [0.5])
    with pytest.raises(InputError, match="rerank"):
        sig.compare(base, run(["q1"], [0.5], protocol="rerank"))
    with pytest.raises(InputError, match="--gain-offset"):
        sig.compare(base, run(["q1"], [0.5], offset=0.0))
    with pytest.raises(InputError, match="--half"):
        sig.compare(base, run(["q2"], [0.5]))
    with pytest.raises(InputError, match="no such file"):
        sig.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not a per-query file"):
        sig.load(bad)
    bad.write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InputError, match="not a per-query file"):
        sig.load(bad)
    bad.write_text(json.dumps({"format": sig.FORMAT, "version": 1, "queries": ["q1", "q2"],
                               "modes": {"hybrid": {"ndcg@10": [0.5]}}}))
    with pytest.raises(InputError, match="damaged"):
        sig.load(bad)


def test_a_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "base.json"
    sig.save(p, "full-corpus", {"gain_offset": 1.0}, ["q1"], {"hybrid": {"ndcg@10": [0.5]}})
    before = p.read_text()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(sig.os, "replace", boom)
    with pytest.raises(OSError):
        sig.save(p, "full-corpus", {"gain_offset": 1.0}, ["q1"], {"hybrid": {"ndcg@10": [0.9]}})
    assert p.read_text() == before and not list(tmp_path.glob(".*.tmp"))
