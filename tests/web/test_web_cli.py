"""`qkv serve`: options checked before anything starts; uvicorn gets the app on 127.0.0.1 by default."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner


@pytest.fixture
def captured(monkeypatch):
    import uvicorn

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    return calls


def test_serve_defaults_to_loopback(captured, sample_index):
    from qkv.cli import app

    r = CliRunner().invoke(app, ["serve", "--index", str(sample_index), "--port", "8765"])
    assert r.exit_code == 0, r.output
    (application, kw), = captured
    assert kw["host"] == "127.0.0.1" and kw["port"] == 8765
    assert application.state.qkv.index_dir == sample_index.resolve()
    assert "http://localhost:8765/" in r.output


def test_serve_sample_uses_the_cached_sample_builds(captured, sample_index, sample_attributes, monkeypatch):
    import qkv.web.sample as sample
    from qkv.cli import app

    seen = {}
    monkeypatch.setattr(sample, "ensure_sample_index", lambda path, **kw: seen.setdefault("index", path) and sample_index)
    monkeypatch.setattr(sample, "ensure_sample_attribute_model",
                        lambda path, **kw: seen.setdefault("attrs", path) and sample_attributes)
    r = CliRunner().invoke(app, ["serve", "--sample", "--cache-dir", "/tmp/qkv-web-test-cache"])
    assert r.exit_code == 0, r.output
    assert str(seen["index"]).endswith("qkv-web-test-cache/sample-index")
    assert str(seen["attrs"]).endswith("qkv-web-test-cache/sample-attributes")
    st = captured[0][0].state.qkv
    assert st.index_dir == sample_index.resolve()
    assert st.attributes_path == (sample_attributes.resolve() if sample_attributes else None)


@pytest.mark.parametrize("args, words", [
    (["--index", "/nonexistent/qkv-index"], "no search index"),
    (["--attributes", "/nonexistent/model.qkvattr"], "no attribute model"),
    (["--sample", "--index", "/tmp"], "not both"),
])
def test_serve_refuses_bad_options(captured, args, words):
    from qkv.cli import main

    import sys

    old = sys.argv
    sys.argv = ["qkv", "serve", *args]
    try:
        with pytest.raises(SystemExit) as e:
            main()
    finally:
        sys.argv = old
    assert e.value.code == 2 and captured == []


def test_serve_error_message(captured, capsys):
    from qkv.cli import main

    import sys

    old = sys.argv
    sys.argv = ["qkv", "serve", "--index", "/nonexistent/qkv-index"]
    try:
        with pytest.raises(SystemExit):
            main()
    finally:
        sys.argv = old
    assert "no search index at /nonexistent/qkv-index" in capsys.readouterr().err.replace("\n", "")
