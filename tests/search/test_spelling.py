"""Spelling: an unknown query word is searched, on both sides, as the catalog word it most likely
meant (``qkv.search.spelling``), and the response says so."""

import json
import sqlite3

import numpy as np
import pytest

from qkv.search import Index, spelling
from qkv.search.embedded import EmbeddedStore
from qkv.search.evaluate import evaluate
from qkv.search.store import Manifest, open_store, title_hash


# ---------------------------------------------------------------------------- the rule
def test_fewer_edits_win_unless_the_other_word_is_far_commoner():
    # "aluminun" → "aluminum" is one edit; "alumina" is two and a hundred times commoner
    assert spelling.correct("aluminun", {"aluminum": 10, "alumina": 1000}) == "aluminum"
    # one edit each: the commoner word
    assert spelling.correct("celing", {"ceiling": 300, "cling": 5}) == "ceiling"
    assert spelling.correct("celing", {"ceiling": 5, "cling": 300}) == "cling"
    # an edit is worth ln(df) EDIT_WEIGHT: a word e^6 ≈ 403 times commoner outweighs one edit
    assert spelling.correct("aluminun", {"aluminum": 2, "alumina": 2 * 404}) == "alumina"
    assert spelling.correct("aluminun", {"aluminum": 2, "alumina": 2 * 400}) == "aluminum"
    # a swap of neighbours is one edit
    assert spelling.correct("blubs", {"bulbs": 10}) == "bulbs"


def test_a_short_word_takes_one_edit_a_long_one_two():
    assert len("xmas") < spelling.TWO_EDITS_FROM and spelling.correct("xmas", {"gas": 500}) is None
    assert spelling.correct("refridgerater", {"refrigerator": 50}) == "refrigerator"  # two edits


def test_run_together_words_are_split_into_two_catalog_words():
    assert spelling.correct("windowair", {"window": 50, "air": 80, "windward": 3}) == "window air"
    # a half shorter than SPLIT_LEAST letters is no split: "sheetin" meant "sheeting"
    assert spelling.correct("sheetin", {"sheet": 100, "in": 5000, "sheeting": 4}) == "sheeting"
    # a split costs SPLIT_COST edits against the rarer half: one edit to a word of df 5 beats
    # splitting into words of df 90 (ln 5 − 6 > ln 90 − 9), to a word of df 4 it does not
    assert spelling.correct("walloven", {"wall": 90, "oven": 90, "wallovens": 5}) == "wallovens"
    assert spelling.correct("walloven", {"wall": 90, "oven": 90, "wallovens": 4}) == "wall oven"


@pytest.mark.parametrize("term, df", [
    ("fan", {"fans": 100}),                 # shorter than LEAST_LETTERS
    ("2x4x8", {"2x4x10": 100}),             # digits: sizes are not misspelt words
    ("celing", {"ceiling": 1}),             # a word one title holds is no correction
    ("zzzzzz", {"ceiling": 100}),           # nothing within MAX_DISTANCE edits
])
def test_no_correction(term, df):
    assert spelling.correct(term, df) is None


# ---------------------------------------------------------------------------- the store's words
TITLES = ["Ceiling Fan with Light, White", "Ceiling Fan, Brushed Nickel", "LED Bulbs 4-Pack", "LED Bulbs 2-Pack",
          "Window Air Conditioner 10,000 BTU", "Window Air Conditioner 8,000 BTU", "Wall Oven 30 in.",
          "Wall Oven 27 in.", "Cling Wrap", "运动鞋 透气"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("spell") / "idx"
    st = EmbeddedStore.create(path, Manifest(model="m", fingerprint="f", dim=4))
    v = np.random.default_rng(0).normal(size=(len(TITLES), 4)).astype(np.float32)
    with st.writer() as w:
        w.upsert([{"id": f"p{i}", "title": t} for i, t in enumerate(TITLES)],
                 v / np.linalg.norm(v, axis=1, keepdims=True), [title_hash(t) for t in TITLES])
    st.close()
    st = open_store(path)
    yield st
    st.close()


def test_the_published_generation_keeps_its_words_with_their_counts(store):
    words = dict(store.db.execute("SELECT word, doc FROM word_df"))
    assert words["ceiling"] == 2 and words["bulbs"] == 2 and words["cling"] == 1
    assert "10" not in words and "运动鞋" not in words  # numbers and Chinese are not spelt


def test_a_generation_without_the_table_reads_its_documents(store, tmp_path):
    import shutil

    copy = tmp_path / "old"
    shutil.copytree(store.path, copy)
    gen = json.loads((copy / "manifest.json").read_text())["extra"]["generation"]
    con = sqlite3.connect(copy / gen / "catalog.sqlite")
    con.execute("DROP TABLE word_df")
    con.commit()
    con.close()
    old = open_store(copy)
    try:
        assert old.keyword.vocab.words() == store.keyword.vocab.words()
        assert old.spell("celing fan") == "ceiling fan"
    finally:
        old.close()


@pytest.mark.parametrize("query, want", [
    ("celing fan", "ceiling fan"),
    ("led blubs", "led bulbs"),
    ("windowair conditioner", "window air conditioner"),
    ("Ceiling Fan", "Ceiling Fan"),       # known words stay as typed, case included
    ("ceiling fans", "ceiling fans"),     # a known stem is a known word
    ("zzzzzz fan", "zzzzzz fan"),         # nothing near: as typed
    ("运动鞋 blubs", "运动鞋 bulbs"),       # the store spells the English words of any text
])
def test_spell_corrects_only_words_no_title_holds(store, query, want):
    assert store.spell(query) == want


def test_a_query_needing_nothing_comes_back_itself(store):
    q = "ceiling  fan"  # its spacing too: the plan compares the text with the query
    assert store.spell(q) is q


def test_keep_leaves_the_words_it_names_as_typed(store):
    assert store.spell("celing blubs", keep=lambda w: w == "celing") == "celing bulbs"


def test_the_keyword_side_searches_what_it_is_given(store):
    # the plan corrects (Index.plan); the keyword side leaves out what no title holds
    assert store.query_terms("celing fan") == ["fan"]
    assert store.query_terms(store.spell("celing fan")) == ["ceiling", "fan"]


# ---------------------------------------------------------------------------- searching
@pytest.fixture(scope="module")
def idx(sample_index, encoder):
    with Index.open(sample_index, encoder) as i:
        yield i


def test_a_misspelt_query_is_searched_as_its_correction_on_both_sides(idx):
    res = idx.search("breathable runing shoes", k=8)
    assert res.corrected == "breathable running shoes"
    want = idx.search("breathable running shoes", k=8)
    assert want.corrected is None
    assert res.plan.dense == ("breathable running shoes",)
    # the bilingual sample catalog: the correction's Chinese words join the keyword side as well
    assert res.plan.keyword == want.plan.keyword and "跑鞋" in res.plan.keyword
    assert [(r.id, r.score) for r in res] == [(r.id, r.score) for r in want]
    assert np.array_equal(res.vector, want.vector)  # the dense side embedded the correction


def test_the_explanation_is_the_grid_of_the_corrected_text(idx):
    res = idx.search("breathable runing shoes", k=2, explain=True)
    e = res[0].explanation
    assert "running" in [t.lower() for t in e.query_tokens]
    assert abs(e.cosine - res[0].dense_score) < 1e-4


def test_a_word_the_model_knows_is_searched_as_typed(idx):
    # the sample catalog sells no skirts and no books: the nearest catalog words are other words
    assert idx.store.spell("black skirt") == "black shirt" and idx.store.spell("books") == "boots"
    assert idx.model_knows("skirt") and idx.model_knows("books") and not idx.model_knows("runing")
    assert idx.search("black skirt", k=3).corrected is None and idx.search("books", k=3).corrected is None


def test_a_chinese_query_is_not_spelt(idx):
    res = idx.search("透气跑鞋", k=3)
    assert res.corrected is None


def test_evaluation_searches_the_correction(idx):
    # graded by the correct spelling's dense order, so a dense side that embedded the typo differs
    ranked = idx.search("waterproof hiking boots", k=10, mode="dense")
    qrels = {"q1": {r.id: 3.0 - 0.2 * i for i, r in enumerate(ranked)}}
    typo = evaluate(idx, {"q1": "waterprof hikng boots"}, qrels)
    right = evaluate(idx, {"q1": "waterproof hiking boots"}, qrels)
    assert typo.metrics == right.metrics and typo.settings["corrected"] == 1
    as_typed = evaluate(idx, {"q1": "waterprof hikng boots"}, qrels, spell=False)  # the typo embedded
    assert as_typed.metrics["dense"] != right.metrics["dense"] and as_typed.settings["corrected"] == 0


# ---------------------------------------------------------------------------- the faces
def test_the_cli_says_what_it_searched_and_can_search_as_typed(sample_index):
    from typer.testing import CliRunner

    from qkv.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["search", "breathable runing shoes", "--index", str(sample_index), "-k", "3"])
    assert r.exit_code == 0, r.output
    assert "showing results for: breathable running shoes" in " ".join(r.output.split())
    r = runner.invoke(app, ["search", "breathable runing shoes", "--index", str(sample_index), "-k", "3", "--json"])
    assert json.loads(r.stdout)["corrected"] == "breathable running shoes"
    r = runner.invoke(app, ["search", "breathable runing shoes", "--index", str(sample_index), "-k", "3", "--json",
                            "--no-spell"])
    assert r.exit_code == 0, r.output
    assert "corrected" not in json.loads(r.stdout)
