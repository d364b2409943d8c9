"""Result objects find their HTML through the registry the renderers fill (data never imports html)."""

import ast
from pathlib import Path

import pytest

import qkv.explain  # noqa: F401  (registers the HTML views)
from qkv.explain.display import ShowsHtml, render, renders

EXPLAIN = Path(__file__).resolve().parents[2] / "qkv" / "explain"


def test_every_result_class_has_a_registered_view():
    from qkv.explain import AttentionMaps, Explanation, HeatMap, NeuronView, PairAttribution, SellingPoints, Tour
    from qkv.explain.display import _renderers

    for cls in (HeatMap, NeuronView, PairAttribution, SellingPoints, Tour, Explanation):
        assert issubclass(cls, ShowsHtml) and (cls, "fragment") in _renderers, cls
    assert (Explanation, "page") in _renderers
    assert not issubclass(AttentionMaps, ShowsHtml)  # a container of maps: its heatmaps show themselves


def test_registry_resolves_by_class_and_says_what_is_missing():
    class Thing(ShowsHtml):
        pass

    class Special(Thing):
        pass

    with pytest.raises(LookupError, match="no HTML fragment is registered for Thing"):
        Thing()._repr_html_()
    renders(Thing)(lambda t: f"<b>{type(t).__name__}</b>")
    assert Thing()._repr_html_() == "<b>Thing</b>"
    assert Special()._repr_html_() == "<b>Special</b>"  # a subclass uses its base's view
    with pytest.raises(LookupError, match="page"):
        render(Thing(), "page")


def test_data_modules_import_no_renderer():
    """maps, attribution, salience, tour and report: no import of html, figures or rich."""
    for name in ("maps", "attribution", "salience", "tour", "report", "display"):
        tree = ast.parse((EXPLAIN / f"{name}.py").read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        bad = {m for m in imported if any(r in m for r in ("explain.html", "explain.figures", "rich", "matplotlib"))}
        assert not bad, f"qkv/explain/{name}.py imports a renderer: {sorted(bad)}"
