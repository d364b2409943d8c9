"""Distributed indexing on Ray: the catalog is read as a Ray Dataset, titles are embedded by
``map_batches`` on a pool of actors (each loads the encoder once and uses one BLAS thread), the
driver writes each finished batch as an embedding *shard*, and when every product has a vector the
same index the local path builds is written (embedded faiss + SQLite, or Milvus with ``store=URI``).

Resumable: a shard is a small ``.npz`` (ids, title hashes, float32 vectors) written atomically
(temporary file + ``os.replace``) under ``work_dir`` (default ``INDEX.ray-shards``). A later run
reads the shards, skips every (id, title) already embedded and embeds only the rest. A worker that
dies mid-batch is restarted by Ray and its batch retried (``max_restarts``/``max_task_retries``);
products are keyed by id + title hash when the shards are assembled, so each product is written
to the index exactly once even if a retried batch produced a duplicate shard.

The embedding (the expensive part: ~150 titles/s per core here) runs on the cluster; the driver
reads the catalog a second time to get the cleaned rows and fields (``qkv.search.catalog``), so the
catalog must be a local path (or a path every node and the driver see, e.g. a shared mount).

    from qkv.scale import index_with_ray
    report = index_with_ray("catalog.parquet", "my-index", workers=2)      # local Ray, 2 actors
    report = index_with_ray("catalog.csv", "idx", address="ray://head:10001", store="http://milvus:19530")
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qkv.errors import InputError, ModelError
from qkv.progress import Count, Progress
from qkv.search.build import open_target, plan_build, prefixed, write_rows
from qkv.search import termweights
from qkv.search.catalog import _sniff_format, read_catalog
from qkv.search.store import read_manifest, title_hash

SHARD_FORMAT = "qkv-ray-shards"


@dataclass
class RayIndexReport:
    path: str
    count: int = 0  # products in the index afterwards
    embedded: int = 0  # titles embedded by this run
    reused: int = 0  # titles found in shards of an earlier (interrupted) run
    shards: int = 0
    workers: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0  # wall time of the Ray pipeline (start-up included)
    ray_start_seconds: float = 0.0
    catalog: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return dict(self.__dict__)


class _Embedder:
    """One Ray actor: loads the encoder once (one BLAS thread), embeds the batches it is given."""

    def __init__(self, model, id_col, title_col, done, batch_size, pid_dir, precision="float32", prefix=""):
        from qkv.model import shared_encoder
        from qkv.model.threads import WORKER_THREADS, set_default_threads

        set_default_threads(WORKER_THREADS)  # one core per actor, for whatever the actor starts too
        self.enc = shared_encoder(model, threads=WORKER_THREADS)
        self.fp = self.enc.fingerprint()
        self.id_col, self.title_col, self.batch_size = id_col, title_col, batch_size
        self.precision, self.prefix = precision, prefix  # the build plan's (qkv.search.build.plan_build)
        self.done = done  # frozenset of "id\thash" already in shards
        if pid_dir:  # which processes embed (operators watch them; the kill test uses it)
            Path(pid_dir).mkdir(parents=True, exist_ok=True)
            (Path(pid_dir) / str(os.getpid())).touch()

    def __call__(self, batch: dict) -> dict:
        ids, hashes, titles = [], [], []
        for pid, t in zip(batch[self.id_col], batch[self.title_col]):
            pid = "" if pid is None else str(pid).strip()
            t = "" if t is None else str(t).strip()
            if not pid or not t:
                continue
            h = title_hash(t)
            if f"{pid}\t{h}" in self.done:
                continue
            ids.append(pid)
            hashes.append(h)
            titles.append(t)
        dim = self.enc.dim
        # titles as passages with the prefix the manifest records, in the precision the plan chose
        vecs = (self.enc.encode([self.prefix + t for t in titles], batch_size=self.batch_size,
                                precision=self.precision) if titles
                else np.zeros((0, dim), np.float32))
        return {"id": np.asarray(ids, dtype=object), "title_hash": np.asarray(hashes, dtype=object),
                "vector": np.asarray(vecs, dtype=np.float32).reshape(len(ids), dim),
                "fingerprint": np.asarray([self.fp] * len(ids), dtype=object)}


def _read_dataset(ray_data, path: Path, fmt: str, id_col: str, title_col: str):
    cols = [id_col, title_col]
    if fmt == "parquet":
        return ray_data.read_parquet(str(path), columns=cols)
    if fmt in ("csv", "tsv"):
        import pyarrow as pa
        from pyarrow import csv as pacsv

        return ray_data.read_csv(
            str(path), parse_options=pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ","),
            convert_options=pacsv.ConvertOptions(column_types={c: pa.string() for c in cols}, include_columns=cols))
    if fmt == "jsonl":
        return ray_data.read_json(str(path), lines=True).select_columns(cols)
    raise InputError(f"the Ray engine reads csv, tsv, jsonl and parquet catalogs, not {fmt!r}")


def _load_shards(work: Path) -> dict[str, tuple[str, np.ndarray]]:
    """{"id\\thash": vector} from every complete shard (temporary files are ignored)."""
    out: dict[str, np.ndarray] = {}
    for f in sorted(work.glob("shard-*.npz")):
        with np.load(f, allow_pickle=False) as z:
            for pid, h, v in zip(z["ids"], z["hashes"], z["vectors"]):
                out.setdefault(f"{pid}\t{h}", v)
    return out


def _write_shard(work: Path, ids, hashes, vecs) -> Path:
    key = hashlib.blake2b("\n".join(f"{i}\t{h}" for i, h in zip(ids, hashes)).encode(), digest_size=8).hexdigest()
    final = work / f"shard-{key}.npz"
    tmp = work / f".tmp-{key}-{os.getpid()}.npz"
    np.savez(tmp, ids=np.asarray(ids, dtype=str), hashes=np.asarray(hashes, dtype=str),
             vectors=np.asarray(vecs, dtype=np.float32))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    return final


def _check_work_dir(work: Path, model: str, fingerprint: str, precision: str) -> None:
    meta = work / "shards.json"
    want = {"format": SHARD_FORMAT, "model": model, "fingerprint": fingerprint, "precision": precision}
    if meta.is_file():
        try:
            have = json.loads(meta.read_text())
        except (OSError, json.JSONDecodeError):
            have = {}
        if have != want:
            raise InputError(f"{work} holds embedding shards of another model, precision or format ({have.get('model')}, "
                             f"{have.get('fingerprint')}, {have.get('precision')}); remove it or pass another --work-dir")
    else:
        work.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps(want))


def start_ray(address: str | None, workers: int):
    """Connect to ``address`` (``auto``, ``ray://HOST:10001``) or start a local Ray with one CPU per
    worker plus one for reading (an actor pool holding every CPU would starve the read tasks)."""
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the install
        raise InputError("the Ray engine needs ray: pip install 'qkv[ray]'") from None
    if ray.is_initialized():
        cpus = ray.cluster_resources().get("CPU", 0)
        if not address and cpus < workers + 1:  # the read tasks would wait forever behind the actors
            raise InputError(f"the running Ray has {cpus:g} CPUs; {workers} embedding actors need {workers + 1} "
                             f"(one each, plus one for reading the catalog): use --workers {max(1, int(cpus) - 1)}")
        return ray, False
    kw = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if address:
        ray.init(address=address, **kw)
    else:
        ray.init(num_cpus=workers + 1, **kw)
    return ray, True


def index_with_ray(catalog, index_dir, *, address: str | None = None, workers: int = 2, model: str | None = None,
                   encoder=None, store: str | None = None, rebuild: bool = False, batch_size: int = 64,
                   block_rows: int = 512, work_dir=None, keep_shards: bool = False, id_column: str | None = None,
                   title_column: str | None = None, fmt: str | None = None, ann: str = "auto", dtype: str = "float32",
                   progress: Progress | None = None, _pid_dir=None) -> RayIndexReport:
    """Build the index at ``index_dir`` from ``catalog`` with the embedding done on Ray (module
    docstring). ``store``: a Milvus URI to keep the data in Milvus; ``rebuild``: replace an existing
    index; ``progress`` (``qkv.progress``) counts stage "embed" in titles, after each shard.
    Returns a ``RayIndexReport``."""
    t0 = time.perf_counter()
    if not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers must be a whole number ≥ 1, got {workers!r}")
    if block_rows < 1 or batch_size < 1:
        raise InputError("block_rows and batch_size must be ≥ 1")
    path = Path(index_dir)
    if (path / "manifest.json").is_file() and not rebuild:
        raise InputError(f"{path} already holds an index; pass --rebuild to replace it (the Ray engine builds whole indexes)")
    src = Path(str(catalog))
    if "://" in str(catalog) or not src.is_file():
        raise InputError(f"no catalog file at {catalog}; the Ray engine needs a catalog path the driver can read "
                         "(a local file or a shared mount)")
    fmt = _sniff_format(src, fmt)
    cat = read_catalog(src, id_column=id_column, title_column=title_column, fmt=fmt)
    # model, prefixes, precision and keyword scheme as `qkv index` decides them (one build path)
    if (path / "manifest.json").is_file() and termweights.recorded(read_manifest(path).extra) is not None:
        raise InputError(f"the index at {path} weights its keyword side with a term head (--term-weights); the Ray "
                         "engine writes plain keyword documents: rebuild it with the local engine")
    plan = plan_build(path, encoder, model=model, rebuild=rebuild, dtype=dtype, ann=ann,
                      backend="milvus" if store else "embedded", term_weights=termweights.OFF)
    enc, model_name = plan.encoder, plan.manifest.model
    prefix = prefixed(plan.manifest, [""], "passage")[0]
    work = Path(work_dir) if work_dir else path.with_name(path.name + ".ray-shards")
    fp = enc.fingerprint()
    _check_work_dir(work, model_name, fp, plan.precision)
    report = RayIndexReport(str(path), workers=workers, catalog=cat.summary())

    done = _load_shards(work)
    want = {f"{r['id']}\t{title_hash(r['title'])}" for r in cat.rows}
    report.reused = len(want & done.keys())
    todo = len(want) - report.reused
    if todo:
        ts = time.perf_counter()
        ray, started = start_ray(address, workers)
        report.ray_start_seconds = time.perf_counter() - ts
        try:
            te = time.perf_counter()
            ds = _read_dataset(ray.data, src, fmt, cat.id_column, cat.title_column)
            ds = ds.map_batches(
                _Embedder, fn_constructor_args=(model_name, cat.id_column, cat.title_column,
                                                frozenset(done) & frozenset(want), batch_size,
                                                str(_pid_dir) if _pid_dir else None, plan.precision, prefix),
                batch_size=block_rows, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=1)  # Ray Data's actor pools restart dead actors and retry their batches by default
                             # (max_restarts=-1, max_task_retries=-1); the kill test relies on that
            count = Count(progress, "embed", todo)
            for b in ds.iter_batches(batch_size=None, batch_format="numpy"):
                if not len(b["id"]):
                    continue
                fps = set(map(str, b["fingerprint"]))
                if fps != {fp}:  # a node with other weights under the same model name
                    raise ModelError(f"a Ray worker embedded with model weights {sorted(fps)} instead of {fp} "
                                     f"({model_name}); install the same model on every node")
                _write_shard(work, b["id"], b["title_hash"], b["vector"])
                report.shards += 1
                count.set(min(count.done + len(b["id"]), todo))
            report.embed_seconds = time.perf_counter() - te
        finally:
            if started:
                ray.shutdown()
        done = _load_shards(work)
    missing = want - done.keys()
    if missing:
        raise InputError(f"{len(missing)} products got no vector from the Ray run (e.g. {sorted(missing)[0]!r}); "
                         "run again to embed the rest (finished shards are kept)")
    report.embedded = todo
    report.count = _write_index(path, cat, done, plan.manifest, store)
    if not keep_shards:
        shutil.rmtree(work, ignore_errors=True)
    report.seconds = time.perf_counter() - t0
    return report


def _write_index(path: Path, cat, vectors: dict, made, store) -> int:
    """The same index the local path builds (``qkv.search.build``'s write half), from the vectors
    the shards hold; an existing index is replaced atomically when the writer block succeeds."""
    if store and (path / "manifest.json").is_file():
        raise InputError(f"{path} already exists; --store creates a new Milvus-backed index, choose a new --index")
    backend = "milvus" if store else "embedded"
    st = open_target(path, lambda: made, rebuild=True, backend=backend, **({"uri": store} if store else {}))

    def from_shards(rows):
        for a in range(0, len(rows), 4096):
            yield np.stack([vectors[f"{r['id']}\t{title_hash(r['title'])}"] for r in rows[a:a + 4096]])

    try:
        with st.writer(reset=True, manifest=made) as w:
            write_rows(w, cat.rows, from_shards, reuse=False)
    finally:
        st.close()
    return read_manifest(path).count
