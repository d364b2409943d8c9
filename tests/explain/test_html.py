"""The HTML report works offline: no network references, its data embedded and readable."""

import json
import re

from qkv.explain.html import index_page, svg_heatmap

NET = re.compile(r"""(?:src|href|action|xlink:href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" class="qkv-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_report_offline_and_complete(nike_explanation):
    page = nike_explanation.to_html()
    assert page.startswith("<!doctype html>")
    assert not NET.search(page)
    assert "http://" not in page and "https://" not in page  # not even an SVG namespace
    assert "<link" not in page and "@import" not in page
    d = _data(page)
    assert d["tokens"][0] == "[CLS]" and len(d["tokens"]) == 14
    assert d["layers"] == list(range(6)) and d["layer"] == 5 and d["head"] == 11
    assert len(d["attention"]["5"]["11"]) == 14 and d["heads"] == list(range(12))
    assert abs(sum(d["attention_all"]["2"][3]) - 1) < 0.01 and d["value_zeroing"]["4"]
    assert d["selling_points"]["ranked"][0]["word"] in d["text"]
    assert "not an explanation" in page  # the caveat beside the maps
    for cls in ("qkv-kind", "qkv-layer", "qkv-head", "qkv-hide", "qkv-neuron", "qkv-grid"):
        assert cls in page


def test_fragments(nike_maps, nike_explanation):
    assert "<svg" in nike_maps.heatmap(1, 1)._repr_html_()
    assert "neuron view" in nike_maps.neuron(1, 1, 2)._repr_html_()
    assert "similarity" in nike_explanation.pair._repr_html_()
    assert "Nike" in nike_explanation.selling_points._repr_html_()
    svg = svg_heatmap(["a", "<b>"], ["a", "<b>"], [[0.5, 0.5], [0.1, 0.9]])
    assert svg.count("<rect") == 4 and "&lt;b&gt;" in svg  # labels are escaped


def test_index_page():
    page = index_page([{"n": 1, "text": "A <b>", "href": "001-a.html", "tokens": 4, "top": ["A"]}], "m")
    assert "001-a.html" in page and "&lt;b&gt;" in page and not NET.search(page)


def test_long_text_page_is_bounded(encoder):
    from qkv.explain.report import ATTRIBUTION_LIMIT, explain

    e = explain(encoder, "red running shoes for men with laces " * 20, layer=2, head=3)
    assert len(e.maps.tokens) > ATTRIBUTION_LIMIT and e.occlusion is None and "skipped" in e.note
    page = e.to_html()
    d = _data(page)
    assert d["layers"] == [2] and d["heads"] == [3] and d["value_zeroing"] == {}
    assert "value_zeroing" not in page.split('class="qkv-kind"')[1].split("</select>")[0]
    assert not NET.search(page)
