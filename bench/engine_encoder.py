"""bench/engine.py's encoder section: sentences and tokens per second on titles, reviews and padded
mixed batches, through the paired duel (bench/_duel.py: tables 3a-3d), the older one-job-per-engine
tables (--per-job), and where qkv's bfloat16 pass spends its time (3e, bench/bf16.py's steps)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import _duel
from _harness import (ENTRY, TARGET_WORKLOADS, WORKLOADS, encoder_flops, fmt_ratio, load_torch_model, median, torch_runner,
                      ort_session, ratio_text, thread_env, timed, workload_batches)


ENGINE_LABEL = {"qkv-encode": "qkv encode()", "onnxruntime": "onnxruntime", "transformers": "transformers",
                "qkv-bf16": "qkv bfloat16", "transformers-bf16": "transformers bfloat16",
                "onnxruntime-int8": "onnxruntime int8 (dynamic)", "qkv-int8": "qkv int8",
                "onnxruntime-int8-pc": "onnxruntime int8 per channel (dynamic)"}
# Issue 25: qkv's precision="int8" against ONNX Runtime's dynamic int8, per tensor and per channel
INT8_ENGINES = ("qkv-int8", "onnxruntime-int8", "onnxruntime-int8-pc")
# Issue 16: qkv in bfloat16 against the best peer at ANY precision (torch with the model cast to
# bfloat16, ONNX Runtime float32, ONNX Runtime with dynamic int8 quantization), same run.
PRECISION_ENGINES = ("qkv-bf16", "transformers-bf16", "onnxruntime-int8")
PEERS = ("transformers", "transformers-bf16", "onnxruntime", "onnxruntime-int8")
BF16_TARGET = 1.2
# the duel's engines per workload (bench/_duel.py); "qkv-encode" joins them in full runs
DUEL_ENGINES = ("qkv", "qkv-bf16") + PEERS
MIXED_ENGINES = ("qkv", "qkv-bf16", "transformers", "onnxruntime")
QUICK_DUEL_S, FULL_DUEL_S = 25.0, 90.0  # seconds of rounds per target duel


def duel_plan(threads_list: list[int], quick: bool, scale: float = 1.0) -> list[dict]:
    """One duel per workload and thread count: its engines, slot length, seconds of rounds and the
    least / most rounds. --quick: slots of ~0.3 s and ~25 s of rounds per target workload (about
    5 min for the encoder section at threads 1,2 with start-up and table 3e); otherwise ~0.5 s and
    90 s. The mixed workload (not a target) gets a third of that."""
    slot, budget = (0.3, QUICK_DUEL_S) if quick else (0.5, FULL_DUEL_S)
    out = []
    for t in threads_list:
        for wl in WORKLOADS:
            target = wl in TARGET_WORKLOADS
            engines = DUEL_ENGINES + (() if quick else ("qkv-encode",)) if target else MIXED_ENGINES
            out.append({"workload": wl, "threads": t, "engines": engines, "slot_s": slot,
                        "budget_s": budget * scale * (1.0 if target else 0.3),
                        "min_rounds": 8 if target else 5, "max_rounds": 60})
    return out


def duel_commands(engines, wl: str, threads: int, files: dict) -> dict:
    """argv and environment of each engine's persistent worker (the same thread environment as
    run_job's: OMP/OPENBLAS/MKL_NUM_THREADS, QKV_THREADS; torch.set_num_threads in the worker)."""
    out = {}
    for eng in engines:
        job = {"engine": eng, "workload": wl, "threads": threads, **files}
        out[eng] = ([sys.executable, str(ENTRY), "--duel-worker", json.dumps(job)],
                    thread_env(threads))
    return out

def encoder_engine(job: dict):
    """Load one engine with a workload's batches, as every encoder measurement runs it: returns
    (meta, run) where run(indices) runs those batches (forward to the last hidden states) and
    meta has each batch's sentences, real and padded tokens and matmul FLOPs. The per-pass jobs
    and the duel's persistent workers both use it, so they time the same code."""
    engine, threads, wl = job["engine"], job["threads"], job["workload"]
    if engine == "fake-spin":  # the duel's tests: a pure-Python loop of job["work"] steps a batch
        n = int(job["work"])

        def run(indices):
            for _ in indices:
                x = 0
                for i in range(n):
                    x += i
        batches = [{"shape": [8, 16], "sentences": 8, "tokens": 128, "padded": 128, "flops": 0}] * 4
        return {"batches": batches}, run

    import numpy as np

    import qkv

    enc = qkv.load(threads=threads)
    batches = workload_batches(enc, wl)
    meta = {"batches": [{"shape": list(ids.shape), "sentences": int(ids.shape[0]), "tokens": int(mask.sum()),
                         "padded": int(ids.size), "flops": encoder_flops(enc.config, *ids.shape)}
                        for _, ids, mask in batches]}
    if engine in ("qkv", "qkv-bf16", "qkv-int8"):
        from qkv.model.threads import blas_threads
        from qkv.model.workspace import Workspace

        precision = {"qkv-bf16": "bfloat16", "qkv-int8": "int8"}.get(engine, "float32")
        # one Workspace reused by every batch, as encode() reuses one for all the batches of a call
        # (fresh scratch arrays every batch cost page faults, and at two threads the freeing of
        # them stalls the other thread too: reviews in bfloat16, 2 threads, 158.7 -> 111.2 CPU ms
        # a batch with the workspace reused; 99.7 -> 95.9 at one thread)
        ws = Workspace()

        def run(indices):
            with blas_threads(threads):  # as encode() does: BLAS threads set once per call
                for i in indices:
                    _, ids, mask = batches[i]
                    enc.forward(ids, mask, precision=precision, workspace=ws)
        if engine == "qkv-bf16":
            from qkv.kernels import cpu as kernels_cpu  # ``cpu`` is this function's CPU times

            meta["unit"] = kernels_cpu.ISA
        if engine == "qkv-int8":
            from qkv.kernels import int8 as kernels_int8

            meta["unit"] = kernels_int8.unit()
    elif engine == "qkv-encode":
        per_batch = WORKLOADS[wl][0]

        def run(indices):
            enc.encode([t for i in indices for t in batches[i][0]], batch_size=per_batch)
    elif engine in ("transformers", "transformers-bf16"):
        import torch

        model = load_torch_model(threads)
        if engine == "transformers-bf16":
            model = model.to(torch.bfloat16)
        run = torch_runner(model, batches)
    elif engine in ("onnxruntime", "onnxruntime-int8", "onnxruntime-int8-pc"):
        if engine == "onnxruntime-int8-pc":  # made from the float32 export on first use, cached beside it
            from _onnx import quantized

            model_file = quantized(Path(job["onnx"]), per_channel=True)
        else:
            model_file = Path(job["onnx_int8" if engine == "onnxruntime-int8" else "onnx"])
        sess = ort_session(model_file, threads)
        feeds = [{"input_ids": ids, "attention_mask": mask.astype(np.int64)} for _, ids, mask in batches]

        def run(indices):
            for i in indices:
                sess.run(None, feeds[i])
    else:
        raise ValueError(f"unknown engine {engine!r}")
    return meta, run


def worker_encoder(job: dict) -> dict:
    """Time whole passes over a workload's batches in one process (the per-job measurement, kept
    for comparison with the duel: ``--per-job``)."""
    meta, run = encoder_engine(job)
    nb = len(meta["batches"])
    wall, cpu = timed(lambda: run(range(nb)), job["reps"], warmup=1)
    b = meta["batches"]
    return {**({"unit": meta["unit"]} if "unit" in meta else {}), "wall": wall, "cpu": cpu,
            "sentences": sum(x["sentences"] for x in b), "tokens": sum(x["tokens"] for x in b),
            "flops": sum(x["flops"] for x in b), "batch_shapes": [x["shape"] for x in b]}


def worker_bf16_steps(job: dict) -> dict:
    """Issue 16's breakdown: where a one-thread bfloat16 forward pass goes, step by step (bench/bf16.py's
    steps: CPU ms per step, the products' GFLOP/s, the phases inside the kernels), and the tile unit's
    measured peak to hold the products against, in this one process."""
    import bf16 as bench_bf16

    quick, t = job.get("quick", True), job.get("threads", 1)
    if t > 1:  # the bfloat16 pass on t threads, and the tile peak on all of them at once
        return {"peak_threads": bench_bf16.tile_peak_threads(t, quick), "threads": t,
                "steps": bench_bf16.steps(quick, threads=t)}
    return {"peak": bench_bf16.tile_peak(quick), "steps": bench_bf16.steps(quick)}

def report_duels(console, Table, duel_raw: dict, threads_list: list[int], peak: dict, verdicts: list) -> None:
    """Tables 3a-3c (every engine's rates) and 3d (issue 16: qkv bfloat16 ÷ each peer, paired), and
    the verdicts of the encoder targets, from the duels' slots."""
    def duel(wl, t):
        return duel_raw.get(f"duel|{wl}|{t}")

    first = next(iter(duel_raw.values()))
    console.print(f"   Encoder duels: each engine in its own persistent process (thread environment as for one job), "
                  f"loaded and warmed once; slots of ~{first['slot_s']:.1f} s (a few batches) one engine at a time, "
                  "a fresh random order every round. Rates: median over an engine's slots. Ratios: median over "
                  "rounds of the per-round ratio (slots seconds apart), [25th–75th percentile].")
    for wl, (bs, target, nb) in WORKLOADS.items():
        tb = Table(title=f"3{'abc'[list(WORKLOADS).index(wl)]}. Encoder throughput — {wl}: batches of {bs}, ~{target} "
                         "tokens; paired duel (qkv ÷ this = qkv float32's rate ÷ this engine's, per round)")
        for c in ("engine", "threads", "slots", "ms/batch wall", "ms/batch CPU", "sentences/s", "tokens/s",
                  "GFLOP/s wall", "GFLOP/s CPU", "% of peak CPU", "spread", "qkv ÷ this, wall", "qkv ÷ this, CPU"):
            tb.add_column(c, justify="left" if c == "engine" else "right", no_wrap=c == "engine")
        shapes = None
        for t in threads_list:
            d = duel(wl, t)
            if not d:
                continue
            p = peak.get(("numpy-cpu", t))
            for eng in d["engines"]:
                s = _duel.engine_stats(d, eng)
                if not s:
                    continue
                shapes = shapes or s["shapes"]
                ref = eng != "qkv" and "qkv" in d["engines"]
                tb.add_row(ENGINE_LABEL.get(eng, "qkv float32" if eng == "qkv" else eng), str(t), str(s["slots"]),
                           f"{s['ms_wall']:.0f}", f"{s['ms_cpu']:.0f}", f"{s['sps']:.1f}", f"{s['tps']:.0f}",
                           f"{s['gflops']:.1f}", f"{s['gflops_cpu']:.1f}",
                           f"{100 * s['gflops_cpu'] / p:.0f}%" if p else "—", f"±{50 * s['spread']:.0f}%",
                           ratio_text(_duel.paired(d, "qkv", eng)) if ref else "",
                           ratio_text(_duel.paired(d, "qkv", eng, "cpu")) if ref else "")
            tb.add_section()
        console.print(tb)
        if shapes:
            console.print(f"   batch shapes [B, L]: {shapes}; ms per batch = the average batch at the median rate; "
                          "GFLOP/s counts matmul FLOPs of the padded batch (QKV, QKᵀ, PV, output, FFN); % of peak = "
                          "GFLOP/s per CPU-second against numpy's GEMM peak per CPU-second at the same threads; "
                          "spread = half the 25th–75th percentile range of the engine's slot rates over their median "
                          "(what the host's drift does to one engine alone); 'qkv encode()' is tokenize + forward + "
                          "pool + normalise, for information.")
    for wl in WORKLOADS:  # float32 targets of the engine issue, one thread
        t = 1 if 1 in threads_list else threads_list[0]
        d = duel(wl, t)
        for other, need in (("transformers", 1.0), ("onnxruntime", 0.85)):
            pw, pc = (_duel.paired(d, "qkv", other, k) for k in ("wall", "cpu")) if d else (None, None)
            if pw and pc:
                target = wl in TARGET_WORKLOADS
                verdicts.append((f"qkv {'≥ ' + format(need, '.2f') + '×' if target else 'vs'} {other}, {wl}, "
                                 f"{t} thread (paired)", (pw["median"] >= need) if target else None,
                                 f"{ratio_text(pw)} wall, {ratio_text(pc, False)} CPU",
                                 (pc["median"] >= need) if target else None))
        a, b = duel(wl, 1), duel(wl, 2)
        sa, sb = (a and _duel.engine_stats(a, "qkv")), (b and _duel.engine_stats(b, "qkv"))
        if sa and sb:
            verdicts.append((f"qkv 2 threads / 1 thread throughput, {wl} (separate duels)", None,
                             fmt_ratio(sb["sps"] / sa["sps"]) + " wall", None))

    cols = [(wl, t) for t in threads_list for wl in TARGET_WORKLOADS if duel(wl, t)]
    if not any("qkv-bf16" in duel(*c)["engines"] for c in cols):
        return
    tb = Table(title=f"3d. Issue 16: sentences/s at any precision (median over slots, wall) and qkv bfloat16 ÷ each "
                     f"peer, paired per round [25th–75th percentile]; target ≥ {BF16_TARGET}× the best peer")
    tb.add_column("engine", no_wrap=True)
    for wl, t in cols:
        tb.add_column(f"{wl}, {t} thread{'s' if t > 1 else ''}", justify="right")
    stats = {c: {e: _duel.engine_stats(duel(*c), e) for e in duel(*c)["engines"]} for c in cols}
    for eng in ("qkv", "qkv-bf16") + PEERS:
        cells = [stats[c].get(eng) for c in cols]
        if any(cells):
            tb.add_row(ENGINE_LABEL.get(eng, "qkv float32" if eng == "qkv" else eng),
                       *("—" if x is None else f"{x['sps']:.1f}" for x in cells))
    tb.add_section()
    for peer in PEERS:
        tb.add_row(f"qkv bfloat16 ÷ {ENGINE_LABEL[peer]}", *(ratio_text(_duel.paired(duel(*c), "qkv-bf16", peer))
                                                              for c in cols))
    tb.add_section()
    best_cells, cpu_cells, unpaired, spreads, ratio_spread, dinfo = [], [], [], [], [], []
    for wl, t in cols:
        d = duel(wl, t)
        best, best_cpu = _duel.best_peer(d, PEERS), _duel.best_peer(d, PEERS, "cpu")
        pw, pc = _duel.paired(d, "qkv-bf16", best), _duel.paired(d, "qkv-bf16", best_cpu, "cpu")
        sq, sbest = stats[(wl, t)].get("qkv-bf16"), stats[(wl, t)].get(best)
        best_cells.append(f"{ratio_text(pw)} ({ENGINE_LABEL.get(best, best)})" if pw else "—")
        cpu_cells.append(f"{ratio_text(pc)} ({ENGINE_LABEL.get(best_cpu, best_cpu)})" if pc else "—")
        unpaired.append(fmt_ratio(sq["sps"] / sbest["sps"]) if sq and sbest else "—")
        spreads.append(f"±{50 * sq['spread']:.0f}% / ±{50 * sbest['spread']:.0f}%" if sq and sbest else "—")
        ratio_spread.append(f"±{50 * (pw['p75'] - pw['p25']) / pw['median']:.0f}% ({pw['n']} rounds)" if pw else "—")
        dinfo.append(f"{wl} {t}t: {d['rounds']} rounds in {d['seconds']:.0f} s (start-up {d.get('start_s', 0):.0f} s), load {d['load'][0]:.1f} → "
                     f"{d['load'][1]:.1f}, steal {d['steal_s']:.1f} s, idle workers' CPU "
                     f"{100 * d['idle_cpu_share']:.1f}% of the slots' wall")
        if pw:
            verdicts.append((f"qkv bfloat16 ≥ {BF16_TARGET}× best peer, {wl}, {t} thread{'s' if t > 1 else ''} (paired)",
                             pw["median"] >= BF16_TARGET,
                             f"{ratio_text(pw)} wall vs {best}, {ratio_text(pc, False)} CPU vs {best_cpu}",
                             pc["median"] >= BF16_TARGET if pc else None))
    tb.add_row("[bold]qkv bfloat16 ÷ best peer (paired, wall)[/bold]", *best_cells)
    tb.add_row("qkv bfloat16 ÷ best peer by CPU time (paired)", *cpu_cells)
    tb.add_row("[dim]unpaired: ratio of the median rates[/dim]", *(f"[dim]{x}[/dim]" for x in unpaired))
    tb.add_row("[dim]spread of one engine's slot rates: qkv bf16 / best peer[/dim]", *(f"[dim]{x}[/dim]" for x in spreads))
    tb.add_row("[dim]spread of the paired ratio[/dim]", *(f"[dim]{x}[/dim]" for x in ratio_spread))
    console.print(tb)
    units = {duel(*c)["meta"].get("qkv-bf16", {}).get("unit") for c in cols}
    console.print(f"   qkv bfloat16 ran on: {', '.join(sorted(u for u in units if u)) or '?'} "
                  "(qkv.kernels.cpu.ISA; QKV_ISA forces one). transformers bfloat16: BertModel.to(torch.bfloat16); "
                  "onnxruntime int8: onnxruntime.quantization.quantize_dynamic (QInt8 weights) of the float32 export. "
                  "Best peer: the highest median rate in that duel. Spread = half the 25th–75th percentile range "
                  "over the median: pairing removes what the host's drift does to both engines of a round.")
    for line in dinfo:
        console.print(f"   {line}")


def report(console, Table, raw: dict, threads_list: list[int], peak: dict, verdicts: list) -> None:
    """Tables 3a-3e and their verdicts."""
    duel_raw = {k: v[0] for k, v in raw.items() if k.startswith("duel|") and v}
    if duel_raw:
        report_duels(console, Table, duel_raw, threads_list, peak, verdicts)

    # ---- encoder throughput
    enc_summary: dict = {}
    per_job = any(k.startswith("enc|") for k in raw)
    if per_job:
        for wl, (bs, target, nb) in WORKLOADS.items():
            tb = Table(title=f"3{'abc'[list(WORKLOADS).index(wl)]}′. Per-job (--per-job, for comparison with the duel): "
                             f"{wl}: {nb} batches of {bs}, ~{target} tokens (median over passes of one job per engine; "
                             "ratio = qkv / reference at the same threads)")
            for c in ("engine", "threads", "ms/batch wall", "ms/batch CPU", "sentences/s", "tokens/s",
                      "GFLOP/s wall", "GFLOP/s CPU", "% of peak CPU", "qkv/this wall", "qkv/this CPU"):
                tb.add_column(c, justify="left" if c == "engine" else "right", no_wrap=c == "engine")
            for t in threads_list:
                stats = {}
                for eng in ("qkv", "transformers", "onnxruntime", "qkv-encode") + PRECISION_ENGINES:
                    runs = raw.get(f"enc|{wl}|{eng}|{t}", [])
                    if not runs:
                        continue
                    wall = median([x for r in runs for x in r["wall"]])
                    cpu = median([x for r in runs for x in r["cpu"]])
                    r0 = runs[0]
                    stats[eng] = dict(wall=wall, cpu=cpu, sps=r0["sentences"] / wall, tps=r0["tokens"] / wall,
                                      gflops=r0["flops"] / wall / 1e9, gflops_cpu=r0["flops"] / cpu / 1e9,
                                      nb=len(r0["batch_shapes"]),
                                      shapes=r0["batch_shapes"])
                p = peak.get(("numpy-cpu", t))
                q = stats.get("qkv")
                for eng, s in stats.items():
                    ref = eng not in ("qkv", "qkv-encode") and q is not None
                    tb.add_row(ENGINE_LABEL.get(eng, eng), str(t),
                               f"{s['wall'] / s['nb'] * 1e3:.0f}", f"{s['cpu'] / s['nb'] * 1e3:.0f}",
                               f"{s['sps']:.1f}", f"{s['tps']:.0f}", f"{s['gflops']:.1f}", f"{s['gflops_cpu']:.1f}",
                               f"{100 * s['gflops_cpu'] / p:.0f}%" if p else "—",
                               fmt_ratio(q["sps"] / s["sps"]) if ref else "",
                               fmt_ratio(s["cpu"] / q["cpu"]) if ref else "")
                enc_summary[(wl, t)] = stats
            console.print(tb)
            shapes = next(iter(enc_summary.get((wl, threads_list[0]), {}).values()), {}).get("shapes")
            if shapes:
                console.print(f"   batch shapes [B, L]: {shapes}; GFLOP/s counts matmul FLOPs of the padded batch "
                              "(QKV, QKᵀ, PV, output, FFN); % of peak = GFLOP/s per CPU-second against numpy's GEMM "
                              "peak per CPU-second at the same threads. qkv/this CPU = this engine's CPU time / qkv's "
                              "(> 1: qkv does the work in less CPU time); 'qkv encode()' is tokenize + forward + pool "
                              "+ normalise, for information.")
        for wl in WORKLOADS if not duel_raw else ():  # the duel's paired ratios decide when it ran
            for t in threads_list[:1] if 1 not in threads_list else [1]:
                s = enc_summary.get((wl, t), {})
                for other, need in (("transformers", 1.0), ("onnxruntime", 0.85)):
                    if "qkv" not in s or other not in s:
                        continue
                    if "qkv" in s and other in s:
                        r = s["qkv"]["sps"] / s[other]["sps"]
                        rc = s[other]["cpu"] / s["qkv"]["cpu"]
                        target = wl in TARGET_WORKLOADS
                        verdicts.append((f"qkv {'≥ ' + format(need, '.2f') + '×' if target else 'vs'} {other}, {wl}, "
                                         f"{t} thread", (r >= need) if target else None,
                                         f"{fmt_ratio(r)} wall, {fmt_ratio(rc)} CPU", (rc >= need) if target else None))
            if 1 in threads_list and 2 in threads_list and (wl, 1) in enc_summary and (wl, 2) in enc_summary:
                a, b = enc_summary[(wl, 1)].get("qkv"), enc_summary[(wl, 2)].get("qkv")
                if a and b:
                    verdicts.append((f"qkv 2 threads / 1 thread throughput, {wl}", None,
                                     fmt_ratio(b["sps"] / a["sps"]) + " wall", None))

    # ---- issue 16: qkv bfloat16 against every peer at any precision
    if any(e in s for s in enc_summary.values() for e in PRECISION_ENGINES):
        tb = Table(title="3d′. Per-job: sentences/s at any precision (issue 16; median over passes, wall); "
                         f"target: qkv bfloat16 ≥ {BF16_TARGET}× the best peer")
        tb.add_column("engine", no_wrap=True)
        cols = [(wl, t) for t in threads_list for wl in TARGET_WORKLOADS if (wl, t) in enc_summary]
        for wl, t in cols:
            tb.add_column(f"{wl}, {t} thread{'s' if t > 1 else ''}", justify="right")
        for eng in ("qkv", "qkv-bf16") + PEERS:
            cells = [enc_summary[c].get(eng) for c in cols]
            if any(cells):
                tb.add_row(ENGINE_LABEL.get(eng, "qkv float32" if eng == "qkv" else eng),
                           *("—" if x is None else f"{x['sps']:.1f}" for x in cells))
        ratio_cells = []
        for wl, t in cols:
            st = enc_summary[(wl, t)]
            peers = {e: st[e] for e in PEERS if e in st}
            if "qkv-bf16" in st and peers:
                best = max(peers, key=lambda e: peers[e]["sps"])
                r = st["qkv-bf16"]["sps"] / peers[best]["sps"]
                rc = min(peers[e]["cpu"] for e in peers) / st["qkv-bf16"]["cpu"]
                ratio_cells.append(f"{fmt_ratio(r)} ({ENGINE_LABEL.get(best, best)})")
                if not duel_raw:
                        verdicts.append((f"qkv bfloat16 ≥ {BF16_TARGET}× best peer, {wl}, {t} thread", r >= BF16_TARGET,
                                     f"{fmt_ratio(r)} wall vs {best}, {fmt_ratio(rc)} CPU", rc >= BF16_TARGET))
            else:
                ratio_cells.append("—")
        tb.add_row("[bold]qkv bfloat16 ÷ best peer[/bold]", *ratio_cells)
        console.print(tb)
        units = {r.get("unit") for k, v in raw.items() if "|qkv-bf16|" in k for r in v}
        console.print(f"   qkv bfloat16 ran on: {', '.join(sorted(u for u in units if u)) or '?'} "
                      "(qkv.kernels.cpu.ISA; QKV_ISA forces one). transformers bfloat16: BertModel.to(torch.bfloat16); "
                      "onnxruntime int8: onnxruntime.quantization.quantize_dynamic (QInt8 weights) of the float32 export.")
    if raw.get("bf16-steps"):
        import bf16 as bench_bf16

        br = raw["bf16-steps"][0]
        steps = dict(br["steps"])
        console.print("3e. Where qkv's time goes (issue 16), CPU ms per batch, one thread, one process; products' "
                      "GFLOP/s against the tile unit's peak measured in the same process"
                      + ("; the bfloat16 pass at more threads in a process of its own" if len(threads_list) > 1 else ""))
        for t in threads_list:
            more = (raw.get(f"bf16-steps-{t}") or [None])[0] if t > 1 else None
            if more:
                steps.update(more["steps"])
                pt = more.get("peak_threads")
                if pt and pt.get("one_thread"):
                    console.print(f"   tile peak on {t} threads at once: {pt['per_thread_cpu']:.0f} GFLOP/s per thread "
                                  f"(its CPU time), {pt['total_wall']:.0f} together (wall) = "
                                  f"{pt['total_wall'] / pt['one_thread']:.2f}× one thread's {pt['one_thread']:.0f} "
                                  "(interleaved, same process)")
        bench_bf16.print_steps(console, steps, br.get("peak"))
        beside = []
        for t in threads_list:
            for wl in TARGET_WORKLOADS:
                d = duel_raw.get(f"duel|{wl}|{t}")
                st = d and _duel.engine_stats(d, "qkv-bf16")
                if st:
                    beside.append(f"{wl}, {t} thread{'s' if t > 1 else ''}: {st['ms_cpu']:.1f} CPU ms "
                                  f"({st['ms_wall']:.1f} wall)")
        if beside:
            console.print("   the duel's qkv bfloat16 per batch in the same run (3d; median over slots): "
                          + "; ".join(beside))


# ------------------------------------------------------------------ issue 25: qkv int8 against ORT int8
def int8_duel(seconds: float = 60.0, engines=INT8_ENGINES + ("qkv-bf16",)) -> dict:
    """qkv ``precision="int8"`` against ONNX Runtime's dynamic int8, per tensor and per channel, one
    thread, MiniLM titles and reviews, each engine in its own process, paired and interleaved
    (bench/_duel.py). ``QKV_ISA`` in the environment reaches qkv's workers (ONNX Runtime picks its
    own kernels). Prints each engine's rate and qkv int8's paired ratio to each other engine."""
    import os

    import qkv
    from _harness import onnx_path
    from _onnx import export_last_hidden_state, quantized

    onnx = onnx_path(qkv.load().fingerprint())
    if not onnx.is_file():
        onnx.parent.mkdir(parents=True, exist_ok=True)
        export_last_hidden_state(load_torch_model(1), onnx, qkv.load().config.max_tokens)
    files = {"onnx": str(onnx), "onnx_int8": str(quantized(onnx, per_channel=False))}
    quantized(onnx, per_channel=True)  # made once here, not in a worker
    out = {}
    for wl in TARGET_WORKLOADS:
        load0 = os.getloadavg()[0]
        rec = _duel.run(duel_commands(engines, wl, 1, files), slot_s=0.4, budget_s=seconds, min_rounds=8,
                        max_rounds=60)
        out[wl] = rec
        rounds = len({s["round"] for s in rec["slots"]})
        print(f"{wl}: {rounds} rounds, load {load0:.1f} -> {os.getloadavg()[0]:.1f}, QKV_ISA="
              f"{os.environ.get('QKV_ISA', '(unset)')}, failures {rec['failures'] or 'none'}")
        for e in engines:
            st = _duel.engine_stats(rec, e)
            if st:
                per = WORKLOADS[wl][0] / st["ms_wall"] * 1e3
                per_cpu = WORKLOADS[wl][0] / st["ms_cpu"] * 1e3
                unit = rec["meta"][e].get("unit", "")
                print(f"  {ENGINE_LABEL.get(e, e):40s} {per:7.1f} sentences/s wall, {per_cpu:7.1f} per CPU-second"
                      + (f"  ({unit})" if unit else ""))
        for peer in engines[1:]:
            p = _duel.paired(rec, engines[0], peer)
            if p:
                print(f"  {engines[0]} / {peer}: {p['median']:.2f}x (rounds' 25-75%: {p['p25']:.2f}-{p['p75']:.2f})")
    return out


def int8_cosines() -> None:
    """Cosine to qkv float32 (mean-pooled, normalised, as encode()) of qkv int8 and of ONNX Runtime's
    dynamic int8 per tensor and per channel (the same pooling over its last hidden state), worst and
    mean, on the benchmark's titles and reviews and the sample catalogue's titles."""
    import csv

    import numpy as np

    import qkv
    from _harness import make_reviews, make_titles, onnx_path, ort_session
    from _onnx import quantized

    enc = qkv.load()
    onnx = onnx_path(enc.fingerprint())
    sessions = {"onnxruntime-int8": ort_session(quantized(onnx, False), 1),
                "onnxruntime-int8-pc": ort_session(quantized(onnx, True), 1)}
    sample = Path(__file__).resolve().parents[1] / "qkv" / "data" / "sample_catalog.csv"
    with open(sample, encoding="utf-8") as f:
        catalogue = [r["title"] for r in csv.DictReader(f)]
    sets = {"titles (256 generated)": make_titles(enc.tokenizer, 256, 24), "sample catalogue titles": catalogue,
            "reviews (32 × 256 tokens)": make_reviews(enc.tokenizer, 32, 256)}

    def ort_vectors(sess, texts):
        out = []
        for i in range(0, len(texts), 8):
            b = enc._pad(enc.tokenize(texts[i:i + 8]))
            h = sess.run(None, {"input_ids": b.ids, "attention_mask": b.mask.astype(np.int64)})[0]
            m = b.mask[..., None]
            v = (h * m).sum(1) / m.sum(1)
            out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        return np.concatenate(out)

    for name, texts in sets.items():
        ref = enc.encode(texts)
        got = {"qkv-int8": enc.encode(texts, precision="int8")}
        got.update({k: ort_vectors(s, texts) for k, s in sessions.items()})
        print(f"{name}: " + "; ".join(f"{ENGINE_LABEL[k]} {(ref * v).sum(1).min():.4f} worst / "
                                      f"{(ref * v).sum(1).mean():.4f} mean" for k, v in got.items()))


if __name__ == "__main__":  # issue 25's int8 figures; bench/engine.py runs the rest of this module
    import argparse

    ap = argparse.ArgumentParser(description="qkv int8 against ONNX Runtime int8 (per tensor, per channel)")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of rounds per workload")
    ap.add_argument("--cosines", action="store_true", help="only the cosines to float32")
    a = ap.parse_args()
    int8_cosines() if a.cosines else int8_duel(a.seconds)
