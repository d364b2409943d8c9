"""Work by kind: each kind of request runs in its own bounded pool of threads, so a burst of one
kind (summaries, attention views) cannot hold up another (searches).

Searches and explanations run in threads: their heavy part is the encoder's compiled kernels
(called through ctypes, which releases the GIL), NumPy, faiss and SQLite. The heavy kinds
(attention views, summaries, attributes) also run long stretches of Python (building the maps'
JSON, sentence selection), which would hold the GIL against the event loop and the searches of
the same process; ``qkv serve`` therefore runs them in child processes that the heavy kinds share
(``process=True``: the function and its arguments are sent there; ``Children``, sized by
``heavy_processes``; forked with the model already loaded, or spawned and loading it once). Each
pool

- runs at most ``threads`` jobs at once, with at most ``queue`` more waiting: one more is answered
  **429** with ``Retry-After`` (an estimate from the pool's recent job times), never queued;
- answers **503** when a job has not finished within ``deadline`` seconds of its arrival (a job
  still waiting is dropped; one already running finishes, its answer discarded);
- runs its threads at the niceness ``nice`` (Linux: per thread), so that on a machine whose cores
  are all busy the scheduler gives searches the CPU before heavy work, which can wait.

BLAS is limited to the encoder's thread count while any job runs (threadpoolctl's limit is
process-wide, so it is entered by the first job and left by the last, not per job).
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Callable

from qkv.errors import QkvError

KINDS = ("search", "search_long", "explain", "attention", "summary", "attributes")


@dataclass(frozen=True)
class PoolSpec:
    threads: int
    queue: int  # jobs that may wait beyond the running ones
    deadline: float  # seconds from arrival to answer, else 503
    nice: int = 0  # added niceness of the pool's threads (Linux)
    process: bool = False  # run in a child process (when the app is given a child configuration)


# Searches: one thread per process (with one worker process per core, that keeps the cores busy; a
# second thread only added GIL contention with the event loop: 50 clients on 2 workers, 21.2
# searches/s with two threads against 24.8 with one, same busy machine), a deep queue (they are
# short), a short deadline. Heavy kinds: one each, in a child process under ``qkv serve``, a short
# queue, a long deadline, lower priority. All overridable through create_app(pools={...}).
DEFAULT_POOLS: dict[str, PoolSpec] = {
    "search": PoolSpec(threads=1, queue=256, deadline=10.0, nice=0),
    # searches that can only be slow (long Chinese queries: translation and two long encodings) run
    # in a lane of their own, at lower priority, so six of them cannot starve every cheap search
    "search_long": PoolSpec(threads=1, queue=32, deadline=10.0, nice=5),
    "explain": PoolSpec(threads=1, queue=64, deadline=15.0, nice=5),
    "attention": PoolSpec(threads=1, queue=16, deadline=30.0, nice=10, process=True),
    "summary": PoolSpec(threads=1, queue=8, deadline=60.0, nice=10, process=True),
    "attributes": PoolSpec(threads=1, queue=16, deadline=30.0, nice=10, process=True),
}


class Busy(QkvError):
    """The kind's queue is full: answered 429 with Retry-After."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Overdue(QkvError):
    """The job did not finish within the kind's deadline: answered 503 with Retry-After."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class ChildCrashed(QkvError):
    """The child process running the job died (killed, out of memory): answered 503. The pool has
    started a new child; only the jobs that were in the dead one fail."""


class _BlasGate:
    """Enter the process-wide BLAS limit with the first running job, leave it with the last."""

    def __init__(self, threads: Callable[[], int]):
        self._threads = threads
        self._lock = threading.Lock()
        self._users = 0
        self._ctx = None

    def __enter__(self):
        with self._lock:
            if self._users == 0:
                from qkv.kernels.blas import blas_threads

                self._ctx = blas_threads(self._threads())
                self._ctx.__enter__()
            self._users += 1

    def __exit__(self, *exc):
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._ctx is not None:
                ctx, self._ctx = self._ctx, None
                ctx.__exit__(None, None, None)
        return False


# ---------------------------------------------------------------------- in a child process
_CHILD_STATE = None  # the child's own AppState (model loaded once, at start-up)


def _exit_with_parent(parent: int) -> None:
    """A child whose server process ``parent`` is gone (killed, crashed; perhaps before the child
    got here) exits too, instead of waiting for work forever with a model in memory."""

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="qkv-parent-watch", daemon=True).start()


def _child_init(state_class: type, config: dict, nice: int, parent: int) -> None:
    # ``state_class`` is the parent's AppState, handed over (pickled by name) rather than imported
    # here: qkv.web.state imports this module, and the two must not import each other.
    global _CHILD_STATE
    _exit_with_parent(parent)
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass
    from qkv.kernels.blas import blas_threads

    _CHILD_STATE = state_class(**config, pools={k: {"process": False} for k in KINDS})
    blas_threads(_CHILD_STATE._blas_threads()).__enter__()  # the child does nothing else: for good
    _CHILD_STATE.encoder  # noqa: B018  (loaded now, not by the first request)


def _child_job(fn, args):
    return fn(_CHILD_STATE, *args)


def _child_ready() -> bool:
    return _CHILD_STATE is not None


class Children:
    """The child processes that every heavy kind of one server process shares (``processes`` of
    them; one model each, loaded at start-up). A kind's own limits (queue, deadline, running jobs)
    stay the kind's; only the processes are shared. One process per kind held three copies of the
    model per worker (six heavy children of 340-800 MB on a 2-core machine): sizing them by cores
    and memory (``heavy_processes``) is what keeps ``qkv serve`` small."""

    def __init__(self, processes: int, state_class: type, config: dict, nice: int):
        self.processes = max(1, int(processes))
        self._args = (state_class, config, nice)
        self._lock = threading.Lock()
        self.executor = None  # made by start(), or by the first job

    def _new(self) -> ProcessPoolExecutor:
        """Forked while this process has one thread (``qkv serve``'s worker before it serves): the
        children then share the model already loaded here (the tokenizer alone is ~280 MB) page by
        page, copy-on-write, instead of loading a copy each. Otherwise (a replacement started while
        serving, tests in threads) spawned: forking a process with threads can inherit a lock held
        by another thread."""
        import multiprocessing as mp

        state_class, config, nice = self._args
        method = "fork" if _single_threaded() else "spawn"
        return ProcessPoolExecutor(self.processes, mp_context=mp.get_context(method), initializer=_child_init,
                                   initargs=(state_class, config, nice, os.getpid()))

    def submit(self, *args):
        with self._lock:
            if self.executor is None:
                self.executor = self._new()
            executor = self.executor
        return executor, executor.submit(*args)

    def replace(self, broken) -> bool:
        """A child died and ``broken`` (the executor it was in) fails every job it holds, and would
        refuse every later one: swap in a new one (once, whichever job notices first). Returns
        whether this call replaced it."""
        with self._lock:
            if self.executor is not broken:
                return False
            self.executor = self._new()
        broken.shutdown(wait=False, cancel_futures=True)
        self.start()
        return True

    def start(self) -> None:
        """Start the child processes now (their models load before the first request needs them)."""
        for _ in range(self.processes):
            self.submit(_child_ready)

    def shutdown(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)


def _single_threaded() -> bool:
    """Whether this process runs one thread only (Linux counts native ones too: BLAS, Rust pools)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


# What one heavy child holds, measured (bench/_web_memory.py, multilingual-e5-small): about 340 MB
# loaded and idle, up to 800 MB while it summarises 80 reviews.
CHILD_MB = 600


def available_mb() -> float | None:
    """MemAvailable of /proc/meminfo in MB (Linux), else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def heavy_processes(workers: int = 1, cores: int | None = None, memory_mb: float | None = None) -> int:
    """Heavy-kind child processes per server process: the heavy kinds are CPU-bound, so more
    processes than the cores left to each worker only add copies of the model; at most one per
    heavy kind; and all of them together take at most half of ``memory_mb`` (default: the
    memory available now). At least one."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
    kinds = sum(1 for s in DEFAULT_POOLS.values() if s.process)
    n = min(kinds, max(1, cores // max(1, workers)))
    memory_mb = available_mb() if memory_mb is None else memory_mb
    if memory_mb is not None:
        n = min(n, int(memory_mb / 2 / CHILD_MB / max(1, workers)))
    return max(1, n)


class Pool:
    def __init__(self, kind: str, spec: PoolSpec, gate: _BlasGate, state=None, children: Children | None = None):
        self.kind = kind
        self.spec = spec
        self._gate = gate
        self._state = state  # what a job gets as its first argument, in threads
        self.on_change: Callable[[str, int, int], None] | None = None  # (kind, waiting, running): metrics
        self.on_restart: Callable[[str], None] | None = None  # (kind): a dead child replaced (metrics)
        self.restarts = 0
        self._children = children
        self.in_process = bool(spec.process and children is not None and state is not None)
        if not self.in_process:
            self._threads = ThreadPoolExecutor(spec.threads, thread_name_prefix=f"qkv-{kind}", initializer=self._init)
        self._lock = threading.Lock()
        self.pending = 0  # submitted and not finished (running + waiting)
        self.running = 0
        self._avg = 0.05  # recent job seconds (exponential average), for Retry-After
        self._measured = False  # until a job finished, _avg is only a seed
        self._clock = time.perf_counter
        self._since: dict[object, float] = {}  # unfinished job → when it was submitted
        self._last_done: float | None = None

    def _replace(self, broken) -> None:
        """A child died: the shared children are replaced (by whichever kind notices first)."""
        if self._children.replace(broken):
            with self._lock:
                self.restarts += 1
            if self.on_restart is not None:
                self.on_restart(self.kind)

    def _init(self) -> None:
        if self.spec.nice:
            try:  # Linux: a thread is a task with its own niceness
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + self.spec.nice)
            except (AttributeError, OSError):
                pass

    @property
    def job_seconds(self) -> float:
        """Recent job seconds (an exponential average)."""
        return self._avg

    @property
    def waiting(self) -> int:
        return max(0, self.pending - self.running)

    def retry_after(self) -> int:
        """Seconds until the queue has likely drained: waiting jobs × a job's time ÷ threads. A job's
        time is the measured average, but at least as long as the oldest unfinished job has run so
        far (it started when submitted or when the job before it finished): before any job has
        finished, that is the only measurement there is (a seed of 0.05 s told clients to retry in
        1 s while summaries took 7)."""
        with self._lock:
            est = self._avg if self._measured else 0.0
            if self._since:
                head = min(self._since.values())
                start = max(head, self._last_done) if self._last_done is not None else head
                est = max(est, self._clock() - start)
            waiting = max(0, self.pending - self.running)
        return max(1, math.ceil((waiting + 1) * (est or self._avg) / self.spec.threads))

    def _measure(self, dt: float) -> None:
        """Fold one job's seconds into the average (the first replaces the seed); under the lock."""
        self._avg = 0.8 * self._avg + 0.2 * dt if self._measured else dt
        self._measured = True

    def _notify(self) -> None:
        if self.on_change is not None:
            self.on_change(self.kind, self.waiting, self.running)

    def _job(self, fn, args, kwargs):
        with self._lock:
            self.running += 1
        self._notify()
        t0 = self._clock()
        try:
            with self._gate:
                return fn(*args, **kwargs)
        finally:
            dt = self._clock() - t0
            with self._lock:
                self.running -= 1
                self._measure(dt)

    def _finished(self, token):
        def done(_future) -> None:
            with self._lock:
                self.pending -= 1
                self._since.pop(token, None)
                self._last_done = self._clock()
            self._notify()
        return done

    def _done_in_child(self, submitted: float, ahead: int):
        def done(future) -> None:
            dt = (self._clock() - submitted) / (ahead + 1)  # its share of the time it waited
            with self._lock:
                self.running = max(0, self.running - 1)
                self._measure(dt)
        return done

    async def run(self, fn: Callable, *args, **kwargs):
        """``fn(state, *args, **kwargs)`` in this pool: 429 when full, 503 past the deadline."""
        spec = self.spec
        token = object()
        with self._lock:
            if self.pending >= spec.threads + spec.queue:
                full = True
            else:
                full = False
                self.pending += 1
                self._since[token] = self._clock()
        if full:
            raise Busy(f"the server is busy with {self.kind} requests ({self.pending} in progress or waiting); "
                       f"retry in {self.retry_after()} s", self.retry_after())
        try:
            if self.in_process:
                import functools

                with self._lock:
                    ahead = self.pending - 1
                    self.running = min(self.pending, spec.threads)
                job = functools.partial(fn, **kwargs) if kwargs else fn
                try:
                    executor, future = self._children.submit(_child_job, job, args)
                except BrokenProcessPool:  # its child died since the last job: this one goes to a new child
                    self._replace(self._children.executor)
                    executor, future = self._children.submit(_child_job, job, args)
                future.add_done_callback(self._done_in_child(self._clock(), ahead))
            else:
                future = self._threads.submit(self._job, fn, (self._state, *args), kwargs)
        except RuntimeError:  # shut down
            with self._lock:
                self.pending -= 1
                self._since.pop(token, None)
            raise
        future.add_done_callback(self._finished(token))
        self._notify()
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), spec.deadline)
        except Exception as e:
            if self.in_process and isinstance(e, BrokenProcessPool):
                self._replace(executor)
                raise ChildCrashed(f"the process running this {self.kind} request stopped (killed, or out of "
                                   "memory); it has been restarted: retry the request") from None
            if not isinstance(e, asyncio.TimeoutError):
                raise
            future.cancel()  # a job still waiting never runs; a running one finishes unseen
            raise Overdue(f"the {self.kind} request did not finish within this server's {spec.deadline:g} s "
                          f"deadline (the server is busy); retry in {self.retry_after()} s", self.retry_after()) from None

    def shutdown(self) -> None:
        if not self.in_process:  # the shared children are shut down by their Pools
            self._threads.shutdown(wait=False, cancel_futures=True)


class Pools:
    """One ``Pool`` per kind, sharing one BLAS gate. ``child``: the settings a child process builds
    its own state from (``AppState.child_config``); without it every kind runs in threads. The
    heavy kinds share ``heavy_workers`` child processes (default ``heavy_processes()``)."""

    def __init__(self, specs: dict[str, PoolSpec] | None = None, blas: Callable[[], int] = lambda: 1,
                 state=None, child: dict | None = None, heavy_workers: int | None = None):
        merged = dict(DEFAULT_POOLS)
        for kind, spec in (specs or {}).items():
            if kind not in KINDS:
                raise ValueError(f"unknown kind of work {kind!r}; kinds: {', '.join(KINDS)}")
            merged[kind] = spec if isinstance(spec, PoolSpec) else replace(DEFAULT_POOLS[kind], **spec)
        if heavy_workers is not None and heavy_workers < 1:
            raise ValueError(f"heavy_workers must be at least 1 (got {heavy_workers})")
        gate = _BlasGate(blas)
        self.children = None
        heavy = [s for s in merged.values() if s.process]
        if child is not None and state is not None and heavy:
            self.children = Children(heavy_workers or heavy_processes(), type(state), child,
                                     max(s.nice for s in heavy))
        self.pools = {kind: Pool(kind, spec, gate, state, self.children) for kind, spec in merged.items()}
        self._observers: list[Callable[[str, int, int], None]] = []

    def start(self) -> None:
        if self.children is not None:
            self.children.start()

    def __getitem__(self, kind: str) -> Pool:
        return self.pools[kind]

    def on_restart(self, restarted: Callable[[str], None]) -> None:
        """Call ``restarted(kind)`` when a pool replaces a dead child process."""
        for p in self.pools.values():
            p.on_restart = restarted

    def observe(self, on_change: Callable[[str, int, int], None]) -> None:
        """Call ``on_change(kind, waiting, running)`` whenever a pool's queue changes (with any
        observer added before)."""
        self._observers.append(on_change)
        observers = list(self._observers)

        def changed(kind: str, waiting: int, running: int) -> None:
            for f in observers:
                f(kind, waiting, running)

        for p in self.pools.values():
            p.on_change = changed

    def shutdown(self) -> None:
        for p in self.pools.values():
            p.shutdown()
        if self.children is not None:
            self.children.shutdown()
