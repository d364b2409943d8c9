"""Fault injection on the served index: missing at start-up and published later, a generation's
SQLite file truncated. Each answers 503 while broken, names no server path, and recovers by itself."""

from __future__ import annotations

import shutil
import time

from fastapi.testclient import TestClient

QUERY = {"query": "waterproof hiking boots", "k": 5, "mode": "keyword"}


def _until_ok(c, seconds: float = 90.0):
    """Search until it answers 200 (the server retries opening the index with back-off)."""
    end = time.monotonic() + seconds
    while True:
        r = c.post("/api/search", json=QUERY)
        if r.status_code == 200 or time.monotonic() > end:
            return r
        time.sleep(0.1)


def test_an_index_published_after_start_up_is_picked_up(encoder, sample_index, tmp_path):
    from qkv.web import create_app

    served = tmp_path / "catalog-index"  # not there yet
    with TestClient(create_app(encoder=encoder, index_dir=served, generation_poll=0.1), raise_server_exceptions=False) as c:
        r = c.post("/api/search", json=QUERY)
        assert r.status_code == 503 and "cannot open the search index" in r.json()["error"]
        assert str(tmp_path) not in r.text and "catalog-index" in r.json()["error"]  # its name, not its path
        shutil.copytree(sample_index, served)
        r = _until_ok(c)
        assert r.status_code == 200 and r.json()["results"], r.text


def test_a_truncated_generation_file_is_503_then_recovers(encoder, sample_index, tmp_path):
    """A generation's SQLite file cut short (a disk filled, a copy interrupted) when the server
    opens it: 503 without server paths, the rest of the server fine; once the file is whole again
    the index is opened by itself and answers as before."""
    import json

    from qkv.web import create_app

    served = tmp_path / "catalog-index"
    shutil.copytree(sample_index, served)
    with TestClient(create_app(encoder=encoder, index_dir=served, generation_poll=None)) as c:
        before = c.post("/api/search", json=QUERY).json()["results"]
    db = served / json.loads((served / "manifest.json").read_text())["extra"]["generation"] / "catalog.sqlite"
    kept = db.read_bytes()
    db.write_bytes(kept[:len(kept) // 3])
    with TestClient(create_app(encoder=encoder, index_dir=served, generation_poll=0.1), raise_server_exceptions=False) as c:
        for q in ("leather chelsea boots", "merino wool sweater"):
            r = c.post("/api/search", json={**QUERY, "query": q})
            assert r.status_code == 503, r.text
            assert str(tmp_path) not in r.text and "index" in r.json()["error"]
        assert c.get("/api/health").status_code == 200
        db.write_bytes(kept)  # whole again: nothing stored was lost
        r = _until_ok(c)
        assert r.status_code == 200 and r.json()["results"] == before


def test_an_index_failing_while_served_is_dropped_and_reopened(encoder, sample_index, tmp_path):
    """SQLite reports the open generation damaged mid-search (pages not read before): 503 naming
    no path, and the index is opened again after the back-off."""
    import sqlite3

    from qkv.web import create_app

    served = tmp_path / "catalog-index"
    shutil.copytree(sample_index, served)
    with TestClient(create_app(encoder=encoder, index_dir=served, generation_poll=0.1), raise_server_exceptions=False) as c:
        before = c.post("/api/search", json=QUERY).json()["results"]
        st = c.app.state.qkv
        broken = st.index()

        def damaged(*a, **k):
            raise sqlite3.DatabaseError(f"database disk image is malformed: {served}/gen-000001/catalog.sqlite")

        broken.search = damaged
        r = c.post("/api/search", json=QUERY)
        assert r.status_code == 503 and "cannot be read" in r.json()["error"] and str(tmp_path) not in r.text
        r = _until_ok(c)
        assert r.status_code == 200 and r.json()["results"] == before and st.index() is not broken
