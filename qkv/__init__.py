"""qkv: see and use transformer attention.

Layers, bottom up: ``qkv.attention`` (the math), ``qkv.model`` (a BERT-family encoder with every
intermediate visible), applications (``qkv.explain``, ``qkv.search``, ``qkv.attributes``,
``qkv.summarize``), and faces (the ``qkv`` command, the web app).
"""

__version__ = "0.1.0"

from qkv.errors import InputError, ModelError, QkvError  # noqa: E402
from qkv.model import DEFAULT_MODEL, Encoder, Trace, load  # noqa: E402

__all__ = ["DEFAULT_MODEL", "Encoder", "InputError", "ModelError", "QkvError", "Trace", "load", "__version__"]
