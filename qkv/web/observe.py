"""What the server tells its operator, and who may call it: Prometheus metrics (``GET /metrics``),
one structured access-log line per request, and the API key required off loopback.

Metrics use ``prometheus_client`` (the Prometheus project's own Python client). Under
``qkv serve --workers N`` every worker process writes its values to files in
``PROMETHEUS_MULTIPROC_DIR`` (set by ``qkv serve``) and ``/metrics``, whichever worker answers it,
adds up all of them (the client's multiprocess mode); in one process the app's own registry is
exposed.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import time

KIND_OF_PATH = {  # endpoint → kind of work (qkv.web.pools.KINDS); everything else is "meta"
    "/api/search": "search", "/api/search/fields": "search", "/api/search/explain": "explain",
    "/api/attention": "attention", "/api/rollout": "attention", "/api/neuron": "attention", "/api/tour": "attention",
    "/api/summarize": "summary", "/api/summarize/upload": "summary", "/api/attributes": "attributes",
}
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

access_log = logging.getLogger("qkv.web.access")


def kind_of(path: str) -> str:
    return KIND_OF_PATH.get(path, "meta")


class Metrics:
    """The server's metrics, registered in a registry of their own (several apps may live in one
    test process)."""

    def __init__(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("qkv_requests", "HTTP requests answered, by kind of endpoint and status",
                                ["kind", "status"], registry=r)
        self.latency = Histogram("qkv_request_seconds", "Time from request to response, by kind of endpoint",
                                 ["kind"], buckets=LATENCY_BUCKETS, registry=r)
        self.queue = Gauge("qkv_queue_depth", "Jobs waiting in the pool of each kind", ["kind"], registry=r,
                           multiprocess_mode="livesum")
        self.running = Gauge("qkv_jobs_running", "Jobs running in the pool of each kind", ["kind"], registry=r,
                             multiprocess_mode="livesum")
        self.generation = Gauge("qkv_index_generation", "Index generation number each worker serves", registry=r,
                                multiprocess_mode="liveall")
        self.swaps = Counter("qkv_index_generation_swaps", "New index generations picked up while serving",
                             registry=r)
        self.model = Gauge("qkv_model_info", "The encoder this server runs (value 1)", ["model", "fingerprint"],
                           registry=r, multiprocess_mode="max")

        self.restarts = Counter("qkv_pool_restarts", "Child processes of a pool that died and were replaced",
                                ["kind"], registry=r)

    def pool_restarted(self, kind: str) -> None:
        self.restarts.labels(kind).inc()

    def pool_changed(self, kind: str, waiting: int, running: int) -> None:
        self.queue.labels(kind).set(waiting)
        self.running.labels(kind).set(running)

    def set_generation(self, generation: str | None) -> None:
        digits = "".join(c for c in (generation or "") if c.isdigit())
        self.generation.set(int(digits) if digits else -1)

    def exposition(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest

        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        else:
            registry = CollectorRegistry()
            registry.register(_Registered(self.registry))
        registry.register(ServerMemory())
        return generate_latest(registry)


class _Registered:
    """The metrics of another registry, collected into a fresh one."""

    def __init__(self, registry):
        self._registry = registry

    def collect(self):
        return self._registry.collect()


class ServerMemory:
    """A Prometheus collector of the whole server's memory, read when scraped: the proportional
    set size summed over its processes (the ``qkv serve`` parent, its workers, their heavy-work
    children; ``qkv.web.memory.server_memory``) and their count. PSS divides each shared page
    among the processes that map it, so the sum is what the server costs the machine."""

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        from qkv.web.memory import server_memory

        mem = server_memory()
        pss = GaugeMetricFamily("qkv_memory_pss_bytes", "Proportional set size of the server, summed over its "
                                "processes (shared pages divided among the processes mapping them)", labels=["role"])
        count = GaugeMetricFamily("qkv_memory_processes", "Processes of the server, by role", labels=["role"])
        for role, (mb, n) in mem.items():
            pss.add_metric([role], mb * 1024 * 1024)
            count.add_metric([role], n)
        yield pss
        yield count


class AccessLog:
    """Pure ASGI middleware (outermost): one JSON line per HTTP request on the ``qkv.web.access``
    logger — time, worker pid, client, method, path, kind, status, bytes out, milliseconds — and
    the request counters and latency histogram."""

    def __init__(self, app, metrics: Metrics | None):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = 500
        size = 0

        async def watching_send(message):
            nonlocal status, size
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                size += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, watching_send)
        finally:
            seconds = time.perf_counter() - t0
            path = scope.get("path", "")
            kind = kind_of(path)
            if self.metrics is not None and path != "/metrics":
                self.metrics.requests.labels(kind, str(status)).inc()
                self.metrics.latency.labels(kind).observe(seconds)
            if access_log.isEnabledFor(logging.INFO):
                client = scope.get("client") or ("", 0)
                access_log.info(json.dumps({
                    "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z",
                    "pid": os.getpid(), "client": client[0], "method": scope.get("method"), "path": path,
                    "kind": kind, "status": status, "bytes": size, "ms": round(seconds * 1000, 2)}))


LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ApiKey:
    """Pure ASGI middleware: every ``/api/`` and ``/metrics`` request must carry the key, as
    ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``, compared in constant time
    (``hmac.compare_digest``); otherwise 401. The page and its static files stay public (the page
    asks for the key when the API refuses it); CORS preflights pass (they carry no credentials)."""

    def __init__(self, app, key: str):
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") == "OPTIONS" or not (
                scope.get("path", "").startswith("/api/") or scope.get("path") == "/metrics"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"x-api-key")
        auth = headers.get(b"authorization", b"")
        if given is None and auth[:7].lower() == b"bearer ":
            given = auth[7:].strip()
        if given is not None and hmac.compare_digest(given, self.key):
            return await self.app(scope, receive, send)
        message = ("this server needs an API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'"
                   if given is None else "the API key is wrong")
        body = json.dumps({"error": message}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="qkv"')]})
        await send({"type": "http.response.body", "body": body})
