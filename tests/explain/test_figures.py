"""Figures: the data behind each picture (labels, sizes), and that the files decode."""

import io

import numpy as np
import pytest

from qkv.explain import figures


@pytest.fixture(autouse=True)
def _close():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_heatmap_figure_data(nike_maps):
    hm = nike_maps.heatmap(5, 11, hide_special=True, level="word")
    fig = figures.heatmap_figure(hm)
    ax = fig.axes[0]
    img = ax.images[0].get_array()
    assert img.shape == (9, 9)
    np.testing.assert_allclose(np.asarray(img), hm.values)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(hm.cols)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(hm.rows)
    assert "layer 5 head 11" in ax.get_title()
    assert any("not an explanation" in t.get_text() for t in fig.texts)  # the caveat sits beside the map


def test_png_and_svg_decode(tmp_path, nike_maps):
    from PIL import Image

    fig = figures.heatmap_figure(nike_maps.heatmap(0, 0))
    png = figures.save(fig, tmp_path / "h", "png")
    with Image.open(png) as im:
        im.load()
        assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 300
    svg = figures.save(figures.heatmap_figure(nike_maps.heatmap(0, 0)), tmp_path / "h", "svg")
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text


def test_grid_and_model_view(nike_maps):
    fig = figures.grid_figure(nike_maps.grid(2))
    assert sum(len(ax.images) for ax in fig.axes) == 12
    fig = figures.grid_figure(nike_maps.all_layers())
    assert sum(len(ax.images) for ax in fig.axes) == 72
    assert {ax.get_title() for ax in fig.axes if ax.images} >= {"L0 H0", "L5 H11"}


def test_neuron_and_compare(nike_maps, nike_explanation):
    nv = nike_maps.neuron(5, 11, 9)
    fig = figures.neuron_figure(nv)
    kimg = [ax for ax in fig.axes if ax.images and ax.get_title().startswith("k vectors")][0]
    assert kimg.images[0].get_array().shape == (14, 32)
    bars = [ax for ax in fig.axes if ax.get_title() == "softmax"][0]
    np.testing.assert_allclose([p.get_width() for p in bars.patches], nv.weights)
    fig = figures.compare_figure(nike_maps, 5, 11, level="word")
    titles = [ax.get_title() for ax in fig.axes if ax.images]
    assert len(titles) == 4 and titles[2].startswith("value zeroing") and titles[3].startswith("rollout")
    fig = figures.pair_figure(nike_explanation.pair)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["running", "shoes", "for", "men"]
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
