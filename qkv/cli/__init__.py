"""The ``qkv`` command: a thin face over the Python API.

Each module in this package that defines ``register(app)`` adds its commands; a command imports
what it needs inside its body so ``qkv --help`` stays fast. ``app`` is the root typer application
and ``eval_app`` the ``qkv eval ...`` group that evaluation commands join.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

app = typer.Typer(
    name="qkv",
    help="See and use transformer attention: encode, tour, explain, search, attributes, summaries.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
eval_app = typer.Typer(help="Evaluate qkv on labelled data (search, summaries).", no_args_is_help=True)
app.add_typer(eval_app, name="eval")

_loaded = False


def _load_commands() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "register"):
            mod.register(app)


def main() -> None:
    from qkv.cli._common import run_app

    _load_commands()
    run_app(app)


_load_commands()
