"""The one compiled library, what this CPU offers, and which path runs.

Loads ``qkv/kernels/_kernels.so`` (every ``*.c`` under ``qkv/kernels/``, built by
``python -m qkv.kernels.build`` or at install) with ctypes, or the library named by
``QKV_KERNELS_LIB=/path/lib.so`` (e.g. one built for another target: the tests run the kernels
against an x86-64-v3 build that way). It is not loaded when ``QKV_KERNELS=0`` is set, when it is
missing or older than a source, or when it was built for instructions this CPU lacks (its
``qkv_built_for()`` against ``/proc/cpuinfo``): then ``lib`` is None and every kernel runs its
NumPy twin (``qkv.kernels.float32``, ``.bfloat16``, ``.q4``).

The bfloat16 unit is chosen here at import, best first:

- ``amx``: AMX tiles (TDPBF16PS), where CPUID reports AMX-TILE and AMX-BF16 (with AVX-512 BF16,
  which the rounding of x uses), XCR0 says the OS saves the tile state, and Linux grants this
  process the tile data state (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``);
- ``avx512bf16``: AVX-512 BF16 dot products (VDPBF16PS), e.g. AMD Zen 4;
- ``float32``: neither — bfloat16 callers run the float32 product.

``QKV_ISA=amx|avx512bf16|float32`` is the best unit this process may use: the search starts
there, and ``offered()`` names nothing above it, so a machine with more features runs (and its
tests check) the lesser paths as a CPU without them would — ``QKV_ISA=avx512bf16`` on an AMX
Xeon stands in for AMD Zen 4, ``QKV_ISA=float32`` for a CPU with neither. A unit the CPU lacks
or the kernel refuses falls to the next, never a crash.

4-bit products (``Q4``, ``q4_offered()``) run on AMX tiles where the bfloat16 unit is AMX; else on
integer dot products over x quantised to int8 blocks (``qkv/kernels/q4/int8.c``): "vnni" (AVX-512
VNNI, e.g. Zen 4) unless ``QKV_ISA`` (or ``select``'s ``want``) is float32, which stands in for a
CPU with no AVX-512 unit, then "avx2"; else the float32 kernel. ``QKV_Q4=amx|vnni|avx2|float32``
or ``select(q4=...)`` forces one (tests run each; the parity tests the exact ones). int8 products
(``precision="int8"``, ``qkv/kernels/int8``; ``I8``, ``i8_offered()``) run on "vnni" where the CPU has
AVX-512 VNNI and ``QKV_ISA`` is not float32, else "avx2", else "numpy" (the twin); ``QKV_INT8`` or
``select(i8=...)`` forces one. ``ISA`` is the bfloat16 unit in use, ``WHY`` the reasons any better one was passed over, ``STATUS``
says all of it in one line (``qkv info``). This module imports nothing from qkv.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
DEFAULT_LIB = HERE / "_kernels.so"
SOURCES = sorted(HERE.rglob("*.c"))  # all compiled into one library (qkv.kernels.build)

_p, _i64, _f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
_SIGNATURES = {
    # float32/kernels.c
    "qkv_bias_gelu": (_p, _p, _i64, _i64),
    "qkv_add_layernorm": (_p, _p, _p, _p, _p, _i64, _i64, _f32),
    "qkv_softmax_rows": (_p, _i64, _i64, _f32, _p, _i64),
    "qkv_online_softmax_tile": (_p, _i64, _i64, _i64, _p, _p, _p),
    "qkv_exp_tile": (_p, _i64, _i64, _i64, _p),
    "qkv_panel_matmul_f16bits": (_p, _i64, _i64, _p, _i64, _p, _p),
    "qkv_gemm": (_p, _i64, _i64, _p, _i64, _p, ctypes.c_int, _p),
    "qkv_panel_width": (),
    "qkv_attention_work": (_i64, _i64, _i64),
    "qkv_attention_heads": (_p, _p, _p, _i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64, _i64,
                            _i64, _i64, _i64, _i64, _f32, _p, _p),
    "qkv_attention_texts": (_p, _i64, _p, _p, _i64, _i64, _i64, _f32, _p, _i64, _p),
    # bfloat16/kernels.c
    "qkv_bf16_cpu": (),
    "qkv_amx_request": (),
    "qkv_bf16_panel_width": (),
    "qkv_bf16_depth": (),
    "qkv_gemm_bf16": (_p, _i64, _i64, _p, _i64, _i64, _p, ctypes.c_int, _p, _i64),
    "qkv_gemm_bf16_io": (_p, _p, _i64, _i64, _p, _i64, _i64, _p, ctypes.c_int, _p, _p, _i64),
    "qkv_bf16_rows_padded": (_i64,),
    "qkv_bf16_profile": (_i64, _p),
    "qkv_attention_bf16_io": (_p, _p, _i64, _i64, _i64, _f32, _p, _p, _i64, _p),
    "qkv_attention_bf16_dp_io": (_p, _p, _i64, _i64, _i64, _f32, _p, _p, _i64, _p),
    "qkv_add_layernorm_bf16": (_p, _p, _p, _p, _p, _i64, _i64, _f32, _p),
    "qkv_attention_bf16_work": (_i64,),
    "qkv_amx_peak": (_i64,),
    "qkv_attention_bf16": (_p, _i64, _i64, _i64, _f32, _p, _i64, _p),
    # q4/kernels.c: products on 4-bit blocks
    "qkv_q4_block_bytes": (),
    "qkv_q4_matmul": (_p, _i64, _i64, _p, _i64, _p, ctypes.c_int, _p),
    "qkv_q4_expand": (_p, _i64, _i64, _p),
    "qkv_q4_gemm": (_p, _i64, _i64, _p, _i64, _p, ctypes.c_int, _p, _p),
    "qkv_q4_rows": (_p, _i64, _p, _i64, _p),
    # q4/amx.c: the same products on AMX tiles, x split into three bfloat16 parts
    "qkv_q4_amx": (_p, _i64, _i64, _p, _i64, _p, ctypes.c_int, _p),
    "qkv_q4_amx_vbmi": (_i64,),
    # q4/int8.c: the same products with x in int8 blocks, integer dot products (AVX-512 VNNI, AVX2)
    "qkv_q4_int_cpu": (),
    "qkv_q4_int": (_p, _i64, _i64, _p, _i64, _p, ctypes.c_int, _p, _i64),
    "qkv_q4_int_ffn": (_p, _i64, _i64, _p, _i64, _p, _p, _i64, _p, _p, _i64),
    # q4/layer.c: a whole layer for one short text on 4-bit weights (qkv.model.layer_q4)
    "qkv_q4_layer_work": (_i64, _i64, _i64, _i64),
    "qkv_q4_layer": (_p, _i64, _i64, _i64, _i64, _f32, _f32, *([_p] * 12), _p, _p, _i64),
    "qkv_q4_stack": (_p, _i64, _i64, _p, _i64, _i64, _i64, _f32, _f32, _p, _p, _i64),
    # int8/kernels.c: float32 models' products on int8 weights (per column) and rows (per row)
    "qkv_i8_gemm": (_p, _i64, _i64, _p, _p, _p, _i64, _p, ctypes.c_int, _p, _i64, _i64),
}
_RETURNS = {"qkv_panel_width": _i64, "qkv_attention_work": _i64,
            "qkv_q4_block_bytes": _i64, "qkv_bf16_cpu": _i64, "qkv_amx_request": _i64,
            "qkv_bf16_panel_width": _i64, "qkv_bf16_depth": _i64, "qkv_gemm_bf16": _i64, "qkv_gemm_bf16_io": _i64,
            "qkv_attention_bf16_io": _i64, "qkv_attention_bf16_dp_io": _i64,
            "qkv_bf16_rows_padded": _i64, "qkv_attention_bf16_work": _i64,
            "qkv_amx_peak": _i64, "qkv_attention_bf16": _i64, "qkv_q4_amx": _i64, "qkv_q4_amx_vbmi": _i64,
            "qkv_q4_int_cpu": _i64, "qkv_q4_int": _i64, "qkv_q4_int_ffn": _i64,
            "qkv_q4_layer_work": _i64, "qkv_q4_layer": _i64, "qkv_q4_stack": _i64,
            "qkv_i8_gemm": _i64}  # the rest return nothing


# ------------------------------------------------------------------------------ the CPU, the target
def cpu_flags() -> set[str] | None:
    """The CPU's feature flags as Linux names them (/proc/cpuinfo), or None where unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return None


def target_name(features: set[str]) -> str:
    """A library's compile target in words, from the features it was built with."""
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= features:
        return "x86-64-v4 (AVX-512)"
    if {"avx2", "fma"} <= features:
        return "x86-64-v3 (AVX2 + FMA)"
    return "baseline (no AVX2)" if os.uname().machine == "x86_64" else os.uname().machine


def lib_path() -> Path:
    """The library to load: ``QKV_KERNELS_LIB`` when set, else the installed one."""
    named = os.environ.get("QKV_KERNELS_LIB", "").strip()
    return Path(named) if named else DEFAULT_LIB


def _load(path: Path, flags: set[str] | None) -> tuple[ctypes.CDLL | None, str, set[str]]:
    """(library or None, why, the features it was built for)."""
    if os.environ.get("QKV_KERNELS", "1").strip().lower() in ("0", "off", "false", "no"):
        return None, "disabled by QKV_KERNELS=0", set()
    if not path.is_file():
        hint = "QKV_KERNELS_LIB names no file" if path != DEFAULT_LIB else "needs a C compiler at install time"
        return None, f"{path} not built ({hint})", set()
    if path == DEFAULT_LIB:  # a library named by QKV_KERNELS_LIB is the caller's to keep current
        for src in SOURCES:
            if src.stat().st_mtime > path.stat().st_mtime + 1:
                return None, f"{path.name} is older than {src.relative_to(HERE)}: run `python -m qkv.kernels.build`", set()
    try:
        lib = ctypes.CDLL(str(path))
        for name, args in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, _RETURNS.get(name)
    except (OSError, AttributeError) as e:
        return None, f"{path.name} could not be loaded: {e}", set()
    built = _built_for(lib)
    missing = sorted(built - flags) if flags is not None else []
    if missing:
        return None, (f"{path.name} was built for {target_name(built)} but this CPU lacks {', '.join(missing)}: "
                      "rebuild it here with `python -m qkv.kernels.build`"), built
    return lib, "loaded", built


def _built_for(lib: ctypes.CDLL) -> set[str]:
    """The features ``lib`` was compiled to use (a constant string: safe to read on any CPU); an
    older build without ``qkv_built_for`` (bench/bf16.py's ab section loads one) says nothing."""
    fn = getattr(lib, "qkv_built_for", None)
    if fn is None:
        return set()
    fn.argtypes, fn.restype = (), ctypes.c_char_p
    return set(fn().decode().split())


LIB_PATH = lib_path()
lib, LOADED, BUILT_FOR = _load(LIB_PATH, cpu_flags())
TARGET = target_name(BUILT_FOR) if lib is not None else "none"  # what the float32 kernels were compiled for


def blas_takes_batches(built: set[str], flags: set[str] | None) -> bool:
    """True when NumPy's BLAS multiplies float32 batches faster than this library: the library was
    built without AVX-512 (an x86-64-v3 build, what an AVX2 CPU compiles). Then the float32
    products of more than a few rows go to BLAS (``qkv.model.linear.choose``); a few rows (a lone
    query) stay with the library. Measured one thread, the v3 build's blocked product against
    NumPy's matmul plus the same compiled bias and GELU, on all four MiniLM shapes
    (docs/engine.md, "Performance"):
    - on this project's Xeon (AVX-512), where OpenBLAS picks its wider AVX-512 kernels: BLAS
      1.3-1.6x faster from 96 rows, the v3 product faster or even up to 32 rows (12 rows: 1.0-2.2x);
    - on an AMD EPYC Zen 3 (AVX2 only), where both run AVX2: BLAS (in one-thread blocks of 128
      rows, ``linear.BLAS_BLOCK``) 1.1-1.4x faster from 48 rows, 1.05-1.16x at 32, the v3 product
      faster at 12 rows and fewer (1.05-2.0x).
    An AVX-512 build keeps every product (faster than OpenBLAS on the Xeon)."""
    return bool(built) and "avx512f" not in built and flags is not None


BLAS_BATCHES = lib is not None and blas_takes_batches(BUILT_FOR, cpu_flags())


def available() -> bool:
    """True when the compiled kernels are in use (see ``STATUS`` for why not)."""
    return lib is not None


def native(*arrays) -> bool:
    """The compiled kernels are loaded and every array is float32 and C-contiguous."""
    return lib is not None and all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


def ptr(a: np.ndarray | None):
    return None if a is None else a.ctypes.data


# ------------------------------------------------------------------------------ the bfloat16 unit
ISAS = ("amx", "avx512bf16", "float32")
_CPU_AVX512BF16, _CPU_AMX, _OS_AMX = 1, 2, 4  # bits of qkv_bf16_cpu()
ISA_CODE = {"avx512bf16": 1, "amx": 2}  # the unit as the C kernels take it


def cpu_bits() -> int:
    """What the CPU and OS offer (bits above, from CPUID and XGETBV); 0 without the library."""
    return int(lib.qkv_bf16_cpu()) if lib is not None else 0


def request_amx() -> bool:
    """Ask Linux for the AMX tile data state for this process (idempotent)."""
    return lib is not None and bool(lib.qkv_amx_request())


def ceiling() -> str | None:
    """The best unit ``QKV_ISA`` lets this process use, or None (no limit, or not a unit's name)."""
    want = os.environ.get("QKV_ISA", "").strip().lower()
    return want if want in ISAS else None


def offered() -> list[str]:
    """The units this CPU has (before any permission request) up to ``QKV_ISA``, best first;
    float32 always."""
    bits = cpu_bits()
    out = []
    if bits & _CPU_AMX and bits & _OS_AMX and bits & _CPU_AVX512BF16:
        out.append("amx")
    if bits & _CPU_AVX512BF16:
        out.append("avx512bf16")
    cap = ceiling()
    return [u for u in out if cap is None or ISAS.index(u) >= ISAS.index(cap)] + ["float32"]


def choose(want: str | None = None) -> tuple[str, str]:
    """(unit, why): the best unit from ``want`` (default ``QKV_ISA``, else the best) down that
    this process can use, and why each better one was passed over."""
    want = (os.environ.get("QKV_ISA", "") if want is None else want).strip().lower()
    why = []
    if want and want not in ISAS:
        why.append(f"QKV_ISA={want!r} is not one of {', '.join(ISAS)}: ignored")
        want = ""
    if lib is None:
        return "float32", "; ".join(why + ["the compiled kernels are not in use"])
    cap = ceiling()
    start = ISAS.index(want) if want else 0
    if cap is not None and start < ISAS.index(cap):
        why.append(f"{', '.join(ISAS[start:ISAS.index(cap)])}: above QKV_ISA={cap}")
        start = ISAS.index(cap)
    bits = cpu_bits()
    for isa in ISAS[start:]:
        if isa == "amx":
            if not bits & _CPU_AMX:
                why.append("amx: the CPU has no AMX-BF16")
            elif not bits & _OS_AMX:
                why.append("amx: the OS does not enable the tile state (XCR0)")
            elif not bits & _CPU_AVX512BF16:
                why.append("amx: the CPU has no AVX-512 BF16 (used to round x)")
            elif not request_amx():
                why.append("amx: Linux refused the tile data permission (arch_prctl)")
            else:
                return isa, "; ".join(why)
        elif isa == "avx512bf16":
            if bits & _CPU_AVX512BF16:
                return isa, "; ".join(why)
            why.append("avx512bf16: the CPU (or OS) has no AVX-512 BF16")
        else:
            return isa, "; ".join(why)
    raise AssertionError("unreachable: float32 is always offered")


# ------------------------------------------------------------------------------ the 4-bit unit
Q4_UNITS = ("amx", "vnni", "avx2", "float32")
Q4_WORDS = {"amx": "amx (x in three exact bfloat16 parts)", "vnni": "vnni (int8 blocks)",
            "avx2": "avx2 (int8 blocks)", "float32": "float32"}
_INT_VNNI, _INT_AVX2 = 1, 2  # bits of qkv_q4_int_cpu()


def q4_offered(cap: str | None = None) -> list[str]:
    """The 4-bit units this CPU has up to ``cap`` (a bfloat16 unit's name as ``QKV_ISA``; default
    the ``QKV_ISA`` ceiling), best first; float32 always. A cap of float32 leaves out VNNI: it
    stands in for a CPU with no AVX-512 unit (an AVX2 laptop)."""
    env = ceiling()  # the stricter of the two
    cap = env if cap is None or (env is not None and ISAS.index(env) > ISAS.index(cap)) else cap
    ints = int(lib.qkv_q4_int_cpu()) if lib is not None else 0
    out = ["amx"] if "amx" in offered() and (cap in (None, "amx")) else []
    if ints & _INT_VNNI and cap != "float32":
        out.append("vnni")
    if ints & _INT_AVX2:
        out.append("avx2")
    return out + ["float32"]


def q4_choose(want: str | None = None, cap: str | None = None) -> str:
    """The 4-bit unit: ``want`` if this process can run it, else the next one down that it can
    ("amx" falls to the float32 kernel: both are exact), or, with no ``want``, ``QKV_Q4`` if set
    (``QKV_Q4=float32`` forces the exact float32 kernel), else "amx" where the bfloat16 unit is
    AMX, else the best integer unit ``q4_offered(cap)`` names, else float32."""
    if want is not None and want not in Q4_UNITS:
        raise ValueError(f"4-bit products run on one of {', '.join(Q4_UNITS)}, not {want!r}")
    if lib is None:
        return "float32"
    have = q4_offered(cap)
    if want is None:
        want = os.environ.get("QKV_Q4", "").strip().lower() or None
        if want is not None and want not in Q4_UNITS:
            want = None  # an unknown name: the default, as an unknown QKV_ISA is ignored
    if want is None:
        return "amx" if ISA == "amx" else next(u for u in have if u != "amx")
    if want == "amx":
        return "amx" if "amx" in have and request_amx() else "float32"
    return next(u for u in Q4_UNITS[Q4_UNITS.index(want):] if u in have)


# ------------------------------------------------------------------------------ the int8 unit
I8_UNITS = ("vnni", "avx2", "numpy")
I8_WORDS = {"vnni": "vnni (AVX-512 VNNI dot products)", "avx2": "avx2 (VPMADDUBSW dot products)",
            "numpy": "numpy (no compiled int8 unit)"}


def i8_offered(cap: str | None = None) -> list[str]:
    """The int8 units (``precision="int8"``, ``qkv/kernels/int8``) this CPU has up to ``cap`` (a
    bfloat16 unit's name, as ``QKV_ISA``; default the ``QKV_ISA`` ceiling), best first; "numpy"
    (the twin) always. As for the 4-bit units, a cap of float32 stands in for an AVX2 laptop."""
    return [u for u in q4_offered(cap) if u in ("vnni", "avx2")] + ["numpy"]


def i8_choose(want: str | None = None, cap: str | None = None) -> str:
    """The int8 unit: ``want`` (else ``QKV_INT8``, else the best) where this process can run it,
    else the next one down."""
    if want is not None and want not in I8_UNITS:
        raise ValueError(f"int8 products run on one of {', '.join(I8_UNITS)}, not {want!r}")
    if want is None:
        want = os.environ.get("QKV_INT8", "").strip().lower() or None
        if want not in I8_UNITS:
            want = None  # unset or an unknown name: the best, as an unknown QKV_ISA is ignored
    have = i8_offered(cap)
    return next(u for u in I8_UNITS[I8_UNITS.index(want or I8_UNITS[0]):] if u in have)


ISA, WHY, STATUS, Q4, I8 = "float32", "", LOADED, "float32", "numpy"


def select(want: str | None = None, q4: str | None = None, i8: str | None = None) -> str:
    """Choose the unit again (``want`` as ``QKV_ISA``), the 4-bit unit (``q4`` forces one, see
    ``q4_choose``) and the int8 unit (``i8``, see ``i8_choose``); update ``ISA``, ``Q4``, ``I8``,
    ``WHY`` and ``STATUS``; returns the bfloat16 unit.
    Packed weights do not depend on either."""
    global ISA, WHY, STATUS, Q4, I8
    ISA, WHY = choose(want)
    cap = (want or "").strip().lower() or None
    Q4 = q4_choose(q4, cap if cap in ISAS else None)
    I8 = i8_choose(i8, cap if cap in ISAS else None)
    built = f" (built for {TARGET})" if lib is not None else ""
    STATUS = (f"{LOADED}{built}; bfloat16 products: {ISA}" + (f" ({WHY})" if WHY else "")
              + f"; 4-bit products: {Q4_WORDS[Q4]}; int8 products: {I8_WORDS[I8]}")
    return ISA


select()
