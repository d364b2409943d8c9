"""Fixtures for search tests: the shipped sample catalog, indexed once per session."""

from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "qkv" / "data" / "sample_catalog.csv"


@pytest.fixture(scope="session")
def sample_catalog() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory, encoder):
    """A read-only index of the whole sample catalog (tests that write make their own)."""
    from qkv.search import build_index

    path = tmp_path_factory.mktemp("search") / "sample-index"
    build_index(SAMPLE, path, encoder)
    return path


@pytest.fixture()
def small_csv(tmp_path) -> Path:
    """Twelve products from the sample catalog, as a small CSV of our own."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    p = tmp_path / "small.csv"
    p.write_text("\n".join(lines[:1] + lines[1:277:23]) + "\n", encoding="utf-8")
    return p
