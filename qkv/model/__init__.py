"""The model layer: config, weight readers, packed weights, tokenizer, the reference and fast
layers, the encoder, pooling and trace. The products themselves live in ``qkv.kernels``; here is
only which one a weight goes to (``qkv.model.linear``)."""

from qkv.model.config import ModelConfig
from qkv.model.default import default_model
from qkv.model.encoder import Encoder, load
from qkv.model.hub import DEFAULT_MODEL, resolve
from qkv.model.shared import shared_encoder
from qkv.model.tokenizer import Tokenizer, Tokens, Word, group_words
from qkv.model.trace import Trace, all_names

__all__ = ["DEFAULT_MODEL", "Encoder", "ModelConfig", "Tokenizer", "Tokens", "Trace", "Word",
           "all_names", "default_model", "group_words", "load", "resolve", "shared_encoder"]
