"""Compile every ``qkv/_kernels*.c`` source into the one library ``qkv/_kernels.so``.

Run at install time by ``hatch_build.py`` (so ``pip install -e .`` and ``make`` build it), or by
hand after editing the C file: ``python -m qkv._build_kernels``. It needs a C compiler (``$CC``,
``cc``, ``gcc`` or ``clang``). Without one, or if compiling fails, nothing is built and qkv runs the
NumPy twins in ``qkv.kernels`` (slower, same results). This module imports nothing from qkv, so
the build hook can load it before anything is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "_kernels.c"
# _kernels.c holds the float32 products and fused steps; others (_kernels_q4.c: 4-bit blocks) add
# products of their own and may call its exported functions, so all go into one library.
SOURCES = sorted(HERE.glob("_kernels*.c"))
OUT = HERE / "_kernels.so"
# -fopenmp-simd: honour `#pragma omp simd` without the OpenMP runtime. -fno-math-errno: no errno
# bookkeeping around maths calls (sqrt), which would stop vectorisation. -march=native: the
# kernels are built on the machine that runs them, so they may use all of its vector width.
FLAGS = ["-O3", "-fPIC", "-shared", "-fno-math-errno", "-fopenmp-simd", "-Wno-psabi"]


def compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build(src: Path | list[Path] | None = None, out: Path = OUT, log=print) -> Path | None:
    """Build the library; returns its path, or None (with the reason logged) when it could not."""
    srcs = SOURCES if src is None else ([src] if isinstance(src, Path) else list(src))
    cc = compiler()
    if cc is None:
        log("qkv: no C compiler found; the NumPy kernels will be used")
        return None
    tmp = out.with_name(out.name + ".tmp")
    errors = ""
    # 512-bit vectors where the CPU has them (AVX-512: twice the lanes of the compiler's default);
    # some compilers lack these flags, hence the fallbacks.
    for extra in (["-march=native", "-mprefer-vector-width=512"], ["-march=native"], []):
        cmd = [cc, *FLAGS, *extra, *map(str, srcs), "-o", str(tmp), "-lm"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode == 0:
            os.replace(tmp, out)  # atomic: a running process keeps the old file
            return out
        errors = res.stderr.strip()
    tmp.unlink(missing_ok=True)
    log(f"qkv: compiling {', '.join(s.name for s in srcs)} failed; the NumPy kernels will be used:\n{errors}")
    return None


if __name__ == "__main__":
    path = build()
    print(f"built {path}" if path else "not built")
    sys.exit(0 if path else 1)
