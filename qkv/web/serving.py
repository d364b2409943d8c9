"""Running the app in several processes: ``qkv serve --workers N``.

uvicorn starts N worker processes that share the listening socket; each imports this module and
calls ``app_from_env()``, which builds the app from the settings ``qkv serve`` put in the
environment (``QKV_SERVE_CONFIG``, JSON). Every worker loads the model once and opens the same
index directory read-only: the vectors and postings are memory-mapped and SQLite is opened
``immutable``, so the page cache holds one copy of the index for all of them, and each extra
worker costs about its private memory (the encoder's weights and packed panels, Python, caches;
``qkv.web.serving.memory()`` reads it and ``bench/web.py`` reports it).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import asdict, dataclass, field

ENV = "QKV_SERVE_CONFIG"


@dataclass
class ServeConfig:
    index_dir: str | None = None
    attributes_model: str | None = None
    model: str | None = None
    threads: int | None = None
    cors_origins: list[str] = field(default_factory=list)
    api_key: str | None = None
    access_log: bool = True

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> "ServeConfig":
        raw = os.environ.get(ENV)
        if not raw:
            raise RuntimeError(f"{ENV} is not set: start the server with `qkv serve`")
        return cls(**json.loads(raw))

    def app(self, encoder=None):
        from qkv.web import create_app

        return create_app(index_dir=self.index_dir, attributes_model=self.attributes_model, model=self.model,
                          encoder=encoder, cors_origins=self.cors_origins or None, threads=self.threads,
                          api_key=self.api_key)


def configure_access_log(enabled: bool) -> None:
    """One JSON line per request on stderr (``qkv.web.access``), or none."""
    log = logging.getLogger("qkv.web.access")
    log.propagate = False
    log.handlers.clear()
    if enabled:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    else:
        log.setLevel(logging.WARNING)


def app_from_env():
    """uvicorn's factory in each worker process."""
    cfg = ServeConfig.from_env()
    configure_access_log(cfg.access_log)
    return cfg.app()


def memory(pid: int | str = "self") -> dict[str, float]:
    """Resident memory of a process in MB (Linux): ``rss`` (all resident pages, shared ones
    included), ``private`` (pages no other process maps: what one more worker costs) and ``pss``
    (shared pages divided among their users)."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                    out[key] = int(rest.split()[0]) / 1024
    except OSError:
        return {}
    return {"rss": round(out.get("Rss", 0), 1), "pss": round(out.get("Pss", 0), 1),
            "private": round(out.get("Private_Clean", 0) + out.get("Private_Dirty", 0), 1)}
