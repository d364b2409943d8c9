"""Weak results (qkv.search.floor): the background cosine read with the search's own query vector
marks the same results as a second pass of the model would, and runs no second pass."""

import dataclasses

import numpy as np
import pytest

from qkv.search import Index
from qkv.search.floor import weak_results


@pytest.fixture(scope="module")
def idx(sample_index, encoder):
    with Index.open(sample_index, encoder) as i:
        yield i


CASES = [("headphones", "price <= 30"),  # none meets the price: every result weak
         ("guitar strings", None),  # a product the catalog lacks
         ("breathable running shoes", None),  # close products
         ("透气跑鞋", None)]  # a translated query: its dense vector mixes the Chinese and the English


@pytest.mark.parametrize("query,where", CASES)
def test_the_searchs_vector_gives_the_floor_a_second_pass_gives(idx, query, where):
    res = idx.search(query, k=5, where=where)
    assert res.vector is not None
    np.testing.assert_array_equal(res.vector, idx.dense_vector(res.plan))  # the very vector searched
    again = weak_results(idx, query, dataclasses.replace(res, vector=None))  # the model run once more
    assert weak_results(idx, query, res) == again


def test_a_weak_search_is_found_weak_without_running_the_model_again(idx, monkeypatch):
    res = idx.search("headphones", k=5, where="price <= 30")
    calls = []
    forward = idx.encoder.forward
    monkeypatch.setattr(idx.encoder, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k))
    weak, floor = weak_results(idx, "headphones", res)
    assert floor is not None and all(weak) and not calls
    weak_results(idx, "headphones", dataclasses.replace(res, vector=None))
    assert calls  # without the vector the model runs: the count above could have failed


def test_keyword_mode_has_no_vector(idx):
    assert idx.search("running shoes", k=3, mode="keyword").vector is None
