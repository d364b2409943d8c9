"""What every command shares: the console, model loading, progress bars, JSON output and error
reporting."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

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


def load_encoder(model: str | None, threads: int | None = None, texts=None):
    """The encoder of ``model`` at ``threads`` (``qkv.model.shared_encoder``: loaded once per process);
    no model named: the one ``qkv.model.default_model`` picks for ``texts`` (None: not known yet)."""
    from qkv.model import default_model, shared_encoder

    model = model or default_model(texts)
    with console.status(f"loading {model} ...", spinner="dots") if sys.stderr.isatty() else _null():
        return shared_encoder(model, threads=threads)


@contextmanager
def progress_bars(labels: Mapping[str, str] | None = None, *, transient: bool = False,
                  quiet_off_terminal: bool = False) -> Iterator:
    """Rich bars on stderr (stdout stays clean for ``--json``), fed by one ``qkv.progress``
    callback: a bar per stage, named ``labels[stage]`` (or the stage itself), with count, percent,
    rate, elapsed time and ETA. ``transient``: clear the bars when done (many short calls);
    ``quiet_off_terminal``: draw nothing when stderr is not a terminal."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    from rich.text import Text

    class _Rate(TextColumn):
        def render(self, task):
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f}/s" if speed else "…/s", style="progress.data.speed")

    labels = labels or {}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                  _Rate(""), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                  console=err_console, transient=transient,
                  disable=quiet_off_terminal and not err_console.is_terminal) as bar:
        tasks: dict[str, Any] = {}

        def report(stage: str, done: int, total: int | None) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(labels.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield report


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def print_json(obj: Any) -> None:
    """JSON to stdout, plain (no colour codes), so other programs can read it; numbers converted
    as the web API converts them (``qkv.jsonable``)."""
    sys.stdout.write(json.dumps(jsonable(obj), ensure_ascii=False, indent=2) + "\n")
