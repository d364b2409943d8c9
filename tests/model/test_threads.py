"""qkv.model.threads owns every thread setting; no other module reads the environment for one."""

import ast
import re
from pathlib import Path

import pytest

from qkv.errors import InputError
from qkv.model.threads import build_threads, default_threads, resolve_threads

PACKAGE = Path(__file__).resolve().parents[2] / "qkv"


def test_encoder_threads_given_or_from_the_environment(monkeypatch):
    monkeypatch.delenv("QKV_THREADS", raising=False)
    assert default_threads() == 1 and resolve_threads(None) == 1
    monkeypatch.setenv("QKV_THREADS", "3")
    assert resolve_threads(None) == 3 and resolve_threads(2) == 2 and resolve_threads(0) == 1
    monkeypatch.setenv("QKV_THREADS", "two")
    with pytest.raises(InputError, match="QKV_THREADS='two' is not a whole number"):
        resolve_threads(None)
    assert resolve_threads(2) == 2  # a choice made by the caller needs no environment


def test_build_threads(monkeypatch):
    monkeypatch.setenv("QKV_BUILD_THREADS", "3")
    assert build_threads() == 3
    monkeypatch.setenv("QKV_BUILD_THREADS", "x")
    with pytest.raises(InputError, match="QKV_BUILD_THREADS"):
        build_threads()
    monkeypatch.delenv("QKV_BUILD_THREADS")
    assert build_threads() >= 1


def test_only_the_threads_module_names_a_thread_variable():
    """Any other module that reads or sets QKV_*THREADS would be a second owner."""
    owners = []
    for p in sorted(PACKAGE.rglob("*.py")):
        if p == PACKAGE / "model" / "threads.py":
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"QKV_\w*THREADS", node.value):
                owners.append(f"{p.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not owners, f"thread settings read outside qkv/model/threads.py: {owners}"
