"""What one server process shares between requests: the encoder (loaded once), the search index
chosen at start-up (reopened when a writer publishes a new generation), and the pools that run
each kind of work (``qkv.web.pools``).

The encoder is safe to call from several threads at once: every call has its own workspace and
the compiled kernels work on the arrays they are given. The search index is opened read-only
(SQLite ``immutable``, memory-mapped vectors), which any number of threads may search.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from qkv.errors import InputError, QkvError
from qkv.model.threads import resolve_threads
from qkv.web.limits import Limits
from qkv.web.pools import Pools, PoolSpec

GENERATION_POLL = 0.5  # seconds between looks at the index's manifest (new products show within ~1 s)
# An index that fails to open (not published yet, a file cut short) is tried again after this
# many seconds, doubled on each failure up to the most: it recovers by itself once repaired.
INDEX_RETRY = (0.5, 30.0)


class AppState:
    def __init__(self, *, model: str | None = None, encoder=None, index_dir: Path | None = None,
                 attributes_model: Path | None = None, limits: Limits | None = None, threads: int | None = None,
                 pools: dict[str, PoolSpec | dict] | None = None, child_processes: bool = False,
                 glossary: str | Path | None = None, trade_glossary: str = "home-improvement",
                 heavy_workers: int | None = None):
        self.model_name = model
        self.trade_glossary = trade_glossary
        self.glossary = Path(glossary).expanduser().resolve() if glossary else None
        self.threads = threads
        self.index_dir = Path(index_dir).expanduser().resolve() if index_dir else None
        self.limits = limits or Limits()
        self.attributes_path = Path(attributes_model).expanduser().resolve() if attributes_model else None
        self._encoder = encoder
        self._attr_model: Any = None
        self._index: Any = None
        self._index_error: str | None = None
        self._index_retry_at = 0.0  # time.monotonic() after which a failed open is tried again
        self._index_backoff = 0.0
        self._index_sig: tuple | None = None  # (inode, mtime) of the manifest the open index came from
        self._reloading = False
        self.generation: str | None = None  # the generation the open index shows
        self.generation_swaps = 0
        self._fingerprint: str | None = None
        self.fields_cache: tuple = (None, None)  # (generation, its filterable fields described)
        self._load_lock = threading.Lock()
        self.pools = Pools(pools, blas=self._blas_threads, state=self,
                           child=self.child_config() if child_processes else None, heavy_workers=heavy_workers)
        self._maps_cache: OrderedDict = OrderedDict()
        self._maps_lock = threading.Lock()
        self._maps_cache_size = 8

    # ------------------------------------------------------------------ resources, loaded once
    @property
    def encoder(self):
        if self._encoder is None:
            with self._load_lock:
                if self._encoder is None:
                    from qkv.model import shared_encoder

                    self._encoder = shared_encoder(self.model_name or self._stored_or_default_model(),
                                                   threads=self.threads)
        return self._encoder

    def _stored_or_default_model(self) -> str:
        return served_model(None, self.index_dir)

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
                if self._index is None and self.index_retry_due():
                    try:
                        sig = self._manifest_sig()
                        self._index = self._open_index()
                        self._index_sig = sig
                        self.generation = _generation(self._index)
                        self._index_error, self._index_backoff = None, 0.0
                    except ImportError as e:
                        self._index_error = f"search is not available in this installation ({e})"
                        self._index_retry_at = float("inf")  # an installation does not change while serving
                    except (QkvError, sqlite3.DatabaseError, OSError) as e:
                        self._index_failed(f"cannot open the search index: {e}")
        index = self._index
        if index is None:
            raise Unavailable(self._index_error or "the search index is not available")
        return index

    def index_retry_due(self) -> bool:
        """No index is open and the back-off after the last failure to open one has passed."""
        return self._index is None and time.monotonic() >= self._index_retry_at

    def _index_failed(self, message: str) -> None:
        """Remember why the index is unavailable (names only: no server paths go to clients) and
        when to try again."""
        self._index_backoff = min(INDEX_RETRY[1], self._index_backoff * 2 or INDEX_RETRY[0])
        self._index_retry_at = time.monotonic() + self._index_backoff
        self._index_error = self.names_only(message) + f"; tried again in {self._index_backoff:g} s"

    def names_only(self, message: str) -> str:
        """``message`` with the index directory's absolute path cut to its name."""
        if self.index_dir is not None:
            message = message.replace(str(self.index_dir), self.index_dir.name)
        return message

    def index_broken(self, error: Exception) -> Unavailable:
        """The open index failed while searching (its SQLite file damaged): dropped, to be opened
        again with back-off; the 503 to answer."""
        with self._load_lock:
            self._index = None
            self._index_failed(f"the search index cannot be read ({error})")
        return Unavailable(self._index_error)

    def _open_index(self):
        from qkv.search import Index

        return Index.open(self.index_dir, encoder=self.encoder, glossary=self.glossary,
                          trade_glossary=self.trade_glossary)

    def _manifest_sig(self) -> tuple | None:
        try:
            st = os.stat(self.index_dir / "manifest.json")
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def generation_changed(self) -> bool:
        """Whether the manifest was replaced since the open index was read (one stat call)."""
        return (self._index is not None and not self._reloading
                and self._manifest_sig() not in (None, self._index_sig))

    def reload_index(self) -> bool:
        """Switch the open index to the newest published generation (``Index.refresh``: opened and
        warmed first, then swapped in one assignment; searches already running finish on the old
        one). Returns whether a new generation is now served."""
        if self.index_dir is None or self._index is None:
            return False
        with self._load_lock:
            if self._reloading:
                return False
            self._reloading = True
        try:
            sig = self._manifest_sig()
            if sig is None or sig == self._index_sig:
                return False
            old_gen = self.generation
            self._index_sig = sig  # looked at: the next look is at the next publish
            try:
                self._index.refresh(warm=True)
            except QkvError as e:  # a broken or foreign generation: keep serving the open one
                import logging

                logging.getLogger("qkv.web").warning("not switching to the new index generation: %s", e)
                return False
            self.generation = _generation(self._index)
            if self.generation == old_gen:
                return False
            self.generation_swaps += 1
            return True
        finally:
            self._reloading = False

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
        # As many BLAS threads as the encoder's (1 by default) for all the numeric work (faiss, the
        # attribute tagger, explain's maps): more on these 2-vCPU machines are slower, and far
        # slower when other processes are busy.
        return self._encoder.threads if self._encoder is not None else resolve_threads(self.threads)

    def child_config(self) -> dict:
        """What a child process builds its own state from (heavy kinds, ``qkv.web.pools``)."""
        # the model this server runs: named, else the encoder it was given, else the index's own
        # (a child told nothing would take the rule's default and answer with another model)
        model = self.model_name or (self._encoder.name if self._encoder is not None
                                    else served_model(None, self.index_dir))
        return {"model": model, "threads": self.threads, "limits": self.limits,
                "attributes_model": self.attributes_path}

    async def run(self, kind: str, fn: Callable, *args, **kwargs):
        """``fn(state, *args, **kwargs)`` in the pool of this ``kind`` of work
        (``qkv.web.pools.KINDS``): 429 when its queue is full, 503 past its deadline. For a kind
        run in a child process, ``fn`` and its arguments must pickle (a module-level function),
        and ``state`` is the child's own."""
        try:
            return await self.pools[kind].run(fn, *args, **kwargs)
        except sqlite3.DatabaseError as e:
            if kind not in ("search", "explain"):
                raise
            raise self.index_broken(e) from None

    # ------------------------------------------------------------------ attention maps, cached per text
    def maps(self, text: str):
        """``qkv.explain.attention_maps`` of ``text`` (call inside ``run``). A small LRU cache keeps
        the last few texts, so switching layer, head or map kind does not run the model again."""
        with self._maps_lock:
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
        with self._maps_lock:
            self._maps_cache[text] = out
            while len(self._maps_cache) > self._maps_cache_size:
                self._maps_cache.popitem(last=False)
        return out


def served_model(model: str | None, index_dir: str | Path | None) -> str:
    """The model a server with these settings loads: ``model`` if named, else the index's own (it
    was built with it), else the rule's for text not known yet (``qkv.model.default_model``)."""
    if model:
        return model
    from qkv.model import default_model

    if index_dir is not None and (Path(index_dir) / "manifest.json").is_file():
        from qkv.search.store import read_manifest

        return read_manifest(Path(index_dir)).model
    return default_model()


def _generation(index) -> str:
    """The generation an open index shows (the store's own name for it)."""
    return str(index.generation or "")


class Unavailable(QkvError):
    """A capability this server cannot offer (module not installed, no index): answered with 503."""


class NotFound(InputError):
    """Something the request names that is not there (a product id): answered with 404."""


class TooLarge(InputError):
    """An input over one of the server's size limits: answered with 413."""
