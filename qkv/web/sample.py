"""The index of the project's own sample catalog (``qkv/data/sample_catalog.csv``), built once
into a cache directory so ``qkv serve --sample`` (and ``make run``) have something to search."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from qkv.model.default import default_model

SAMPLE_CATALOG = Path(__file__).resolve().parents[1] / "data" / "sample_catalog.csv"
# The seller's own glossary for the sample's trade words (透气 → breathable: CC-CEDICT's first
# sense is "to flow freely"), used to translate Chinese queries (qkv.translate.translator)
SAMPLE_GLOSSARY = SAMPLE_CATALOG.with_name("sample_glossary.csv")
# The sample is served (its queries are not known yet, in any language; its catalog is bilingual):
# the rule's multilingual model unless told otherwise
SAMPLE_MODEL = default_model()
# The demo attribute model's training titles (qkv/data/make_sample_attributes.py)
SAMPLE_ATTRIBUTES = SAMPLE_CATALOG.with_name("sample_attributes.jsonl")
STAMP = "qkv-sample.json"  # which catalog and model the cached index was built from


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qkv"


def ensure_sample_index(cache_dir: str | Path | None = None, *, model: str | None = None, encoder=None,
                        console=None) -> Path:
    """The sample index directory, built (with a progress bar) if absent or stale: a different
    sample catalog or model rebuilds it. ``encoder``, else ``model`` (default ``SAMPLE_MODEL``).
    Returns the directory."""
    from qkv.errors import InputError

    if not SAMPLE_CATALOG.is_file():
        raise InputError(f"the sample catalog is missing ({SAMPLE_CATALOG}); reinstall qkv")
    path = Path(cache_dir).expanduser() if cache_dir else default_cache_dir() / "sample-index"
    if encoder is None:
        from qkv.model import shared_encoder

        encoder = shared_encoder(model or SAMPLE_MODEL)
    from qkv.search.store import FORMAT_VERSION

    want = {"catalog_sha256": hashlib.sha256(SAMPLE_CATALOG.read_bytes()).hexdigest(),
            "model": encoder.name, "fingerprint": encoder.fingerprint(), "index_format": FORMAT_VERSION}
    stamp = path / STAMP
    if (path / "manifest.json").is_file() and stamp.is_file():
        try:
            if json.loads(stamp.read_text()) == want:
                return path
        except (OSError, ValueError):
            pass
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from qkv.search import build_index

    if (path / "manifest.json").is_file():
        # a stale sample index (another catalog, model or index format: an older format cannot
        # even be opened to rebuild it) is replaced; it is only ever this cache's own build
        import shutil

        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    with Progress(TextColumn("building the sample index"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task("embed", total=None)

        def progress(stage, done, total):  # qkv.progress: one stage, "embed"
            bar.update(task, completed=done, total=total)

        build_index(SAMPLE_CATALOG, path, encoder, progress=progress)
    stamp.write_text(json.dumps(want))
    return path


def sample_attribute_examples(limit: int | None = None):
    """The demo attribute model's labelled titles (``qkv/data/sample_attributes.jsonl``, written by
    ``qkv/data/make_sample_attributes.py``): brand, colour, size and material in English and Chinese
    titles, the first ``limit`` of them (both languages are interleaved)."""
    from qkv.attributes import read_jsonl

    out = read_jsonl(SAMPLE_ATTRIBUTES)
    return out[:limit] if limit else out


def ensure_sample_attribute_model(cache_dir: str | Path | None = None, *, encoder, console=None,
                                  limit: int | None = None, max_iter: int = 60) -> Path:
    """A demo attribute model (brand, colour, size, material, in English and Chinese) trained on
    ``sample_attribute_examples``, cached like the sample index; retrained when those titles, the
    model or the settings change. Training is deterministic (fixed PCA sample, L-BFGS from zeros)."""
    path = Path(cache_dir).expanduser() if cache_dir else default_cache_dir() / "sample-attributes"
    out = path / "sample.qkvattr"
    want = {"examples_sha256": hashlib.sha256(SAMPLE_ATTRIBUTES.read_bytes()).hexdigest(), "model": encoder.name,
            "fingerprint": encoder.fingerprint(), "limit": limit, "max_iter": max_iter}
    stamp = path / STAMP
    if out.is_file() and stamp.is_file():
        try:
            if json.loads(stamp.read_text()) == want:
                return out
        except (OSError, ValueError):
            pass
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from qkv.attributes import AttributeModel
    from qkv.model.threads import blas_threads

    examples = sample_attribute_examples(limit)
    path.mkdir(parents=True, exist_ok=True)
    with Progress(TextColumn("training the sample attribute model: {task.fields[stage]}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("train", total=None, stage="encode")

        def progress(stage, done, total):
            bar.update(task, completed=done, total=total, stage=stage)

        # One BLAS thread, as the encoder uses: the tagger's numeric work with two threads took
        # minutes instead of seconds on a busy 2-vCPU machine.
        with blas_threads(encoder.threads):
            model, _ = AttributeModel.train(examples, encoder, max_iter=max_iter, progress=progress)
    # the web page says so: a demo model, and how to train one's own
    model.info["demo"] = {"titles": len(examples), "data": f"qkv/data/{SAMPLE_ATTRIBUTES.name}"}
    model.save(out)
    stamp.write_text(json.dumps(want))
    return out
