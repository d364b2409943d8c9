"""Weight formats are readers returning one parameter set; a directory's format is found by file."""

import numpy as np
import pytest

import qkv
from qkv.model import weights as W
from qkv.model.linear import Blas


def test_safetensors_is_the_registered_default(encoder):
    assert W.FORMATS[0].name == "safetensors"
    assert W.find_format(encoder.path).filename == "model.safetensors"
    params, file = W.read_parameters(encoder.path, encoder.config)
    assert file == encoder.path / "model.safetensors"
    assert isinstance(params, W.Parameters) and len(params.layers) == encoder.config.num_layers
    H, inter = encoder.config.hidden_size, encoder.config.intermediate_size
    lw = params.layers[0]
    assert (lw.w_qkv.shape, lw.w_o.shape, lw.w_in.shape, lw.w_out.shape) == ((H, 3 * H), (H, H), (H, inter), (inter, H))
    assert all(getattr(lw, f).dtype == np.float32 for f in ("w_qkv", "b_qkv", "ln1_g"))


def test_a_new_format_is_one_more_reader(tmp_path, encoder, monkeypatch):
    """A format registered with its own file is read instead, and may hand over packed matrices:
    the encoder runs them, and the explain views see their numbers through dense()."""
    import shutil

    model = tmp_path / "m"
    shutil.copytree(encoder.path, model)
    (model / "model.safetensors").unlink()
    (model / "model.toy").write_bytes(b"toy")
    seen = []

    def read_toy(model_dir, config):
        seen.append(model_dir)
        p = encoder.weights
        layers = tuple(W.LayerParameters(**{**vars(lw), "w_o": Blas(lw.w_o)}) for lw in p.layers)
        return W.Parameters(p.word, p.position, p.token_type, p.emb_ln_g, p.emb_ln_b, layers)

    monkeypatch.setattr(W, "FORMATS", list(W.FORMATS))
    W.register(W.Format("toy", "model.toy", read_toy))
    enc = qkv.load(model)
    assert seen == [model.resolve()] or seen == [model]
    np.testing.assert_allclose(enc.encode(["red shoes"]), encoder.encode(["red shoes"]), atol=1e-6)
    lw = enc.weights.layers[0]
    assert isinstance(lw.w_o, Blas) and isinstance(lw.dense().w_o, np.ndarray)
    assert enc.weights.astype(np.float64).layers[0].w_o.dtype == np.float64
    assert enc.fingerprint() != "unknown"
    tr = enc.trace(["red shoes"], keep=["layers.0.attn.weights"])  # the reference layer reads dense()
    np.testing.assert_allclose(tr["layers.0.attn.weights"], encoder.trace(["red shoes"])["layers.0.attn.weights"],
                               atol=1e-6)


def test_missing_weights_name_the_file(tmp_path):
    with pytest.raises(Exception, match="model.safetensors"):
        W.read_parameters(tmp_path, None)
