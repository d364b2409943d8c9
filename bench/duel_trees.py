"""The encoder duel of bench/_duel.py between named variants: each an engine of
bench/engine_encoder.py run from a source tree with its own environment — two trees of qkv (before
and after a change), a kernel build for another target, the NumPy path, transformers.

    .venv/bin/python bench/duel_trees.py NAME=ENGINE:TREE[:VAR=VALUE,...] ... [--workload reviews]

    # a change against a copy of the tree before it, and transformers, as a Zen 4 runs them:
    .venv/bin/python bench/duel_trees.py "new=qkv:.:QKV_ISA=avx512bf16" \
        "old=qkv:/tmp/before:QKV_ISA=avx512bf16" "tf=transformers:.:QKV_ISA=avx512bf16"
    # the x86-64-v3 build against the NumPy path (no compiled kernels):
    .venv/bin/python bench/duel_trees.py "v3=qkv:.:QKV_KERNELS_LIB=/tmp/v3.so,QKV_ISA=float32" \
        "numpy=qkv:.:QKV_KERNELS=0"

One thread each (OMP/OPENBLAS/MKL/QKV threads 1, as bench/engine.py's duels). Prints each
variant's median rates (bench/_duel.engine_stats) and, for every pair, the median over rounds of
the per-round ratio of their rates, wall and CPU [25th–75th percentile]: > 1, the first is faster.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _duel  # noqa: E402
from _harness import thread_env  # noqa: E402


def commands(specs: list[str], workload: str) -> dict:
    out = {}
    for spec in specs:
        name, _, rest = spec.partition("=")
        engine, tree, *env_part = rest.split(":", 2)
        if not (name and engine and tree):
            raise SystemExit(f"{spec!r}: expected NAME=ENGINE:TREE[:VAR=VALUE,...]")
        root = Path(tree).resolve()
        env = thread_env(1)
        env["PYTHONPATH"] = str(root)
        for item in filter(None, (env_part[0].split(",") if env_part else [])):
            var, _, value = item.partition("=")
            env[var] = value
        job = {"engine": engine, "workload": workload, "threads": 1}
        out[name] = ([sys.executable, str(root / "bench" / "engine.py"), "--duel-worker", json.dumps(job)], env)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variant", nargs="+", help="NAME=ENGINE:TREE[:VAR=VALUE,...]")
    ap.add_argument("--workload", default="reviews", help="titles, reviews or mixed (bench/_harness.py)")
    ap.add_argument("--seconds", type=float, default=60, help="seconds of rounds (default 60)")
    ap.add_argument("--slot", type=float, default=0.4, help="seconds per slot (default 0.4)")
    ap.add_argument("--min-rounds", type=int, default=10)
    a = ap.parse_args()
    cmds = commands(a.variant, a.workload)
    d = _duel.run(cmds, slot_s=a.slot, budget_s=a.seconds, min_rounds=a.min_rounds, max_rounds=60)
    print(f"{a.workload}: {d['rounds']} rounds in {d['seconds']:.0f} s, load average {d['load'][0]:.1f} -> "
          f"{d['load'][1]:.1f}" + (f"; failed: {d['failures']}" if d["failures"] else ""))
    names = [n for n in cmds if n in d["meta"]]
    for n in names:
        s = _duel.engine_stats(d, n)
        print(f"  {n:10s} {s['sps']:7.2f} sentences/s wall, {s['sps'] * s['rate_cpu'] / s['rate_wall']:7.2f} "
              f"per CPU-second; {s['ms_cpu']:7.1f} CPU ms a batch")
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            parts = []
            for kind in ("wall", "cpu"):
                p = _duel.paired(d, x, y, kind)
                if p:
                    parts.append(f"{kind} {p['median']:.3f} [{p['p25']:.3f}-{p['p75']:.3f}]")
            print(f"  {x} ÷ {y}: " + ", ".join(parts) + f" (n={p['n'] if p else 0})")


if __name__ == "__main__":
    main()
