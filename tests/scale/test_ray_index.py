"""Indexing on a local Ray cluster started by the test (``ray.init(num_cpus=2)``): the vectors equal a
local encode, an interrupted run resumes from its shards, and a worker killed with SIGKILL mid-run is
replaced by Ray while every product still lands in the index exactly once."""

import csv
import os
import signal

import numpy as np
import pytest

from qkv.errors import InputError
from qkv.scale.ray_index import index_with_ray
from qkv.search import Index
from qkv.search.store import open_store

import ray  # the ray extra; missing it is a failure, not a skip


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


class Stop(Exception):
    pass


def _catalog(path, n, sample_catalog):
    """n products of our own: the sample titles with a running number (distinct ids and titles)."""
    src = list(csv.DictReader(open(sample_catalog, encoding="utf-8")))
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["id", "title", "price"])
        w.writeheader()
        for i in range(n):
            r = src[i % len(src)]
            w.writerow({"id": f"x{i:05d}", "title": f"{r['title']} #{i}", "price": r["price"]})
    return path


def test_interrupted_run_resumes_and_vectors_equal_local(tmp_path, local_ray, sample_catalog, encoder):
    cat = _catalog(tmp_path / "cat.csv", 200, sample_catalog)
    work = tmp_path / "shards"

    def stop_after_first(stage, done, total):
        if done:
            raise Stop()

    with pytest.raises(Stop):
        index_with_ray(cat, tmp_path / "idx", workers=1, encoder=encoder, block_rows=40, work_dir=work,
                       progress=stop_after_first)
    assert not (tmp_path / "idx").exists()  # nothing published by the failed run
    kept = len(list(work.glob("shard-*.npz")))
    assert kept >= 1
    rep = index_with_ray(cat, tmp_path / "idx", workers=1, encoder=encoder, block_rows=40, work_dir=work)
    assert rep.reused >= 40 and rep.reused + rep.embedded == rep.count == 200
    assert not work.exists()  # shards removed after a successful build
    st = open_store(tmp_path / "idx")
    ids = st.all_ids()
    assert sorted(ids) == [f"x{i:05d}" for i in range(200)]
    rows = st.get_rows(ids)
    local = encoder.encode([r["title"] for r in rows], precision=st.manifest.extra["precision"])
    np.testing.assert_allclose(st.get_vectors(ids), local, atol=1e-6)  # the Ray path gives the same vectors
    assert rows[0]["price"] is not None and st.manifest.fingerprint == encoder.fingerprint()
    with Index.open(tmp_path / "idx", encoder) as idx:  # and it is the same kind of index the local path builds
        assert idx.search("waterproof hiking boots", k=3, mode="hybrid")
    with pytest.raises(InputError, match="--rebuild"):
        index_with_ray(cat, tmp_path / "idx", workers=1, encoder=encoder)


def test_killed_worker_is_replaced_and_every_product_lands_once(tmp_path, local_ray, sample_catalog, encoder):
    cat = _catalog(tmp_path / "cat.csv", 400, sample_catalog)
    pids = tmp_path / "pids"
    killed = []

    def kill_a_worker(stage, done, total):
        if done and not killed:
            pid = int(sorted(pids.iterdir())[0].name)
            os.kill(pid, signal.SIGKILL)
            killed.append((pid, done, total))

    rep = index_with_ray(cat, tmp_path / "idx", workers=1, encoder=encoder, block_rows=20,
                         work_dir=tmp_path / "shards", progress=kill_a_worker, _pid_dir=pids)
    assert killed and killed[0][1] < 400  # killed mid-run, with batches still to go
    assert len(list(pids.iterdir())) >= 2  # Ray started a new worker process after the kill
    assert rep.count == 400
    st = open_store(tmp_path / "idx")
    ids = st.all_ids()
    assert len(ids) == len(set(ids)) == 400 and set(ids) == {f"x{i:05d}" for i in range(400)}
    pick = ids[::37]
    rows = st.get_rows(pick)
    # embedded as the build plan says (titles in bfloat16 where the CPU has a unit for it)
    precision = st.manifest.extra.get("precision", "float32")
    want = encoder.encode([r["title"] for r in rows], precision=precision)
    np.testing.assert_allclose(st.get_vectors(pick), want, atol=1e-6)


def test_too_many_workers_for_the_cluster_is_refused_not_hung(tmp_path, local_ray, sample_catalog, encoder):
    with pytest.raises(InputError, match="use --workers 1"):  # 2 actors + a reader on 2 CPUs would deadlock
        index_with_ray(sample_catalog, tmp_path / "i", workers=2, encoder=encoder)


def test_bad_arguments_are_refused(tmp_path, sample_catalog):
    with pytest.raises(InputError, match="workers"):
        index_with_ray(sample_catalog, tmp_path / "i", workers=0)
    with pytest.raises(InputError, match="no catalog file"):
        index_with_ray(tmp_path / "missing.csv", tmp_path / "i")
    with pytest.raises(InputError, match="no catalog file"):
        index_with_ray("s3://bucket/catalog.parquet", tmp_path / "i")


@pytest.mark.parametrize("model", [None, "minilm"])
def test_the_ray_build_is_the_local_build(tmp_path, local_ray, sample_catalog, encoder, model):
    """`qkv index --engine ray` builds what `qkv index` builds: one build path decides model,
    prefixes, precision and keyword scheme, so the manifests are equal but for the generation's
    name, the vectors are the local build's, and both answer a query alike. ``None``: the default
    model (the test's encoder stands in for it, as the CLI would load it)."""
    from typer.testing import CliRunner

    from qkv.cli import app

    cat = _catalog(tmp_path / "cat.csv", 120, sample_catalog)
    extra = ["--model", model] if model else []
    if model is None:  # the default model is the one the test suite loads as its encoder
        extra = ["--model", encoder.name]
    runner = CliRunner()
    for engine, where in (("local", "local"), ("ray", "ray")):
        r = runner.invoke(app, ["index", str(cat), "--index", str(tmp_path / where), "--engine", engine,
                                "--workers", "1", *extra])
        assert r.exit_code == 0, r.output
    local, distributed = open_store(tmp_path / "local"), open_store(tmp_path / "ray")

    def described(m):
        d = {k: v for k, v in m.__dict__.items() if k != "extra"}
        d["extra"] = {k: v for k, v in m.extra.items() if k not in ("generation", "created", "updated")}
        return d

    assert described(distributed.manifest) == described(local.manifest)
    ids = local.all_ids()
    assert sorted(distributed.all_ids()) == sorted(ids)
    np.testing.assert_allclose(distributed.get_vectors(ids), local.get_vectors(ids), atol=1e-6)
    with Index.open(tmp_path / "local", encoder) as a, Index.open(tmp_path / "ray", encoder) as b:
        for q in ("breathable running shoes", "waterproof hiking boots"):
            assert [r.id for r in a.search(q, k=5)] == [r.id for r in b.search(q, k=5)]


def test_a_term_weighted_index_is_not_rebuilt_plain_by_ray(encoder, small_csv, tmp_path):
    """The Ray engine writes plain keyword documents: it refuses, before starting Ray, to rebuild
    an index whose keyword side a term head weights (qkv.search.termweights)."""
    from qkv.explain.terms import Example, train
    from qkv.search import build_index
    from qkv.search.store import read_manifest

    head = train(encoder, [Example("Trail Running Shoes", (("running shoes", 2.0),)),
                           Example("Leather Chelsea Boots", (("chelsea boots", 1.0),))]).save(tmp_path / "h.npz")
    build_index(small_csv, tmp_path / "idx", encoder, term_weights=head)
    before = read_manifest(tmp_path / "idx")
    with pytest.raises(InputError, match="rebuild it with the local engine"):
        index_with_ray(small_csv, tmp_path / "idx", encoder=encoder, rebuild=True)
    assert read_manifest(tmp_path / "idx") == before
