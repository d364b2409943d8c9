"""The encoder's own worker threads, and how work is shared out between them.

The compiled products and the fused attention release the GIL, so Python threads run them in
parallel. A product's rows are cut into whole register blocks (``row_cuts``); texts' attention is
dealt out by cost (``deal``); a batch of several texts may instead be cut into pieces of whole
texts (``text_pieces``) that the threads claim one after another (``claim``), each piece taken
through every layer by the thread that claimed it (``Encoder.forward``). None of them changes a
sum, so results are the same floats at any count.
"""

from __future__ import annotations

import threading


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


def text_cost(tokens: int) -> float:
    """What a text of ``tokens`` real tokens costs a forward pass, in tokens: the products grow with
    the tokens, attention with their square, and for all-MiniLM-L6-v2 on the tile unit attention
    per token matches the products' at about 600 tokens (bench/bf16.py's steps: reviews of 256
    tokens spend about a third as much in attention as in the products)."""
    return tokens * (1.0 + tokens / 600.0)


def _cut(costs: list[float], targets: list[float]) -> list[int]:
    """Boundaries [0, …, len(costs)] cutting ``costs`` in order into runs of whole texts whose costs
    are about ``targets``: each cut falls at the text whose middle crosses the running target;
    targets that fall inside one text make no empty run (fewer runs, never an empty one)."""
    cuts, acc, bounds = [0], 0.0, [sum(targets[:k + 1]) for k in range(len(targets) - 1)]
    for i, c in enumerate(costs):
        while bounds and acc + c / 2 > bounds[0]:
            bounds.pop(0)
            if i > cuts[-1]:
                cuts.append(i)
        acc += c
    return cuts + [len(costs)]


def text_cuts(lengths, threads: int, least: int = 48) -> list[int]:
    """Boundaries cutting a batch's texts (real tokens each) into at most ``threads`` runs of whole
    texts in order, of about equal cost (``text_cost``), no run under ``least`` tokens:
    [0, …, len(lengths)]."""
    lengths = [int(n) for n in lengths]
    n = max(1, min(threads, len(lengths), sum(lengths) // max(1, least)))
    cost = [text_cost(t) for t in lengths]
    return _cut(cost, [sum(cost) / n] * n)


# Pieces a bfloat16 batch is cut into for the threads to claim (``text_pieces``), measured at one
# and two threads in one process (docs/engine.md, "Two threads"). A first round of one piece a
# thread takes FIRST_SHARE of each thread's share; the rest is cut into one piece a thread, for
# whichever thread is ahead to claim. Every piece costs a forward's fixed part (the Python and
# the kernel calls of every layer, a part-filled last block of rows in each product: a title of
# ~24 tokens alone costs ~3.5x its share of a 32-title batch), so where those last pieces would be
# under PIECE_LEAST tokens of cost the batch is cut into one run a thread instead (32 titles of
# ~24 tokens at two threads: 4-title pieces cost 7-25% more CPU than 16-title runs).
PIECE_LEAST = 128.0
FIRST_SHARE = 0.75


def text_pieces(lengths, threads: int, least: float = PIECE_LEAST, first: float = FIRST_SHARE,
                tail: int | None = None) -> list[tuple[int, int]]:
    """Pieces (start, end) of a batch's texts (real tokens each), whole texts in order, in the
    order the threads should claim them: ``threads`` pieces of about ``first`` of a thread's
    share each, then the rest in ``tail`` pieces (default one a thread, or none, the first
    round then taking all, where those would cost under ``least``: ``text_cost``). Claimed
    dynamically (``claim``), a thread that runs slower (its CPU shared for a while) takes fewer
    of the last ones,
    where a fixed cut would make the other wait for it (guided self-scheduling: Polychronopoulos
    and Kuck, 1987; OpenMP's ``schedule(guided)``). ``first=1``: one run a thread, as
    ``text_cuts``. Batches under 48 tokens a thread make one piece."""
    lengths = [int(n) for n in lengths]
    runs = text_cuts(lengths, threads)
    n = len(runs) - 1
    cost = [text_cost(t) for t in lengths]
    total = sum(cost)
    if n == 1:
        return [(0, len(lengths))]
    first = min(1.0, max(0.0, first))
    rest = total * (1.0 - first)
    if tail is None:
        tail = n if rest >= n * least else 0
    k = max(0, int(tail)) if rest > 0 else 0
    if k == 0:  # the rest is too small to share out: one run a thread
        return list(zip(runs, runs[1:]))
    head = (total - rest) / n
    cuts = _cut(cost, [head] * n + [rest / k] * k)
    return list(zip(cuts, cuts[1:]))


def claim(pieces: int, workers: Workers, fn) -> None:
    """fn(g, i) for every piece i in 0 … pieces - 1, in order, each on whichever thread g (0 … the
    workers' threads - 1) asks for the next one first: the threads claim pieces from one shared
    counter until none are left (a dynamic schedule), so none waits on another's fixed share."""
    lock, nxt = threading.Lock(), [0]

    def take() -> int:
        with lock:
            i = nxt[0]
            nxt[0] += 1
            return i

    def run(g: int) -> None:
        i = take()
        while i < pieces:
            try:
                fn(g, i)
            except BaseException:
                with lock:  # the others claim nothing more; the error reaches the caller (Workers.run)
                    nxt[0] = pieces
                raise
            i = take()

    workers.run(run, min(workers.threads, pieces))
