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

    retry = asyncio.run(scenario())
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

    assert asyncio.run(scenario()) >= 7
    pool.shutdown()
