"""Fixtures for scale tests: the sample index (tests/conftest.py) in the embedded store, and the
same index migrated into Milvus Lite (a .db file under pytest's tmp dir; no server, no network)."""

import pytest


@pytest.fixture(scope="session")
def embedded_index(sample_index):
    """The session's sample index (tests/conftest.py) in the embedded store."""
    return sample_index


@pytest.fixture(scope="session")
def milvus_index(tmp_path_factory, embedded_index):
    """The embedded sample index copied into Milvus Lite with ``migrate`` (checked in test_migrate)."""
    from qkv.scale.migrate import migrate

    root = tmp_path_factory.mktemp("milvus")
    report = migrate(embedded_index, f"milvus://{root}/sample.db", root / "handle", sample=50)
    return root / "handle", report


@pytest.fixture(scope="session", params=["embedded", "milvus"])
def any_index(request, embedded_index, milvus_index):
    return embedded_index if request.param == "embedded" else milvus_index[0]
