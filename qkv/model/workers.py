"""The encoder's own worker threads, and how work is shared out between them.

The compiled products and the fused attention release the GIL, so Python threads run them in
parallel. A product's rows are cut into whole register blocks (``row_cuts``); texts' attention is
dealt out by cost (``deal``); a batch of several texts may instead be cut into runs of whole texts
(``text_cuts``), each thread taking its run through every layer (``Encoder.forward``). None of
them changes a sum, so results are the same floats at any count.
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


def text_cuts(lengths, threads: int, least: int = 48) -> list[int]:
    """Boundaries cutting a batch's texts (real tokens each) into at most ``threads`` runs of whole
    texts in order, of about equal cost, no run under ``least`` tokens: [0, …, len(lengths)].

    A text's cost is its tokens times (1 + tokens / 600): the products grow with the tokens,
    attention with their square, and for all-MiniLM-L6-v2 on the tile unit attention per token
    matches the products' at about 600 tokens (bench/bf16.py's steps: reviews of 256 tokens spend
    about a third as much in attention as in the products)."""
    lengths = [int(n) for n in lengths]
    n = max(1, min(threads, len(lengths), sum(lengths) // max(1, least)))
    cost = [t * (1.0 + t / 600.0) for t in lengths]
    total, cuts, acc = sum(cost), [0], 0.0
    for i, c in enumerate(cost):
        if len(cuts) < n and acc + c / 2 > total * len(cuts) / n and i > cuts[-1]:
            cuts.append(i)
        acc += c
    return cuts + [len(lengths)]
