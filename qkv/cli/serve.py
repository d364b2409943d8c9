"""``qkv serve``: the web app (FastAPI + one page) on this machine."""

from __future__ import annotations

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
        threads: Annotated[Optional[int], typer.Option(help="Encoder threads (default QKV_THREADS or 1).")] = None,
    ):
        """Serve the web page and its JSON API (OpenAPI at /docs)."""
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
            raise InputError(f"no search index at {index}; build one with `qkv index build` or use --sample")
        if attributes is not None and not attributes.is_file():
            raise InputError(f"no attribute model at {attributes}; train one with `qkv attrs train` or use --sample")
        encoder = None
        if sample:
            from qkv.cli._common import load_encoder
            from qkv.web.sample import default_cache_dir, ensure_sample_attribute_model, ensure_sample_index

            encoder = load_encoder(model, threads)
            base = cache_dir.expanduser() if cache_dir else default_cache_dir()
            index = ensure_sample_index(base / "sample-index", encoder=encoder, console=console)
            if attributes is None:
                try:
                    attributes = ensure_sample_attribute_model(base / "sample-attributes", encoder=encoder,
                                                               console=console)
                except ImportError:
                    attributes = None
        if host not in ("127.0.0.1", "localhost", "::1"):
            console.print(f"[yellow]note:[/] binding to {host}: other machines can reach this server.")
        application = create_app(index_dir=index, attributes_model=attributes, model=model, encoder=encoder,
                                 cors_origins=cors, threads=threads)
        shown = "localhost" if host in ("127.0.0.1", "::1") else host
        console.print(f"qkv web app: open [bold]http://{shown}:{port}/[/]  (API docs: /docs; Ctrl+C stops)")
        uvicorn.run(application, host=host, port=port, log_level="warning")
