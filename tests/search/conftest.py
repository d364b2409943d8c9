"""Search tests share tests/conftest.py's fixtures: the sample catalog, its session index and
``small_csv``; and ``catalog_index``, for a test module's own small catalog."""

from qkv.search import build_index


def catalog_index(tmp_path_factory, name: str, catalog: str, encoder):
    """An index directory built from ``catalog`` (CSV text: id,title,…) in a fresh folder ``name``."""
    d = tmp_path_factory.mktemp(name)
    (d / "cat.csv").write_text(catalog, encoding="utf-8")
    build_index(d / "cat.csv", d / "idx", encoder)
    return d / "idx"
