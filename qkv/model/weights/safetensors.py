"""The safetensors reader: ``model.safetensors`` into ``Parameters``, checking every name and shape.

Hugging Face stores a Linear layer's weight as [out, in] and computes x·Wᵀ; we store [in, out] so
the code reads x·W like the formulas. Q, K and V of a layer are fused into one [in, 3·out] matrix so
self-attention projects with a single matrix product.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qkv.errors import ModelError
from qkv.model.config import ModelConfig
from qkv.model.weights.parameters import LayerParameters, Parameters

_PREFIXES = ("bert.", "roberta.", "model.", "encoder.model.")


def _read_tensors(path: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    if not path.is_file():
        if (path.parent / "pytorch_model.bin").is_file():
            raise ModelError(
                f"{path.parent} has only pytorch_model.bin; qkv reads model.safetensors (pickle files can run "
                "code when loaded). Convert once where torch is installed: "
                "`python -c \"from transformers import AutoModel; AutoModel.from_pretrained('DIR')"
                ".save_pretrained('DIR', safe_serialization=True)\"`")
        raise ModelError(f"no weights file at {path}; a model directory needs model.safetensors")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        raise ModelError(f"cannot read {path}: {e} (the file may be truncated or not safetensors; "
                         "download or copy it again)") from None


def _canonical(name: str) -> str:
    for p in _PREFIXES:
        if name.startswith(p):
            name = name[len(p):]
            break
    # Old TF-converted checkpoints name LayerNorm parameters gamma/beta.
    return name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


def read_safetensors(model_dir: Path, config: ModelConfig) -> Parameters:
    """The reader registered for ``model.safetensors`` in a model directory."""
    return load_weights(Path(model_dir) / "model.safetensors", config)


def load_weights(path: str | Path, config: ModelConfig) -> Parameters:
    """Load and check the weights at ``path`` (a model.safetensors file) for ``config``."""
    path = Path(path)
    raw = {_canonical(k): v for k, v in _read_tensors(path).items()}
    h, inter = config.hidden_size, config.intermediate_size

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in raw:
            raise ModelError(f"{path} lacks the tensor {name!r} (expected shape {shape}); "
                             "is this the right model for its config.json?")
        a = raw[name]
        if tuple(a.shape) != shape:
            raise ModelError(f"tensor {name!r} in {path} has shape {tuple(a.shape)}, config.json implies {shape}")
        if a.dtype not in (np.float32, np.float16, np.float64):
            raise ModelError(f"tensor {name!r} has dtype {a.dtype}; qkv reads float16/32/64 weights")
        return np.ascontiguousarray(a, dtype=np.float32)

    def linear(prefix: str, n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
        w = get(prefix + ".weight", (n_out, n_in))
        return np.ascontiguousarray(w.T), get(prefix + ".bias", (n_out,))

    layers = []
    for i in range(config.num_layers):
        p = f"encoder.layer.{i}."
        wq, bq = linear(p + "attention.self.query", h, h)
        wk, bk = linear(p + "attention.self.key", h, h)
        wv, bv = linear(p + "attention.self.value", h, h)
        w_o, b_o = linear(p + "attention.output.dense", h, h)
        w_in, b_in = linear(p + "intermediate.dense", h, inter)
        w_out, b_out = linear(p + "output.dense", inter, h)
        layers.append(LayerParameters(
            w_qkv=np.ascontiguousarray(np.concatenate([wq, wk, wv], axis=1)),
            b_qkv=np.concatenate([bq, bk, bv]),
            w_o=w_o, b_o=b_o,
            ln1_g=get(p + "attention.output.LayerNorm.weight", (h,)),
            ln1_b=get(p + "attention.output.LayerNorm.bias", (h,)),
            w_in=w_in, b_in=b_in, w_out=w_out, b_out=b_out,
            ln2_g=get(p + "output.LayerNorm.weight", (h,)),
            ln2_b=get(p + "output.LayerNorm.bias", (h,)),
        ))
    return Parameters(
        word=get("embeddings.word_embeddings.weight", (config.vocab_size, h)),
        position=get("embeddings.position_embeddings.weight", (config.max_position_embeddings, h)),
        token_type=get("embeddings.token_type_embeddings.weight", (config.type_vocab_size, h)),
        emb_ln_g=get("embeddings.LayerNorm.weight", (h,)),
        emb_ln_b=get("embeddings.LayerNorm.bias", (h,)),
        layers=tuple(layers),
    )
