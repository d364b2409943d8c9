"""/api/search and /api/search/fields over the sample catalog's index."""

from __future__ import annotations

import pytest


def test_fields_describe_the_catalog(client):
    r = client.get("/api/search/fields")
    assert r.status_code == 200
    body = r.json()
    assert body["count"] == 276
    by = {f["name"]: f for f in body["fields"]}
    assert by["price"]["kind"] == "number" and 0 < by["price"]["min"] < by["price"]["max"]
    assert by["language"]["values"] == ["en", "zh"]
    assert "shoes" in by["category"]["values"]


def test_search_returns_what_the_index_returns(client, sample_index, encoder):
    from qkv.search import Index

    r = client.post("/api/search", json={"query": "waterproof hiking boots", "k": 5, "mode": "hybrid", "explain": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    want = Index.open(sample_index, encoder=encoder).search("waterproof hiking boots", k=5)
    assert [x["id"] for x in body["results"]] == [w.id for w in want]
    # explanations for the first two only: the others are computed when asked for
    assert ["explanation" in x for x in body["results"]] == [True, True, False, False, False]
    assert "explain" in body["timings_ms"]
    top = body["results"][0]
    assert "Waterproof Hiking Boots" in top["title"]
    assert body["server_ms"] > 0 and "encode" in body["timings_ms"]
    # matched words: the keyword side marks the query's words in the title
    marked = {top["title"][h["start"]:h["end"]] for h in top["highlights"] if h["keyword"]}
    assert {"Waterproof", "Hiking", "Boots"} <= marked
    grid = top["explanation"]["grid"]
    assert len(grid) == len(top["explanation"]["query_tokens"])
    assert abs(sum(map(sum, grid)) - top["explanation"]["cosine"]) < 1e-4  # exact parts of the cosine


def test_explanations_on_request_equal_those_in_the_search(client):
    q = "waterproof hiking boots"
    plain = client.post("/api/search", json={"query": q, "k": 4}).json()["results"]
    assert not any("explanation" in x or "highlights" in x for x in plain)  # none unless asked for
    full = client.post("/api/search", json={"query": q, "k": 4, "explain": True}).json()["results"]
    assert all("explanation" in x for x in full)
    ids = [x["id"] for x in plain]
    r = client.post("/api/search/explain", json={"query": q, "ids": ids[2:]})
    assert r.status_code == 200, r.text
    got = r.json()["explanations"]
    assert list(got) == ids[2:]
    for x in full[2:]:
        e = got[x["id"]]
        assert e["explanation"]["grid"] == x["explanation"]["grid"]
        assert e["highlights"] == x["highlights"]
        assert abs(sum(map(sum, e["explanation"]["grid"])) - e["explanation"]["cosine"]) < 1e-4


GRID_KEYS = {"query_tokens", "title_tokens", "grid", "exact", "cosine", "parts_sum", "keyword_terms", "word_grid",
             "context"}


def test_the_grid_detail_is_the_full_explanations_token_grid(client):
    """explain_detail "grid" (what the page asks for): the token grid, its sums and the BM25 terms,
    equal to those of the full detail, without the word-level extras, and the same highlights."""
    q = "waterproof hiking boots"
    full = client.post("/api/search", json={"query": q, "k": 4, "explain": 3}).json()["results"]
    r = client.post("/api/search", json={"query": q, "k": 4, "explain": 3, "explain_detail": "grid"})
    assert r.status_code == 200, r.text
    slim = r.json()["results"]
    assert [x["id"] for x in slim] == [x["id"] for x in full]
    assert ["explanation" in x for x in slim] == [True, True, True, False]
    for s, f in zip(slim[:3], full[:3]):
        assert set(s["explanation"]) == GRID_KEYS
        assert {"pairs", "title_words", "query_words"} <= set(f["explanation"])
        assert s["explanation"] == {k: f["explanation"][k] for k in GRID_KEYS}
        assert s["highlights"] == f["highlights"] and any(h["keyword"] for h in s["highlights"])
    assert len(r.content) < 0.7 * len(client.post("/api/search", json={"query": q, "k": 4, "explain": 3}).content)
    # a result explained later in the same detail gets the same
    e = client.post("/api/search/explain", json={"query": q, "ids": [slim[1]["id"]], "detail": "grid"}).json()
    assert e["explanations"][slim[1]["id"]]["explanation"] == slim[1]["explanation"]
    bad = client.post("/api/search", json={"query": q, "explain": 1, "explain_detail": "words"})
    assert bad.status_code == 422 and "explain_detail" in bad.json()["error"]


def test_the_page_asks_for_the_detail_it_draws():
    """The page's search asks for the "grid" detail, and draws only fields that detail carries
    (matchGrid reads ``e.<field>``); bench/web.py reads the same constants to measure it."""
    import importlib.util
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    js = (root / "qkv" / "web" / "static" / "app.js").read_text(encoding="utf-8")
    draw = js[js.index("function matchGrid"):js.index("const EXPLAIN_FIRST")]
    assert set(re.findall(r"\be\.(\w+)", draw)) <= GRID_KEYS
    spec = importlib.util.spec_from_file_location("qkv_bench_web", root / "bench" / "web.py")
    bench_web = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_web)
    assert bench_web.page_search_fields() == {"explain": 3, "explain_detail": "grid"}


def test_explaining_an_unknown_product_is_404(client):
    r = client.post("/api/search/explain", json={"query": "boots", "ids": ["no-such-id"]})
    assert r.status_code == 404 and "no-such-id" in r.json()["error"]


@pytest.mark.parametrize("path, payload, field, meant", [
    ("search", {"query": "shoes", "where": 'brand = "x"'}, "where", "filters"),
    ("search", {"query": "shoes", "top_k": 3}, "top_k", "k"),
    ("search", {"query": "shoes", "filters": [{"field": "brand", "value": "x", "operator": "="}]}, "operator", None),
    ("search/explain", {"query": "shoes", "ids": ["P0001"], "id": "P0001"}, "id", "ids"),
])
def test_unknown_fields_are_refused_by_name(client, path, payload, field, meant):
    """An unknown field is a 422 naming it (and the right one), never silently ignored."""
    r = client.post(f"/api/{path}", json=payload)
    assert r.status_code == 422, r.text
    msg = r.json()["error"]
    assert f'unknown field "{field}"' in msg
    if meant:
        assert f'did you mean "{meant}"' in msg


@pytest.mark.parametrize("mode", ["dense", "keyword"])
def test_modes_and_filters(client, mode):
    r = client.post("/api/search", json={"query": "running shoes", "mode": mode, "k": 8, "explain": False,
                                         "filters": [{"field": "price", "op": "<", "value": 60},
                                                     {"field": "language", "op": "=", "value": "en"}]})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert res and all(x["fields"]["price"] < 60 and x["fields"]["language"] == "en" for x in res)
    assert all("explanation" not in x for x in res)
    if mode == "keyword":
        assert all(x["keyword_score"] > 0 for x in res)


def test_filter_values_are_data_not_syntax(client):
    """A value that looks like filter or SQL syntax is compared as a plain string: no match, no error."""
    r = client.post("/api/search", json={"query": "shoes", "filters": [
        {"field": "brand", "op": "=", "value": "x' or 1=1 --"}]})
    assert r.status_code == 200 and r.json()["results"] == []


@pytest.mark.parametrize("payload, status, words", [
    ({"query": ""}, 422, "query"),
    ({"query": "   "}, 422, "empty"),
    ({"query": "q" * 501}, 413, "500 characters"),
    ({"query": "shoes", "k": 0}, 422, "k"),
    ({"query": "shoes", "k": 51}, 422, "k"),
    ({"query": "shoes", "mode": "fuzzy"}, 422, "mode"),
    ({"query": "shoes", "filters": [{"field": "nope", "value": "x"}]}, 422, "nope"),
    ({"query": "shoes", "filters": [{"field": "price", "op": "<", "value": "cheap"}]}, 422, "number"),
    ({"query": "shoes", "filters": [{"field": "price", "op": "~", "value": 1}]}, 422, "op"),
    ({"query": "shoes", "filters": "price < 5"}, 422, "filters"),
])
def test_search_refuses_bad_input(client, payload, status, words):
    r = client.post("/api/search", json=payload)
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


def test_without_an_index_search_says_how_to_get_one(encoder):
    from fastapi.testclient import TestClient

    from qkv.web import create_app

    with TestClient(create_app(encoder=encoder)) as c:
        assert c.get("/api/health").json()["features"]["search"] is False
        r = c.post("/api/search", json={"query": "shoes"})
        assert r.status_code == 503 and "--index" in r.json()["error"]
        assert c.get("/api/search/fields").status_code == 503


def test_a_broken_index_is_a_clear_503(encoder, tmp_path):
    from fastapi.testclient import TestClient

    from qkv.web import create_app

    (tmp_path / "manifest.json").write_text("{not json")
    with TestClient(create_app(encoder=encoder, index_dir=tmp_path)) as c:
        r = c.post("/api/search", json={"query": "shoes"})
        assert r.status_code == 503 and "cannot open the search index" in r.json()["error"]


def test_the_grid_is_answered_as_jsonable_would_write_it(client):
    """The web answer skips jsonable's walk over the grid: to_json already rounds it as jsonable does."""
    from qkv.jsonable import jsonable

    r = client.post("/api/search", json={"query": "透气跑鞋 waterproof", "k": 3, "explain": 3, "explain_detail": "grid"})
    for x in r.json()["results"]:
        g = x["explanation"]["grid"]
        assert g == jsonable(g) and all(type(v) is float for row in g for v in row)


def _ids(client, filters, query="shoes"):
    r = client.post("/api/search", json={"query": query, "k": 50, "mode": "keyword", "filters": filters})
    assert r.status_code == 200, r.text
    return sorted(x["id"] for x in r.json()["results"])


@pytest.mark.parametrize("op", ["=", "!=", "<="])
def test_a_number_sent_as_text_filters_as_the_number(client, op):
    as_number = _ids(client, [{"field": "price", "op": op, "value": 48.99}])
    assert as_number and as_number == _ids(client, [{"field": "price", "op": op, "value": "48.99"}])
    assert _ids(client, [{"field": "rating", "op": "=", "value": "5"}]) == _ids(
        client, [{"field": "rating", "op": "=", "value": 5}])


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused_as_filter_values(client, value):
    for v in (value, f'"{value}"'):
        body = '{"query": "shoes", "filters": [{"field": "price", "op": "<", "value": %s}]}' % v
        r = client.post("/api/search", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, (v, r.text)
        assert "finite" in r.json()["error"] or "value" in r.json()["error"]


def test_a_word_for_a_number_field_is_refused(client):
    r = client.post("/api/search", json={"query": "shoes", "filters": [{"field": "price", "op": "=", "value": "cheap"}]})
    assert r.status_code == 422 and "holds numbers" in r.json()["error"]


LONG_ZH = "男士透气网面跑鞋轻便运动鞋女士防水登山靴护踝儿童帆布一脚蹬休闲鞋记忆棉家居拖鞋防滑速干登山短裤拉链口袋"


def test_a_long_chinese_query_says_what_was_translated(client):
    from qkv.translate.translator import MAX_HAN_CHARS

    query = (LONG_ZH * 2)[:90]
    r = client.post("/api/search", json={"query": query, "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert f"only the first {MAX_HAN_CHARS} Chinese characters" in body["searched_as"]
    assert sum(len(row["zh"]) for row in body["translation"]) <= MAX_HAN_CHARS


def test_the_chinese_query_limit_is_lower(client):
    from qkv.web.limits import Limits

    n = Limits().max_query_han_chars
    assert n < Limits().max_query_chars
    r = client.post("/api/search", json={"query": (LONG_ZH * 10)[:n + 1], "k": 3})
    assert r.status_code == 413 and f"{n} Chinese characters" in r.json()["error"]
    assert client.post("/api/search", json={"query": "boots " + (LONG_ZH * 10)[:n], "k": 3}).status_code == 200


def test_long_searches_run_in_their_own_lane(encoder, sample_index):
    """The lane for long queries is full and stuck: ordinary searches still answer at once, and a
    long query waits (or is refused) in its own lane only."""
    import threading

    from fastapi.testclient import TestClient

    from qkv.web import create_app

    app = create_app(encoder=encoder, index_dir=sample_index, pools={"search_long": {"queue": 0}})
    release = threading.Event()
    with TestClient(app) as c:
        st = app.state.qkv
        held = threading.Thread(target=lambda: c.portal.call(st.run, "search_long", lambda s: release.wait(60)))
        held.start()
        try:
            while st.pools["search_long"].running < 1:
                release.wait(0.01)
            for q in ("boots", "透气跑鞋", "kettle"):
                r = c.post("/api/search", json={"query": q, "k": 3})
                assert r.status_code == 200, r.text
            r = c.post("/api/search", json={"query": LONG_ZH[:60], "k": 3})
            assert r.status_code == 429  # its lane is busy; the ordinary lane was not used
        finally:
            release.set()
            held.join(60)
        assert c.post("/api/search", json={"query": LONG_ZH[:60], "k": 3}).status_code == 200


@pytest.mark.parametrize("query", ["headphones", "guitar strings"])
def test_nothing_close_is_marked_weak(client, query):
    """Headphones under a price none meets, or a product the catalog lacks: every result is only
    the least far (qkv.search.floor); the same search without the filter finds close ones."""
    r = client.post("/api/search", json={"query": query, "k": 5,
                                         "filters": [{"field": "price", "op": "<=", "value": 30}]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["floor"] is not None and body["results"]
    assert all(x["weak"] for x in body["results"]), [(x["title"], x["dense_score"]) for x in body["results"]]
    assert all(x["dense_score"] < body["floor"] for x in body["results"])
    if query == "headphones":
        close = client.post("/api/search", json={"query": query, "k": 5}).json()
        assert "Headphones" in close["results"][0]["title"] and not close["results"][0]["weak"]


def test_a_sellers_words_come_back_marked_not_dropped(client):
    """Issue 30, item 3: a brand with no translation (安踏) and 女款 are kept in what the query was
    searched as and come back as rows marked untranslated (the page's "未找到翻译" chip); 码 after
    a size is "size", never "weight"."""
    body = client.post("/api/search", json={"query": "安踏跑鞋", "k": 5}).json()
    assert body["searched_as"] == "安踏 running shoes"
    rows = {r["zh"]: r for r in body["translation"]}
    assert rows["安踏"]["source"] == "untranslated" and rows["安踏"]["en"] == "" and rows["安踏"]["weight"] is None
    assert rows["跑鞋"]["en"] == "running shoes"
    body = client.post("/api/search", json={"query": "女款登山鞋 37码", "k": 5}).json()
    assert "weight" not in body["searched_as"] and body["searched_as"].startswith("女款 ")
    rows = body["translation"]
    assert rows[0] == {"zh": "女款", "en": "", "source": "untranslated", "weight": None, "alternatives": []}
    assert rows[-1]["zh"] == "码" and rows[-1]["en"] == "size" and rows[-1]["source"] == "size word"


def test_an_english_query_finds_the_chinese_listings_too(client):
    """Issue 30, item 4: in the sample's mixed catalog "running shoes" reaches the Chinese running
    shoes (男士透气网面跑鞋) in the top five, the English ones still first."""
    body = client.post("/api/search", json={"query": "running shoes", "k": 10}).json()
    titles = [x["title"] for x in body["results"]]
    assert any("男士透气网面跑鞋" in t for t in titles[:5]), titles
    assert all("Running Shoes" in t for t in titles[:3]) and body["searched_as"] is None


def test_a_misspelt_query_says_what_it_was_searched_as(client):
    r = client.post("/api/search", json={"query": "breathable runing shoes", "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["corrected"] == "breathable running shoes" and body["searched_as"] is None
    want = client.post("/api/search", json={"query": "breathable running shoes", "k": 3}).json()
    assert want["corrected"] is None
    assert [x["id"] for x in body["results"]] == [x["id"] for x in want["results"]]


def test_spell_false_searches_as_typed_and_explains_what_it_searched(client):
    q = "breathable runing shoes"
    typed = client.post("/api/search", json={"query": q, "k": 3, "spell": False, "explain": 1}).json()
    fixed = client.post("/api/search", json={"query": q, "k": 3, "explain": 1}).json()
    assert typed["corrected"] is None and fixed["corrected"] == "breathable running shoes"
    tokens = lambda body: [t.lower() for t in body["results"][0]["explanation"]["query_tokens"]]
    assert "running" in tokens(fixed) and "running" not in tokens(typed)
    # the explanation asked for later is of the text that search searched
    ids = [typed["results"][0]["id"]]
    later = client.post("/api/search/explain", json={"query": q, "ids": ids, "spell": False}).json()
    assert later["explanations"][ids[0]]["explanation"]["grid"] == typed["results"][0]["explanation"]["grid"]
    r = client.post("/api/search", json={"query": q, "spell": "no"})
    assert r.status_code == 422 and "spell" in r.text


def test_a_served_index_takes_up_its_query_adapter_at_the_next_search(encoder, sample_index, tmp_path):
    """`qkv terms adapt` on an index being served: the next search uses the fit and says so, the
    explanation's grid sums to the adapted cosine, and removing the fit goes back to plain vectors."""
    import shutil

    from fastapi.testclient import TestClient

    from qkv.search import Index, adapter as A
    from qkv.web import create_app

    root = tmp_path / "idx"
    shutil.copytree(sample_index, root)
    q = "gift for a runner"
    with TestClient(create_app(encoder=encoder, index_dir=root), raise_server_exceptions=False) as c:
        plain = c.post("/api/search", json={"query": q, "k": 5, "mode": "dense"}).json()
        assert plain["query_adapter"] is False
        with Index.open(root, encoder) as idx:
            ids = [r["id"] for r in idx.store.get_rows(idx.store.all_ids()) if r["category"] == "shoes"]
            ad, _ = A.train(idx, {q: {i: 1.0 for i in ids}}, epochs=30, lr=0.01)
        A.install(root, ad)
        fitted = c.post("/api/search", json={"query": q, "k": 5, "mode": "dense", "explain": 1}).json()
        assert fitted["query_adapter"] is True
        assert sum(r["id"] in ids for r in fitted["results"]) > sum(r["id"] in ids for r in plain["results"])
        e = fitted["results"][0]["explanation"]
        assert abs(sum(map(sum, e["grid"])) - e["cosine"]) < 1e-4
        assert c.post("/api/search", json={"query": q, "k": 5, "mode": "keyword"}).json()["query_adapter"] is False
        A.remove(root)
        again = c.post("/api/search", json={"query": q, "k": 5, "mode": "dense"}).json()
        assert again["query_adapter"] is False and [r["id"] for r in again["results"]] == [r["id"] for r in plain["results"]]
