"""qkv.web.balance: the heavier of the workers closes a keep-alive connection after a search so
its client is placed anew; equal workers, stale ones and other paths never do."""

from __future__ import annotations

import multiprocessing as mp

import pytest
from fastapi.testclient import TestClient

from qkv.web import balance
from qkv.web.balance import Balancer


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _pair(clock):
    shared = mp.RawArray("d", 4)
    return Balancer(shared, 0, clock=clock), Balancer(shared, 1, clock=clock)


def test_the_heavier_worker_sheds_and_the_lighter_does_not():
    clock = Clock()
    a, b = _pair(clock)
    a.publish(28, 0.01)  # 280 ms of searches waiting
    b.publish(22, 0.01)  # 220 ms
    assert a.should_shed() and not b.should_shed()
    assert not a.should_shed()  # at most one close per GAP
    clock.t += 2 * balance.GAP
    assert a.should_shed()
    a.publish(25, 0.01)
    b.publish(25, 0.01)
    clock.t += 2 * balance.GAP
    assert not a.should_shed() and not b.should_shed()  # equal waits: no churn
    a.publish(26, 0.01)  # one job more: within SLACK
    assert not a.should_shed()
    assert a.sheds == 2 and b.sheds == 0


def test_a_slower_worker_with_as_many_connections_sheds():
    """Waits, not counts: 25 jobs of 14 ms against 25 of 10 ms (a worker sharing its core)."""
    clock = Clock()
    a, b = _pair(clock)
    a.publish(25, 0.014)
    b.publish(25, 0.010)
    assert a.should_shed() and not b.should_shed()


def test_a_silent_worker_is_not_compared_against():
    clock = Clock()
    a, b = _pair(clock)
    a.publish(30, 0.01)
    assert a.shared[3] == 0.0 and not a.should_shed()  # b never beat (not serving yet): nobody to compare
    b.publish(0, 0.01)  # idle and alive: the place to go
    clock.t += 2 * balance.GAP
    assert a.should_shed()
    clock.t += balance.STALE + 0.1  # b died: its last word (an empty queue) no longer counts
    a.publish(30, 0.01)
    assert not a.should_shed()
    b.beat()  # alive again (an idle worker beats from its event loop)
    assert a.should_shed()


def test_a_slot_outside_the_array_is_refused():
    with pytest.raises(ValueError, match="slot 2"):
        Balancer(mp.RawArray("d", 4), 2)


def test_the_app_closes_the_connection_only_after_searches_of_the_heavier_worker(encoder, sample_index):
    from qkv.web import create_app

    shared = mp.RawArray("d", 4)
    me = Balancer(shared, 0)
    other = Balancer(shared, 1)
    with TestClient(create_app(encoder=encoder, index_dir=sample_index, metrics=False, balancer=me)) as c:
        other.publish(0, 0.01)
        r = c.post("/api/search", json={"query": "boots", "k": 1})
        assert r.status_code == 200 and r.headers.get("connection") != "close"  # my queue was empty
        me.publish(40, 0.01)  # as if 40 searches were waiting here (the pool republishes on each change)
        me._last_shed = float("-inf")
        searches = c.app.state.qkv.pools["search"]
        searches.on_change = lambda *a: None  # hold the published wait for this check
        r = c.post("/api/search", json={"query": "boots", "k": 1})
        assert r.status_code == 200 and r.headers.get("connection") == "close"
        me._last_shed = float("-inf")
        assert c.get("/api/health").headers.get("connection") != "close"  # only searches
        assert me.sheds == 1


def test_the_search_pool_publishes_its_wait(encoder, sample_index):
    """Every change of the search queue is published (jobs × recent job time) with a heartbeat."""
    from qkv.web import create_app

    shared = mp.RawArray("d", 4)
    me = Balancer(shared, 0)
    with TestClient(create_app(encoder=encoder, index_dir=sample_index, balancer=me)) as c:
        assert shared[1] > 0  # the heartbeat started with the app
        searches = c.app.state.qkv.pools["search"]
        seen = []
        real = me.publish
        me.publish = lambda jobs, secs, threads=1: (seen.append(jobs), real(jobs, secs, threads))
        assert c.post("/api/search", json={"query": "boots", "k": 1}).status_code == 200
        assert 1 in seen and seen[-1] == 0  # submitted, then finished
        assert shared[0] == 0.0 and searches.job_seconds > 0
        # the metrics observer still sees the queue too (observers compose)
        assert "qkv_jobs_running" in c.get("/metrics").text
