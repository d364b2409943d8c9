"""qkv.web.sample: the cached sample index is rebuilt when it is stale, an older index format too; the
sample as ``qkv serve --sample`` serves it (multilingual model, the sample's glossary) finds its
products across languages."""

from __future__ import annotations

import json


def test_a_sample_index_of_an_older_format_is_replaced(encoder, tmp_path, monkeypatch):
    import hashlib

    import qkv.search as search
    from qkv.search.store import FORMAT_VERSION
    from qkv.web.sample import SAMPLE_CATALOG, STAMP, ensure_sample_index

    path = tmp_path / "sample-index"
    (path / "gen-000001").mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"format": "qkv-search-index", "version": 1}))
    old = hashlib.sha256(SAMPLE_CATALOG.read_bytes()).hexdigest()
    (path / STAMP).write_text(json.dumps({"catalog_sha256": old, "model": encoder.name,
                                          "fingerprint": encoder.fingerprint()}))  # no index format: older
    built = []

    def fake_build(catalog, where, enc, **kw):  # the real build is tested elsewhere; here: was it asked for
        assert not (where / "gen-000001").exists() and "rebuild" not in kw
        (where / "manifest.json").write_text("{}")
        built.append(where)

    monkeypatch.setattr(search, "build_index", fake_build)
    assert ensure_sample_index(path, encoder=encoder) == path
    assert built == [path]
    assert json.loads((path / STAMP).read_text())["index_format"] == FORMAT_VERSION
    # fresh now: a second call builds nothing
    assert ensure_sample_index(path, encoder=encoder) == path and built == [path]


def _search(client, body):
    r = client.post("/api/search", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_sample_glossary_holds_the_trade_words():
    from qkv.translate import read_glossary
    from qkv.web.sample import SAMPLE_GLOSSARY

    g = read_glossary(SAMPLE_GLOSSARY)
    assert g["透气"] == "breathable" and g["登山靴"] == "hiking boots" and len(g) > 40


def test_a_chinese_query_finds_english_and_chinese_running_shoes(client_zh):
    """透气跑鞋: CC-CEDICT's first sense of 透气 is "to flow freely"; the sample's glossary says
    "breathable", and the top five hold both the English and the Chinese running shoes."""
    body = _search(client_zh, {"query": "透气跑鞋", "k": 5, "explain": 3})
    assert body["searched_as"] == "breathable running shoes"
    titles = [x["title"] for x in body["results"]]
    assert any("Breathable Mesh Running Shoes" in t for t in titles), titles
    assert any("透气网面跑鞋" in t for t in titles), titles
    english = next(x for x in body["results"] if "Breathable" in x["title"])
    e = english["explanation"]
    assert e["query_tokens"][0] == "<s>" and any("透" in t for t in e["query_tokens"])
    assert abs(sum(map(sum, e["grid"])) - e["cosine"]) < 1e-4  # still the exact parts of the cosine
    # the keyword side searched the translation too: the English title's words are marked
    marked = {english["title"][h["start"]:h["end"]] for h in english["highlights"] if h["keyword"]}
    assert {"Breathable", "Running", "Shoes"} <= marked


def test_an_english_query_finds_the_chinese_hiking_boots(client_zh):
    body = _search(client_zh, {"query": "waterproof hiking boots", "k": 5})
    assert body["searched_as"] is None  # searched as typed (the glossary adds 登山靴 to its keyword side)
    titles = [x["title"] for x in body["results"]]
    assert any("登山靴" in t for t in titles) and any("Waterproof Hiking Boots" in t for t in titles), titles


def test_explanations_on_request_say_what_the_query_was_searched_as(client_zh):
    body = _search(client_zh, {"query": "防水登山靴", "k": 6})
    ids = [x["id"] for x in body["results"]]
    r = client_zh.post("/api/search/explain", json={"query": "防水登山靴", "ids": ids[-2:]})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["searched_as"] == body["searched_as"] == "waterproof hiking boots"
    for pid, x in zip(ids[-2:], body["results"][-2:]):
        e = got["explanations"][pid]["explanation"]
        assert abs(sum(map(sum, e["grid"])) - e["cosine"]) < 1e-4
        if "Hiking Boots" in x["title"]:  # matched through the translation's keyword terms
            assert {t["term"] for t in e["keyword_terms"]} & {"hike", "hiking", "boot", "boots", "waterproof"}


def test_a_translated_query_comes_back_word_by_word(client_zh):
    """``translation``: one row per piece (crosslingual.translation_rows) — the translated words'
    English joined is what the query was searched as, each weighted by trust in its source (the
    sample's glossary in full, the dictionary's words less); the brand typed as is has no weight."""
    from qkv.search.crosslingual import piece_trust
    from qkv.translate import Piece

    body = _search(client_zh, {"query": "Velora 透气跑鞋", "k": 4})
    rows = body["translation"]
    assert [r["zh"] for r in rows][1:] == ["透气", "跑鞋"] and rows[0]["source"] == "as typed"
    assert rows[0]["weight"] is None and rows[0]["alternatives"] == []
    words = [r for r in rows if r["weight"] is not None]
    assert " ".join(r["en"] for r in words) == "breathable running shoes"
    assert " ".join(r["en"] for r in rows if r["en"]) == body["searched_as"]
    assert [r["weight"] for r in words] == [piece_trust(Piece(r["zh"], r["en"], r["source"])) for r in words]
    assert words[0]["source"] == "glossary" and words[0]["weight"] == 1.0
    assert words[1]["source"] == "dictionary" and words[1]["weight"] < 1
    assert all(isinstance(a, str) and a for r in rows for a in r["alternatives"])
    # the explanations on request say the same
    ids = [x["id"] for x in body["results"][:2]]
    got = client_zh.post("/api/search/explain", json={"query": "Velora 透气跑鞋", "ids": ids}).json()
    assert got["translation"] == rows and got["searched_as"] == body["searched_as"]
    # a search that finds nothing still says what it was searched as
    body = _search(client_zh, {"query": "透气跑鞋", "k": 3, "filters": [{"field": "price", "op": ">", "value": 1e9}]})
    assert body["count"] == 0 and body["searched_as"] == "breathable running shoes"
    assert [r["zh"] for r in body["translation"]] == ["透气", "跑鞋"]
    # a query searched as typed has neither
    body = _search(client_zh, {"query": "waterproof hiking boots", "k": 1, "mode": "keyword"})
    assert body["searched_as"] is None and body["translation"] is None
