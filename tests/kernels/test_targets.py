"""The kernels built for another target than this machine, and the loader's checks of a build.

Installs build with -march=native. A user's machine is often an AVX2 laptop or VM (x86-64-v3: AVX2
+ FMA, no AVX-512): here the library is built for that target into a temporary file and the kernel
tests run against it in a child process (``QKV_KERNELS_LIB``), so that path is checked from a
machine with AVX-512. The bfloat16 and AMX kernels carry their own target attributes and stay in
such a build, run only where CPUID finds their units.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from qkv.kernels import build, cpu

ROOT = Path(__file__).resolve().parents[2]
V3 = "x86-64-v3"
x86 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="x86-64 targets")


@pytest.fixture(scope="module")
def v3_lib(tmp_path_factory):
    """The library built for x86-64-v3 (once for this module)."""
    if build.compiler() is None:
        pytest.skip("no C compiler on this machine: qkv runs the NumPy twins (tested in test_float32.py)")
    said = []
    out = build.build(out=tmp_path_factory.mktemp("v3") / "kernels_v3.so", march=V3, log=said.append)
    if out is None and any(w in said[0] for w in ("bad value", "unrecognized", "unknown target")):
        pytest.skip(f"this compiler does not know -march={V3}: {said[0][-200:]}")
    assert out is not None, said
    return out


def _env(lib: Path) -> dict:
    env = dict(os.environ, QKV_KERNELS_LIB=str(lib), PYTHONPATH=str(ROOT))
    env.pop("QKV_KERNELS", None)  # the child must load the library it is given
    return env


def _child_pytest(lib: Path, *args: str) -> str:
    """Run pytest on ``args`` in a child using ``lib``; returns its report after checking that it
    passed and that nothing was skipped for want of the compiled kernels."""
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args],
                         capture_output=True, text=True, env=_env(lib), cwd=ROOT)
    report = res.stdout + res.stderr
    assert res.returncode == 0, report[-4000:]
    assert " passed" in report and "compiled kernels" not in report, report[-4000:]
    return report


@x86
def test_the_v3_build_uses_no_avx512_and_the_loader_names_its_target(v3_lib):
    out = subprocess.run([sys.executable, "-c", "from qkv.kernels import cpu; print(cpu.TARGET); "
                          "print(' '.join(sorted(cpu.BUILT_FOR))); print(cpu.STATUS); print(cpu.LIB_PATH); "
                          "print(cpu.BLAS_BATCHES)"],
                         capture_output=True, text=True, env=_env(v3_lib), check=True).stdout.splitlines()
    target, built, status, path, wider = out[0], set(out[1].split()), out[2], out[3], out[4]
    assert target == "x86-64-v3 (AVX2 + FMA)" and {"avx2", "fma"} <= built
    assert not any(f.startswith(("avx512", "amx")) for f in built)
    assert status.startswith("loaded (built for x86-64-v3") and path == str(v3_lib)
    # float32 batches go to OpenBLAS wherever this build (which has no AVX-512) runs
    assert wider == "True"


@x86
def test_float32_and_4bit_kernels_pass_against_the_v3_build(v3_lib):
    """The default tier: every float32 kernel test, the 4-bit float32 kernel at its block edges, and
    the int8 units (VNNI and AVX2 carry their own target attributes)."""
    _child_pytest(v3_lib, "tests/kernels/test_float32.py", "tests/kernels/test_q4.py", "tests/kernels/test_int8.py",
                  "-k", "not amx and not build")  # the build itself is tested in test_float32.py


@pytest.mark.slow
@x86
def test_every_kernel_test_passes_against_the_v3_build(v3_lib):
    """All of tests/kernels (bfloat16 and tiles too, where this CPU has them) against the v3 build."""
    _child_pytest(v3_lib, "tests/kernels", "--ignore", "tests/kernels/test_targets.py")


def test_qkv_info_names_the_librarys_target():
    from qkv.cli.info import info_dict

    d = info_dict()
    assert d["built_for"] == cpu.TARGET and d["library"] == str(cpu.LIB_PATH)
    assert ("NumPy's BLAS for batches" in d["float32_products"]) == cpu.BLAS_BATCHES
    if cpu.available():
        assert f"built for {cpu.TARGET}" in d["kernels"]


@pytest.mark.skipif(not cpu.available(), reason=f"compiled kernels: {cpu.STATUS}")
def test_a_library_built_for_features_this_cpu_lacks_is_not_loaded():
    """A library moved to a CPU without the instructions it was built for would die of SIGILL at
    the first product: the loader refuses it (here: as if the CPU had none of them), and says how
    to rebuild."""
    lib, why, built = cpu._load(cpu.LIB_PATH, set())
    if not built:
        pytest.skip("this library was built for the baseline: nothing it needs can be missing")
    assert lib is None and "lacks" in why and "python -m qkv.kernels.build" in why
    lib, why, _ = cpu._load(cpu.LIB_PATH, set(built))
    assert lib is not None and why == "loaded"


def test_a_named_library_that_is_missing_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("QKV_KERNELS", raising=False)
    monkeypatch.setenv("QKV_KERNELS_LIB", str(tmp_path / "none.so"))
    path = cpu.lib_path()
    assert path == tmp_path / "none.so"
    lib, why, _ = cpu._load(path, cpu.cpu_flags())
    assert lib is None and "QKV_KERNELS_LIB names no file" in why


def test_without_the_library_an_encoder_gives_the_compiled_vectors(encoder, tmp_path):
    """A machine with no compiler (QKV_KERNELS=0 stands in) runs every step's NumPy twin: the
    sentence vectors are the compiled ones within the bound the kernels are held to (2e-5,
    test_float32.py's test_encoder_is_the_same_with_and_without_the_kernels)."""
    import numpy as np

    texts = ["Stainless Steel Electric Kettle 1.7L", "透气跑鞋 men", "a long review of a kettle " * 12]
    compiled = encoder.encode(texts)
    script = ("import sys, numpy as np, qkv; from qkv.kernels import cpu; print(cpu.STATUS); "
              f"np.save(sys.argv[1], qkv.load().encode({texts!r}))")
    env = dict(os.environ, QKV_KERNELS="0", PYTHONPATH=str(ROOT))
    env.pop("QKV_KERNELS_LIB", None)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "v.npy")], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert out.startswith("disabled by QKV_KERNELS=0") and "bfloat16 products: float32" in out
    plain = np.load(tmp_path / "v.npy")
    assert plain.shape == compiled.shape == (3, 384)
    np.testing.assert_allclose(plain, compiled, atol=2e-5)
