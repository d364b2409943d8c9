"""``qkv serve``: the web app (FastAPI + one page) on this machine, in one or several processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from qkv.cli._common import console


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        index: Annotated[Optional[Path], typer.Option("--index", help="Search index directory this server answers from.")] = None,
        attributes: Annotated[Optional[Path], typer.Option("--attributes", help="Attribute model file (from `qkv attrs train`) for the attributes view.")] = None,
        sample: Annotated[bool, typer.Option("--sample", help="Serve the project's sample catalog: build its search index and a demo attribute model first if absent.")] = False,
        cache_dir: Annotated[Optional[Path], typer.Option("--cache-dir", help="Where --sample keeps what it builds (default ~/.cache/qkv).")] = None,
        host: Annotated[str, typer.Option(help="Address to bind; the default answers only this machine.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
        model: Annotated[Optional[str], typer.Option("--model", "-m", help="Model directory, packaged name or hub id.")] = None,
        cors: Annotated[Optional[list[str]], typer.Option("--cors", help="Origin allowed to call the API from another page (repeatable). None by default.")] = None,
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads per worker (default QKV_THREADS or 1).")] = None,
        workers: Annotated[Optional[int], typer.Option("--workers", "-w", min=1, help="Server processes sharing the index read-only (default: the cores this process may use).")] = None,
        api_key: Annotated[Optional[str], typer.Option("--api-key", envvar="QKV_API_KEY", help="Key every API call must carry (Authorization: Bearer KEY or X-API-Key); required to bind beyond loopback.")] = None,
        insecure: Annotated[bool, typer.Option("--insecure", help="Bind beyond loopback without an API key (anyone who can reach the port may use it).")] = False,
        access_log: Annotated[bool, typer.Option("--access-log/--no-access-log", help="One JSON line per request on stderr.")] = True,
        glossary: Annotated[Optional[Path], typer.Option(help="CSV of 'Chinese term,English term' that overrides the dictionary when Chinese queries are translated (--sample: the sample's own glossary).")] = None,
        heavy_workers: Annotated[Optional[int], typer.Option("--heavy-workers", min=1, help="Child processes per worker that the heavy views (attention, summaries, attributes) share, each holding the model (default: by cores and available memory; 1 on a 2-core machine).")] = None,
        trade_glossary: Annotated[str, typer.Option("--trade-glossary", help="Built-in trade glossary for Chinese queries, below --glossary and above the dictionary: home-improvement (default) or none.")] = "home-improvement",
    ):
        """Serve the web page and its JSON API (OpenAPI at /docs, metrics at /metrics)."""
        try:
            import uvicorn

            from qkv.web import create_app
        except ImportError as e:
            from qkv.errors import InputError

            raise InputError(f"the web app needs its extra: pip install 'qkv[web]' ({e})") from None
        from qkv.errors import InputError

        if sample and index is not None:
            raise InputError("give either --index DIR or --sample, not both")
        if index is not None and not (index / "manifest.json").is_file():
            raise InputError(f"no search index at {index}; build one with `qkv index CATALOG --index {index}` "
                             "or use --sample")
        if attributes is not None and not attributes.is_file():
            raise InputError(f"no attribute model at {attributes}; train one with `qkv attrs train` or use --sample")
        if glossary is not None:
            from qkv.translate import read_glossary

            read_glossary(glossary)  # a missing or malformed glossary is refused now, not at the first query
        from qkv.translate import trade_glossary as load_trade

        load_trade(trade_glossary)  # an unknown name too
        if sample:
            from qkv.web.sample import SAMPLE_GLOSSARY, SAMPLE_MODEL, default_cache_dir

            model = model or SAMPLE_MODEL  # a bilingual catalog: the multilingual encoder unless told otherwise
            glossary = glossary or SAMPLE_GLOSSARY
            base = cache_dir.expanduser() if cache_dir else default_cache_dir()
            index, attributes = _prepare_sample(model, threads, base, attributes)
        from qkv.web.guard import hosts_for_bind
        from qkv.web.observe import LOOPBACK
        from qkv.web.serving import ServeConfig, configure_access_log

        if host not in LOOPBACK:
            if not api_key and not insecure:
                raise InputError(f"binding to {host} lets other machines reach this server: give an API key "
                                 "(--api-key KEY or QKV_API_KEY) that every request must carry, or --insecure "
                                 "to serve without one")
            console.print(f"[yellow]note:[/] binding to {host}: other machines can reach this server"
                          + (" (API key required)." if api_key else " [bold]without an API key[/] (--insecure)."))
        if api_key is not None and len(api_key) < 16:
            raise InputError("the API key is too short: use at least 16 characters (e.g. `openssl rand -hex 16`)")
        n = workers or _cores()
        if heavy_workers is None:
            from qkv.web.pools import heavy_processes

            heavy_workers = heavy_processes(workers=n)
        cfg = ServeConfig(index_dir=str(index) if index else None, attributes_model=str(attributes) if attributes else None,
                          model=model, threads=threads, cors_origins=list(cors or []), api_key=api_key,
                          access_log=access_log, glossary=str(glossary) if glossary else None,
                          trade_glossary=trade_glossary, hosts=hosts_for_bind(host), heavy_workers=heavy_workers)
        configure_access_log(access_log)
        shown = "localhost" if host in ("127.0.0.1", "::1") else host
        console.print(f"qkv web app: open [bold]http://{shown}:{port}/[/]  (API docs: /docs; metrics: /metrics; "
                      f"{n} worker{'s' if n > 1 else ''}, {heavy_workers} heavy-work process{'es' if heavy_workers > 1 else ''} "
                      f"each; Ctrl+C stops)")
        if n == 1:
            from qkv.web.serving import preload_shared

            preload_shared(cfg)  # the heavy-work children forked at start-up share the model
            uvicorn.run(cfg.app(), host=host, port=port, log_level="warning")
            return
        # Several processes, each with its own app and model, on one port (qkv.web.serving)
        from qkv.web.serving import run_workers
        run_workers(cfg, host, port, n)


def _prepare_sample(model: str, threads: int | None, base: Path, attributes: Optional[Path]):
    """Build the sample's index and demo attribute model if absent, in a process of its own: its
    encoder and training memory (about 500 MB) leave with it, instead of staying in the parent,
    which only watches the workers. Returns (index directory, attribute model or None)."""
    return _run_apart(_build_sample, model, threads, base, attributes)


def _run_apart(fn, *args):
    """``fn(*args)`` in a spawned process of its own, its answer returned (tests run it here)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(fn, *args).result()


def _build_sample(model: str, threads: int | None, base: Path, attributes: Optional[Path]):
    from qkv.cli._common import load_encoder
    from qkv.web.sample import ensure_sample_attribute_model, ensure_sample_index

    encoder = load_encoder(model, threads)
    index = ensure_sample_index(base / "sample-index", encoder=encoder, console=console)
    if attributes is None:
        try:
            attributes = ensure_sample_attribute_model(base / "sample-attributes", encoder=encoder, console=console)
        except ImportError:
            attributes = None
        except Exception as e:  # noqa: BLE001 - the other views still serve; said, not hidden
            attributes = None
            console.print(f"[yellow]note:[/] the demo attribute model could not be trained with {encoder.name} "
                          f"({type(e).__name__}: {e}); the attributes view is off (`--model minilm` has it)")
    return index, attributes


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
