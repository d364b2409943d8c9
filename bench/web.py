"""Web load check: many concurrent clients on loopback against the search and attention endpoints.

    .venv/bin/python bench/web.py                        # 50 clients, 30 s, sample catalog
    .venv/bin/python bench/web.py --clients 20 --seconds 10

Starts ``qkv serve --sample`` (the project's own sample catalog, cached in /tmp/qkv-cache/web-bench)
in a separate process on a free 127.0.0.1 port, so the clients and the server do not share a
Python interpreter. First a reference: one client, requests one after another, for a few seconds.
Then ``--clients`` asyncio clients (httpx, one shared connection pool) each send requests back to
back for ``--seconds``, alternating POST /api/search (hybrid, no match grid, k=10; queries drawn
from a list) and POST /api/attention (one head of one layer; texts drawn from a list, more than the
server's trace cache holds, so some requests run the model and some are cache hits). Bounded in
time (the run stops at the deadline; each request times out after ``--timeout`` s) and in count
(``--max-requests``). Reports throughput, p50/p99 latency per endpoint and every error (target: 0).
Needs no data from ../shared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERIES = ["waterproof hiking boots", "running shoes for men", "wool sweater", "non-stick frying pan",
           "wireless headphones", "kids sneakers", "down jacket hooded", "silk scarf", "chef knife",
           "防水登山靴", "跑鞋", "memory foam slippers", "cotton t-shirt", "leather boots", "ski leggings",
           "electric kettle", "bluetooth speaker", "camping tent", "desk lamp", "building blocks"]
TEXTS = ["Nike Air Max 270 Men's Running Shoes", "Waterproof Hiking Boots with Ankle Support",
         "Merino Wool Crew Neck Sweater, Navy", "Non-Stick Frying Pan 28 cm with Lid",
         "Wireless Noise Cancelling Headphones", "Kids' Slip-On Canvas Sneakers EU 30",
         "Packable Down Jacket, Hooded, Windproof", "Silk Scarf with Floral Print",
         "男士透气网面跑鞋 轻便运动鞋", "Memory Foam House Slippers, Non-Slip Sole",
         "Organic Cotton T-Shirt, Regular Fit", "Leather Chelsea Boots for Men",
         "Thermal Base Layer Leggings for Skiing", "Stainless Steel Electric Kettle 1.7 L"]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(port: int, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # qkv.cli has no __main__: call its console entry point.
    cmd = [sys.executable, "-c", "from qkv.cli import main; main()", "serve", "--sample", "--cache-dir", str(cache),
           "--port", str(port)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


async def wait_ready(base: str, proc: subprocess.Popen, limit: float = 900) -> None:
    import httpx

    deadline = time.monotonic() + limit
    async with httpx.AsyncClient() as c:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited early:\n{proc.stdout.read()}")
            try:
                if (await c.get(base + "/api/health", timeout=2)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.5)
    raise SystemExit("the server did not become ready in time")


def request_for(i: int, rng: random.Random) -> tuple[str, str, dict]:
    if i % 2 == 0:
        return "search", "/api/search", {"query": rng.choice(QUERIES), "mode": "hybrid", "k": 10, "explain": False}
    return "attention", "/api/attention", {"text": rng.choice(TEXTS), "layer": rng.randrange(6), "head": rng.randrange(12)}


async def load(base: str, clients: int, seconds: float, timeout: float, max_requests: int, seed: int = 0) -> dict:
    import httpx

    lat: dict[str, list[float]] = {"search": [], "attention": []}
    errors: dict[str, int] = {}
    count = 0
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=timeout) as c:
        async def worker(w: int):
            nonlocal count
            rng = random.Random(seed * 1000 + w)
            i = w
            while time.monotonic() < deadline and count < max_requests:
                count += 1
                kind, path, body = request_for(i, rng)
                i += 1
                t0 = time.perf_counter()
                try:
                    r = await c.post(path, json=body)
                    ok = r.status_code == 200
                    if not ok:
                        key = f"{kind}: HTTP {r.status_code}"
                except httpx.HTTPError as e:
                    ok, key = False, f"{kind}: {type(e).__name__}"
                dt = time.perf_counter() - t0
                if ok:
                    lat[kind].append(dt)
                else:
                    errors[key] = errors.get(key, 0) + 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(clients)))
        wall = time.perf_counter() - t0
    return {"lat": lat, "errors": errors, "wall": wall, "clients": clients}


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--reference-seconds", type=float, default=8)
    ap.add_argument("--timeout", type=float, default=60, help="per request, seconds")
    ap.add_argument("--max-requests", type=int, default=100_000)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/qkv-cache/web-bench"))
    args = ap.parse_args(argv)
    try:
        import httpx  # noqa: F401
        from rich.console import Console
        from rich.table import Table
    except ImportError as e:
        print(f"bench/web.py needs the web extra (pip install -e '.[web]'): {e}")
        return 0
    console = Console()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    console.print(f"starting qkv serve --sample on {base} (first run builds the sample index and demo model) ...")
    proc = start_server(port, args.cache)
    try:
        asyncio.run(wait_ready(base, proc))
        asyncio.run(load(base, 2, 3, args.timeout, 1000, seed=99))  # warm up: BLAS, caches, connections
        ref = asyncio.run(load(base, 1, args.reference_seconds, args.timeout, args.max_requests, seed=1))
        run = asyncio.run(load(base, args.clients, args.seconds, args.timeout, args.max_requests, seed=2))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()

    table = Table(title=f"qkv web load check · loopback · {os.cpu_count()} CPUs · server: 1 uvicorn process")
    for col in ("run", "endpoint", "requests", "req/s", "p50 ms", "p99 ms", "errors"):
        table.add_column(col, justify="right" if col not in ("run", "endpoint") else "left")
    for label, res in ((f"1 client, {args.reference_seconds:g} s (reference)", ref),
                       (f"{args.clients} clients, {args.seconds:g} s", run)):
        for kind, xs in list(res["lat"].items()) + [("all", [x for v in res["lat"].values() for x in v])]:
            errs = sum(n for k, n in res["errors"].items() if kind == "all" or k.startswith(kind))
            table.add_row(label if kind == "search" else "", kind, str(len(xs)), f"{len(xs) / res['wall']:.1f}",
                          f"{1000 * pct(xs, 50):.1f}", f"{1000 * pct(xs, 99):.1f}", str(errs))
    console.print(table)
    all_ref = [x for v in ref["lat"].values() for x in v]
    all_run = [x for v in run["lat"].values() for x in v]
    thr_ref, thr_run = len(all_ref) / ref["wall"], len(all_run) / run["wall"]
    console.print(f"throughput {args.clients} clients / 1 client: {thr_run / thr_ref:.2f}×; "
                  f"p50 latency {args.clients} clients / 1 client: {pct(all_run, 50) / pct(all_ref, 50):.1f}× "
                  "(the server runs one encoder call at a time: requests queue, they do not fail)")
    n_err = sum(run["errors"].values()) + sum(ref["errors"].values())
    if n_err:
        console.print(f"[red]errors: {dict(run['errors'])} {dict(ref['errors'])}[/]")
    else:
        console.print("errors: 0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
