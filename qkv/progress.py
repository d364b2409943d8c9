"""One shape for progress reports: ``progress(stage, done, total)``.

Every long call in qkv — encoding, index builds, migrations, Ray embedding, attribute training
and extraction, summaries and their evaluation, search evaluation — takes ``progress=None`` or a
callable of this shape:

- ``stage``: what is being counted, one short word ("encode", "embed", "fit", "queries", "copy",
  …); a call with several steps reports each under its own name, one after the other;
- ``done``: items of that stage finished so far — a running count, never an increment;
- ``total``: the items the stage will count, or None while that is unknown.

Why running counts: the callback needs no state (a progress bar sets ``completed=done``), a
report that is dropped or repeated does no harm, and a caller that hands its own callback down to
the encoder can re-label the encoder's counts (``relay``) without summing them itself. A stage
begins with ``done == 0`` once its total is known, so a bar can show its length from the start.

Producers count with ``Count``; consumers (the CLI's rich bars, the web's start-up log, Ray's
driver) only ever receive this one shape.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, stage: str, done: int, total: int | None) -> None: ...


class Count:
    """A running count of one stage, reported on each ``add``; does nothing when ``progress`` is None.

    >>> c = Count(progress, "encode", total=len(texts))   # reports ("encode", 0, n)
    >>> c.add(len(batch))                                  # reports ("encode", k, n)
    """

    __slots__ = ("progress", "stage", "total", "done")

    def __init__(self, progress: Progress | None, stage: str, total: int | None = None, done: int = 0):
        self.progress, self.stage, self.total, self.done = progress, stage, total, done
        if progress is not None:
            progress(stage, done, total)

    def add(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.stage, self.done, self.total)

    def set(self, done: int) -> None:
        self.done = done
        if self.progress is not None:
            self.progress(self.stage, done, self.total)


def relay(progress: Progress | None, stage: str, offset: int = 0, total: int | None = None) -> Progress | None:
    """A callback for an inner call (say the encoder, on one chunk) that reports its counts as
    ``offset + done`` of ``total`` under ``stage``: the caller's own label and overall count. Its
    opening ``done == 0`` is passed on only for the first chunk (``offset == 0``)."""
    if progress is None:
        return None

    def inner(_stage: str, done: int, _total: int | None) -> None:
        if done or not offset:
            progress(stage, offset + done, total)

    return inner
