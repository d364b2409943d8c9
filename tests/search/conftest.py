"""Fixtures for search tests (the sample catalog and its session index live in tests/conftest.py)."""

from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "qkv" / "data" / "sample_catalog.csv"  # also tests/conftest.py's


@pytest.fixture()
def small_csv(tmp_path) -> Path:
    """Twelve products from the sample catalog, as a small CSV of our own."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    p = tmp_path / "small.csv"
    p.write_text("\n".join(lines[:1] + lines[1:277:23]) + "\n", encoding="utf-8")
    return p
