"""Evaluation runs the same on either store: identical dense metrics (same rankings), and both
keyword and hybrid find the judged products on the sample catalog."""

import csv

import pytest

from qkv.search import Index
from qkv.search.evaluate import evaluate

QUERIES = {"q1": "running shoes", "q2": "waterproof hiking boots", "q3": "wool sweater", "q4": "electric kettle"}
WORDS = {"q1": ["running shoes", "跑鞋"], "q2": ["hiking boots", "登山靴"], "q3": ["sweater", "毛衣"], "q4": ["kettle", "水壶"]}


@pytest.fixture(scope="module")
def qrels(sample_catalog):
    rows = list(csv.DictReader(open(sample_catalog, encoding="utf-8")))
    return {q: {r["id"]: (3.0 if any(w in r["title"].lower() for w in ws) else 1.0) for r in rows}
            for q, ws in WORDS.items()}


@pytest.mark.parametrize("rerank", [False, True], ids=["full-corpus", "rerank"])
def test_metrics_agree_across_stores(rerank, embedded_index, milvus_index, encoder, qrels):
    res = {}
    for name, path in (("embedded", embedded_index), ("milvus", milvus_index[0])):
        with Index.open(path, encoder) as idx:
            res[name] = evaluate(idx, QUERIES, qrels, rerank=rerank).metrics
    a, b = res["embedded"]["dense"], res["milvus"]["dense"]
    for m in ("ndcg@10", "mrr@10", "recall@100"):
        assert a[m] == pytest.approx(b[m], abs=1e-9), m
    for store in res.values():
        assert store["keyword"]["ndcg@10"] > 0.6 and store["hybrid"]["ndcg@10"] > 0.6
