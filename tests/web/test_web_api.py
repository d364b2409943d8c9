"""The JSON API through FastAPI's test client: answers, limits (413/422), malformed bodies, safety."""

from __future__ import annotations

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


def test_attention_is_the_engines_weights(client, encoder):
    r = client.post("/api/attention", json={"text": TEXT, "layer": 3})
    assert r.status_code == 200
    body = r.json()
    tr = encoder.trace([TEXT], keep=["layers.3.attn.weights"])
    want = tr.get("layers.3.attn.weights", 0)
    got = np.asarray(body["weights"])
    assert got.shape == want.shape == (12, len(body["tokens"]), len(body["tokens"]))
    np.testing.assert_allclose(got, want, atol=6e-5)  # rounded to 4 decimals for the wire
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-3)
    assert body["tokens"][0] == "[CLS]" and body["tokens"][-1] == "[SEP]"
    assert body["special"][0] and body["special"][-1] and not any(body["special"][1:-1])
    assert body["layer"] == 3 and body["num_layers"] == 6


@pytest.mark.parametrize("payload, status, words", [
    ({"text": TEXT, "layer": 6}, 422, "layers 0..5"),
    ({"text": TEXT, "layer": -1}, 422, "layer"),
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

    app.state.qkv.attention = boom
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
    assert {"/api/health", "/api/attention", "/api/search", "/api/search/fields", "/api/summarize",
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
    real = st.attention

    def slow(text):
        gate.set()
        release.wait(10)
        return real(text)

    st.attention = slow
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
        st.attention = real
        release.set()
