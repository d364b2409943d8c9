"""How many BLAS threads the encoder uses.

On the 2-vCPU machines this project is measured on, one BLAS thread is usually faster than two for
the encoder's many small matrix products: waking a second thread costs more than it saves (see
``make bench``, which times both). The default is therefore 1; ``QKV_THREADS`` or ``threads=``
changes it. The limit is applied around each call with threadpoolctl, so the rest of the process
keeps its own setting.
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
