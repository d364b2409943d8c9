"""The index of the project's own sample catalog (``qkv/data/sample_catalog.csv``), built once
into a cache directory so ``qkv serve --sample`` (and ``make run``) have something to search."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

SAMPLE_CATALOG = Path(__file__).resolve().parents[1] / "data" / "sample_catalog.csv"
STAMP = "qkv-sample.json"  # which catalog and model the cached index was built from


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qkv" / "sample-index"


def ensure_sample_index(cache_dir: str | Path | None = None, *, model: str | None = None, encoder=None,
                        console=None) -> Path:
    """The sample index directory, built (with a progress bar) if absent or stale: a different
    sample catalog or model rebuilds it. Returns the directory."""
    from qkv.errors import InputError

    if not SAMPLE_CATALOG.is_file():
        raise InputError(f"the sample catalog is missing ({SAMPLE_CATALOG}); reinstall qkv")
    path = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    if encoder is None:
        import qkv

        encoder = qkv.load(model)
    want = {"catalog_sha256": hashlib.sha256(SAMPLE_CATALOG.read_bytes()).hexdigest(),
            "model": encoder.name, "fingerprint": encoder.fingerprint()}
    stamp = path / STAMP
    if (path / "manifest.json").is_file() and stamp.is_file():
        try:
            if json.loads(stamp.read_text()) == want:
                return path
        except (OSError, ValueError):
            pass
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from qkv.search import build_index

    path.mkdir(parents=True, exist_ok=True)
    exists = (path / "manifest.json").is_file()
    with Progress(TextColumn("building the sample index"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as bar:
        task = bar.add_task("embed", total=None)

        def progress(done, total):
            bar.update(task, completed=done, total=total)

        build_index(SAMPLE_CATALOG, path, encoder, rebuild=exists, progress=progress)
    stamp.write_text(json.dumps(want))
    return path
