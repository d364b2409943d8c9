"""Heatmaps, grids, neuron view and their plain-data form."""

import json

import numpy as np
import pytest

from qkv.errors import InputError


def test_heatmap_shapes_and_hiding(nike_maps):
    n = len(nike_maps.tokens)
    hm = nike_maps.heatmap(5, 11)
    assert hm.shape == (n, n) and hm.rows == nike_maps.tokens and hm.name == "layers.5.attn.weights"
    np.testing.assert_allclose(hm.values, nike_maps.weights[5, 11])
    hidden = nike_maps.heatmap(5, 11, hide_special=True)
    assert hidden.shape == (n - 2, n - 2) and "[CLS]" not in hidden.rows and "[SEP]" not in hidden.rows
    w = nike_maps.weights[5, 11].astype(np.float64)
    np.testing.assert_allclose(hidden.hidden_share, w[1:-1, 0] + w[1:-1, -1], atol=1e-6)
    np.testing.assert_allclose(hidden.values.sum(1) + hidden.hidden_share, 1.0, atol=1e-5)
    mean = nike_maps.heatmap(2)  # heads combined
    np.testing.assert_allclose(mean.values, nike_maps.weights[2].mean(0), atol=1e-6)


def test_grid_and_all_layers(nike_maps):
    g = nike_maps.grid(4)
    assert [h.head for h in g] == list(range(12)) and all(h.layer == 4 for h in g)
    al = nike_maps.all_layers(kind="norm")
    assert len(al) == 6 and all(len(r) == 12 for r in al)
    for kind in ("rollout", "value_zeroing", "norm"):
        np.testing.assert_allclose(nike_maps.heatmap(3, kind=kind).values.sum(1), 1.0, atol=1e-6)


def test_neuron_view(nike_maps):
    nv = nike_maps.neuron(5, 11, "shoes")
    assert nv.tokens[nv.query] == "shoes"
    np.testing.assert_allclose(nv.qk.sum(1), nv.scores, rtol=1e-5)
    np.testing.assert_allclose(nv.scores, nike_maps.k[5, 11] @ nike_maps.q[5, 11, nv.query], rtol=1e-5, atol=1e-5)
    e = np.exp(nv.scaled - nv.scaled.max())
    np.testing.assert_allclose(e / e.sum(), nv.weights, atol=1e-6)
    with pytest.raises(InputError, match="not in this text"):
        nike_maps.neuron(5, 11, "sandals")
    with pytest.raises(InputError, match="out of range"):
        nike_maps.neuron(5, 11, 40)


def test_bad_layer_head(nike_maps):
    with pytest.raises(InputError, match="layer 7 is out of range"):
        nike_maps.heatmap(7, 0)
    with pytest.raises(InputError, match="head -13 is out of range"):
        nike_maps.heatmap(0, -13)
    assert nike_maps.heatmap(-1, -1).layer == 5 and nike_maps.heatmap(-1, -1).head == 11


def test_to_dict_uses_trace_names(nike_maps):
    d = json.loads(json.dumps(nike_maps.to_dict(kinds=("attention", "norm", "rollout", "value_zeroing"))))
    for l in range(6):
        assert f"layers.{l}.attn.weights" in d["maps"] and f"rollout.{l}" in d["maps"]
        assert f"layers.{l}.attn.weighted_norms" in d["maps"] and f"layers.{l}.value_zeroing" in d["maps"]
    assert np.array(d["maps"]["layers.0.attn.weights"]).shape == (12, 14, 14)
    assert d["tokens"][0] == "[CLS]" and d["words"][5]["text"] == "Men's"
    hm = json.loads(json.dumps(nike_maps.heatmap(5, 11, level="word", hide_special=True).to_dict()))
    assert hm["rows"][0] == "Nike" and len(hm["values"]) == len(hm["hidden_share"]) == 9
