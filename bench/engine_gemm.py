"""bench/engine.py's parity and gemm sections: the three engines give the same hidden states before
anything is timed (table 1); the machine's float32 matmul peak and the encoder's four product
shapes, qkv's own product beside numpy's and torch's (tables 2, 2b)."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from _harness import WORKLOADS, load_torch_model, median, onnx_path, ort_session, timed, workload_batches

def worker_export(job: dict) -> dict:
    """Export transformers' BertModel (same weights as qkv) to ONNX with dynamic batch and length."""
    import qkv
    from _onnx import export_last_hidden_state

    enc = qkv.load()
    out = onnx_path(enc.fingerprint())
    if out.is_file():
        return {"path": str(out), "cached": True, "int8": _quantized(out)}
    out.parent.mkdir(parents=True, exist_ok=True)
    model = load_torch_model(1)

    t0 = time.perf_counter()
    export_last_hidden_state(model, out, enc.config.max_tokens)
    return {"path": str(out), "cached": False, "seconds": time.perf_counter() - t0, "int8": _quantized(out)}

def _quantized(path: Path) -> str | None:
    """ONNX Runtime's dynamic int8 quantization of the exported model (weights int8 per tensor,
    activations quantized on the fly: the usual CPU recipe), cached beside it; None if it fails."""
    out = path.with_name(path.stem + "-int8.onnx")
    if not out.is_file():
        try:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            tmp = out.with_suffix(".tmp.onnx")
            quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8)
            tmp.replace(out)
        except Exception as e:  # noqa: BLE001 — reported as a missing row, never a crash
            print(f"int8 quantization failed: {e}", file=sys.stderr)
            return None
    return str(out)


def worker_parity(job: dict) -> dict:
    """Max |diff| of the last hidden states, real tokens only, between the three engines."""
    import numpy as np
    import torch

    import qkv

    enc = qkv.load(threads=1)
    model = load_torch_model(1)
    sess = ort_session(Path(job["onnx"]), 1)
    res = {}
    for wl in WORKLOADS:
        _, ids, mask = workload_batches(enc, wl)[0]
        a = enc.forward(ids, mask)
        with torch.inference_mode():
            b = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask.astype(np.int64))
                      ).last_hidden_state.numpy()
        c = sess.run(None, {"input_ids": ids, "attention_mask": mask.astype(np.int64)})[0]
        m = mask
        res[wl] = {"qkv vs transformers": float(np.abs(a - b)[m].max()),
                   "onnxruntime vs transformers": float(np.abs(c - b)[m].max()),
                   "qkv vs onnxruntime": float(np.abs(a - c)[m].max()),
                   "shape": list(ids.shape), "real_tokens": int(m.sum())}
    return res


def worker_gemm(job: dict) -> dict:
    """float32 GEMM GFLOP/s for square sizes and for the encoder's product shapes, median of the
    timed repetitions. lib "qkv": the encoder's own blocked product (qkv.kernels.float32.gemm, one
    thread) on weights packed once, as the encoder holds them; shapes only."""
    import numpy as np

    lib, threads = job["lib"], job["threads"]
    rng = np.random.default_rng(0)
    out = {}
    if lib == "torch":
        import torch

        torch.set_num_threads(threads)
    for m, k, n in job.get("shapes", []):
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        y = np.empty((m, n), np.float32)
        if lib == "torch":
            tx, tw, ty = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(y)
            fn = lambda: torch.mm(tx, tw, out=ty)  # noqa: E731
        elif lib == "qkv":
            from qkv.kernels import cpu as kernels_cpu, float32  # ``cpu`` is this function's CPU times

            panels = float32.pack_panels(w)
            if panels is None:
                return out | {"error": f"compiled kernels not in use: {kernels_cpu.STATUS}"}
            y = float32.aligned_empty((m, n))  # as the encoder's workspace arrays are
            fn = lambda: float32.gemm(x, panels, None, y)  # noqa: E731
        else:
            fn = lambda: np.matmul(x, w, out=y)  # noqa: E731
        wall, cpu = timed(fn, job["reps"])
        out[f"{m}x{k}x{n}"] = {"wall": wall, "cpu": cpu, "flops": 2 * m * k * n}
    for n in job["sizes"]:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        if lib == "torch":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            fn = lambda: torch.mm(ta, tb)  # noqa: E731
        else:
            fn = lambda: a @ b  # noqa: E731
        wall, cpu = timed(fn, job["reps"])
        out[str(n)] = {"wall": wall, "cpu": cpu, "flops": 2 * n ** 3}
    return out


# the four products of a BERT layer for all-MiniLM-L6-v2 on 8 × 256 tokens: Q|K|V, output, FFN in, FFN out
PRODUCT_SHAPES = [(2048, 384, 1152), (2048, 384, 384), (2048, 384, 1536), (2048, 1536, 384)]


def report_parity(console, Table, results: dict, verdicts: list) -> None:
    """Table 1 and its verdict."""
    tb = Table(title="1. Parity before timing: max |diff| of last hidden states (real tokens)")
    tb.add_column("workload")
    tb.add_column("batch [B, L]")
    for c in ("qkv vs transformers", "onnxruntime vs transformers", "qkv vs onnxruntime"):
        tb.add_column(c, justify="right")
    for wl, d in results["parity"].items():
        tb.add_row(wl, str(d["shape"]), *(f"{d[c]:.1e}" for c in
                                          ("qkv vs transformers", "onnxruntime vs transformers", "qkv vs onnxruntime")))
    console.print(tb)
    worst = max(d["qkv vs transformers"] for d in results["parity"].values())
    verdicts.append(("qkv hidden states match transformers (max |diff| < 1e-4)", worst < 1e-4, f"{worst:.1e}", None))


def report_gemm(console, Table, raw: dict, results: dict, threads_list: list[int]) -> dict:
    """Tables 2 and 2b; returns the peak GFLOP/s per (library[-cpu], threads) the encoder tables use."""
    peak: dict[tuple[str, int], float] = {}
    tb = Table(title="2. Machine float32 matmul peak, GFLOP/s (median of repetitions; wall / CPU time)")
    tb.add_column("library")
    tb.add_column("threads", justify="right")
    sizes = [1024, 1536, 2048]
    for n in sizes:
        tb.add_column(f"{n}³", justify="right")
    tb.add_column("peak wall", justify="right")
    tb.add_column("peak CPU", justify="right")
    for t in threads_list:
        for lib in ("numpy", "torch"):
            runs = raw.get(f"gemm|{lib}|{t}", [])
            if not runs:
                continue
            cells, best, best_cpu = [], 0.0, 0.0
            for n in sizes:
                wall = [x for r in runs for x in r[str(n)]["wall"]]
                cpu = [x for r in runs for x in r[str(n)]["cpu"]]
                f = runs[0][str(n)]["flops"]
                gw, gc = f / median(wall) / 1e9, f / median(cpu) / 1e9
                best, best_cpu = max(best, gw), max(best_cpu, gc)
                cells.append(f"{gw:.0f} / {gc:.0f}")
            peak[(lib, t)] = best
            peak[(lib + "-cpu", t)] = best_cpu
            tb.add_row(lib, str(t), *cells, f"[bold]{best:.0f}[/bold]", f"{best_cpu:.0f}")
    console.print(tb)
    tb = Table(title="2b. The encoder's products on a reviews batch (2048 rows × K by K × N), GFLOP/s by CPU "
                     "time; ratio = qkv's time ÷ that library's (< 1: qkv faster)")
    tb.add_column("library")
    tb.add_column("threads", justify="right")
    names = [f"{m}x{k}x{n}" for m, k, n in PRODUCT_SHAPES]
    for name in names:
        tb.add_column(name.replace("x", " × "), justify="right")
    tb.add_column("all four", justify="right")
    shape_cpu: dict[tuple[str, int], dict[str, float]] = {}
    for t in threads_list:
        for lib in ("qkv", "numpy", "torch"):
            runs = [r for r in raw.get(f"gemm|{lib}|{t}", []) if "error" not in r]
            if runs and all(name in runs[0] for name in names):
                shape_cpu[(lib, t)] = {name: median([x for r in runs for x in r[name]["cpu"]]) for name in names}
    ours = shape_cpu.get(("qkv", 1))
    for (lib, t), times in shape_cpu.items():
        cells = []
        for name in names + ["all"]:
            sec = sum(times.values()) if name == "all" else times[name]
            flops = sum(2 * m * k * n for m, k, n in PRODUCT_SHAPES) if name == "all" else \
                2 * math.prod(int(v) for v in name.split("x"))
            cell = f"{flops / sec / 1e9:.0f}"
            if ours and lib != "qkv" and t == 1:
                mine = sum(ours.values()) if name == "all" else ours[name]
                cell += f" ({mine / sec:.2f})"
            cells.append(cell)
        tb.add_row(lib, str(t), *cells)
    errors = [r["error"] for r in raw.get("gemm|qkv|1", []) if "error" in r]
    console.print(tb)
    if errors:
        console.print(f"   qkv's product not measured: {errors[0]}")
    results["gemm_shapes_cpu_s"] = {f"{lib}|{t}": v for (lib, t), v in shape_cpu.items()}
    return peak
