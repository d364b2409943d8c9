"""Compile every C source under ``qkv/kernels/`` into the one library ``qkv/kernels/_kernels.so``.

Run at install time by ``hatch_build.py`` (so ``pip install -e .`` and ``make`` build it), or by
hand after editing a C file: ``python -m qkv.kernels.build``. It needs a C compiler (``$CC``,
``cc``, ``gcc`` or ``clang``). Without one, or if compiling fails, nothing is built and qkv runs the
NumPy twins (slower, same results within the stated bounds). This module imports nothing from
qkv, so the build hook can load it by path before anything is installed.

``build(march=...)`` compiles for another target than this machine, e.g. ``x86-64-v3`` (AVX2 +
FMA, no AVX-512): the float32 kernels then use only that target's instructions, and the bfloat16
and AMX kernels, which carry per-function target attributes, stay in the library and run only
where CPUID finds their units. ``python -m qkv.kernels.build --march x86-64-v3 --out /tmp/v3.so``
and ``QKV_KERNELS_LIB=/tmp/v3.so`` run qkv on such a build (tests/kernels/test_targets.py does).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# float32/kernels.c holds the float32 products and fused steps; the others (bfloat16/, q4/) add
# products of their own and call its exported functions, so all go into one library.
SOURCES = sorted(HERE.rglob("*.c"))
OUT = HERE / "_kernels.so"
# -fopenmp-simd: honour `#pragma omp simd` without the OpenMP runtime. -fno-math-errno: no errno
# bookkeeping around maths calls (sqrt), which would stop vectorisation.
FLAGS = ["-O3", "-fPIC", "-shared", "-fno-math-errno", "-fopenmp-simd", "-Wno-psabi"]


def compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build(src: Path | list[Path] | None = None, out: Path = OUT, log=print, march: str = "native") -> Path | None:
    """Build the library for ``march`` (default: this machine, which installs are built on and
    run on); returns its path, or None (with the reason logged) when it could not."""
    srcs = SOURCES if src is None else ([src] if isinstance(src, Path) else list(src))
    out = Path(out)
    cc = compiler()
    if cc is None:
        log("qkv: no C compiler found; the NumPy kernels will be used")
        return None
    tmp = out.with_name(out.name + ".tmp")
    errors = ""
    # 512-bit vectors where the target has them (AVX-512: twice the lanes of the compiler's
    # default); some compilers lack these flags, hence the fallbacks. A named target other than
    # native is never dropped: a library for the wrong target would be worse than none.
    tries = [[f"-march={march}", "-mprefer-vector-width=512"], [f"-march={march}"]]
    for extra in tries + ([[]] if march == "native" else []):
        cmd = [cc, *FLAGS, *extra, *map(str, srcs), "-o", str(tmp), "-lm"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode == 0:
            os.replace(tmp, out)  # atomic: a running process keeps the old file
            return out
        errors = res.stderr.strip()
    tmp.unlink(missing_ok=True)
    log(f"qkv: compiling {', '.join(s.name for s in srcs)} failed; the NumPy kernels will be used:\n{errors}")
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m qkv.kernels.build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--march", default="native", help="the compiler's -march (default: this machine)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"where to write the library (default {OUT})")
    args = ap.parse_args(argv)
    path = build(out=args.out, march=args.march)
    print(f"built {path}" if path else "not built")
    return 0 if path else 1


if __name__ == "__main__":
    sys.exit(main())
