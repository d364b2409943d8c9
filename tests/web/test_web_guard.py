"""qkv.web.guard: Host check on loopback binds, cross-origin writes refused, security headers."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from qkv.web.guard import hosts_for_bind

REVIEW_FILE = {"file": ("r.txt", b"Light and comfortable shoes.\nThe sole wore out in a month.\n")}


@pytest.fixture(scope="module")
def loopback(encoder):
    """The app as `qkv serve` makes it on 127.0.0.1: only loopback Host names answered."""
    from qkv.web import create_app

    app = create_app(encoder=encoder, allowed_hosts=hosts_for_bind("127.0.0.1"), cors_origins=["http://tool.example"])
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as c:
        yield c


def test_a_loopback_bind_answers_only_loopback_host_names(loopback):
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST"):
        assert loopback.get("/api/health", headers={"host": host}).status_code == 200, host
    for host in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", ""):
        r = loopback.get("/api/health", headers={"host": host})
        assert r.status_code == 400 and "answers only for" in r.json()["error"], host
    assert hosts_for_bind("127.0.0.1") and hosts_for_bind("0.0.0.0") is None


def test_cross_origin_uploads_are_refused(loopback):
    """A page elsewhere may post a multipart form without a CORS preflight: refused here."""
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9999"):
        r = loopback.post("/api/summarize/upload", files=REVIEW_FILE, data={"budget": "20"}, headers={"origin": origin})
        assert r.status_code == 403 and "cross-origin" in r.json()["error"], origin
    r = loopback.post("/api/summarize/upload", files=REVIEW_FILE, data={"budget": "20"},
                      headers={"sec-fetch-site": "cross-site"})
    assert r.status_code == 403
    for headers in ({"origin": "http://127.0.0.1:8000"}, {"origin": "http://tool.example"}, {}):
        r = loopback.post("/api/summarize/upload", files=REVIEW_FILE, data={"budget": "20"}, headers=headers)
        assert r.status_code == 200, (headers, r.text)
    assert loopback.get("/api/health", headers={"origin": "http://evil.example"}).status_code == 200


@pytest.mark.parametrize("method, path", [("GET", "/"), ("GET", "/static/app.js"), ("GET", "/api/health"),
                                          ("GET", "/api/nope"), ("POST", "/api/attention"), ("GET", "/docs")])
def test_every_answer_carries_the_security_headers(client, method, path):
    r = client.request(method, path, json={} if method == "POST" else None)
    assert r.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    if path != "/docs":
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_refusals_carry_them_too(client):
    r = client.post("/api/attention", content=b"x" * 2_000_000, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.headers["x-content-type-options"] == "nosniff"


def test_the_page_has_no_inline_script_or_style():
    """The CSP allows only the server's own files: an inline script or style would not run."""
    import re

    from qkv.web.app import STATIC

    html = (STATIC / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    assert "<style" not in html and not re.search(r"\sstyle=", html) and not re.search(r"\son[a-z]+=", html)



@pytest.mark.browser
def test_every_view_works_under_the_content_security_policy(csp_page, tmp_path):
    """The page with its CSP enforced: each view's main action draws, and the browser reports no
    refused script, style or connection (Chromium logs each as a console error)."""
    page = csp_page
    page.goto(page.base_url + "/")
    page.wait_for_selector("#att-heatmap .cell")
    page.locator('#att-heatmap .cell[data-i="1"][data-j="2"]').hover()  # the tooltip is placed by style
    page.click('#att-modes [data-mode="grid"]')
    page.wait_for_selector("#att-grid canvas")
    page.click("#tab-search")
    page.wait_for_selector("#search-results li")
    page.locator("#search-results > li").first.get_by_role("button", name="Why this match?").click()
    page.wait_for_selector("#search-results .match .heatmap")
    page.click("#tab-attributes")
    page.fill("#attr-titles", "Northpeak Women's Waterproof Hiking Boots with Ankle Support - Black, US 8")
    page.click("#attr-form button[type=submit]")
    page.wait_for_selector("#attr-table tbody tr")
    f = tmp_path / "reviews.txt"
    f.write_text("Great shoes, very light.\nRuns small; order a size up.\nComfortable all day.\n")
    page.click("#tab-summaries")
    page.set_input_files("#sum-file", str(f))  # a multipart upload from the page itself: same origin
    page.click("#sum-form button[type=submit]")
    page.wait_for_selector("#sum-table tbody tr")
    assert page.console_errors == []
