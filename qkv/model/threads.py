"""How many threads the encoder uses.

The default is 1: on the 2-vCPU machines this project is measured on, one process per core (as the
indexer runs) uses the machine best, and a forward pass on one thread is what the benchmark's
targets are about. ``QKV_THREADS`` or ``threads=`` raises it: the encoder then splits each product
and the texts' attention between its own worker threads (about 1.7× the throughput at two; see
``make bench``, which times both). BLAS, where the encoder still calls it, gets the same limit,
applied around each call with threadpoolctl, so the rest of the process keeps its own setting.
"""

from __future__ import annotations

import os

from qkv.blas import blas_threads  # noqa: F401  (re-exported: callers import it from here)


def default_threads() -> int:
    raw = os.environ.get("QKV_THREADS", "1")
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"QKV_THREADS={raw!r} is not a whole number") from None
    return max(1, n)
