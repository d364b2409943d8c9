"""Learned term weights on the keyword side (qkv.search.termweights, `qkv index --term-weights`):
keyword documents by hand, the ranking they change, the manifest, bad heads, updates and rebuilds."""

import csv
import json
import sqlite3

import pytest
from typer.testing import CliRunner

from qkv.errors import InputError
from qkv.explain import terms as T
from qkv.search import Index, build_index
from qkv.search.store import read_manifest
from qkv.search.termweights import keyword_text

# A made-up search-term report: shoppers search a title by what the product is (its last noun),
# seldom by what it is for, so the head learns that "Faucet" weighs more in a faucet than in a wrench
REPORT = [("kitchen faucet", "Glacier Bay Kitchen Faucet", 5), ("faucet", "Delta Chrome Shower Faucet", 4),
          ("bathroom faucet", "Moen Bathroom Faucet in Brushed Nickel", 3), ("wrench", "Faucet Wrench Tool", 5),
          ("basin wrench", "Faucet Basin Wrench", 4), ("angle bracket", "Everbilt Steel Angle Bracket", 5),
          ("pliers", "Faucet Pliers Set", 3), ("shower head", "Chrome Shower Head", 4),
          ("hinge", "Cabinet Door Hinge", 3), ("faucet", "Pfister Bar Faucet", 2), ("lamp", "Desk Lamp Shade", 3),
          ("shade", "Lamp Shade Kit", 2)]
# B (the wrench) comes first, so plain BM25's tie on "faucet" (same length, one occurrence) goes to it
CATALOG = ["B,Faucet Wrench Tool Set", "A,Glacier Bay Kitchen Faucet", "C,Cabinet Door Hinge", "D,Desk Lamp Shade Kit",
           "E,Everbilt Steel Angle Bracket", "F,Chrome Shower Head", "G,Oak Stair Tread", "H,Copper Pipe Elbow",
           "I,Garden Hose Reel", "J,Ceiling Fan Light Kit"]


def test_keyword_text_repeats_each_term_by_its_weight():
    # no blend: tf = round(clip(w, 0, 1) · scale); a word's normalised terms share its weight ("6ft" → 6, ft)
    assert keyword_text("Delta Shower Faucet 6ft", ["Delta", "Shower", "Faucet", "6ft"], [0.04, 0.32, 1.7, 0.2],
                        scale=10, blend=0) == "delta shower shower shower faucet faucet faucet faucet faucet faucet faucet " \
                                     "faucet faucet faucet 6 6 ft ft"
    # words weighted ~0 (or below 0) are left out unless kept once; terms no head word covers keep their count
    # (the unit "in" made of '"' in 3/4")
    assert keyword_text('Brass Nipple 3/4"', ["Brass", "Nipple", "3/4"], [-0.3, 0.5, 0.0], scale=4,
                        keep_zero=False, blend=0) == "nipple nipple in"
    assert keyword_text('Brass Nipple 3/4"', ["Brass", "Nipple", "3/4"], [-0.3, 0.5, 0.0], scale=4,
                        keep_zero=True, blend=0) == "brass nipple nipple 3/4 in"


@pytest.fixture(scope="module")
def head_file(encoder, tmp_path_factory):
    d = tmp_path_factory.mktemp("terms")
    with open(d / "report.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["search term", "product title", "clicks"])
        w.writerows(REPORT)
    head = T.train(encoder, T.examples_from_report(d / "report.csv"))
    return head.save(d / "head.npz")


def _catalog(tmp_path, rows=CATALOG):
    p = tmp_path / "cat.csv"
    p.write_text("id,title\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return p


def _keyword_docs(path) -> dict[str, str]:
    gen = read_manifest(path).extra["generation"]
    with sqlite3.connect(path / gen / "catalog.sqlite") as con:
        return dict(con.execute("SELECT id, ktext FROM products"))


def _keyword_ids(path, encoder, query):
    with Index.open(path, encoder) as idx:
        return [r.id for r in idx.search(query, k=3, mode="keyword")], idx


def test_learned_weights_rank_the_title_that_is_what_the_word_says_first(encoder, head_file, tmp_path):
    head = T.TermHead.load(head_file, encoder)
    (wa, ya), (wb, yb) = head.title_scores(encoder, ["Glacier Bay Kitchen Faucet", "Faucet Wrench Tool Set"])
    assert ya[wa.index("Faucet")] > yb[wb.index("Faucet")] + 0.3  # what the head learned from the report
    cat = _catalog(tmp_path)
    build_index(cat, tmp_path / "plain", encoder)
    rep = build_index(cat, tmp_path / "weighted", encoder, term_weights=head_file)
    plain, _ = _keyword_ids(tmp_path / "plain", encoder, "faucet")
    weighted, _ = _keyword_ids(tmp_path / "weighted", encoder, "faucet")
    assert plain[:2] == ["B", "A"] and weighted[:2] == ["A", "B"]
    # the manifest (and the build report) say which head, with its digest and settings
    tw = read_manifest(tmp_path / "weighted").extra["term_weights"]
    assert tw["head"] == str(head_file.resolve()) and tw["model"] == encoder.name and len(tw["sha256"]) == 64
    assert (tw["scale"], tw["keep_zero"], tw["k1"], tw["b"], tw["blend"]) == (20.0, True, 0.1, 0.9, 0.25)
    assert rep.term_weights == tw
    assert "term_weights" not in read_manifest(tmp_path / "plain").extra
    # only the keyword document changed: the title shown (and highlighted) is the catalog's
    docs = _keyword_docs(tmp_path / "weighted")
    assert docs["A"].split().count("faucet") > docs["B"].split().count("faucet") >= 1
    with Index.open(tmp_path / "weighted", encoder) as idx:
        r = idx.search("kitchen faucet", k=1, explain=True)[0]
    assert r.id == "A" and r.title == "Glacier Bay Kitchen Faucet"
    assert {t for t, _ in r.explanation.keyword_terms} == {"kitchen", "faucet"}


def test_a_bad_head_is_refused_and_leaves_the_index_as_it_was(encoder, head_file, tmp_path):
    cat = _catalog(tmp_path)
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a head")
    with pytest.raises(InputError, match="not a term head"):
        build_index(cat, tmp_path / "new", encoder, term_weights=junk)
    assert not (tmp_path / "new").exists()  # refused before anything was written
    build_index(cat, tmp_path / "idx", encoder)
    before = (tmp_path / "idx" / "manifest.json").read_text()
    docs = _keyword_docs(tmp_path / "idx")
    for bad, msg in ((junk, "not a term head"), (tmp_path / "missing.npz", "no term head")):
        with pytest.raises(InputError, match=msg):
            build_index(cat, tmp_path / "idx", encoder, rebuild=True, term_weights=bad)
    with pytest.raises(InputError, match="scale must be above 0"):
        build_index(cat, tmp_path / "idx", encoder, rebuild=True, term_weights=head_file, term_scale=0)
    # an update cannot weight new titles while the old ones stay plain
    with pytest.raises(InputError, match="rebuild"):
        build_index(cat, tmp_path / "idx", encoder, upsert=True, term_weights=head_file)
    assert (tmp_path / "idx" / "manifest.json").read_text() == before and _keyword_docs(tmp_path / "idx") == docs
    assert _keyword_ids(tmp_path / "idx", encoder, "faucet")[0][:2] == ["B", "A"]


def test_updates_and_rebuilds_keep_the_head_and_search_needs_no_file(encoder, head_file, tmp_path):
    head = tmp_path / "mine.npz"
    head.write_bytes(head_file.read_bytes())
    cat = _catalog(tmp_path, CATALOG[:6])
    build_index(cat, tmp_path / "idx", encoder, term_weights=head, term_scale=6, keep_zero=False, term_blend=0)
    recorded = read_manifest(tmp_path / "idx").extra["term_weights"]
    # naming the same head again on an update is fine (its settings are the index's)
    build_index(cat, tmp_path / "idx", encoder, upsert=True, term_weights=head)
    # an update weights its new titles by the recorded head; unchanged titles keep their documents
    build_index(_catalog(tmp_path, CATALOG), tmp_path / "idx", encoder, upsert=True)
    docs = _keyword_docs(tmp_path / "idx")
    assert read_manifest(tmp_path / "idx").extra["term_weights"] == recorded
    assert docs["A"].split().count("faucet") == 6 and docs["J"] != "ceiling fan light kit"
    # a rebuild keeps the option and its settings
    build_index(cat, tmp_path / "idx", encoder, rebuild=True)
    assert read_manifest(tmp_path / "idx").extra["term_weights"] == recorded
    assert _keyword_docs(tmp_path / "idx")["A"] == docs["A"]
    # the head file gone: searching still works (the weights are in the index), an update says what is missing
    head.unlink()
    assert _keyword_ids(tmp_path / "idx", encoder, "faucet")[0][0] == "A"
    with pytest.raises(InputError, match="mine.npz, which is missing"):
        build_index(_catalog(tmp_path, CATALOG), tmp_path / "idx", encoder, upsert=True)
    # a rebuild with "none" writes a plain keyword side and forgets the head
    build_index(cat, tmp_path / "idx", encoder, rebuild=True, term_weights="none")
    assert "term_weights" not in read_manifest(tmp_path / "idx").extra
    assert _keyword_docs(tmp_path / "idx")["A"] == "glacier bay kitchen faucet"


def test_cli_index_with_term_weights(encoder, head_file, tmp_path):
    from qkv.cli import app

    cat = _catalog(tmp_path)
    r = CliRunner().invoke(app, ["index", str(cat), "--index", str(tmp_path / "idx"), "--model", "minilm",
                                 "--term-weights", str(head_file), "--term-scale", "5", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["term_weights"]["scale"] == 5.0
    assert read_manifest(tmp_path / "idx").extra["term_weights"]["head"] == str(head_file.resolve())
    r = CliRunner().invoke(app, ["index", str(cat), "--index", str(tmp_path / "other"), "--model", "minilm",
                                 "--term-scale", "5"])
    assert r.exit_code != 0 and "give the head too" in f"{r.exception} {r.output}"


def test_a_head_that_reads_the_catalog_weighs_titles_against_the_catalog_being_indexed(encoder, tmp_path):
    """A head trained with catalog features (`qkv terms train` on BEIR data does so by default) needs
    the catalog when it scores; an index build gives it the catalog it indexes, and the weights are
    the ones the head gives against that catalog."""
    from qkv.explain.points import PointsCatalog
    from qkv.search.termweights import TermWeighting, Weigher

    with open(tmp_path / "report.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["search term", "product title", "clicks"])
        w.writerows(REPORT)
    titles = [r.split(",", 1)[1] for r in CATALOG]
    pc = PointsCatalog.build(titles, encoder)
    head = T.train(encoder, T.examples_from_report(tmp_path / "report.csv"), catalog=pc)
    assert head.needs_catalog
    path = head.save(tmp_path / "cat-head.npz")
    with pytest.raises(InputError, match="reads the catalog"):  # no catalog: refused, saying what to do
        Weigher(TermWeighting.of_file(path), encoder)
    build_index(_catalog(tmp_path), tmp_path / "idx", encoder, term_weights=path)
    docs = _keyword_docs(tmp_path / "idx")
    words, ys = head.title_scores(encoder, ["Glacier Bay Kitchen Faucet"], catalog=pc)[0]
    assert docs["A"] == keyword_text("Glacier Bay Kitchen Faucet", words, ys)  # the default settings


def test_keyword_text_blends_the_count_and_floors_kept_words():
    # tf = max(λ · count + ŷ, floor), repeated round(tf · scale) times
    assert keyword_text("Delta Shower Faucet", ["Delta", "Shower", "Faucet"], [0.0, 0.32, 0.9], scale=100,
                        floor=0.05, blend=0).split() == ["delta"] * 5 + ["shower"] * 32 + ["faucet"] * 90
    # λ = 0.2: every occurrence adds 0.2 ("pipe" twice: 0.4 + its weight); a term no head word covers
    # (the unit "in" of '"') counts λ per occurrence, at least one repeat
    doc = keyword_text('Pipe Elbow Pipe 3/4"', ["Pipe", "Elbow", "Pipe", "3/4"], [0.3, 0.5, 0.1, 0.0], scale=10,
                       blend=0.2).split()
    assert [doc.count(t) for t in ("pipe", "elbow", "3/4", "in")] == [7, 7, 2, 2]
    # no floor and no blend: a word weighted 0 is left out, as --drop-zero does
    assert keyword_text("Delta Shower", ["Delta", "Shower"], [0.0, 0.32], scale=100, keep_zero=False, blend=0) == \
        " ".join(["shower"] * 32)


def test_the_bm25_settings_are_recorded_used_and_kept(encoder, head_file, tmp_path):
    from qkv.search.embedded import bm25
    from qkv.search.termweights import TermWeighting

    head = tmp_path / "mine.npz"
    head.write_bytes(head_file.read_bytes())
    cat = _catalog(tmp_path, CATALOG[:6])
    build_index(cat, tmp_path / "idx", encoder, term_weights=head, term_scale=100, term_k1=0.3, term_b=0.8,
                term_blend=0.1, term_floor=0.05)
    tw = read_manifest(tmp_path / "idx").extra["term_weights"]
    assert {k: tw[k] for k in ("scale", "k1", "b", "blend", "floor", "keep_zero")} == \
        {"scale": 100.0, "k1": 0.3, "b": 0.8, "blend": 0.1, "floor": 0.05, "keep_zero": True}
    assert TermWeighting.from_json(tw).to_json() == tw  # the manifest round-trips
    with Index.open(tmp_path / "idx", encoder) as idx:  # … and is what the keyword side scores with
        assert idx.store.keyword.scoring == bm25.Scoring(0.3, 0.8, 100.0)
        top = idx.search("faucet", k=2, mode="keyword")[0]
    assert top.id == "A"
    # an update weights its new titles with the same settings; a rebuild keeps them
    build_index(_catalog(tmp_path, CATALOG), tmp_path / "idx", encoder, upsert=True)
    assert read_manifest(tmp_path / "idx").extra["term_weights"] == tw
    assert _keyword_docs(tmp_path / "idx")["J"].split().count("kit") >= 10  # λ 0.1 + floor: ≥ 0.1 · 100 repeats
    build_index(cat, tmp_path / "idx", encoder, rebuild=True)
    assert read_manifest(tmp_path / "idx").extra["term_weights"] == tw
    # another k1 on an update would score old and new titles alike but was not asked as a rebuild: refused
    before = (tmp_path / "idx" / "manifest.json").read_text()
    with pytest.raises(InputError, match="--term-k1 0.3; another setting means --rebuild"):
        build_index(cat, tmp_path / "idx", encoder, upsert=True, term_k1=0.9)
    assert (tmp_path / "idx" / "manifest.json").read_text() == before
    build_index(cat, tmp_path / "idx", encoder, rebuild=True, term_k1=0.9)
    assert read_manifest(tmp_path / "idx").extra["term_weights"] == {**tw, "k1": 0.9}
    # an index from before the settings were recorded scores as it was written: FTS5's BM25 over repeats
    legacy = {k: tw[k] for k in ("head", "sha256", "model", "scale", "keep_zero")}
    assert TermWeighting.from_json(legacy).scoring() == bm25.FTS5 and TermWeighting.from_json(legacy).least == 0.01


@pytest.mark.parametrize("setting, msg", [({"term_k1": 0.0}, "k1 must be above 0"),
                                          ({"term_b": 1.5}, "b must be between 0 and 1"),
                                          ({"term_blend": -0.1}, "blend λ must be 0 or above"),
                                          ({"term_floor": 2.0}, "floor must be between 0 and 1"),
                                          ({"term_k1": float("nan")}, "k1 must be above 0")])
def test_a_bad_bm25_setting_is_refused_before_anything_is_written(encoder, head_file, tmp_path, setting, msg):
    with pytest.raises(InputError, match=msg):
        build_index(_catalog(tmp_path), tmp_path / "new", encoder, term_weights=head_file,
                    **{"term_k1": 0.3, "term_b": 0.8, **setting})
    assert not (tmp_path / "new").exists()
    with pytest.raises(InputError, match="give the head too"):  # a setting without a head says what is missing
        build_index(_catalog(tmp_path), tmp_path / "new", encoder, **setting)
