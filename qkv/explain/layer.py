"""One encoder layer recomputed from its weights, so an explanation can change something inside it.

Value zeroing (Mohebbi et al. 2023) must zero one token's value vector *inside* a layer and see
what comes out. So this module runs a layer again, from ``enc.weights.layers[i]`` and the layer's
input taken from a trace, through the encoder's own reference layer (``qkv.model.layer``, the same
code its traces run); pooling is the encoder's (``qkv.model.pooling``).
"""

from __future__ import annotations

import numpy as np

from qkv.model import pooling
from qkv.model.layer import reference_layer


def layer_input_name(layer: int) -> str:
    """Trace name of the vectors X entering ``layer``: the embeddings, or the previous layer's output."""
    return "embeddings" if layer == 0 else f"layers.{layer - 1}.out"


def head_slices(enc, head: int) -> tuple[slice, slice, slice]:
    """Columns of the fused ``w_qkv`` [H, 3H] that hold head ``head``'s Wq, Wk and Wv."""
    H, d = enc.config.hidden_size, enc.config.head_dim
    lo = head * d
    return slice(lo, lo + d), slice(H + lo, H + lo + d), slice(2 * H + lo, 2 * H + lo + d)


def run_layer(enc, layer: int, x: np.ndarray, mask: np.ndarray | None = None, *,
              value_scale: np.ndarray | None = None, full: bool = True) -> dict[str, np.ndarray]:
    """Recompute ``layer`` on inputs x [B, L, H] (mask [B, L], True = real token): the encoder's
    reference layer (``qkv.model.layer.reference_layer``, the one its traces use), with
    ``value_scale`` [B, L] multiplying each token's value vector (0 zeroes it). float64 inputs
    run in float64, which value zeroing uses so tiny cosine distances are not rounding noise.
    Returns arrays under the engine's names without the ``layers.{i}.`` prefix."""
    return reference_layer(enc.weights.layers[layer], enc.config, x, mask, value_scale=value_scale, full=full)


def run_from(enc, layer: int, x: np.ndarray, mask: np.ndarray | None = None, *,
             value_scale: np.ndarray | None = None, zero_all_layers: bool = False) -> np.ndarray:
    """Hidden states after the last layer, starting from x entering ``layer``.

    ``value_scale`` applies to ``layer`` only, or to every layer from it on with ``zero_all_layers``.
    """
    for i in range(layer, enc.config.num_layers):
        vs = value_scale if (i == layer or zero_all_layers) else None
        x = run_layer(enc, i, x, mask, value_scale=vs)["out"]
    return x


def pool(enc, hidden: np.ndarray, mask: np.ndarray, normalize: bool | None = None) -> np.ndarray:
    """Sentence vectors [B, H] by the model's pooling rule (as ``Encoder.encode``), from hidden [B, L, H]."""
    out = pooling.pool(hidden, mask, enc.config.pooling)
    if enc.config.normalize if normalize is None else normalize:
        out = pooling.normalize(out)
    return out
