"""Does process-level parallel embedding pay on this machine? N processes × 1 BLAS thread vs 1.

    .venv/bin/python bench/search_parallel.py --titles 20000 --workers 2

Encodes the same generated titles (bench/_titles.py's generator) with one process, then with
``--workers`` processes (spawned, each loading the model with one BLAS thread and encoding an equal
share), then with one process again (to bracket load drift on a shared machine). Reports wall time
with and without process start-up + model load, titles/s and the ratio to one process.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_enc = None


def _init() -> None:
    global _enc
    import qkv

    _enc = qkv.load(threads=1)


def _encode(part: list[str]) -> tuple[int, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    _enc.encode(part, batch_size=64)
    return len(part), time.perf_counter() - t0, time.process_time() - c0


def run(ts: list[str], workers: int) -> dict:
    import multiprocessing as mp

    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_init) as ex:
        list(ex.map(_encode, [["warm up"]] * workers))  # every worker has loaded the model
        t1 = time.perf_counter()
        share = -(-len(ts) // workers)
        res = list(ex.map(_encode, [ts[i:i + share] for i in range(0, len(ts), share)]))
        t2 = time.perf_counter()
    return {"workers": workers, "wall": t2 - t0, "encode_wall": t2 - t1, "start": t1 - t0,
            "cpu": sum(r[2] for r in res), "load": os.getloadavg()[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--titles", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    spec = importlib.util.spec_from_file_location("bench_titles", ROOT / "bench" / "_titles.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    ts = gen.titles(args.titles, seed=7)
    console = Console()
    rows = []
    for w in (1, args.workers, 1):
        with console.status(f"{w} process(es) encoding {len(ts):,} titles"):
            rows.append(run(ts, w))
    base = (rows[0]["encode_wall"] + rows[2]["encode_wall"]) / 2
    t = Table(title=f"{len(ts):,} generated titles, 1 BLAS thread per process, {os.cpu_count()} vCPUs")
    for c in ("processes", "titles/s (encoding)", "÷ 1 process", "wall incl. start s", "start + model load s",
              "CPU s (all workers)", "load avg"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["workers"]), f"{len(ts) / r['encode_wall']:,.0f}", f"{base / r['encode_wall']:.2f}",
                  f"{r['wall']:.1f}", f"{r['start']:.1f}", f"{r['cpu']:.1f}", f"{r['load']:.1f}")
    console.print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
