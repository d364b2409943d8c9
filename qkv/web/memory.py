"""Memory of the server's processes (Linux /proc): one process's resident, private and
proportional set sizes, and the proportional set size summed over ``qkv serve``'s process tree
(``/metrics`` and ``bench/web.py`` report it)."""

from __future__ import annotations

import os

SERVER_PID = "QKV_SERVER_PID"  # set in each worker: the `qkv serve` parent's pid


def memory(pid: int | str = "self") -> dict[str, float]:
    """Resident memory of a process in MB (Linux): ``rss`` (all resident pages, shared ones
    included), ``private`` (pages no other process maps: what one more worker costs) and ``pss``
    (shared pages divided among their users)."""
    out: dict[str, float] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                    out[key] = int(rest.split()[0]) / 1024
    except OSError:
        return {}
    return {"rss": round(out.get("Rss", 0), 1), "pss": round(out.get("Pss", 0), 1),
            "private": round(out.get("Private_Clean", 0) + out.get("Private_Dirty", 0), 1)}


def process_tree(pid: int) -> list[tuple[int, int]]:
    """``pid`` and every process below it, with its depth (0 for ``pid``; Linux /proc)."""
    out, todo = [], [(pid, 0)]
    while todo:
        p, depth = todo.pop()
        out.append((p, depth))
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [(int(c), depth + 1) for c in f.read().split()]
        except OSError:
            pass
    return out


def _is_tracker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"resource_tracker" in f.read()
    except OSError:
        return False


def server_memory(root: int | None = None) -> dict[str, tuple[float, int]]:
    """PSS in MB and process count by role over the server's process tree: ``root`` (default the
    ``qkv serve`` parent of this worker, else this process) is "server"; below it, "workers" and
    their children "heavy" (the heavy kinds' processes) under ``--workers N``, or only "heavy" under one process (multiprocessing's resource tracker
    counts with "server"); "all" sums them."""
    if root is None:
        root = int(os.environ.get(SERVER_PID) or os.getpid())
    tree = process_tree(root)
    multi = any(depth >= 2 for _, depth in tree)
    roles: dict[str, list[float]] = {"server": [], "workers": [], "heavy": []}
    for pid, depth in tree:
        m = memory(pid)
        if m:
            role = ("server" if depth == 0 or _is_tracker(pid) else "workers" if depth == 1 and multi else "heavy")
            roles[role].append(m["pss"])
    out = {k: (round(sum(v), 1), len(v)) for k, v in roles.items()}
    out["all"] = (round(sum(sum(v) for v in roles.values()), 1), sum(len(v) for v in roles.values()))
    return out
