"""Chinese in search: word-aware keyword terms, traditional folding, and Chinese queries translated
against an English catalog (index, JSON and CLI)."""

import json

import pytest

from qkv.search import Index
from qkv.text import keywords as textmod
from qkv.search.crosslingual import SOURCE_TRUST
from qkv.search.catalog import read_catalog
from qkv.search.store import open_store
from qkv.text import zh

from .conftest import catalog_index

ZH_CATALOG = """id,title,price
t1,不锈钢保温杯 500ml 真空,25
t2,儿童保温杯 带吸管,18
m1,保湿面霜 50g 补水,60
m2,玻尿酸保湿面霜,88
s1,男士运动鞋 透气,199
e1,Stainless Steel Vacuum Insulated Water Bottle 500ml,22
e2,Men's Breathable Running Shoes,80
"""


@pytest.fixture(scope="module")
def zh_index(tmp_path_factory, encoder):
    with Index.open(catalog_index(tmp_path_factory, "zh", ZH_CATALOG, encoder), encoder) as idx:
        yield idx


@pytest.fixture(scope="module")
def sample(sample_index, encoder):
    with Index.open(sample_index, encoder) as i:
        yield i


def test_thermos_no_longer_finds_moisturiser(zh_index):
    # before: every character was a term, and 保温杯 met 保湿面霜 on 保
    ids = [r.id for r in zh_index.search("保温杯", k=7, mode="keyword", translate=False)]
    assert set(ids) == {"t1", "t2"}


def test_traditional_queries_find_simplified_titles(zh_index):
    simp = zh_index.search("运动鞋", k=5, mode="keyword", translate=False)
    trad = zh_index.search("運動鞋", k=5, mode="keyword", translate=False)
    assert [r.id for r in trad] == [r.id for r in simp] == ["s1"]
    assert trad[0].score == pytest.approx(simp[0].score)


def test_the_index_records_its_chinese_terms_and_old_indexes_keep_characters(zh_index, tmp_path, encoder):
    assert zh_index.manifest.extra["keyword_han"] == zh.SCHEME
    st = zh_index.store
    assert st.query_terms("保温杯") == [t for t in textmod.terms("保温杯") if t]
    # an index written before the scheme existed records none: it is searched by characters
    assert textmod.terms("保温杯", han=textmod.LEGACY_HAN) == ["保", "温", "杯"]


def test_english_text_is_normalised_exactly_as_before(sample_catalog):
    # the Chinese schemes only touch Han runs: every English title keeps its old terms
    titles = [r["title"] for r in read_catalog(sample_catalog).rows if not zh.has_han(r["title"])]
    assert len(titles) > 200
    for t in titles:
        assert textmod.normalize(t) == textmod.normalize(t, han=textmod.LEGACY_HAN)


def test_chinese_query_finds_english_and_chinese_running_shoes(sample):
    res = sample.search("透气跑鞋", k=5)
    titles = [r.title for r in res]
    assert any("跑鞋" in t for t in titles), titles
    assert any("Running Shoes" in t for t in titles), titles
    assert res[0].searched_as and "running shoes" in res[0].searched_as
    assert all(r.searched_as == res[0].searched_as for r in res)
    assert res.searched_as == res[0].searched_as and res.plan.translated
    assert ("跑鞋", "running shoes", "dictionary") in res.translation.pieces


def test_translation_can_be_turned_off_and_english_queries_are_not_translated(sample):
    res = sample.search("透气跑鞋", k=5, translate=False)
    assert res and all(r.searched_as is None for r in res) and res.translation is None
    assert res.plan.keyword == "透气跑鞋" and res.plan.dense == ("透气跑鞋",)  # as typed, both sides
    res = sample.search("breathable running shoes", k=3)
    assert res.translation is None and res[0].searched_as is None
    assert "searched_as" not in res[0].to_json()


def test_translated_results_carry_searched_as_in_json(sample):
    res = sample.search("透气跑鞋", k=2)
    d = res[0].to_json()
    assert d["searched_as"] == res.translation.text == res.plan.dense[1]


def test_glossary_overrides_the_dictionary(sample_index, encoder, tmp_path):
    g = tmp_path / "g.csv"
    g.write_text("跑鞋,trail sneakers\n", encoding="utf-8")
    with Index.open(sample_index, encoder, glossary=g) as idx:
        res = idx.search("跑鞋", k=3, mode="keyword")
        assert res[0].searched_as == "trail sneakers"
        assert res.translation.pieces == (("跑鞋", "trail sneakers", "glossary"),)


def test_keyword_mode_translates_without_an_encoder(sample_index):
    with Index.open(sample_index) as idx:  # no encoder given: keyword mode must not load one
        res = idx.search("跑鞋", k=5, mode="keyword")
        assert res and idx._encoder is None
        assert any("Running Shoes" in r.title for r in res)


def test_cli_shows_what_a_chinese_query_was_searched_as(sample_index):
    from typer.testing import CliRunner

    from qkv.cli import app

    r = CliRunner().invoke(app, ["search", "透气跑鞋", "--index", str(sample_index), "-k", "3", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert "running shoes" in out["searched_as"]
    row = next(r for r in out["translation"] if r["zh"] == "跑鞋")  # crosslingual.translation_rows
    assert {**row, "alternatives": []} == {"zh": "跑鞋", "en": "running shoes", "source": "dictionary",
                                           "weight": SOURCE_TRUST["dictionary"], "alternatives": []}
    assert all(x["searched_as"] == out["searched_as"] for x in out["results"])
    r = CliRunner().invoke(app, ["search", "透气跑鞋", "--index", str(sample_index), "-k", "3", "--mode", "keyword"])
    assert r.exit_code == 0, r.output
    assert "searched as:" in r.output and "running shoes" in r.output
    # a word searched below full trust says its weight; a trade glossary's word (full trust) does not
    assert f"跑鞋→running shoes (dictionary ×{SOURCE_TRUST['dictionary']:g}" in r.output
    assert "透气→breathable (trade glossary)" in r.output


def test_cli_piece_text_names_source_weight_and_alternatives():
    from qkv.cli.search import _piece_text

    assert _piece_text({"zh": "除", "en": "divide", "source": "dictionary", "weight": 0.25,
                        "alternatives": ["remove"]}) == "除→divide (dictionary ×0.25; also remove)"
    assert _piece_text({"zh": "吊带", "en": "brace", "source": "glossary", "weight": 1.0,
                        "alternatives": []}) == "吊带→brace (glossary)"
    assert _piece_text({"zh": "鬯", "en": "", "source": "untranslated", "weight": None,
                        "alternatives": []}) == "鬯→? (untranslated)"


def test_an_index_written_by_characters_stays_by_characters(tmp_path):
    # an index from before the word-aware scheme records none (= "chars"): its titles were indexed
    # character by character, so its queries must be too, and updates keep writing that way
    import numpy as np

    from qkv.search.embedded.store import EmbeddedStore
    from qkv.search.store import Manifest, title_hash

    rows = [{"id": "t1", "title": "不锈钢保温杯"}, {"id": "m1", "title": "保湿面霜"}]
    st = EmbeddedStore.create(tmp_path / "old", Manifest(model="m", fingerprint="f", dim=4,
                                                         extra={textmod.MANIFEST_KEY: textmod.LEGACY_HAN}))
    v = np.eye(4, dtype=np.float32)[:2]
    with st.writer() as w:
        w.upsert(rows, v, [title_hash(r["title"]) for r in rows])
    st.close()
    st = open_store(tmp_path / "old")
    try:
        assert st.manifest.extra[textmod.MANIFEST_KEY] == "chars"
        assert st.query_terms("保温杯") == ["保", "温", "杯"]
        assert {h.id for h in st.keyword_search("保温杯", 5)} == {"t1", "m1"}  # the old behaviour, consistently
        with st.writer() as w:
            w.upsert([{"id": "t2", "title": "儿童保温杯"}], np.eye(4, dtype=np.float32)[2:3], ["h"])
    finally:
        st.close()
    st = open_store(tmp_path / "old")
    try:
        assert st.manifest.extra[textmod.MANIFEST_KEY] == "chars"
        assert "t2" in {h.id for h in st.keyword_search("儿童", 5)}
    finally:
        st.close()


def test_a_new_store_records_the_word_aware_scheme(tmp_path):
    from qkv.search.embedded.store import EmbeddedStore
    from qkv.search.store import Manifest

    st = EmbeddedStore.create(tmp_path / "new", Manifest(model="m", fingerprint="f", dim=4))
    try:
        assert st.manifest.extra[textmod.MANIFEST_KEY] == zh.SCHEME
    finally:
        st.close()


HARDWARE_CATALOG = """id,title,price
p1,Charlotte Pipe 1/2 in. PVC 90-Degree Elbow,2
p2,1/2 in. PVC Tee Fitting,2
v1,Glacier Bay 36 in. Bath Vanity in White with Marble Top,399
h1,Milwaukee Hole Saw Kit (9-Piece),49
c1,Bathroom Storage Cabinet in White,89
"""


@pytest.fixture(scope="module")
def hardware_index(tmp_path_factory, encoder):
    return catalog_index(tmp_path_factory, "hw", HARDWARE_CATALOG, encoder)


def test_the_trade_glossary_is_on_by_default_and_can_be_turned_off(hardware_index):
    with Index.open(hardware_index) as idx:  # keyword mode: no encoder needed
        assert idx.trade_glossary == "home-improvement"
        res = idx.search("PVC弯头", k=2, mode="keyword")
        assert res[0].id == "p1" and res[0].searched_as == "PVC elbow"
        assert ("弯头", "elbow", "trade glossary") in res.translation.pieces
        assert idx.search("浴室柜", k=1, mode="keyword")[0].id == "v1"
    with Index.open(hardware_index, trade_glossary="none") as idx:
        res = idx.search("浴室柜", k=1, mode="keyword")
        assert all(p.source != "trade glossary" for p in res.translation.pieces)
    from qkv.errors import InputError

    with pytest.raises(InputError, match="no built-in trade glossary"):
        Index.open(hardware_index, trade_glossary="garden")


def test_cli_says_which_words_came_from_the_trade_glossary(hardware_index):
    from typer.testing import CliRunner

    from qkv.cli import app

    r = CliRunner().invoke(app, ["search", "开孔器", "--index", str(hardware_index), "-k", "1", "--mode", "keyword"])
    assert r.exit_code == 0, r.output
    assert "searched as: hole saw" in r.output and "开孔器→hole saw (trade glossary)" in r.output
    r = CliRunner().invoke(app, ["search", "开孔器", "--index", str(hardware_index), "-k", "1", "--mode", "keyword",
                                 "--trade-glossary", "none", "--json"])
    assert r.exit_code == 0, r.output
    assert all(p["source"] != "trade glossary" for p in json.loads(r.output)["translation"])
