"""qkv.web.sample: the cached sample index is rebuilt when it is stale, an older index format too."""

from __future__ import annotations

import json


def test_a_sample_index_of_an_older_format_is_replaced(encoder, tmp_path, monkeypatch):
    import hashlib

    import qkv.search as search
    from qkv.search.store import FORMAT_VERSION
    from qkv.web.sample import SAMPLE_CATALOG, STAMP, ensure_sample_index

    path = tmp_path / "sample-index"
    (path / "gen-000001").mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"format": "qkv-search-index", "version": 1}))
    old = hashlib.sha256(SAMPLE_CATALOG.read_bytes()).hexdigest()
    (path / STAMP).write_text(json.dumps({"catalog_sha256": old, "model": encoder.name,
                                          "fingerprint": encoder.fingerprint()}))  # no index format: older
    built = []

    def fake_build(catalog, where, enc, **kw):  # the real build is tested elsewhere; here: was it asked for
        assert not (where / "gen-000001").exists() and "rebuild" not in kw
        (where / "manifest.json").write_text("{}")
        built.append(where)

    monkeypatch.setattr(search, "build_index", fake_build)
    assert ensure_sample_index(path, encoder=encoder) == path
    assert built == [path]
    assert json.loads((path / STAMP).read_text())["index_format"] == FORMAT_VERSION
    # fresh now: a second call builds nothing
    assert ensure_sample_index(path, encoder=encoder) == path and built == [path]
