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

    r = CliRunner().invoke(app, ["serve", "--index", str(sample_index), "--port", "8765", "--workers", "1"])
    assert r.exit_code == 0, r.output
    (application, kw), = captured
    assert kw["host"] == "127.0.0.1" and kw["port"] == 8765
    assert application.state.qkv.index_dir == sample_index.resolve()
    assert "http://localhost:8765/" in r.output


def test_serve_sample_uses_the_cached_sample_builds(captured, sample_index, sample_attributes, monkeypatch):
    import qkv.web.sample as sample
    from qkv.cli import app

    import qkv.cli.serve as serve

    seen = {}
    monkeypatch.setattr(serve, "_run_apart", lambda fn, *args: fn(*args))  # built here, where the fakes are
    monkeypatch.setattr(sample, "ensure_sample_index", lambda path, **kw: seen.setdefault("index", path) and sample_index)
    monkeypatch.setattr(sample, "ensure_sample_attribute_model",
                        lambda path, **kw: seen.setdefault("attrs", path) and sample_attributes)
    r = CliRunner().invoke(app, ["serve", "--sample", "--cache-dir", "/tmp/qkv-web-test-cache", "-w", "1"])
    assert r.exit_code == 0, r.output
    assert str(seen["index"]).endswith("qkv-web-test-cache/sample-index")
    assert str(seen["attrs"]).endswith("qkv-web-test-cache/sample-attributes")
    st = captured[0][0].state.qkv
    assert st.index_dir == sample_index.resolve()
    assert st.attributes_path == (sample_attributes.resolve() if sample_attributes else None)
    # a bilingual catalog: the multilingual model and the sample's own glossary unless told otherwise
    assert st.model_name == sample.SAMPLE_MODEL and "multilingual-e5-small" in st.encoder.name
    assert st.glossary == sample.SAMPLE_GLOSSARY.resolve()


def test_serve_sample_without_an_attribute_model_says_so_and_serves_the_rest(captured, sample_index, monkeypatch):
    import qkv.web.sample as sample
    from qkv.cli import app

    def refuse(path, **kw):
        raise ValueError("array is not broadcastable to correct shape")

    import qkv.cli.serve as serve

    monkeypatch.setattr(serve, "_run_apart", lambda fn, *args: fn(*args))  # built here, where the fakes are
    monkeypatch.setattr(sample, "ensure_sample_index", lambda path, **kw: sample_index)
    monkeypatch.setattr(sample, "ensure_sample_attribute_model", refuse)
    r = CliRunner().invoke(app, ["serve", "--sample", "--cache-dir", "/tmp/qkv-web-test-cache", "-w", "1"])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "could not be trained" in out and "not broadcastable" in out and "attributes view is off" in out
    st = captured[0][0].state.qkv
    assert st.attributes_path is None and st.index_dir == sample_index.resolve()


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
    err = " ".join(capsys.readouterr().err.split())
    assert "no search index at /nonexistent/qkv-index" in err
    # the command it names exists: `qkv index CATALOG --index DIR` (there is no `qkv index build`)
    assert "qkv index CATALOG --index /nonexistent/qkv-index" in err and "index build" not in err


def test_serve_runs_one_worker_per_core_by_default(sample_index, monkeypatch):
    """Several workers by default (one per core), each given the same settings."""
    import os

    import qkv.web.serving as serving
    from qkv.cli import app

    calls = []
    monkeypatch.setattr(serving, "run_workers", lambda cfg, host, port, n: calls.append((cfg, host, port, n)))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    r = CliRunner().invoke(app, ["serve", "--index", str(sample_index), "--port", "8123"])
    assert r.exit_code == 0, r.output
    (cfg, host, port, n), = calls
    assert (host, port, n) == ("127.0.0.1", 8123, 3)
    assert cfg.index_dir == str(sample_index) and cfg.api_key is None and cfg.access_log is True
    assert "3 workers" in " ".join(r.output.split())


@pytest.mark.parametrize("args, env, ok, words", [
    (["--host", "0.0.0.0"], {}, False, "--api-key"),
    (["--host", "0.0.0.0", "--api-key", "short"], {}, False, "too short"),
    (["--host", "0.0.0.0", "--api-key", "k" * 20], {}, True, "API key required"),
    (["--host", "0.0.0.0"], {"QKV_API_KEY": "e" * 20}, True, "API key required"),
    (["--host", "0.0.0.0", "--insecure"], {}, True, "without an API key"),
])
def test_binding_beyond_loopback_needs_a_key_or_insecure(captured, sample_index, monkeypatch, args, env, ok, words):
    from qkv.cli import app

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(app, ["serve", "--index", str(sample_index), "-w", "1", *args])
    text = " ".join((r.output + str(r.exception or "")).split())
    assert (r.exit_code == 0) == ok, r.output
    assert words in text
    if ok:
        (application, kw), = captured
        assert kw["host"] == "0.0.0.0"
    else:
        assert captured == []


def test_serve_passes_the_trade_glossary_and_refuses_an_unknown_one(captured, sample_index):
    from qkv.cli import app
    from qkv.web.serving import ServeConfig

    r = CliRunner().invoke(app, ["serve", "--index", str(sample_index), "-w", "1"])
    assert r.exit_code == 0, r.output
    assert captured[-1][0].state.qkv.trade_glossary == "home-improvement"  # on by default
    r = CliRunner().invoke(app, ["serve", "--index", str(sample_index), "-w", "1", "--trade-glossary", "none"])
    assert r.exit_code == 0, r.output
    assert captured[-1][0].state.qkv.trade_glossary == "none"
    cfg = ServeConfig(index_dir=str(sample_index), trade_glossary="none")  # worker processes read it from the environment
    assert ServeConfig(**__import__("json").loads(cfg.to_env())).trade_glossary == "none"
    n = len(captured)
    r = CliRunner().invoke(app, ["serve", "--index", str(sample_index), "-w", "1", "--trade-glossary", "garden"])
    assert r.exit_code != 0 and "no built-in trade glossary called 'garden'" in str(r.exception)
    assert len(captured) == n  # refused before anything started
