"""Fair shares between the workers of one ``qkv serve --workers N``: a worker whose searches wait
longer than another's closes a keep-alive connection after answering, so that its client
reconnects and the kernel places the connection anew.

Why: the workers share the port with ``SO_REUSEPORT``, and the kernel places each *connection*
on a worker by a hash of its addresses, once. Clients that keep their connection (browsers, the
load check's 50 closed-loop clients) stay where they landed: 50 connections split 24/26 or 22/28
at random, and a worker that gets less CPU (it shares a core with another process) serves its
share more slowly. Measured on the 2-vCPU machine (50 clients, 15 s, load ~2): the 24 clients of
one worker saw 169 ms on average, the 26 of the other 242 ms; the search-only p99 is the slow
worker's. Each worker answers its own requests in order (FIFO), so balancing the *expected
wait* between workers balances everyone's latency.

How: every worker publishes, in a small shared array, its search queue's expected wait (jobs in
the pool × recent job seconds ÷ threads) and a heartbeat (its generation watcher beats every
0.5 s, so an idle worker is seen as idle, and a dead one is ignored after ``STALE`` seconds).
After a search, a worker whose wait exceeds the lightest live worker's by both ``RATIO`` and
``SLACK`` jobs answers with ``Connection: close``, at most once per ``GAP`` seconds. The client
reconnects (on loopback, well under a millisecond); the kernel puts the new connection on any
worker, so the heavier one loses connections until the waits agree. Servers that spread
long-lived connections do the like: gRPC's MAX_CONNECTION_AGE (proposal A9, "server-side
connection management") and Envoy's max_requests_per_connection close connections so clients
re-balance; here the close is chosen by measured load instead of age.
"""

from __future__ import annotations

import time

RATIO = 1.15  # shed when my expected wait > RATIO × the lightest live worker's ...
SLACK = 2.0  # ... and more than SLACK of my recent jobs beyond it (no churn on near-equal queues)
GAP = 0.05  # seconds between two closes by one worker (at most 20 a second)
STALE = 2.0  # a worker silent this long (dead, restarting, not yet serving) is not compared against


class Balancer:
    """One worker's view of the shared array: slot ``2·i`` its expected wait (seconds), slot
    ``2·i+1`` its last heartbeat (``time.monotonic()``, one clock for all processes on Linux).
    ``shared``: a ``multiprocessing.RawArray('d', 2 × workers)`` (single writer per slot, so no
    lock: a reader may see a value one update old)."""

    def __init__(self, shared, slot: int, clock=time.monotonic):
        if not 0 <= slot < len(shared) // 2:
            raise ValueError(f"slot {slot} is outside the {len(shared) // 2} workers of the shared array")
        self.shared = shared
        self.slot = slot
        self.clock = clock
        self.workers = len(shared) // 2
        self._last_shed = float("-inf")
        self._job = 0.0  # my recent job seconds, for SLACK
        self.sheds = 0

    def publish(self, jobs: int, job_seconds: float, threads: int = 1) -> None:
        """This worker's search queue now: ``jobs`` running or waiting, ``job_seconds`` each."""
        self._job = job_seconds
        self.shared[2 * self.slot] = jobs * job_seconds / max(1, threads)
        self.shared[2 * self.slot + 1] = self.clock()

    def beat(self) -> None:
        self.shared[2 * self.slot + 1] = self.clock()

    def should_shed(self) -> bool:
        """True when this worker should close the connection it has just answered."""
        now = self.clock()
        if now - self._last_shed < GAP:
            return False
        mine = self.shared[2 * self.slot]
        others = [self.shared[2 * j] for j in range(self.workers)
                  if j != self.slot and now - self.shared[2 * j + 1] <= STALE]
        if not others:
            return False
        lightest = min(others)
        if mine > RATIO * lightest and mine - lightest > SLACK * self._job:
            self._last_shed = now
            self.sheds += 1
            return True
        return False


class Rebalance:
    """Pure ASGI middleware: after a search (``paths``), ``Connection: close`` when the balancer
    says this worker is the heavier (uvicorn then closes the connection once the answer is sent)."""

    def __init__(self, app, balancer: Balancer, paths=("/api/search",)):
        self.app = app
        self.balancer = balancer
        self.paths = frozenset(paths)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") not in self.paths:
            return await self.app(scope, receive, send)

        async def closing_send(message):
            if message["type"] == "http.response.start" and self.balancer.should_shed():
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, closing_send)
