"""Norm-weighted attention (Kobayashi et al. 2020), derived from the weights and checked exactly."""

import numpy as np

from qkv.explain.norms import head_norms, layer_norms, transformed_values

from .conftest import NIKE


def test_decomposition_rebuilds_attn_out(encoder):
    # Σ_h Σ_j α^h_ij f_h(x_j) + b_o must be the engine's attn.out: f is the right per-head transform
    layer = 3
    tr = encoder.trace([NIKE], keep=[f"layers.{layer}.attn.*"])
    w, v = tr.get(f"layers.{layer}.attn.weights", 0), tr.get(f"layers.{layer}.attn.v", 0)
    fx = transformed_values(encoder, layer, v)  # [heads, n, H]
    rebuilt = np.einsum("hij,hjo->io", w, fx) + encoder.weights.layers[layer].b_o
    np.testing.assert_allclose(rebuilt, tr.get(f"layers.{layer}.attn.out", 0), atol=1e-4)


def test_norms_by_loops(encoder, nike_maps):
    layer, d = 2, encoder.config.head_dim
    lw = encoder.weights.layers[layer]
    H = encoder.config.hidden_size
    x = nike_maps.inputs[layer].astype(np.float64)
    w = nike_maps.weights[layer]
    per_head = head_norms(encoder, layer, w, nike_maps.v[layer])
    combined = layer_norms(encoder, layer, w, nike_maps.v[layer], chunk=5)  # chunking must not matter
    for h in (0, 7):
        wv = lw.w_qkv[:, 2 * H + h * d: 2 * H + (h + 1) * d]
        bv = lw.b_qkv[2 * H + h * d: 2 * H + (h + 1) * d]
        wo = lw.w_o[h * d:(h + 1) * d]
        for i, j in ((1, 4), (5, 0), (9, 13)):
            f = (x[j] @ wv + bv) @ wo
            np.testing.assert_allclose(per_head[h, i, j], np.linalg.norm(w[h, i, j] * f), rtol=1e-4)
    i, j = 4, 9
    total = sum(w[h, i, j] * ((x[j] @ lw.w_qkv[:, 2 * H + h * d: 2 * H + (h + 1) * d]
                               + lw.b_qkv[2 * H + h * d: 2 * H + (h + 1) * d]) @ lw.w_o[h * d:(h + 1) * d])
                for h in range(encoder.config.num_heads))
    np.testing.assert_allclose(combined[i, j], np.linalg.norm(total), rtol=1e-4)


def test_norm_weighting_discounts_special_tokens(nike_maps):
    # the finding the maps show: [CLS]/[SEP] take far less of the norm-weighted share than of the weights
    raw = nike_maps.heatmap(5, 11, hide_special=True)
    nw = nike_maps.heatmap(5, 11, kind="norm", hide_special=True)
    assert nw.hidden_share.mean() < 0.5 * raw.hidden_share.mean()
