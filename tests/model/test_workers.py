"""How the encoder's work is shared out between threads (qkv.model.workers)."""

from hypothesis import given
from hypothesis import strategies as st

from qkv.model.workers import Workers, deal, row_cuts, text_cuts


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
