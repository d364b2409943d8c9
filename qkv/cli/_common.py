"""What every command shares: the console, model loading, JSON output and error reporting."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

from qkv.jsonable import jsonable

console = Console()
err_console = Console(stderr=True)


def run_app(app) -> None:
    """Run the typer app; qkv's own errors print one clear line and exit 2, not a traceback."""
    from qkv.errors import QkvError

    try:
        app(standalone_mode=True)
    except QkvError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False)
        sys.exit(2)


def load_encoder(model: str | None, threads: int | None = None):
    from qkv.model import load

    with console.status(f"loading {model or 'the default model'} ...", spinner="dots") if sys.stderr.isatty() else _null():
        return load(model, threads=threads)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def print_json(obj: Any) -> None:
    """JSON to stdout, plain (no colour codes), so other programs can read it; numbers converted
    as the web API converts them (``qkv.jsonable``)."""
    sys.stdout.write(json.dumps(jsonable(obj), ensure_ascii=False, indent=2) + "\n")
