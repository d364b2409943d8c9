"""Every thread setting of qkv, in one place: other modules ask here, none reads the environment.

- Encoder threads: ``threads=`` where an encoder is loaded (``qkv.load``, ``--threads``), else
  ``QKV_THREADS``, else 1 (``resolve_threads``). On the 2-vCPU machines this project is measured
  on, one process per core (as the indexer runs) uses the machine best, and a forward pass on one
  thread is what the benchmark's targets are about. More threads split each product and the
  texts' attention between the encoder's own worker threads (about 1.7× the throughput at two;
  ``make bench`` times both); a bfloat16 batch of several texts goes to them as pieces of whole
  texts instead, which the threads claim one after another, each piece through every layer
  (``Encoder.forward``).
- BLAS, where the encoder and the applications' numeric work still call it, gets the encoder's
  count around each call (``blas_threads``, threadpoolctl), so the rest of the process keeps its
  own setting.
- faiss searches run at the same count (``default_threads``): one query at a time is fastest on
  one thread here (docs/search.md).
- faiss graph builds, when an index write is published, use ``QKV_BUILD_THREADS`` or every core
  the process may use (``build_threads``): the encoder has finished by then.
- Worker processes (``qkv index --workers N``, the Ray embedders) run ``WORKER_THREADS`` = 1
  each — N processes already fill N cores — and say so for anything they start
  (``set_default_threads``).
"""

from __future__ import annotations

import os

from qkv.kernels.blas import blas_threads  # noqa: F401  (re-exported: callers import it from here)
from qkv.errors import InputError

WORKER_THREADS = 1


def _whole(var: str, raw: str) -> int:
    try:
        return max(1, int(raw))
    except ValueError:
        raise InputError(f"{var}={raw!r} is not a whole number; set it to a thread count such as 1 or 2") from None


def default_threads() -> int:
    """Encoder (and BLAS, and faiss search) threads when none are given: ``QKV_THREADS`` or 1."""
    return _whole("QKV_THREADS", os.environ.get("QKV_THREADS", "1"))


def resolve_threads(given: int | None) -> int:
    """``given`` (at least 1) when the caller chose, else ``default_threads()``."""
    return default_threads() if given is None else max(1, int(given))


def build_threads() -> int:
    """faiss threads for building an ANN graph: ``QKV_BUILD_THREADS``, or every core this process
    may use. On this 2-vCPU machine two threads built a 200k-vector HNSW graph in 23 s instead of
    48 s, with 6% less CPU time (docs/search.md)."""
    raw = os.environ.get("QKV_BUILD_THREADS", "").strip()
    if raw:
        return _whole("QKV_BUILD_THREADS", raw)
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def set_default_threads(n: int) -> None:
    """Make ``n`` this process's default (and its children's: it is written to ``QKV_THREADS``)."""
    os.environ["QKV_THREADS"] = str(max(1, int(n)))
