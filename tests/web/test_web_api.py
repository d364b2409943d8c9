"""The JSON API through FastAPI's test client: answers, limits (413/422), malformed bodies, safety."""

from __future__ import annotations

import json

import numpy as np
import pytest

TEXT = "Nike Air Max 270 Men's Running Shoes"


def test_health_names_model_and_features(client, encoder):
    r = client.get("/api/health")
    assert r.status_code == 200
    body = r.json()
    assert body["model"] == encoder.name
    assert body["fingerprint"] == encoder.fingerprint()
    assert (body["num_layers"], body["num_heads"]) == (encoder.config.num_layers, encoder.config.num_heads)
    assert body["features"]["attention"] is True
    assert body["index"] == "sample-index0"  # the directory's name only, never a server path
    assert body["features"]["search"] is True
    assert body["limits"]["max_attention_tokens"] == 128


def test_attention_head_is_the_engines_weights(client, encoder):
    r = client.post("/api/attention", json={"text": TEXT, "layer": 3, "head": 7})
    assert r.status_code == 200
    body = r.json()
    want = encoder.trace([TEXT], keep=["layers.3.attn.weights"]).get("layers.3.attn.weights", 0)[7]
    (m,) = body["maps"]
    got = np.asarray(m["values"])
    assert got.shape == want.shape == (len(body["tokens"]), len(body["tokens"]))
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-4)
    assert m["rows"] == m["cols"] == body["tokens"]
    assert (m["layer"], m["head"], m["kind"]) == (3, 7, "attention")
    assert body["tokens"][0] == "[CLS]" and body["tokens"][-1] == "[SEP]"
    assert body["special"][0] and body["special"][-1] and not any(body["special"][1:-1])
    assert (body["num_layers"], body["num_heads"]) == (6, 12)


def test_unknown_tokens_are_labelled_with_their_characters(client):
    body = client.post("/api/attention", json={"text": "Velora 男士跑鞋", "layer": 0, "head": 0}).json()
    assert "[UNK]" in body["tokens"]
    shown = [l for t, l in zip(body["tokens"], body["labels"]) if t == "[UNK]"]
    assert shown and all(l.endswith("→[UNK]") and len(l) > len("→[UNK]") for l in shown)
    assert [l for t, l in zip(body["tokens"], body["labels"]) if t != "[UNK]"] == \
           [t for t in body["tokens"] if t != "[UNK]"]


def test_attention_grid_hidden_specials_and_words(client, encoder):
    import qkv.explain as ex

    body = client.post("/api/attention", json={"text": TEXT, "layer": 1, "grid": True, "hide_special": True,
                                               "level": "word", "kind": "norm"}).json()
    assert len(body["maps"]) == 12
    want = ex.attention_maps(encoder, TEXT).heatmap(1, 4, kind="norm", hide_special=True, level="word")
    m = body["maps"][4]
    assert m["rows"] == list(want.rows) and "Men's" in m["rows"] and "[CLS]" not in m["rows"]
    np.testing.assert_allclose(m["values"], want.values, atol=1e-5)
    np.testing.assert_allclose(m["hidden_share"], want.hidden_share, atol=1e-5)


def test_rollout_neuron_and_tour_come_from_explain(client, encoder):
    import qkv.explain as ex

    maps = ex.attention_maps(encoder, TEXT)
    r = client.post("/api/rollout", json={"text": TEXT}).json()
    assert r["layer"] == 5 and r["maps"][0]["kind"] == "rollout"
    np.testing.assert_allclose(r["maps"][0]["values"], maps.rollout()[5], atol=1e-5)
    np.testing.assert_allclose(np.sum(r["maps"][0]["values"], axis=1), 1.0, atol=1e-4)

    n = client.post("/api/neuron", json={"text": TEXT, "layer": 2, "head": 3, "query": 2}).json()
    assert n["query_token"] == "air" and len(n["q"]) == encoder.config.head_dim
    np.testing.assert_allclose(n["weights"], maps.weights[2, 3, 2], atol=1e-5)
    np.testing.assert_allclose(np.asarray(n["qk"]).sum(1), n["scores"], atol=1e-3)

    t = client.post("/api/tour", json={"text": TEXT, "layer": 4, "head": 2, "lang": "zh"}).json()
    assert (t["layer"], t["head"]) == (4, 2) and t["ok"] is True
    assert len([s for s in t["steps"] if s["title"][0] in "12345"]) == 5
    assert "词元" in t["steps"][0]["title"]
    np.testing.assert_allclose(t["arrays"]["layers.4.attn.weights[2]"], maps.weights[4, 2], atol=1e-5)


@pytest.mark.parametrize("payload, status, words", [
    ({"text": TEXT, "layer": 6}, 422, "0..5"),
    ({"text": TEXT, "layer": -1}, 422, "layer"),
    ({"text": TEXT, "head": 12}, 422, "0..11"),
    ({"text": TEXT, "kind": "rollout"}, 422, "kind"),
    ({"text": TEXT, "level": "char"}, 422, "level"),
    ({"text": ""}, 422, "text"),
    ({"text": "   "}, 422, "empty"),
    ({"layer": 1}, 422, "text"),
    ({"text": 5}, 422, "text"),
    ({"text": "x" * 2001}, 413, "2000 characters"),
    ({"text": "word " * 200}, 413, "at most 128"),
])
def test_attention_refuses_bad_input(client, payload, status, words):
    r = client.post("/api/attention", json=payload)
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


@pytest.mark.parametrize("path, payload, status, words", [
    ("neuron", {"text": TEXT, "query": 40}, 422, "out of range"),
    ("neuron", {"text": TEXT, "query": -1}, 422, "query"),
    ("rollout", {"text": TEXT, "layer": 9}, 422, "0..5"),
    ("tour", {"text": TEXT, "lang": "fr"}, 422, "lang"),
    ("tour", {"text": "word " * 200}, 413, "at most 128"),
    ("tour", {"text": "x" * 2001}, 413, "2000 characters"),
])
def test_other_attention_endpoints_refuse_bad_input(client, path, payload, status, words):
    r = client.post(f"/api/{path}", json=payload)
    assert r.status_code == status, r.text
    assert words in r.json()["error"]


@pytest.mark.parametrize("path, payload, field, meant", [
    ("attention", {"text": "x", "layr": 1}, "layr", "layer"),
    ("tour", {"text": "x", "language": "zh"}, "language", None),
    ("summarize", {"reviews": ["good"], "budget_tokens": 20}, "budget_tokens", "budget"),
    ("attributes", {"titles": ["a"], "threshold": 0.5}, "threshold", None),
])
def test_unknown_fields_are_refused_everywhere(client, path, payload, field, meant):
    r = client.post(f"/api/{path}", json=payload)
    assert r.status_code == 422, r.text
    assert f'unknown field "{field}"' in r.json()["error"]
    if meant:
        assert f'did you mean "{meant}"' in r.json()["error"]


@pytest.mark.parametrize("raw, ctype", [
    (b"{not json", "application/json"),
    (b"[1, 2, 3]", "application/json"),
    (b"", "application/json"),
    (b"text=hello", "application/x-www-form-urlencoded"),
])
def test_malformed_bodies_get_422_json(client, raw, ctype):
    r = client.post("/api/attention", content=raw, headers={"content-type": ctype})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"].startswith("invalid request")
    if raw.startswith(b"{not"):
        assert "not valid JSON" in r.json()["error"]


def test_body_over_the_limit_is_413_by_header_and_by_stream(client):
    big = b'{"text": "' + b"a" * 1_100_000 + b'"}'
    r = client.post("/api/attention", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["error"]

    def chunks():  # no Content-Length: the middleware counts what arrives
        for _ in range(12):
            yield b"a" * 100_000

    r = client.post("/api/attention", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["error"]


def test_unknown_route_and_method_are_json(client):
    r = client.get("/api/nope")
    assert r.status_code == 404 and "error" in r.json()
    r = client.get("/api/attention")
    assert r.status_code == 405 and "error" in r.json()


def test_unexpected_errors_hide_the_stack_trace(encoder):
    from fastapi.testclient import TestClient

    from qkv.web import create_app

    app = create_app(encoder=encoder)

    def boom(text):
        raise RuntimeError("secret internal detail /etc/passwd")

    app.state.qkv.maps = boom
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/api/attention", json={"text": TEXT})
    assert r.status_code == 500
    assert r.json() == {"error": "internal error (RuntimeError); see the server log"}
    assert "Traceback" not in r.text and "secret" not in r.text


def test_page_and_static_files_are_served(client):
    r = client.get("/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert '<script src="/static/app.js">' in r.text
    assert "http://" not in r.text and "https://" not in r.text  # nothing from a CDN
    for name in ("app.js", "app.css"):
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and len(r.text) > 1000
        assert "https://" not in r.text
    assert client.get("/static/../app.py").status_code == 404


def test_openapi_documents_every_api_route(client):
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {"/api/health", "/api/attention", "/api/rollout", "/api/neuron", "/api/tour", "/api/search", "/api/search/fields", "/api/summarize",
            "/api/summarize/upload"} <= paths
    assert client.get("/docs").status_code == 200


def test_cors_is_closed_unless_configured(client, encoder):
    from fastapi.testclient import TestClient

    from qkv.web import create_app

    pre = {"origin": "http://evil.example", "access-control-request-method": "POST"}
    r = client.options("/api/attention", headers=pre)
    assert "access-control-allow-origin" not in r.headers
    r = client.post("/api/attention", json={"text": "hi"}, headers={"origin": "http://evil.example"})
    assert "access-control-allow-origin" not in r.headers

    app = create_app(encoder=encoder, cors_origins=["http://tool.example"])
    with TestClient(app) as c:
        r = c.options("/api/attention", headers={**pre, "origin": "http://tool.example"})
        assert r.headers.get("access-control-allow-origin") == "http://tool.example"
        r = c.options("/api/attention", headers=pre)
        assert r.headers.get("access-control-allow-origin") != "http://evil.example"


def test_attention_work_runs_off_the_event_loop(client):
    """Two requests in flight: the health check answers while the encoder is busy."""
    import threading

    st = client.app.state.qkv
    gate = threading.Event()
    release = threading.Event()
    real = st.maps

    def slow(text):
        gate.set()
        release.wait(10)
        return real(text)

    st.maps = slow
    try:
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("r", client.post("/api/attention", json={"text": "slow one"})))
        th.start()
        assert gate.wait(10)
        assert client.get("/api/health").status_code == 200  # would hang if the loop were blocked
        release.set()
        th.join(10)
        assert out["r"].status_code == 200
    finally:
        st.maps = real
        release.set()


def test_attention_words_are_segmented_with_offsets(client):
    """The payload's words: Chinese runs cut as search segments them, start/end into the text."""
    text = "Velora 男士透气跑鞋"
    body = client.post("/api/attention", json={"text": text, "layer": 0, "head": 0}).json()
    words = [w for w in body["words"] if not w["special"]]
    assert [w["text"] for w in words] == ["Velora", "男士", "透气", "跑鞋"]
    assert all(text[w["start"]:w["end"]] == w["text"] for w in words)
    assert sorted(t for w in body["words"] for t in w["tokens"]) == list(range(len(body["tokens"])))


def test_a_500_closes_the_connection_cleanly(encoder, serve):
    """An unexpected error answers 500 with ``Connection: close``: a keep-alive client then opens a
    new connection instead of failing its next request on the dropped one."""
    import http.client

    from qkv.web import create_app

    app = create_app(encoder=encoder)

    def boom(text):
        raise RuntimeError("unexpected")

    app.state.qkv.maps = boom
    host, port = serve(app).removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/api/attention", body=json.dumps({"text": TEXT}), headers={"content-type": "application/json"})
    r = conn.getresponse()
    assert r.status == 500 and json.loads(r.read())["error"].startswith("internal error")
    assert r.getheader("connection") == "close"
    conn.request("GET", "/api/health")  # http.client reopens a connection the server said it closes
    r = conn.getresponse()
    assert r.status == 200 and json.loads(r.read())["status"] == "ok"


@pytest.mark.parametrize("path, payload, field", [
    ("/api/search", {"query": "shoes", "k": True}, "k"),
    ("/api/search", {"query": "shoes", "k": 3.5}, "k"),
    ("/api/search", {"query": "shoes", "k": "3"}, "k"),
    ("/api/search", {"query": "shoes", "explain": "yes"}, "explain"),
    ("/api/search", {"query": "shoes", "filters": [{"field": "price", "value": True}]}, "value"),
    ("/api/search", {"query": 5}, "query"),
    ("/api/attention", {"text": TEXT, "hide_special": 0}, "hide_special"),
    ("/api/attention", {"text": TEXT, "layer": "1"}, "layer"),
    ("/api/neuron", {"text": TEXT, "query": False}, "query"),
    ("/api/summarize", {"reviews": ["good shoe"], "budget": "20"}, "budget"),
    ("/api/summarize", {"reviews": ["good shoe"], "ratings": ["5"]}, "ratings"),
    ("/api/attributes", {"titles": ["a shoe"], "normalize": "true"}, "normalize"),
])
def test_json_bodies_are_strictly_typed(client, path, payload, field):
    """A boolean for a number, text for a boolean or number: 422 naming the field, never coerced."""
    r = client.post(path, json=payload)
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]
