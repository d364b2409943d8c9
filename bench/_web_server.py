"""The served side of bench/web.py: a ``qkv serve`` process on a free loopback port, its workers'
process tree, CPU time and memory, and a light HTTP/1.1 client (one keep-alive connection per
asyncio client) — what the load runs measure through."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# ---------------------------------------------------------------------- server
def start_server(port: int, index_dir: Path, attributes: Path | None, workers: int, log: Path, model: str,
                 glossary: Path | None) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", "from qkv.cli import main; main()", "serve", "--index", str(index_dir),
           "--port", str(port), "--workers", str(workers), "--model", model]
    if attributes:
        cmd += ["--attributes", str(attributes)]
    if glossary:
        cmd += ["--glossary", str(glossary)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, text=True)


async def wait_ready(base: str, proc: subprocess.Popen, log: Path, limit: float = 600) -> None:
    host, port = base.rsplit("//", 1)[1].split(":")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited early:\n{log.read_text()[-3000:]}")
        c = Conn(host, int(port), 10)
        try:
            if (await c.post("/api/search", {"query": "ready", "k": 1}))[0] == 200:
                return
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            c.close()
        await asyncio.sleep(0.5)
    raise SystemExit("the server did not become ready in time")


def _direct_children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(x) for x in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def _descendants(pid: int) -> list[int]:
    out = _direct_children(pid)
    return out + [d for c in out for d in _descendants(c)]


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for p in pids:
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total


def wait_settled(server_pid: int, limit: float = 180, idle: float = 0.15) -> float:
    """Wait until the server's processes (workers and their heavy-pool children, which load their
    own model after the workers answer: six loads of multilingual-e5-small on two cores) use less
    than ``idle`` of a core over 2 s, so that no scenario is timed against start-up work. Returns
    the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        pids = [server_pid, *_descendants(server_pid)]
        a = _cpu_seconds(pids)
        time.sleep(2)
        if _cpu_seconds(pids) - a < 2 * idle:
            break
    return time.monotonic() - t0


def _children(pid: int) -> list[int]:
    kids = []
    for p in _direct_children(pid):  # processes started by multiprocessing (forked or spawned), not its resource tracker
        try:
            if b"resource_tracker" not in Path(f"/proc/{p}/cmdline").read_bytes():
                kids.append(p)
        except OSError:
            pass
    return kids


def worker_memory(server_pid: int) -> list[dict]:
    """Per worker: its RSS / PSS / private MB, and the private MB of its child processes (the
    heavy kinds' pools, each with its own model)."""
    from qkv.web.memory import memory

    out = []
    for w in _children(server_pid) or [server_pid]:
        kids = [memory(k) for k in _children(w)]
        out.append({"pid": w, **memory(w), "children": len(kids), "children_private": round(sum(k.get("private", 0) for k in kids), 1)})
    return out


# ---------------------------------------------------------------------- a light HTTP/1.1 client
class Conn:
    """One keep-alive HTTP/1.1 connection speaking just what the load needs (POST JSON, read a
    Content-Length body). The clients share the machine with the server, so the load generator
    must cost little: this is several times cheaper per request than httpx, as wrk-style load
    generators are. The answer's status, headers and JSON body come back."""

    def __init__(self, host: str, port: int, timeout: float):
        self.host, self.port, self.timeout = host, port, timeout
        self.reader = self.writer = None

    async def post(self, path: str, body: dict) -> tuple[int, dict, bytes]:
        import json as _json

        data = _json.dumps(body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()
        for attempt in (0, 1):  # a kept-alive connection the server closed: reconnect once
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            try:
                self.writer.write(head + data)
                return await asyncio.wait_for(self._answer(), self.timeout)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _answer(self) -> tuple[int, dict, bytes]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
        body = await self.reader.readexactly(int(headers.get("content-length", 0)))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None
