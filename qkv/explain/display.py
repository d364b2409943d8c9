"""How explain's result objects show themselves as HTML without importing the code that draws them.

Data sits below pictures: the result modules (maps, attribution, salience, tour, report) import
nothing that renders them — as bertviz's views take plain arrays and tokens. A renderer registers,
per class it draws, a function ``object -> HTML`` (``html.py`` registers all of explain's; another
face could register its own); ``ShowsHtml._repr_html_`` (what a notebook calls) and ``render`` look
it up. ``qkv.explain`` imports ``html`` with the package, so every object finds its renderer.

Why a registry and not a lazy import inside ``_repr_html_``: that import is still an edge from data
to pictures, and it made maps, attribution and html import each other in a circle.
"""

from __future__ import annotations

from typing import Callable

_renderers: dict[tuple[type, str], Callable[[object], str]] = {}


def renders(cls: type, kind: str = "fragment"):
    """Register the decorated function as the ``kind`` view ("fragment" or "page") of ``cls``."""
    def register(fn: Callable[[object], str]) -> Callable[[object], str]:
        _renderers[(cls, kind)] = fn
        return fn

    return register


def render(obj, kind: str = "fragment") -> str:
    """HTML for ``obj`` from the renderer registered for its class (or a base class)."""
    for cls in type(obj).__mro__:
        fn = _renderers.get((cls, kind))
        if fn is not None:
            return fn(obj)
    raise LookupError(f"no HTML {kind} is registered for {type(obj).__name__}: import qkv.explain.html "
                      "(importing qkv.explain does) or register one with qkv.explain.display.renders")


class ShowsHtml:
    """Mixin: a notebook shows the object through its registered HTML fragment."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return render(self)
