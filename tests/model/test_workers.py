"""How the encoder's work is shared out between threads (qkv.model.workers)."""

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qkv.model.workers import Workers, claim, deal, row_cuts, text_cuts, text_pieces


def _cost(n):
    return n * (1 + n / 600)


@given(st.lists(st.integers(1, 512), min_size=1, max_size=40), st.integers(1, 5))
def test_text_cuts_are_runs_of_whole_texts_of_about_equal_cost(lengths, threads):
    cuts = text_cuts(lengths, threads)
    assert cuts[0] == 0 and cuts[-1] == len(lengths)
    assert all(a < b for a, b in zip(cuts, cuts[1:]))  # every run has a text, in order
    runs = len(cuts) - 1
    assert runs <= min(threads, len(lengths))
    assert runs == 1 or sum(lengths) >= 48 * runs  # no sharing out of a handful of tokens
    costs = [sum(_cost(n) for n in lengths[a:b]) for a, b in zip(cuts, cuts[1:])]
    # each run within one text of its share: the cut falls at the text whose middle crosses it
    assert max(costs) <= sum(costs) / runs + max(_cost(n) for n in lengths) + 1e-9


def test_text_cuts_examples():
    assert text_cuts([24] * 32, 2) == [0, 16, 32]
    assert text_cuts([256] * 8, 2) == [0, 4, 8]
    assert text_cuts([256] * 7, 2) in ([0, 3, 7], [0, 4, 7])
    assert text_cuts([6, 7], 2) == [0, 2]  # 13 tokens: one thread
    assert text_cuts([500, 10, 10, 10], 2) == [0, 1, 4]  # the long text alone


def test_row_cuts_and_deal():
    assert row_cuts(768, 2, step=32) == [0, 384, 768]
    assert row_cuts(50, 2) == [0, 50]  # under 96 rows: one thread
    assert sorted(i for g in deal([1, 9, 4, 4], 2) for i in g) == [0, 1, 2, 3]


def test_workers_run_every_part_once():
    seen = []
    Workers(3).run(seen.append, 5)
    assert sorted(seen) == [0, 1, 2, 3, 4]


@given(st.lists(st.integers(1, 512), min_size=1, max_size=40), st.integers(1, 5),
       st.floats(0, 1), st.one_of(st.none(), st.integers(0, 12)))
def test_text_pieces_are_whole_texts_in_order_each_claimed_once(lengths, threads, first, tail):
    pieces = text_pieces(lengths, threads, first=first, tail=tail)
    assert pieces[0][0] == 0 and pieces[-1][1] == len(lengths)
    assert all(a < b for a, b in pieces)  # every piece has a text
    assert all(b == c for (_, b), (c, _) in zip(pieces, pieces[1:]))  # in order, nothing skipped
    runs = len(text_cuts(lengths, threads)) - 1
    if runs == 1:  # too few tokens (or texts) to share out: one piece, as one thread runs it
        assert pieces == [(0, len(lengths))]
    assert len(pieces) <= runs + (runs if tail is None else tail)
    if first == 1:  # one run a thread: the fixed cut
        assert [a for a, _ in pieces] + [len(lengths)] == text_cuts(lengths, threads)


def test_text_pieces_examples():
    # eight reviews of 256 tokens on two threads: three each, then one each for whoever is ahead
    assert text_pieces([256] * 8, 2) == [(0, 3), (3, 6), (6, 7), (7, 8)]
    assert text_pieces([24] * 64, 2) == [(0, 24), (24, 48), (48, 56), (56, 64)]  # 64 titles: 8 in the last pieces
    assert text_pieces([24] * 32, 2) == [(0, 16), (16, 32)]  # 4 titles would cost under 128: one run a thread
    assert text_pieces([24] * 32, 2, tail=2) == [(0, 12), (12, 24), (24, 28), (28, 32)]
    assert text_pieces([6, 7], 2) == [(0, 2)]  # 13 tokens: one thread
    assert text_pieces([256] * 8, 2, first=0, tail=8) == [(i, i + 1) for i in range(8)]  # a piece a text
    assert text_pieces([256] * 7, 3) == [(0, 2), (2, 4), (4, 5), (5, 6), (6, 7)]  # odd counts
    assert text_pieces([256] * 9, 2) == [(0, 3), (3, 7), (7, 8), (8, 9)]
    assert text_pieces([500, 10, 10, 10], 2) == [(0, 1), (1, 4)]  # no piece of a few tokens after a long one


@pytest.mark.parametrize("threads, pieces", [(2, 9), (3, 4), (2, 1), (3, 2), (2, 0)])
def test_claim_runs_every_piece_once_on_at_most_threads_threads(threads, pieces):
    seen, lock = [], threading.Lock()

    def fn(g, i):
        with lock:
            seen.append((g, i))

    claim(pieces, Workers(threads), fn)
    assert sorted(i for _, i in seen) == list(range(pieces))
    assert {g for g, _ in seen} <= set(range(min(threads, pieces)))


def test_claim_lets_the_other_thread_take_what_a_slow_thread_would_have_had():
    """The thread holding piece 0 is stalled until every other piece is done: with a fixed share it
    would wait for itself (a timeout here); claimed, the other thread takes them all."""
    done, rest_done, lock = [], threading.Event(), threading.Lock()
    threads_of = {}

    def fn(g, i):
        if i == 0:
            assert rest_done.wait(10), "the other thread did not take the remaining pieces"
        with lock:
            done.append(i)
            threads_of[i] = g
            if sorted(done) == list(range(1, 6)):
                rest_done.set()

    claim(6, Workers(2), fn)
    assert sorted(done) == list(range(6))
    assert {threads_of[i] for i in range(1, 6)} == {1 - threads_of[0]}


def test_a_failing_piece_stops_the_claims_and_reaches_the_caller():
    seen, lock = [], threading.Lock()

    def fn(g, i):
        with lock:
            seen.append(i)
        if i == 1:
            raise ValueError("piece 1")

    with pytest.raises(ValueError, match="piece 1"):
        claim(50, Workers(2), fn)
    assert len(seen) < 50
