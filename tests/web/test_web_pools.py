"""qkv.web.pools on its own: Retry-After estimates, and (in child processes) a crashed child replaced."""

from __future__ import annotations

import asyncio
import threading

import pytest

from qkv.web.pools import Busy, Pool, PoolSpec, _BlasGate


class Clock:
    """A clock the test moves: job times without waiting for them."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _run(coroutine):
    """``asyncio.run`` in a thread of its own (the browser tests' Playwright keeps an event loop
    running in the main thread for the session)."""
    out = {}

    def main():
        try:
            out["value"] = asyncio.run(coroutine)
        except BaseException as e:  # noqa: BLE001 - raised again in the test's thread
            out["error"] = e

    t = threading.Thread(target=main)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _pool(threads=1, queue=1):
    pool = Pool("summary", PoolSpec(threads=threads, queue=queue, deadline=60.0), _BlasGate(lambda: 1), state=object())
    pool._clock = Clock()
    return pool


def test_retry_after_counts_the_running_jobs_time_before_any_finished():
    """The first jobs are still running after 7 s: a refused request is told to wait at least that
    long, not the 1 s a seed estimate would give."""
    pool = _pool()
    release = threading.Event()

    async def scenario():
        running = asyncio.ensure_future(pool.run(lambda st: release.wait(30)))
        waiting = asyncio.ensure_future(pool.run(lambda st: None))
        await asyncio.sleep(0.05)
        pool._clock.now += 7.0
        with pytest.raises(Busy) as refused:
            await pool.run(lambda st: None)
        release.set()
        await asyncio.gather(running, waiting)
        return refused.value.retry_after

    retry = _run(scenario())
    assert retry >= 14  # the running job's 7 s so far, and the waiting one's as long again
    pool.shutdown()


def test_retry_after_starts_from_the_first_measured_job_time():
    pool = _pool()

    def seven_seconds(st):
        pool._clock.now += 7.0

    async def scenario():
        await pool.run(seven_seconds)
        assert pool.job_seconds == pytest.approx(7.0)
        return pool.retry_after()

    assert _run(scenario()) >= 7
    pool.shutdown()


# ---------------------------------------------------------------- a child process that dies
class LightState:
    """What a pool child builds its state from, without a model (spawned children import this module)."""

    def __init__(self, pools=None, **config):
        self.encoder = None

    def _blas_threads(self) -> int:
        return 1


def _square(st, x):
    return x * x


def _die(st, gate_file):
    """Killed mid-job: waits until the test says so (the job is running), then the process exits
    as an out-of-memory kill would end it."""
    import os
    import time

    while not os.path.exists(gate_file):
        time.sleep(0.01)
    os._exit(137)


def test_a_crashed_child_is_replaced_and_only_its_jobs_fail(tmp_path):
    from qkv.web.observe import Metrics
    from qkv.web.pools import ChildCrashed

    spec = PoolSpec(threads=1, queue=4, deadline=120.0, process=True)
    from qkv.web.pools import Children

    pool = Pool("summary", spec, _BlasGate(lambda: 1), state=LightState(), children=Children(1, LightState, {}, 0))
    meter = Metrics()
    pool.on_restart = meter.pool_restarted
    gate = tmp_path / "die-now"

    async def scenario():
        assert await pool.run(_square, 3) == 9  # the child is up
        dying = asyncio.ensure_future(pool.run(_die, str(gate)))
        await asyncio.sleep(0.5)
        gate.write_text("")  # the child dies while running the job
        with pytest.raises(ChildCrashed, match="restarted"):
            await dying
        # later jobs run in the new child
        return [await pool.run(_square, x) for x in (4, 5)]

    try:
        assert _run(scenario()) == [16, 25]
        assert pool.restarts == 1
        assert 'qkv_pool_restarts_total{kind="summary"} 1.0' in meter.exposition().decode()
    finally:
        pool.shutdown()
        pool._children.shutdown()


def test_heavy_processes_are_sized_by_cores_and_memory():
    from qkv.web.pools import CHILD_MB, heavy_processes

    plenty = 64 * 1024
    assert heavy_processes(workers=2, cores=2, memory_mb=plenty) == 1  # one core per worker: one child each
    assert heavy_processes(workers=1, cores=2, memory_mb=plenty) == 2
    assert heavy_processes(workers=2, cores=16, memory_mb=plenty) == 3  # at most one per heavy kind
    assert heavy_processes(workers=1, cores=16, memory_mb=4 * CHILD_MB) == 2  # half of the memory at most
    assert heavy_processes(workers=4, cores=16, memory_mb=100) == 1  # never none


def test_the_heavy_kinds_share_their_child_processes():
    from qkv.web.pools import Pools

    pools = Pools(state=LightState(), child={}, heavy_workers=2)
    try:
        heavy = [pools[k] for k in ("attention", "summary", "attributes")]
        assert all(p.in_process for p in heavy) and not pools["search"].in_process
        assert {id(p._children) for p in heavy} == {id(pools.children)} and pools.children.processes == 2

        async def scenario():
            return [await pools[k].run(_square, x) for k, x in (("attention", 2), ("summary", 3), ("attributes", 4))]

        assert _run(scenario()) == [4, 9, 16]
        assert 1 <= len(pools.children.executor._processes) <= 2  # at most heavy_workers, not one per kind
    finally:
        pools.shutdown()
    with pytest.raises(ValueError, match="at least 1"):
        Pools(state=LightState(), child={}, heavy_workers=0)


def test_metrics_report_the_servers_memory():
    import re

    from qkv.web.observe import Metrics
    from qkv.web.memory import memory

    text = Metrics().exposition().decode()
    got = {m[0]: float(m[1]) for m in re.findall(r'qkv_memory_pss_bytes\{role="(\w+)"\} (\S+)', text)}
    own = memory()["pss"] * 1024 * 1024
    assert set(got) == {"server", "workers", "heavy", "all"}
    assert got["all"] == pytest.approx(sum(v for k, v in got.items() if k != "all"))
    assert 0.5 * own < got["server"] and got["all"] >= got["server"]  # this process, measured as the server
    assert 'qkv_memory_processes{role="all"}' in text
