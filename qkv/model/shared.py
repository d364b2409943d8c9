"""The one way qkv loads an encoder it was not handed: ``shared_encoder(name, threads=…)``.

Every caller that needs "the encoder of this model" and got none — the summarizer's default, an
``Index`` opened without one (its manifest names the model), an ``AttributeModel`` loaded without
one (it names the model it was trained with), the web app's state, the CLI's commands — asks here.
The first call for a (model directory, thread count) loads it with ``qkv.load``; later calls get
the same object, so a process holds each model's weights once, however many applications use it.

An encoder passed in explicitly always wins over this one; an index or attribute model still
checks the weights' fingerprint of whatever it is given and refuses another model's encoder.
``qkv.load`` stays the way to get a fresh, private encoder (tests, or a second thread count).
"""

from __future__ import annotations

import threading
from pathlib import Path

from qkv.model.hub import resolve
from qkv.model.threads import resolve_threads

_lock = threading.Lock()
_loaded: dict[tuple[str, int], object] = {}


def shared_encoder(name: str | Path | None = None, *, threads: int | None = None):
    """The process's encoder for model ``name`` (default all-MiniLM-L6-v2) at ``threads`` encoder
    threads (default: ``qkv.model.threads``' choice), loaded on first use."""
    from qkv.model.encoder import Encoder

    _, path = resolve(name)
    n = resolve_threads(threads)
    key = (str(path), n)
    enc = _loaded.get(key)
    if enc is None:
        with _lock:  # two threads asking at once load it once
            enc = _loaded.get(key)
            if enc is None:
                enc = _loaded[key] = Encoder.load(name, threads=n)
    return enc


def forget_shared() -> None:
    """Drop the shared encoders (tests that change the environment, or to free their memory)."""
    with _lock:
        _loaded.clear()
