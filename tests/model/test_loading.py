"""Loading model directories: other BERT-family layouts, RoBERTa positions, and every bad input."""

import json
import shutil

import numpy as np
import pytest
import torch

import qkv
from qkv.errors import InputError, ModelError
from qkv.model import ModelConfig, resolve

transformers = pytest.importorskip("transformers", reason="needs the test extra (make test installs it)")

TEXTS = ["red running shoes", "stainless steel water bottle 750ml", "运动鞋", ""]


def _save_tiny(tmp_path, encoder, kind: str):
    """A small randomly initialised model saved by transformers, with the default tokenizer."""
    common = dict(vocab_size=encoder.config.vocab_size, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=64, max_position_embeddings=80)
    torch.manual_seed(0)
    if kind == "roberta":
        cfg = transformers.RobertaConfig(**common, pad_token_id=1, type_vocab_size=1)
        model = transformers.RobertaModel(cfg)
    elif kind == "bert-mlm":  # weights saved with a "bert." prefix and an extra head
        cfg = transformers.BertConfig(**common)
        model = transformers.BertForMaskedLM(cfg)
    else:
        cfg = transformers.BertConfig(**common, hidden_act="gelu_new")
        model = transformers.BertModel(cfg)
    path = tmp_path / kind
    model.eval().save_pretrained(path, safe_serialization=True)
    shutil.copy(encoder.path / "tokenizer.json", path / "tokenizer.json")
    return path


@pytest.mark.parametrize("kind", ["roberta", "bert-mlm", "bert-gelu-new"])
def test_other_architectures_match_transformers(tmp_path, encoder, kind):
    path = _save_tiny(tmp_path, encoder, kind)
    ours = qkv.load(path)
    assert ours.config.family == ("roberta" if kind == "roberta" else "bert")
    ref = transformers.AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    tr = ours.trace(TEXTS, keep=["layers.*.attn.weights", "layers.1.out"])
    ids = torch.from_numpy(tr.input_ids)
    if kind == "roberta":  # our pad id is the model's; transformers derives positions from it
        assert (tr.input_ids[~tr.attention_mask] == 1).all()
    with torch.no_grad():
        out = ref(input_ids=ids, attention_mask=torch.from_numpy(tr.attention_mask.astype(np.int64)),
                  output_attentions=True)
    mask = tr.attention_mask
    assert np.abs(tr["layers.1.out"] - out.last_hidden_state.numpy())[mask].max() <= 1e-4
    for i in range(2):
        assert np.abs(tr[f"layers.{i}.attn.weights"] - out.attentions[i].numpy()).max() <= 1e-5


def test_config_reads_sentence_transformers_settings(encoder):
    c = encoder.config
    assert (c.pooling, c.normalize, c.max_seq_length, c.max_tokens, c.window_tokens) == ("mean", True, 256, 512, 256)


def test_roberta_position_offset():
    c = ModelConfig.from_dict(dict(model_type="xlm-roberta", vocab_size=10, hidden_size=8, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=16, max_position_embeddings=514,
                                   pad_token_id=1))
    assert c.position_offset == 2 and c.max_tokens == 512


def test_resolve_default_and_local(encoder):
    name, path = resolve(None)
    assert name == "sentence-transformers/all-MiniLM-L6-v2" and (path / "model.safetensors").is_file()
    name2, path2 = resolve(str(path))
    assert path2 == path.resolve()


def test_unknown_model_error_says_what_was_tried(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as e:
        resolve("nobody/no-such-model")
    msg = str(e.value)
    assert "local directory" in msg and "HF_HUB_OFFLINE" in msg and "config.json" in msg


# ------------------------------------------------------------------ bad input
@pytest.fixture()
def model_copy(tmp_path, encoder):
    dst = tmp_path / "m"
    shutil.copytree(encoder.path, dst)
    return dst


def test_missing_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        qkv.load(tmp_path / "empty")


def test_missing_weights_and_bin_only(model_copy):
    (model_copy / "model.safetensors").unlink()
    with pytest.raises(ModelError, match="needs model.safetensors"):
        qkv.load(model_copy)
    (model_copy / "pytorch_model.bin").write_bytes(b"not really")
    with pytest.raises(ModelError, match="only pytorch_model.bin.*Convert"):
        qkv.load(model_copy)


def test_truncated_safetensors(model_copy):
    f = model_copy / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="truncated"):
        qkv.load(model_copy)


def test_wrong_shape(model_copy):
    cfg = json.loads((model_copy / "config.json").read_text())
    cfg["intermediate_size"] = 1024
    (model_copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match=r"intermediate.dense.weight.*shape \(1536, 384\).*\(1024, 384\)"):
        qkv.load(model_copy)


def test_unknown_architecture(model_copy):
    cfg = json.loads((model_copy / "config.json").read_text())
    cfg["model_type"] = "gpt2"
    (model_copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelError, match="unsupported architecture.*gpt2.*bert"):
        qkv.load(model_copy)


def test_broken_config_json(model_copy):
    (model_copy / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        qkv.load(model_copy)


def test_missing_tokenizer(model_copy):
    (model_copy / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="tokenizer.json"):
        qkv.load(model_copy)


@pytest.mark.parametrize("bad", [[1], [None], ["ok", b"bytes"]])
def test_non_string_text(encoder, bad):
    with pytest.raises(InputError, match="not str"):
        encoder.encode(bad)
    with pytest.raises(InputError, match="not str"):
        encoder.trace(bad)


def test_a_single_string_is_not_silently_split(encoder):
    with pytest.raises(InputError, match="list of texts"):
        encoder.encode("red shoes")
