"""bench/targets.py (`make bench`, issue 25's tables): the marks drawn from known rates and cosines,
the tables' rows (an engine this build lacks says so), the cosines, the capture of an engine's
hidden states, and a real duel of fake engines in their own processes (no timing is asserted)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench scripts import each other by name
import targets  # noqa: E402  (bench/targets.py)


def duel(speeds: dict[str, float], drift=(1.0, 1.8, 0.7, 1.3, 0.9), failures: dict | None = None) -> dict:
    """A duel record where engine e runs at speeds[e] × drift[r] padded tokens/s in round r (one
    batch of 8 sentences, 100 padded tokens a slot; CPU time 0.8 of wall)."""
    batch = {"shape": [8, 12], "sentences": 8, "tokens": 90, "padded": 100, "flops": 0}
    slots = [{"round": r, "engine": e, "wall": 100 / (v * h), "cpu": 0.8 * 100 / (v * h), "batches": [0]}
             for r, h in enumerate(drift) for e, v in speeds.items()]
    return {"engines": list(speeds), "meta": {e: {"batches": [batch]} for e in speeds}, "slots": slots,
            "failures": dict(failures or {}), "rounds": len(drift), "seconds": 10.0, "steal_s": 0.0,
            "load": [1.0, 1.0]}


def result(speeds, cos, failures=None) -> dict:
    f = failures or {}
    return {"duel": duel(speeds, failures=f), "cos": cos, "failed": {e: targets.availability(m) for e, m in f.items()}}


NOT_BUILT = {"qkv-int8": "ValueError: unknown engine 'qkv-int8'",
             "onnxruntime-int8-pc": "ValueError: unknown engine 'onnxruntime-int8-pc'"}
SPEEDS = {"qkv": 100.0, "qkv-bf16": 300.0, "transformers": 90.0, "transformers-bf16": 200.0,
          "onnxruntime": 100.0, "onnxruntime-int8": 330.0}
COS = {"qkv": (1.0, 1.0), "qkv-bf16": (0.99998, 0.99999), "transformers": (1.0, 1.0),
       "transformers-bf16": (0.9999, 0.99995), "onnxruntime": (1.0, 1.0), "onnxruntime-int8": (0.9, 0.95)}


def by_target(verdicts, wl="titles"):
    return {v[0]: v for v in verdicts if v[1] == wl}


def test_marks_before_int8_exists():
    v = by_target(targets.minilm_verdicts({"titles": result(SPEEDS, COS, NOT_BUILT)}))
    assert len(v) == 3
    best = next(x for k, x in v.items() if k.startswith("qkv fastest"))
    assert best[2].startswith("qkv bfloat16 ÷ torch bfloat16: 1.500×")  # 300 / 200 in every round
    assert best[3:] == ["met", True]
    per_tensor = next(x for k, x in v.items() if "per tensor" in k)
    assert per_tensor[2].startswith("qkv bfloat16 (cosine 0.99998 vs 0.90000): 0.909×")  # 300 / 330
    assert per_tensor[3:] == ["NOT met", False]
    per_channel = next(x for k, x in v.items() if "per channel" in k)
    assert targets.NOT_AVAILABLE in per_channel[2] and per_channel[3:] == ["—", None]


def test_marks_pick_the_qkv_precision_that_beats_each_int8():
    speeds = {**SPEEDS, "qkv-int8": 420.0, "onnxruntime-int8-pc": 345.0}
    cos = {**COS, "qkv-int8": (0.996, 0.998), "onnxruntime-int8-pc": (0.988, 0.993)}
    v = by_target(targets.minilm_verdicts({"reviews": result(speeds, cos)}), "reviews")
    # int8 is below the 0.999 floor: the first target still pairs bfloat16 with torch bfloat16
    assert next(x for k, x in v.items() if k.startswith("qkv fastest"))[2].startswith("qkv bfloat16 ÷ torch bfloat16")
    pt = next(x for k, x in v.items() if "per tensor" in k)
    assert pt[2].startswith("qkv int8 (cosine 0.99600 vs 0.90000): 1.273×") and pt[4] is True  # 420 / 330
    pc = next(x for k, x in v.items() if "per channel" in k)
    assert pc[2].startswith("qkv int8 (cosine 0.99600 vs 0.98800): 1.217×") and pc[4] is True  # 420 / 345
    # with a worse cosine than ORT's, qkv int8 may not count: bfloat16 (300 / 345) is the candidate
    cos["qkv-int8"] = (0.98, 0.99)
    pc = next(x for k, x in by_target(targets.minilm_verdicts({"reviews": result(speeds, cos)}), "reviews").items()
              if "per channel" in k)
    assert pc[2].startswith("qkv bfloat16") and pc[3:] == ["NOT met", False]


def test_no_engine_within_the_floor_cannot_be_marked():
    cos = {e: (0.99, 0.995) for e in SPEEDS}
    v = by_target(targets.minilm_verdicts({"titles": result(SPEEDS, cos)}))
    best = next(x for k, x in v.items() if k.startswith("qkv fastest"))
    assert best[3:] == ["—", None]
    # nobody beats ORT per tensor's own cosine (all equal): not met
    pt = next(x for k, x in v.items() if "per tensor" in k)
    assert pt[3:] == ["NOT met", False] and "no qkv engine" in pt[2]


def test_table_rows_say_what_is_missing():
    res = {"titles": result(SPEEDS, COS, NOT_BUILT), "reviews": result(SPEEDS, COS, {"qkv-int8": "RuntimeError: boom"})}
    header, rows = targets.minilm_rows(res)
    assert header == ["engine", "titles sentences/s", "titles cosine worst / mean", "reviews sentences/s",
                      "reviews cosine worst / mean"]
    assert [r[0] for r in rows] == [label for _, label in targets.ENGINES]
    assert all(len(r) == len(header) for r in rows)
    row = dict((r[0], r) for r in rows)
    assert row["qkv bfloat16"][1] == f"{300.0 * 8 / 100:.1f}"  # median padded tokens/s → sentences/s
    assert row["qkv bfloat16"][2] == "0.99998 / 0.99999"
    assert row["qkv int8"][1] == targets.NOT_AVAILABLE and row["qkv int8"][3] == "failed: RuntimeError: boom"
    assert row["ORT int8 per channel"][3] == "not measured"


def test_availability_and_cosines():
    assert targets.availability("ValueError: unknown engine 'qkv-int8'") == targets.NOT_AVAILABLE
    assert targets.availability("ValueError: precision must be 'float32' or 'bfloat16', not 'int8'") == targets.NOT_AVAILABLE
    assert targets.availability("exited (1): MemoryError").startswith("failed: ")
    a = np.array([[1.0, 0.0], [0.6, 0.8]])
    b = np.array([[1.0, 0.0], [0.8, 0.6]])
    worst, mean = targets.cosines(a, b)
    assert worst == pytest.approx(0.96) and mean == pytest.approx(0.98)
    h = np.array([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]])  # the padded third token must not count
    assert targets.pooled(h, np.array([[True, True, False]])) == pytest.approx(np.array([[0.5 ** 0.5, 0.5 ** 0.5]]))


def test_e5_marks():
    titles = {"duel": duel({"e5-qkv": 250.0, "e5-transformers": 180.0, "e5-transformers-bf16": 220.0}),
              "failed": {}}
    queries = {"duel": duel({"e5-qkv-query": 90.0, "minilm-qkv-query": 100.0}), "failed": {}}
    rows, v = targets.e5_rows(titles, queries, None)
    assert [r[0] for r in rows][:3] == [label for _, label in targets.E5_TITLE_ENGINES]
    per_cpu = 250.0 * 32 / 400 / 0.8  # padded tokens/s → titles/s, CPU time 0.8 of wall
    assert rows[0][2] == f"{per_cpu:.1f}"
    marks = {x[0].split(" ≥")[0].split(" (")[0]: x[3] for x in v}
    assert marks["qkv e5 4-bit: titles per CPU-second"] is (per_cpu >= 200)
    assert marks["qkv e5 titles ÷ transformers e5 float32"] is True  # 250 / 180 = 1.39
    assert marks["qkv e5 titles ÷ torch e5 bfloat16"] is False  # 250 / 220 = 1.14
    assert marks["lone query: qkv e5 4-bit no slower than qkv MiniLM float32"] is False  # 0.9
    assert not any(k.startswith("qkv e5 titles ÷ the float32 expansion") for k in marks)  # not measured: no row


def test_e5_same_machine_ratio_to_the_float32_expansion():
    for f32, ok in ((100.0, True), (110.0, False)):  # 250 / 100 = 2.5 meets 2.5×; 250 / 110 does not
        titles = {"duel": duel({"e5-qkv": 250.0, targets.E5_F32[0]: f32}), "failed": {}}
        rows, v = targets.e5_rows(titles, None, None)
        assert targets.E5_F32[1] in [r[0] for r in rows]
        marks = {x[0]: x[3] for x in v}
        assert marks[f"qkv e5 titles ÷ the float32 expansion, same machine ≥ {targets.E5_FACTOR}×"] is ok


def test_e5_projection_onto_the_issue_zen4_is_information_from_the_transformers_ratio():
    titles = {"duel": duel({"e5-qkv": 250.0, "e5-transformers": 100.0}), "failed": {}}
    _, v = targets.e5_rows(titles, None, None)
    row = next(x for x in v if x[0].startswith("qkv e5 titles projected on the issue's Zen 4"))
    assert row[1] == f"{2.5 * targets.E5_TRANSFORMERS_ZEN4:.1f}" and row[2] == "info" and row[3] is None
    titles = {"duel": duel({"e5-qkv": 250.0}), "failed": {}}  # no transformers run: no projection
    _, v = targets.e5_rows(titles, None, None)
    assert not any("projected" in x[0] for x in v)


def test_capture_reads_the_hidden_states_and_restores_the_encoder():
    import qkv
    from qkv.model.encoder import Encoder

    enc = qkv.load()
    b = enc._pad(enc.tokenize(["waterproof hiking boots", "a kettle"]))
    before = Encoder.__dict__["forward"]
    with targets.capture_hidden() as seen:
        out = enc.forward(b.ids, b.mask)
    assert Encoder.__dict__["forward"] is before
    mask, hidden = seen[-1]
    assert np.array_equal(mask, b.mask) and np.array_equal(hidden, out)


def test_a_real_duel_of_fake_engines_fills_the_table():
    engines = (("qkv", "qkv float32"), ("qkv-int8", "qkv int8"), ("transformers", "transformers float32"),
               ("onnxruntime-int8", "ORT int8 per tensor"))
    jobs = {"qkv": {"engine": "fake", "work": 4000, "noise": 0.0},
            "qkv-int8": {"engine": "fake", "error": "unknown engine 'qkv-int8'"},
            "transformers": {"engine": "fake", "work": 6000, "noise": 0.0},
            "onnxruntime-int8": {"engine": "fake", "work": 3000, "noise": 0.3, "seed": 5}}
    plan = {"slot_s": 0.02, "budget_s": 0.3, "min_rounds": 3, "max_rounds": 5}
    res = targets.measure(jobs, {}, 1, plan, reference="transformers")
    assert res["failed"] == {"qkv-int8": targets.NOT_AVAILABLE}
    assert res["cos"]["qkv"] == pytest.approx((1.0, 1.0))
    assert res["cos"]["onnxruntime-int8"][0] < res["cos"]["onnxruntime-int8"][1] < 0.999
    header, rows = targets.minilm_rows({"titles": res}, engines)
    assert rows[1][1:] == [targets.NOT_AVAILABLE, ""]
    assert all(r[1] and r[1] != "not measured" for r in rows)
    v = targets.minilm_verdicts({"titles": res}, engines)
    assert [x[0].split(" ≥")[0] for x in v] == ["qkv fastest within cosine 0.999 ÷ fastest peer within it",
                                               "qkv (a precision with better worst cosine) ÷ ORT int8 per tensor"]
    assert all(x[3] in ("met", "NOT met") for x in v)  # both measured: a mark either way


def test_the_cpu_line_names_the_stand_in():
    info = {"model name": "Some Xeon", "has": {"AMX": True, "AVX-512 BF16": True, "AVX2": True}, "isa": "avx512bf16",
            "q4": "float32", "q4_offered": ["vnni", "avx2", "float32"], "ceiling": "avx512bf16", "stand_in": True,
            "native_isa": "amx"}
    assert targets.tag(info) == "Zen 4 stand-in"
    line = targets.describe(info)
    assert line.startswith("CPU: Some Xeon") and "has AMX, AVX-512 BF16, AVX2" in line
    assert "bfloat16 products on avx512bf16, 4-bit products on float32" in line
    assert targets.tag({**info, "ceiling": "float32"}) == "stand-in for a CPU without AVX-512 BF16"
    assert targets.tag({**info, "stand_in": False}) == "native"
