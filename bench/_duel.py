"""A paired, finely interleaved comparison of engines (a "duel"), for bench/engine.py's encoder tables.

Why: this shared VM's speed drifts by up to 2× over tens of seconds with what other tenants do
(CPU time too, not only wall: shared caches, memory bandwidth, frequency), so two engines timed in
jobs a minute apart see different machines. Here every engine gets its own persistent process (its
own thread environment, model and batches loaded once, warmed up), and the parent hands out short
slots — a few batches, ~0.3–1 s — one engine at a time, in a fresh random order every round. The
engines that are not running block on their pipe, so the one that runs has every vCPU. Each slot
reports its wall and process CPU time; an engine's rate is the median over its slots, and the
comparison of two engines is the median over rounds of the ratio of their rates IN THAT ROUND
(slots seconds apart, same host conditions), with the 25th–75th percentile of those ratios as its
interval: a paired design, as in A/B benchmarking of noisy systems (e.g. Kalibera & Jones,
"Rigorous Benchmarking in Reasonable Time", ISMM 2013: randomised interleaving of the alternatives).

Protocol (text lines on the worker's stdin/stdout): the worker prints ``MARK {ready meta}`` once
loaded and warmed; then for each line ``K`` it runs its next K batches (cycling) and prints
``MARK {"wall", "cpu", "batches"}``; ``q`` ends it. Lines without MARK (library chatter) are ignored.
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import tempfile
import time

MARK = "QKV-DUEL "


# ------------------------------------------------------------------------------------ the worker
def serve(setup, job: dict, stdin=None, stdout=None) -> int:
    """Worker side: ``setup(job) -> (meta, run)`` with meta["batches"] a list of per-batch dicts
    and run(indices) running those batches. Warm up (every batch once, at least 2 calls, ~1 s at
    most beyond the first pass), measure a batch's time, report ready, then serve slots."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout

    def send(obj):
        stdout.write(MARK + json.dumps(obj) + "\n")
        stdout.flush()

    t0 = time.perf_counter()
    try:
        meta, run = setup(job)
        nb = len(meta["batches"])
        times = []
        for i in range(max(nb, 2)):  # first touch of weights, packing, caches, thread pools
            w = time.perf_counter()
            run([i % nb])
            times.append(time.perf_counter() - w)
            if i >= 1 and time.perf_counter() - t0 > 60:
                break
        w = time.perf_counter()
        run([j % nb for j in range(min(nb, 2))])  # one more, warm: the calibration
        batch_s = (time.perf_counter() - w) / min(nb, 2)
    except Exception as e:  # noqa: BLE001 — the parent reports it and goes on without this engine
        send({"error": f"{type(e).__name__}: {e}"})
        return 1
    send({**meta, "batch_s": batch_s, "setup_s": time.perf_counter() - t0, "pid": os.getpid()})
    cursor = 0
    for line in stdin:
        cmd = line.strip()
        if cmd in ("q", ""):
            break
        idx = [(cursor + j) % nb for j in range(int(cmd))]
        cursor = (cursor + len(idx)) % nb
        try:
            w, c = time.perf_counter(), time.process_time()
            run(idx)
            send({"wall": time.perf_counter() - w, "cpu": time.process_time() - c, "batches": idx})
        except Exception as e:  # noqa: BLE001
            send({"error": f"{type(e).__name__}: {e}"})
    return 0


# ------------------------------------------------------------------------------------ the parent
def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) a process has used so far; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Worker:
    """One engine's persistent process, spoken to by lines."""

    def __init__(self, cmd: list[str], env: dict):
        self._err = tempfile.TemporaryFile(mode="w+")  # stderr to a file: a full pipe would block it
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env=env, bufsize=0)
        self._buf = b""

    def read(self, timeout: float) -> dict:
        end = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith(MARK):
                    return json.loads(text[len(MARK):])
            left = end - time.monotonic()
            if left <= 0:
                return {"error": f"no answer within {timeout:.0f} s"}
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return {"error": f"exited ({self.proc.wait()}): {self.stderr_tail()}"}
                self._buf += chunk

    def ask(self, k: int, timeout: float) -> dict:
        try:
            self.proc.stdin.write(f"{k}\n".encode())
            self.proc.stdin.flush()
        except OSError as e:
            return {"error": f"worker gone: {e}; {self.stderr_tail()}"}
        return self.read(timeout)

    def stderr_tail(self) -> str:
        try:
            self._err.seek(0)
            return " | ".join(self._err.read().strip().splitlines()[-3:])
        except (OSError, ValueError):
            return ""

    def close(self) -> None:
        try:
            self.proc.stdin.write(b"q\n")
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child, by its handle
            self.proc.wait()
        self._err.close()


def _steal() -> float:
    """Seconds of steal time of the whole VM so far (/proc/stat), 0 where unknown."""
    try:
        with open("/proc/stat") as f:
            cpu = f.readline().split()
        return int(cpu[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run(commands: dict[str, tuple[list[str], dict]], *, slot_s: float, budget_s: float, min_rounds: int,
        max_rounds: int, seed: int = 0, timeout: float = 900, on_slot=None) -> dict:
    """Start every engine's worker at once (``commands``: name -> (argv, env)), wait until all are
    ready, time one batch of each, then run rounds of one slot per engine in a random order until ``budget_s`` seconds of
    rounds and at least ``min_rounds`` (at most ``max_rounds``). A slot is as many batches as make
    about ``slot_s`` seconds by the worker's own calibration (at least one). ``on_slot(round, seconds)``
    is called after each slot (progress). Returns the raw record ``summary`` reads."""
    load0, t_start = os.getloadavg()[0], time.monotonic()
    workers = {name: Worker(argv, env) for name, (argv, env) in commands.items()}
    meta, failures = {}, {}
    try:
        for name, w in workers.items():
            r = w.read(timeout)
            if "error" in r:
                failures[name] = r["error"] if "exited" in r["error"] else f"{r['error']}; {w.stderr_tail()}"
            else:
                meta[name] = r
        start_s = time.monotonic() - t_start
        alive = [n for n in commands if n in meta]
        # the workers' own calibration ran while the others were still loading: time one batch of
        # each again, one engine at a time (not recorded), and size the slots from that
        k = {}
        for name in alive[:]:
            r = workers[name].ask(1, timeout)
            if "error" in r:
                failures[name] = r["error"]
                alive.remove(name)
            else:
                k[name] = max(1, round(slot_s / max(r["wall"], 1e-6)))
        rng = random.Random(seed)
        slots: list[dict] = []
        idle_cpu = idle_wall = 0.0
        steal0, t0, rnd = _steal(), time.monotonic(), 0
        while alive and rnd < max_rounds and (rnd < min_rounds or time.monotonic() - t0 < budget_s):
            order = alive[:]
            rng.shuffle(order)
            if slots and len(order) > 1 and order[0] == slots[-1]["engine"]:
                order.append(order.pop(0))  # never the same engine twice in a row across rounds
            for name in order:
                others = {o: proc_cpu(meta[o]["pid"]) for o in alive if o != name}
                r = workers[name].ask(k[name], timeout)
                if "error" in r:
                    failures[name] = r["error"]
                    alive.remove(name)
                    continue
                idle_cpu += sum(proc_cpu(meta[o]["pid"]) - c for o, c in others.items())
                idle_wall += r["wall"]
                slots.append({"round": rnd, "engine": name, **r})
                if on_slot:
                    on_slot(rnd, time.monotonic() - t0)
            rnd += 1
        seconds, steal = time.monotonic() - t0, _steal() - steal0
    finally:
        for w in workers.values():
            w.close()
    return {"engines": list(meta), "meta": meta, "k": k, "slots": slots, "failures": failures,
            "rounds": rnd, "seconds": seconds, "start_s": start_s, "steal_s": steal, "load": [load0, os.getloadavg()[0]],
            "idle_cpu_share": idle_cpu / idle_wall if idle_wall else 0.0, "slot_s": slot_s}


# ------------------------------------------------------------------------------------ statistics
def quantile(xs, q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of a non-empty sequence."""
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def slot_rates(duel: dict, engine: str, kind: str = "wall") -> dict[int, float]:
    """Round -> padded tokens per second (of wall or process CPU time) of the engine's slot in that
    round. Padded tokens, not sentences: slots hold different batches, and a batch's work is its
    padded size (titles' batches differ in length by a few tokens). Empty if the engine never ran."""
    if engine not in duel["meta"]:
        return {}
    padded = [b["padded"] for b in duel["meta"][engine]["batches"]]
    return {s["round"]: sum(padded[i] for i in s["batches"]) / s[kind]
            for s in duel["slots"] if s["engine"] == engine and s[kind] > 0}


def paired(duel: dict, a: str, b: str, kind: str = "wall") -> dict | None:
    """a's rate ÷ b's rate, round by round (the rounds where both ran): median and the 25th–75th
    percentile of the per-round ratios, n rounds. > 1: a is faster. None if no round has both."""
    ra, rb = slot_rates(duel, a, kind), slot_rates(duel, b, kind)
    ratios = [ra[r] / rb[r] for r in sorted(ra) if r in rb]
    if not ratios:
        return None
    return {"median": quantile(ratios, 0.5), "p25": quantile(ratios, 0.25), "p75": quantile(ratios, 0.75),
            "n": len(ratios)}


def engine_stats(duel: dict, engine: str) -> dict | None:
    """An engine's median rates over its slots, as per-batch figures of the workload's average
    batch: ms per batch (wall, CPU), sentences/s, real tokens/s, GFLOP/s; and the spread of its
    wall rate, (p75 − p25) / median over slots: what the host's drift does to one engine alone."""
    w, c = slot_rates(duel, engine, "wall"), slot_rates(duel, engine, "cpu")
    if not w:
        return None
    bs = duel["meta"][engine]["batches"]
    padded = sum(b["padded"] for b in bs)
    per = {f: sum(b[f] for b in bs) / padded for f in ("sentences", "tokens", "flops")}  # per padded token
    rw, rc = quantile(w.values(), 0.5), quantile(c.values(), 0.5)
    return {"rate_wall": rw, "rate_cpu": rc, "ms_wall": padded / len(bs) / rw * 1e3,
            "ms_cpu": padded / len(bs) / rc * 1e3, "sps": rw * per["sentences"], "tps": rw * per["tokens"],
            "gflops": rw * per["flops"] / 1e9, "gflops_cpu": rc * per["flops"] / 1e9,
            "spread": (quantile(w.values(), 0.75) - quantile(w.values(), 0.25)) / rw, "slots": len(w),
            "shapes": [b["shape"] for b in bs]}


def best_peer(duel: dict, peers, kind: str = "wall") -> str | None:
    """The peer with the highest median rate (wall or CPU) among those that ran."""
    rates = {p: quantile(v.values(), 0.5) for p in peers if (v := slot_rates(duel, p, kind))}
    return max(rates, key=rates.get) if rates else None
