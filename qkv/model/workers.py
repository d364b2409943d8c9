"""The encoder's own worker threads, and how work is shared out between them.

The compiled products and the fused attention release the GIL, so Python threads run them in
parallel. A product's rows are cut into whole register blocks (``row_cuts``); texts' attention is
dealt out by cost (``deal``). Neither changes a sum, so results are the same floats at any count.
"""

from __future__ import annotations


class Workers:
    """``threads`` - 1 worker threads (started on first use) plus the calling thread."""

    def __init__(self, threads: int = 1):
        self.threads = max(1, int(threads))
        self._pool = None

    def run(self, fn, n: int) -> None:
        """fn(0) … fn(n - 1): fn(0) on this thread, the rest on the workers."""
        if n <= 1:
            if n:
                fn(0)
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="qkv-encoder")
        futures = [self._pool.submit(fn, g) for g in range(1, n)]
        fn(0)
        for f in futures:
            f.result()


def row_cuts(rows: int, threads: int, step: int = 12, least: int = 96) -> list[int]:
    """Row boundaries splitting a product between threads: whole 12-row register blocks, and no
    part under ``least`` rows (below that, waking a thread costs more than it saves)."""
    n = max(1, min(threads, rows // least))
    size = -(-rows // n // step) * step
    return [min(i * size, rows) for i in range(n)] + [rows]


def deal(costs: list[int], threads: int) -> list[list[int]]:
    """Indices of ``costs`` dealt to at most ``threads`` groups, largest first to the lightest
    group (longest-processing-time rule); empty groups are dropped."""
    groups: list[list[int]] = [[] for _ in range(max(1, threads))]
    loads = [0] * len(groups)
    for i in sorted(range(len(costs)), key=lambda i: -costs[i]):
        g = loads.index(min(loads))
        groups[g].append(i)
        loads[g] += costs[i]
    return [g for g in groups if g]
