"""The fast layer equals the reference layer, route by route: the engine's one proof of speed."""

import numpy as np
import pytest

from qkv.model import attend
from qkv.model.encoder import Encoder
from qkv.model.layer import reference_layer

SHORT = ["red shoes", "Stainless Steel Electric Kettle 1.7L with auto shut-off", "kettle"]
LONG = ["a long review of a quiet kettle that boils fast " * 9, "short one", "a medium review of a kettle " * 4]


def _reference(enc, ids, mask):
    """Hidden states through the reference layer alone, from the engine's embeddings."""
    tr = {}
    enc.forward(ids, mask, _selector(enc, ["embeddings"]), tr, pack=False)
    x = tr["embeddings"]
    for p in enc.weights.layers:
        x = reference_layer(p, enc.config, x, mask)["out"]
    return x


def _selector(enc, names):
    from qkv.model.trace import Selector

    return Selector(names, enc.config.num_layers)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("texts", [SHORT, LONG], ids=["short", "long"])
def test_fast_layer_equals_the_reference_layer(encoder, monkeypatch, texts, compiled, threads):
    from qkv.kernels import cpu

    if compiled and not cpu.available():
        pytest.skip(f"compiled kernels not in use: {cpu.STATUS}")
    if not compiled:
        monkeypatch.setattr(cpu, "lib", None)
    enc = Encoder(encoder.config, encoder.weights, encoder.tokenizer, threads=threads)
    b = enc._pad(enc.tokenize(texts))
    routes = []
    real = attend.attend
    monkeypatch.setattr(attend, "attend", lambda route, *a: routes.append(route) or real(route, *a))
    ref = _reference(enc, b.ids, b.mask)
    for pack in (True, False):
        routes.clear()
        fast = enc.forward(b.ids, b.mask, pack=pack)
        expect = "math" if not compiled else "per_text"  # whatever the length (attend.py: the faster)
        assert set(routes) == {expect} and len(routes) == enc.config.num_layers
        np.testing.assert_allclose(fast[b.mask], ref[b.mask], rtol=1e-5, atol=3e-5)
    assert (texts is SHORT) == (b.ids.shape[1] < 64)


def test_traced_layers_run_the_reference_layer_and_the_rest_stay_fast(encoder, monkeypatch):
    """A trace that looks inside layer 2's attention runs the reference layer there only; the
    hidden states are those of an untraced pass."""
    import qkv.model.encoder as E

    calls = []
    real = E.reference_layer
    monkeypatch.setattr(E, "reference_layer", lambda p, *a, **k: calls.append(p) or real(p, *a, **k))
    tr = encoder.trace(LONG, keep=["layers.2.attn.weights", "layers.5.out"])
    assert calls == [encoder.weights.layers[2]]
    plain = encoder.trace(LONG, keep=["layers.5.out"])
    m = tr.attention_mask
    np.testing.assert_allclose(tr["layers.5.out"][m], plain["layers.5.out"][m], rtol=1e-5, atol=3e-5)
    w = tr["layers.2.attn.weights"]
    np.testing.assert_allclose(w.sum(-1)[:, :, :], 1.0, atol=1e-5)


def test_the_dispatcher_picks_one_route_per_case():
    mask = np.ones((2, 10), bool)
    lens = np.array([10, 10])
    assert attend.choose(attend.Batch(2, 10, mask, lens), traced=True) == "reference"
    assert attend.choose(attend.Batch(2, 10, mask, lens), traced=False) == "per_text"
    # products that quantise x: every text through the per-text kernel, whatever the length; traced as ever
    assert attend.choose(attend.Batch(2, 10, mask, lens), traced=False, invariant=True) == "per_text"
    assert attend.choose(attend.Batch(2, 10, mask, lens), traced=True, invariant=True) == "reference"
    assert attend.choose(attend.Batch(2, 64, np.ones((2, 64), bool), lens), traced=False) == "per_text"
    assert attend.choose(attend.Batch(2, 10, mask, None), traced=False) == "math"
    with pytest.raises(ValueError, match="route"):
        attend.attend("nonsense", None, None, attend.Batch(2, 10, mask, lens), 12, 1.0, None, None)
