"""qkv.search.crosslingual: a translated query's structured keyword side and dense feedback, on a
small made-up catalog and dictionary."""

import numpy as np
import pytest

from qkv.search import Index, crosslingual, fusion
from qkv.translate import TitleVocabulary, Translator

from .conftest import catalog_index

CATALOG = """id,title,price
d1,Galvanized Duct Strap 25 ft,9
d2,Duct Brace Kit,12
d3,Flexible Duct 6 in.,15
b1,Corner Brace Steel 4-Pack,6
s1,Nylon Strap with Buckle,4
x1,Strap Brace Hanger,5
"""
DICT = {"风管": ["duct"], "吊带": ["brace", "strap", "sling"], "角": ["corner", "angle"]}


@pytest.fixture(scope="module")
def idx(tmp_path_factory, encoder):
    with Index.open(catalog_index(tmp_path_factory, "xl", CATALOG, encoder), encoder) as i:
        yield i


@pytest.fixture(scope="module")
def translation():
    titles = [line.split(",")[1] for line in CATALOG.splitlines()[1:]]
    return Translator(TitleVocabulary(titles), dictionary=DICT).translate("风管 吊带")


def test_a_translation_keeps_each_words_other_glosses_the_catalog_holds(translation):
    assert [(p.zh, p.en) for p in translation.pieces] == [("风管", "duct"), ("吊带", "brace")]
    assert translation.alternatives == ((), ("strap",))  # "sling": the catalog has no such word
    assert translation.to_json()["alternatives"] == [[], ["strap"]]


def test_each_word_is_one_synonym_group(translation):
    groups = crosslingual.keyword_groups("风管 吊带", translation, 0.5, trust=None)
    assert groups[-2:] == [[(1.0, ("duct",))], [(1.0, ("brace",)), (0.5, ("strap",))]]
    assert all(len(g) == 1 for g in groups[:-2])  # the query's own terms, each alone
    assert crosslingual.flat_query(groups).endswith("duct brace strap")
    assert crosslingual.keyword_groups("风管 吊带", translation, 0, trust=None)[-1] == [(1.0, ("brace",))]
    # by default each group is weighted by trust in its source: both words came from the dictionary
    d = crosslingual.SOURCE_TRUST["dictionary"]
    assert d < 1
    assert crosslingual.keyword_groups("风管 吊带", translation, 0.5)[-2:] == [[(d, ("duct",))],
                                                                            [(d, ("brace",)), (0.5 * d, ("strap",))]]
    assert crosslingual.keyword_groups("风管 吊带", translation, 0.5)[:-2] == groups[:-2]  # typed terms: in full


def test_a_term_is_searched_once_even_when_two_words_give_it(translation):
    from qkv.translate import Piece, Translation

    t = Translation("x", "duct duct brace", (Piece("风管", "duct", "dictionary"), Piece("管", "duct", "dictionary"),
                                             Piece("吊带", "brace", "dictionary")), ((), (), ("duct",)))
    groups = crosslingual.keyword_groups("x", t, 0.5, trust=None)
    terms = [term for g in groups for _, ts in g for term in ts]
    assert terms.count("duct") == 1 and [(1.0, ("brace",))] in groups


def test_an_alternative_finds_its_products_at_reduced_weight_and_counts_once(idx, translation):
    groups = crosslingual.keyword_groups("风管 吊带", translation, 0.5, trust=None)
    ranking, weighted = crosslingual.structured_keyword(idx.store, groups, 10)
    ids = [i for i, _ in ranking]
    assert ids[0] == "d2"  # duct + the chosen "brace"
    assert ids.index("d1") < ids.index("d3")  # duct + the alternative "strap" beats duct alone
    flat = crosslingual.flat_query(groups)
    shares = {pid: dict(p) for pid, p in idx.store.keyword_terms(flat, ids).items()}
    # x1 holds both glosses of 吊带: credited with the better one only, as one matched term
    x1 = shares["x1"]
    assert dict(ranking)["x1"] == pytest.approx(max(x1["brace"], 0.5 * x1["strap"]))
    assert weighted["x1"] == pytest.approx(dict(ranking)["x1"] * 1 ** fusion.COVERAGE_POWER)
    d1 = shares["d1"]
    assert dict(ranking)["d1"] == pytest.approx(d1["duct"] + 0.5 * d1["strap"])
    assert weighted["d1"] == pytest.approx(dict(ranking)["d1"] * 2 ** fusion.COVERAGE_POWER)


def test_without_alternatives_and_feedback_it_is_the_flat_querys_fusion(idx, translation):
    groups = crosslingual.keyword_groups("风管 吊带", translation, 0, trust=None)
    flat = crosslingual.flat_query(groups)
    v = idx.encode_query("duct brace")
    for mode in ("hybrid", "keyword", "dense"):
        got, _ = crosslingual.retrieve(idx.store, groups, v, 5, mode, None, "score", 0.6, 50, 0, 0.0)
        dense = idx.store.dense_search(v, 50)
        kw = idx.store.keyword_search(flat, 50)
        want = idx.fuse(mode, dense, kw, 5, v, "score", 0.6, query=flat)
        assert [p for p, _, _ in got] == [p for p, _, _ in want], (mode, got, want)
        if mode != "keyword":
            assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in want])


def test_trust_follows_the_source_and_a_lone_characters_gloss_counts_least():
    from qkv.translate import Piece

    trust = crosslingual.piece_trust
    for source in ("glossary", "trade glossary", "units"):
        assert trust(Piece("风管", "duct", source)) == 1.0
        assert trust(Piece("柜", "cabinet", source)) == 1.0  # a seller's or the trade's one-character word: in full
    assert trust(Piece("风管", "duct", "dictionary")) == crosslingual.SOURCE_TRUST["dictionary"]
    assert trust(Piece("浴室", "bathroom", "sub-words")) == crosslingual.SOURCE_TRUST["sub-words"]
    assert trust(Piece("除", "not including", "dictionary")) == crosslingual.CHARACTER_TRUST
    assert trust(Piece("柜", "cabinet", "sub-words")) == crosslingual.CHARACTER_TRUST
    assert crosslingual.CHARACTER_TRUST < crosslingual.SOURCE_TRUST["dictionary"] < 1
    assert trust(Piece("除", "remove", "dictionary"), {"dictionary": 0.7}, 0.1) == 0.1
    assert trust(Piece("风管", "duct", "dictionary"), {"dictionary": 0.7}, 0.1) == 0.7


def test_translation_rows_say_each_words_english_source_weight_and_alternatives():
    """One row per piece, as the CLI and the web API show a translation: translated words with the
    trust their group is searched at and the alternatives searched beside them; pieces searched as
    typed with no weight."""
    from qkv.translate import Piece, Translation

    t = Translation("pvc 除 跳蚤 吊带 鬯", "pvc divide flea brace",
                    (Piece("pvc", "pvc", "as typed"), Piece("除", "divide", "dictionary"),
                     Piece("跳蚤", "flea", "trade glossary"), Piece("吊带", "brace", "sub-words"),
                     Piece("鬯", "", "untranslated")),
                    ((), ("remove",), (), ("strap", "sling", "hanger", "band"), ()))
    rows = crosslingual.translation_rows(t)
    assert [r["zh"] for r in rows] == ["pvc", "除", "跳蚤", "吊带", "鬯"]
    assert [r["weight"] for r in rows] == [None, crosslingual.CHARACTER_TRUST, 1.0,
                                           crosslingual.SOURCE_TRUST["sub-words"], None]
    assert all(r["weight"] == crosslingual.piece_trust(p) for r, p in zip(rows, t.pieces) if r["weight"] is not None)
    assert rows[1]["alternatives"] == ["remove"] and rows[2]["alternatives"] == []
    assert rows[3]["alternatives"] == ["strap", "sling", "hanger"][:crosslingual.MAX_ALTERNATIVES]  # what is searched
    assert rows[4] == {"zh": "鬯", "en": "", "source": "untranslated", "weight": None, "alternatives": []}
    assert " ".join(r["en"] for r in rows if r["en"]) == t.text
    # the rows' weights are the weights the structured query searches each group at
    groups = crosslingual.keyword_groups(t.query, t)
    assert [g[0][0] for g in groups if g[0][0] != 1.0] == [r["weight"] for r in rows if r["weight"] not in (None, 1.0)]
    # a translation without alternatives (an older caller's) still gives rows
    assert crosslingual.translation_rows(Translation("除", "divide", (Piece("除", "divide", "dictionary"),)))[0][
        "alternatives"] == []


TRUST_CATALOG = """id,title,price
f1,Flea Spray Yard,12
f2,Flea Shampoo Dogs,9
v1,Divide Bar Steel,20
h1,Garden Hose Reel,30
b1,Dog Bed Large,25
"""


def test_a_wrongly_glossed_character_no_longer_outranks_the_trusted_word(tmp_path_factory, encoder):
    """除跳蚤 ("flea remover") with 除 glossed "divide": the rare "divide" has the larger BM25, so with
    every word at full weight the board game leads; with trust, the flea products do."""
    from qkv.translate import Piece, Translation

    t = Translation("除跳蚤", "divide flea", (Piece("除", "divide", "dictionary"), Piece("跳蚤", "flea", "trade glossary")),
                    ((), ()))
    with Index.open(catalog_index(tmp_path_factory, "trust", TRUST_CATALOG, encoder), encoder) as i:
        flat, _ = crosslingual.structured_keyword(i.store, crosslingual.keyword_groups("除跳蚤", t, trust=None), 10)
        trusted, _ = crosslingual.structured_keyword(i.store, crosslingual.keyword_groups("除跳蚤", t), 10)
    assert flat[0][0] == "v1"
    assert [pid for pid, _ in trusted] == [pid for pid, _ in flat if pid != "v1"] + ["v1"]


COVERAGE_CATALOG = """id,title,price
g1,ECHO Gas Chainsaw 16 in.,199
c1,ECHO Chain Saw Chaps,89
r1,Garden Rake Steel,20
h1,Hose Reel Cart,45
w1,Chain Link Fence Gate,60
s1,Circular Saw Blade,15
"""


def test_coverage_counts_the_shoppers_words_not_the_english_terms(tmp_path_factory, encoder):
    """油锯 is one word: the product holding its chosen "chainsaw" must not be out-covered by one
    holding its two-term alternative "chain saw" (which, counted by English terms, matches 3 to 2)."""
    from qkv.translate import Piece, Translation

    t = Translation("ECHO 油锯", "ECHO chainsaw", (Piece("ECHO", "ECHO", "as typed"), Piece("油锯", "chainsaw", "trade glossary")),
                    ((), ("chain saw",)))
    groups = crosslingual.keyword_groups("ECHO 油锯", t)
    assert groups[-1] == [(1.0, ("chainsaw",)), (0.5, ("chain", "saw"))]
    with Index.open(catalog_index(tmp_path_factory, "coverage", COVERAGE_CATALOG, encoder), encoder) as i:
        raw, by_word = crosslingual.structured_keyword(i.store, groups, 10, coverage="words")
        raw_t, by_term = crosslingual.structured_keyword(i.store, groups, 10, coverage="terms")
        default = crosslingual.structured_keyword(i.store, groups, 10)
    assert raw == raw_t  # the count weights fusion only; the keyword ranking is BM25 alone
    assert default[1] == by_word and crosslingual.COVERAGE == "words"
    p = fusion.COVERAGE_POWER
    assert by_term["c1"] == pytest.approx(dict(raw)["c1"] * 3 ** p)  # echo + chain + saw
    assert by_word["c1"] == pytest.approx(dict(raw)["c1"] * 2 ** p)  # echo + one word, fully held
    assert by_word["g1"] == by_term["g1"] == pytest.approx(dict(raw)["g1"] * 2 ** p)
    assert by_term["c1"] > by_term["g1"] and by_word["g1"] > by_word["c1"]
    assert by_word["s1"] == pytest.approx(dict(raw)["s1"] * 1)  # half of "chain saw" held: 0.5, no coverage bonus
    with pytest.raises(ValueError, match="'words' or 'terms'"):
        crosslingual.structured_keyword(None, groups, 10, coverage="word")


def test_feedback_is_rocchio_in_embedding_space(idx, translation):
    v = np.array([1.0, 0.0, 0.0], np.float32)
    fb = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], np.float32)
    got = crosslingual.feedback_vector(v, fb, 2.0)
    assert got == pytest.approx(np.array([1, 1, 1]) / np.sqrt(3))
    assert crosslingual.feedback_vector(v, fb, 0.0) == pytest.approx(v)
    groups = crosslingual.keyword_groups("风管 吊带", translation, 0.5)
    q = idx.encode_query("duct brace")
    first, _ = crosslingual.retrieve(idx.store, groups, q, 3, "dense", None, "score", 0.8, 6, 0, 0.0)
    got, searched = crosslingual.retrieve(idx.store, groups, q, 6, "dense", None, "score", 0.8, 6, 2, 1.0)
    want = crosslingual.feedback_vector(q, idx.store.get_vectors([p for p, _, _ in first[:2]]), 1.0)
    assert searched == pytest.approx(want)
    assert [p for p, _, _ in got] == [h.id for h in idx.store.dense_search(want, 6)]
    assert [d["dense_score"] for _, _, d in got] == pytest.approx([h.score for h in idx.store.dense_search(want, 6)])


def test_index_search_runs_translated_queries_through_it(idx):
    res = idx.search("风管", k=4)
    tr = res.translation
    assert tr is not None and tr.text and "translated search" in res.timings and res.plan.translated
    v = idx.mix_vectors(idx.encode_query("风管"), idx.encode_query(tr.text))
    want, _ = crosslingual.retrieve(idx.store, crosslingual.keyword_groups("风管", tr), v, 4, "hybrid", None, "score",
                                    fusion.alpha_for(idx.manifest.model), 200)
    assert [r.id for r in res] == [p for p, _, _ in want]
    assert all(r.searched_as == tr.text for r in res)
    kw = idx.search("风管", k=4, mode="keyword")
    assert kw and all("Duct" in r.title for r in kw)
    en = idx.search("duct strap", k=2)
    assert "translated search" not in en.timings and not en.plan.translated  # English never comes here


def test_each_thread_sees_its_own_searchs_translation(idx):
    """A server may search one Index from several threads: each answer reports its own query's
    translation and timings (they come back in the response; nothing is kept on the Index)."""
    import threading

    seen: dict[str, list] = {"zh": [], "en": []}
    start = threading.Barrier(2)

    def worker(kind, query):
        start.wait()
        for _ in range(20):
            res = idx.search(query, k=2)
            tr = res.translation
            seen[kind].append((tr.query if tr is not None else None, "translated search" in res.timings))

    threads = [threading.Thread(target=worker, args=a) for a in (("zh", "风管"), ("en", "duct strap"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["zh"] == [("风管", True)] * 20
    assert seen["en"] == [(None, False)] * 20
