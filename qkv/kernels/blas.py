"""BLAS thread limits, applied around a block of code with threadpoolctl.

At the bottom of the package so that the attention math and the model can both use it (the
encoder's default thread count lives in ``qkv.model.threads``)."""

from __future__ import annotations

from contextlib import contextmanager

_controller = None


@contextmanager
def blas_threads(n: int | None):
    """Limit BLAS to ``n`` threads inside the block (None: leave as is). The libraries are looked
    up once per process, not at every call."""
    global _controller
    if n is None:
        yield
        return
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    with _controller.limit(limits=n, user_api="blas"):
        yield
