"""Running the app in several processes: ``qkv serve --workers N``.

``run_workers`` starts N worker processes; each builds the app from the settings ``qkv serve``
gives it (``ServeConfig``) and serves it with uvicorn on a socket of its own bound to the same
port with ``SO_REUSEPORT``, so the kernel spreads connections over the workers. (With one shared
listening socket, as uvicorn's own ``--workers`` has it, whichever worker wakes first accepts a
whole burst of keep-alive connections: measured here, 50 clients all landed on one of two
workers.) The kernel places a connection once, at random; ``qkv.web.balance`` moves keep-alive
connections away from a worker whose searches wait longer than another's. The parent restarts a worker that dies and stops them all on Ctrl+C / SIGTERM.
The parent loads the model (and the Chinese dictionaries) once and forks the workers, so they
share those pages copy-on-write; every worker opens the same index directory read-only: the
vectors and postings are memory-mapped and SQLite is opened ``immutable``, so the page cache holds
one copy of the index for all of them. ``qkv.web.memory.server_memory`` sums the proportional set size over
the server's processes (``/metrics`` and ``bench/web.py`` report it).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass, field

from qkv.web.memory import SERVER_PID

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
    glossary: str | None = None
    trade_glossary: str = "home-improvement"
    hosts: list[str] | None = None  # Host names answered (loopback binds: qkv.web.guard.hosts_for_bind)
    heavy_workers: int | None = None  # child processes per worker for the heavy kinds (qkv.web.pools.heavy_processes)

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> "ServeConfig":
        raw = os.environ.get(ENV)
        if not raw:
            raise RuntimeError(f"{ENV} is not set: start the server with `qkv serve`")
        return cls(**json.loads(raw))

    def app(self, encoder=None, balancer=None):
        from qkv.web import create_app

        return create_app(index_dir=self.index_dir, attributes_model=self.attributes_model, model=self.model,
                          encoder=encoder, cors_origins=self.cors_origins or None, threads=self.threads,
                          api_key=self.api_key, child_processes=True, glossary=self.glossary, balancer=balancer,
                          trade_glossary=self.trade_glossary, allowed_hosts=self.hosts,
                          heavy_workers=self.heavy_workers)


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
    """An app from ``QKV_SERVE_CONFIG`` (for running under another ASGI server's factory)."""
    cfg = ServeConfig.from_env()
    configure_access_log(cfg.access_log)
    return cfg.app()


def _listening_socket(host: str, port: int, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _worker(cfg_json: str, host: str, port: int, metrics_dir: str, slot: int = 0, shared=None) -> None:
    """One worker process: its own app, its own SO_REUSEPORT socket on the shared port; ``slot``
    of the ``shared`` array is where it tells the others how long its searches wait
    (``qkv.web.balance``)."""
    import uvicorn

    from qkv.web.balance import Balancer

    for s in (signal.SIGINT, signal.SIGTERM):  # forked: not the parent's handlers (uvicorn sets its own)
        signal.signal(s, signal.SIG_DFL)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    os.environ[SERVER_PID] = str(os.getppid())  # whose process tree /metrics measures
    cfg = ServeConfig(**json.loads(cfg_json))
    configure_access_log(cfg.access_log)
    sock = _listening_socket(host, port, reuse_port=True)
    balancer = Balancer(shared, slot) if shared is not None and len(shared) > 2 else None
    server = uvicorn.Server(uvicorn.Config(cfg.app(balancer=balancer), log_level="warning"))
    server.run(sockets=[sock])


def run_workers(cfg: ServeConfig, host: str, port: int, workers: int, on_ready=None) -> None:
    """Serve with ``workers`` processes until interrupted (see the module docstring)."""
    import multiprocessing as mp
    import shutil
    import tempfile

    # the port must be free: a socket bound without SO_REUSEPORT refuses to share it (and would
    # let another server's workers take part of our traffic otherwise)
    probe = _listening_socket(host, port, reuse_port=False)
    probe.close()
    metrics_dir = tempfile.mkdtemp(prefix="qkv-metrics-")
    preload_shared(cfg)
    ctx = mp.get_context("fork")  # the workers share what preload_shared loaded
    shared = ctx.RawArray("d", 2 * workers)  # per worker: search wait, heartbeat (qkv.web.balance)
    args = (cfg.to_env(), host, port, metrics_dir)
    procs = [ctx.Process(target=_worker, args=(*args, i, shared), daemon=False) for i in range(workers)]
    stopping = False

    def stop(signum, frame):
        nonlocal stopping
        stopping = True

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for p in procs:
            p.start()
        if on_ready is not None:
            on_ready([p.pid for p in procs])
        while not stopping:
            time.sleep(0.5)
            for i, p in enumerate(procs):
                if not p.is_alive() and not stopping:
                    from qkv.web.observe import access_log

                    access_log.warning(json.dumps({"event": "worker exited", "pid": p.pid, "code": p.exitcode}))
                    try:
                        from prometheus_client import multiprocess

                        multiprocess.mark_process_dead(p.pid, metrics_dir)
                    except Exception:
                        pass
                    procs[i] = ctx.Process(target=_worker, args=(*args, i, shared), daemon=False)
                    procs[i].start()
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()  # uvicorn finishes the requests in flight, then exits
        for p in procs:
            p.join(15)
            if p.is_alive():
                p.kill()
        for s, h in old.items():
            signal.signal(s, h)
        shutil.rmtree(metrics_dir, ignore_errors=True)


def preload_shared(cfg: ServeConfig) -> None:
    """Load the model and the dictionaries in this process before it forks the workers (or, with
    one worker, its heavy-work children): the workers are forked from it while it has one thread
    and has done no BLAS work, and they and their children share its pages copy-on-write instead
    of loading a copy each (the tokenizer alone is ~280 MB; the weights are mapped from their
    file). gc.freeze() keeps the collector from writing to every loaded object's header, which
    would copy the pages holding them into each process."""
    import gc

    from qkv.model import shared_encoder
    from qkv.web.state import served_model

    shared_encoder(served_model(cfg.model, cfg.index_dir), threads=cfg.threads)
    _preload_dictionaries()
    gc.collect()
    gc.freeze()


def _preload_dictionaries() -> None:
    """What every worker's first Chinese query loads (CC-CEDICT parsed, ~100 MB of Python objects
    each), loaded before the workers are forked so that they share it."""
    try:
        from qkv.text.zh import fold, segment
        from qkv.translate import ecdict
        from qkv.translate.translator import cedict

        cedict()
        ecdict.load()
        segment(fold("热身運動"))  # jieba's dictionary (Rust) and the traditional → simplified table
    except Exception:  # noqa: BLE001 - a worker loads (and reports) what is missing on first use
        pass
    # The summaries' Chinese sentiment reads SnowNLP's model tables with rjieba (0.831 accuracy
    # against 0.839 for SnowNLP's own way) rather than importing SnowNLP, which loads all its
    # models (~420 MB of Python objects in every process that does): 943 MB after every tab
    # instead of 1,221-1,267 (bench/web.py --memory-only, docs/web.md).
    from qkv.summarize import sentiment

    sentiment.FAST_ABOVE = 0
