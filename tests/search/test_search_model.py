"""Which model an index is built with, and the E5 query/passage convention it records: new indexes
default to multilingual-e5-small, titles are embedded as passages and queries as queries (the
prefixes come from the manifest, not from the caller), ``--model minilm`` keeps the English model,
and an index refuses an encoder of another model. Uses the installed model packages only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.search import Index, build_index
from qkv.search.store import IndexError_, read_manifest

E5 = "intfloat/multilingual-e5-small"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def e5():
    from qkv.model import shared_encoder

    return shared_encoder("multilingual-e5-small")


@pytest.fixture(scope="module")
def e5_index(tmp_path_factory, small_csv_module):
    """An index built without naming a model: the default."""
    path = tmp_path_factory.mktemp("e5") / "idx"
    build_index(small_csv_module, path, precision="float32")
    return path


@pytest.fixture(scope="module")
def small_csv_module(tmp_path_factory, sample_catalog):
    lines = sample_catalog.read_text(encoding="utf-8").splitlines()
    p = tmp_path_factory.mktemp("cat") / "small.csv"
    p.write_text("\n".join(lines[:1] + lines[1:277:23]) + "\n", encoding="utf-8")
    return p


def _titles(path) -> list[str]:
    import csv

    with open(path, encoding="utf-8") as f:
        return [r["title"] for r in csv.DictReader(f)]


def test_a_new_index_defaults_to_the_multilingual_model_and_records_its_prefixes(e5_index):
    m = read_manifest(e5_index)
    assert m.model == E5 and m.dim == 384
    assert m.extra["query_prefix"] == "query: " and m.extra["passage_prefix"] == "passage: "


def test_titles_are_embedded_as_passages_and_queries_as_queries(e5_index, e5, small_csv_module):
    titles = _titles(small_csv_module)
    with Index.open(e5_index) as idx:
        hit = idx.search(titles[0], k=1, mode="dense")[0]
        v = idx.store.get_vectors([hit.id])[0]
        as_passage = e5.encode([titles[0]], role="passage")[0]
        plain = e5.encode([titles[0]])[0]
        assert np.allclose(v, as_passage, atol=1e-5)  # the stored vector is "passage: " + title
        assert not np.allclose(v, plain, atol=1e-3)
        # the query gets "query: " without the caller asking for it
        q = "breathable running shoes"
        got = idx.query_vectors([q], exact=True)[0]
        assert np.allclose(got, e5.encode([q], role="query")[0], atol=1e-5)
        assert not np.allclose(got, e5.encode([q])[0], atol=1e-3)
        # and the dense score searched is the cosine of those two
        hit = idx.search(q, k=1, mode="dense")[0]
        want = float(idx.store.get_vectors([hit.id])[0] @ e5.encode([q], role="query")[0])
        assert hit.score == pytest.approx(want, abs=2e-3)  # the lone query runs in bfloat16/float16


def test_an_explanation_on_an_e5_index_sums_to_the_score_searched(e5_index):
    with Index.open(e5_index) as idx:
        r = idx.search("waterproof hiking boots", k=2, mode="dense", explain=True)
        for x in r:
            e = x.explanation
            assert e.exact and e.parts_sum == pytest.approx(x.dense_score, abs=2e-5)
            # the prefixes' tokens are parts of the grid but no word of the title or the query
            words = [w.text for w in e.title_words if not w.special]
            assert "passage" not in " ".join(words).lower()
            assert x.title.startswith(next(w.text for w in e.title_words if not w.special))


def test_model_minilm_keeps_the_english_model_without_prefixes(small_csv, tmp_path):
    res = CliRunner().invoke(app, ["index", str(small_csv), "--index", str(tmp_path / "en"), "--model", "minilm",
                                   "--json"])
    assert res.exit_code == 0, res.output
    m = read_manifest(tmp_path / "en")
    assert m.model == MINILM and m.extra["query_prefix"] == "" and m.extra["passage_prefix"] == ""
    res = CliRunner().invoke(app, ["search", "running shoes", "--index", str(tmp_path / "en"), "--json", "-k", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["results"]


def test_an_index_refuses_an_encoder_of_another_model(e5_index, encoder):
    with pytest.raises(IndexError_, match="built with model intfloat/multilingual-e5-small"):
        Index.open(e5_index, encoder)  # all-MiniLM-L6-v2: same width (384), other vectors
    res = CliRunner().invoke(app, ["search", "shoes", "--index", str(e5_index), "--model", "minilm"])
    assert res.exit_code != 0 and "built with model intfloat/multilingual-e5-small" in str(res.exception)


def test_a_rebuild_with_another_model_records_that_model(small_csv, tmp_path, encoder, e5):
    path = tmp_path / "idx"
    build_index(small_csv, path, e5, precision="float32")
    assert read_manifest(path).model == E5
    build_index(small_csv, path, encoder, rebuild=True, precision="float32")
    m = read_manifest(path)
    assert m.model == MINILM and m.fingerprint == encoder.fingerprint() and m.extra["passage_prefix"] == ""
    with Index.open(path) as idx:  # opens with the recorded model and finds what MiniLM finds
        top = idx.search("breathable running shoes", k=1, mode="dense")[0]
        assert top.dense_score == pytest.approx(float(idx.store.get_vectors([top.id])[0]
                                                      @ encoder.encode(["breathable running shoes"])[0]), abs=2e-3)
    with pytest.raises(IndexError_):
        Index.open(path, e5)


def test_an_update_embeds_new_titles_with_the_index_s_own_prefix(small_csv, tmp_path, e5):
    path = tmp_path / "idx"
    build_index(small_csv, path, e5, precision="float32")
    new = tmp_path / "new.csv"
    new.write_text("id,title\nN1,Stainless Steel Kitchen Sink\n", encoding="utf-8")
    build_index(new, path, upsert=True)
    with Index.open(path) as idx:
        v = idx.store.get_vectors(["N1"])[0]
    assert np.allclose(v, e5.encode(["Stainless Steel Kitchen Sink"], role="passage")[0], atol=1e-5)


def test_hybrid_search_weighs_the_cosine_by_the_index_s_model(e5_index, sample_index):
    from qkv.search import fusion

    assert fusion.alpha_for(E5) == 0.8 and fusion.alpha_for(MINILM) == fusion.ALPHA == 0.5
    q = "waterproof hiking boots"
    with Index.open(e5_index) as idx:
        got = [(r.id, round(r.score, 5)) for r in idx.search(q, k=5)]
        want = [(pid, round(s, 5)) for pid, s, _ in idx.retrieve(q, k=5, alpha=0.8)]
        other = [(pid, round(s, 5)) for pid, s, _ in idx.retrieve(q, k=5, alpha=0.5)]
    assert got == want and got != other
    with Index.open(sample_index) as idx:  # a MiniLM index keeps 0.5
        got = [(r.id, round(r.score, 5)) for r in idx.search(q, k=5)]
        assert got == [(pid, round(s, 5)) for pid, s, _ in idx.retrieve(q, k=5, alpha=0.5)]
