"""`make bench`: issue 25's target tables for this machine (bench/targets.py), or any bench areas.

    .venv/bin/python bench/run.py                  # the targets' tables (bench/targets.py), ~10 min
    .venv/bin/python bench/run.py --quick          # the same, short duels: a smoke check
    .venv/bin/python bench/run.py --isa native,avx512bf16   # and again as a Zen 4 runs it (stand-in)
    .venv/bin/python bench/run.py --rounds 20 --threads 1
    .venv/bin/python bench/run.py --all            # every area found in bench/ (hours)
    .venv/bin/python bench/run.py engine search    # only these areas
    .venv/bin/python bench/run.py --list           # what would run
    .venv/bin/python bench/run.py engine -- --quick   # arguments after -- go to every selected main()

An area is a bench/<name>.py that defines ``main()`` (files starting with "_" and this runner are
skipped). Each runs in a fresh interpreter — torch and numpy in one process fight over threads, and
one area's imports or thread settings must not colour another's figures — with its output streamed
as it comes. A failing area is reported and the rest still run; the exit status is 1 if any failed.
--quick, --rounds, --threads and --isa are the targets area's own options (bench/targets.py).
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_AREA = "targets"  # issue 25: `make bench` prints its targets' tables for the machine it runs on

# Runs the area's main() with sys.argv as the area would see it standalone; exit code = main()'s
# return value (None = 0). Loaded by path so bench/ needs no __init__.py.
_BOOT = """
import importlib.util, sys
path = sys.argv[1]
sys.argv = [path] + sys.argv[2:]
sys.path.insert(0, __import__("os").path.dirname(path))
spec = importlib.util.spec_from_file_location("bench_" + __import__("os").path.basename(path)[:-3], path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
rc = mod.main()
sys.exit(rc if isinstance(rc, int) else 0)
"""


def has_main(path: Path) -> bool:
    """True when the file defines a top-level main() (checked without importing it)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return True  # let it run and fail visibly rather than be skipped silently
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "main" for n in tree.body)


def discover(bench_dir: Path = HERE) -> dict[str, Path]:
    """Area name -> script, sorted by name, for bench/*.py that define main()."""
    out = {}
    for p in sorted(bench_dir.glob("*.py")):
        if p.name.startswith("_") or p.stem == "run" or p.name.startswith("test_"):
            continue
        if has_main(p):
            out[p.stem] = p
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description="Run the qkv benchmarks (bench/<area>.py main()), each in its own process.")
    ap.add_argument("areas", nargs="*", help=f"areas to run (default: {DEFAULT_AREA})")
    ap.add_argument("--all", action="store_true", help="run every area found")
    ap.add_argument("--list", action="store_true", help="list the areas and exit")
    # the targets area's options, passed to it (bench/targets.py)
    ap.add_argument("--quick", action="store_true", help="targets: short duels, a smoke check")
    ap.add_argument("--rounds", type=int, help="targets: at least this many interleaved rounds per table")
    ap.add_argument("--threads", type=int, help="targets: threads per MiniLM engine (default 1)")
    ap.add_argument("--isa", help="targets: native and/or QKV_ISA values, e.g. native,avx512bf16 (Zen 4 stand-in)")
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("QKV_BENCH_TIMEOUT", 3600)),
                    help="seconds allowed per area (default 3600)")
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    console = Console()
    found = discover()
    if args.list:
        for name, path in found.items():
            console.print(f"{name:14s} {path.relative_to(HERE.parent)}")
        return 0
    unknown = [a for a in args.areas if a not in found]
    if unknown:
        console.print(f"[red]unknown area(s): {', '.join(unknown)}; found: {', '.join(found) or 'none'}[/red]")
        return 2
    selected = {a: found[a] for a in (args.areas or (found if args.all else [DEFAULT_AREA] if DEFAULT_AREA in found else []))}
    own = [*(["--quick"] if args.quick else []), *(["--rounds", str(args.rounds)] if args.rounds else []),
           *(["--threads", str(args.threads)] if args.threads else []), *(["--isa", args.isa] if args.isa else [])]
    if own and DEFAULT_AREA not in selected:
        console.print(f"[red]--quick, --rounds, --threads and --isa are the {DEFAULT_AREA} area's options; "
                      f"pass other areas' options after --[/red]")
        return 2
    if not selected:
        console.print("[yellow]no bench/<area>.py with a main() found[/yellow]")
        return 0

    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    summary = []
    for name, path in selected.items():
        console.rule(f"[bold]bench: {name}[/bold]")
        t0 = time.perf_counter()
        try:
            extra = own if name == DEFAULT_AREA else []
            rc = subprocess.run([sys.executable, "-c", _BOOT, str(path), *extra, *passthrough], env=env,
                                cwd=HERE.parent, timeout=args.timeout).returncode
            status = "ok" if rc == 0 else f"failed (exit {rc})"
        except subprocess.TimeoutExpired:
            status = f"failed (timed out after {args.timeout:.0f} s)"
        summary.append((name, status, time.perf_counter() - t0))

    tb = Table(title="make bench — summary")
    tb.add_column("area")
    tb.add_column("status")
    tb.add_column("seconds", justify="right")
    for name, status, secs in summary:
        tb.add_row(name, "[green]ok[/green]" if status == "ok" else f"[red]{status}[/red]", f"{secs:.0f}")
    console.rule()
    console.print(tb)
    return 0 if all(s == "ok" for _, s, _ in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
