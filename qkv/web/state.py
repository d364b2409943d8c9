"""What one server process shares between requests: the encoder (loaded once), the search index
chosen at start-up, and one lock that serialises work on them.

The encoder's forward pass is NumPy on fresh arrays, but the BLAS thread limit it sets with
threadpoolctl is process-wide, and these machines have two cores: running one encoder call at a
time (in a worker thread, so the event loop keeps answering) is both safe and as fast as it gets.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from starlette.concurrency import run_in_threadpool

from qkv.errors import InputError, QkvError
from qkv.model.threads import blas_threads
from qkv.model.threads import default_threads as _env_threads
from qkv.web.limits import Limits


class AppState:
    def __init__(self, *, model: str | None = None, encoder=None, index_dir: Path | None = None,
                 attributes_model: Path | None = None, limits: Limits | None = None, threads: int | None = None):
        self.model_name = model
        self.threads = threads
        self.index_dir = Path(index_dir).expanduser().resolve() if index_dir else None
        self.limits = limits or Limits()
        self.attributes_path = Path(attributes_model).expanduser().resolve() if attributes_model else None
        self._encoder = encoder
        self._attr_model: Any = None
        self._index: Any = None
        self._index_error: str | None = None
        self._fingerprint: str | None = None
        self.fields_cache: Any = None  # the index's filterable fields, described once
        self._load_lock = threading.Lock()
        self.compute_lock = threading.Lock()
        self._maps_cache: OrderedDict = OrderedDict()
        self._maps_cache_size = 8

    # ------------------------------------------------------------------ resources, loaded once
    @property
    def encoder(self):
        if self._encoder is None:
            with self._load_lock:
                if self._encoder is None:
                    from qkv.model import load

                    self._encoder = load(self.model_name, threads=self.threads)
        return self._encoder

    def fingerprint(self) -> str:
        """The encoder's weight hash, read once (it reads the weights file)."""
        if self._fingerprint is None:
            self._fingerprint = self.encoder.fingerprint()
        return self._fingerprint

    def index(self):
        """The search index opened from the directory given at start-up (never one a client names)."""
        if self.index_dir is None:
            raise Unavailable("this server was started without a search index; "
                              "restart it with `qkv serve --index DIR` or `qkv serve --sample`")
        if self._index is None:
            with self._load_lock:
                if self._index is None and self._index_error is None:
                    try:
                        from qkv.search import Index

                        self._index = Index.open(self.index_dir, encoder=self.encoder)
                    except ImportError as e:
                        self._index_error = f"search is not available in this installation ({e})"
                    except QkvError as e:
                        self._index_error = f"cannot open the search index: {e}"
        if self._index is None:
            raise Unavailable(self._index_error or "the search index is not available")
        return self._index

    def attribute_model(self):
        """The attribute model file given at start-up, loaded once and bound to the shared encoder."""
        if self.attributes_path is None:
            raise Unavailable("this server was started without an attribute model; restart it with "
                              "`qkv serve --attributes MODEL` (train one with `qkv attrs train`) or `qkv serve --sample`")
        if self._attr_model is None:
            with self._load_lock:
                if self._attr_model is None:
                    try:
                        from qkv.attributes import AttributeModel
                    except ImportError as e:
                        raise Unavailable(f"attribute extraction is not available in this installation ({e})") from None
                    try:
                        self._attr_model = AttributeModel.load(self.attributes_path, encoder=self.encoder)
                    except QkvError as e:
                        raise Unavailable(f"cannot use the attribute model: {e}") from None
        return self._attr_model

    def _blas_threads(self) -> int:
        return self._encoder.threads if self._encoder is not None else default_threads(self.threads)

    async def run(self, fn: Callable, *args, **kwargs):
        """Run encoder/index work in a worker thread, one at a time."""

        def locked():
            # One BLAS thread for all the numeric work (faiss, the attribute tagger, explain's maps),
            # as the encoder already does: two threads on these 2-vCPU machines are slower, and far
            # slower when other processes are busy.
            with self.compute_lock, blas_threads(self._blas_threads()):
                return fn(*args, **kwargs)

        return await run_in_threadpool(locked)

    # ------------------------------------------------------------------ attention maps, cached per text
    def maps(self, text: str):
        """``qkv.explain.attention_maps`` of ``text`` (call inside ``run``). A small LRU cache keeps
        the last few texts, so switching layer, head or map kind does not run the model again."""
        hit = self._maps_cache.get(text)
        if hit is not None:
            self._maps_cache.move_to_end(text)
            return hit
        from qkv.explain import attention_maps

        enc = self.encoder
        n = len(enc.tokenize([text])[0])
        cap = self.limits.max_attention_tokens
        if n > cap:
            raise TooLarge(f"the text has {n} tokens; the attention view shows at most {cap} "
                           "(special tokens included): shorten it")
        out = attention_maps(enc, text)
        self._maps_cache[text] = out
        while len(self._maps_cache) > self._maps_cache_size:
            self._maps_cache.popitem(last=False)
        return out


def default_threads(given: int | None) -> int:
    return max(1, int(given)) if given is not None else _env_threads()


class Unavailable(QkvError):
    """A capability this server cannot offer (module not installed, no index): answered with 503."""


class TooLarge(InputError):
    """An input over one of the server's size limits: answered with 413."""
