"""bench/engine.py's encoder duel (bench/_duel.py): the paired ratios on made-up timings where the
host's speed drifts, the verdict of issue 16 drawn from them, and a real duel of cheap fake engines
(persistent worker processes driven over pipes)."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str, file: str):
    sys.path.insert(0, str(BENCH))  # the sections import _harness / _duel by name
    spec = importlib.util.spec_from_file_location(name, BENCH / file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


encoder = _load("engine_encoder", "engine_encoder.py")  # bench/engine.py's encoder section
harness = sys.modules.get("_harness") or _load("_harness", "_harness.py")
duel_mod = sys.modules.get("_duel") or _load("_duel", "_duel.py")

# the host's speed round by round: 2.6× between fastest and slowest, as this VM drifts
DRIFT = [1.0, 2.2, 0.6, 1.7, 1.1, 2.0, 0.85, 1.4, 0.7, 1.9]


def fake_duel(speeds: dict[str, float], drift=DRIFT, only: dict[str, list[float]] | None = None,
              padded=(100, 100)) -> dict:
    """A duel record: each engine runs one batch a slot; its rate in round r is speed × drift[r]
    padded tokens per second (CPU time a fixed 0.9 of wall). ``only``: extra rounds in which just
    that engine ran, at those host speeds (its partner failed there)."""
    batches = [{"shape": [8, p // 8], "sentences": 8, "tokens": p - 4, "padded": p, "flops": 10 * p} for p in padded]
    slots = []
    for r, h in enumerate(drift):
        for e, v in speeds.items():
            i = r % len(batches)
            wall = batches[i]["padded"] / (v * h)
            slots.append({"round": r, "engine": e, "wall": wall, "cpu": 0.9 * wall, "batches": [i]})
    for e, hs in (only or {}).items():
        for j, h in enumerate(hs):
            wall = batches[0]["padded"] / (speeds[e] * h)
            slots.append({"round": len(drift) + j, "engine": e, "wall": wall, "cpu": 0.9 * wall, "batches": [0]})
    return {"engines": list(speeds), "meta": {e: {"batches": batches} for e in speeds}, "slots": slots,
            "rounds": len(drift), "seconds": 30.0, "steal_s": 0.0, "load": [1.0, 1.2], "idle_cpu_share": 0.0,
            "slot_s": 0.3, "failures": {}}


def test_quantile_interpolates():
    q = duel_mod.quantile
    assert q([5, 1, 3, 2, 4], 0.5) == 3
    assert q([5, 1, 3, 2, 4], 0.25) == 2
    assert q([1, 2], 0.5) == pytest.approx(1.5)
    assert q([7], 0.75) == 7


def test_paired_ratio_cancels_the_hosts_drift():
    d = fake_duel({"a": 130.0, "b": 100.0})
    p = duel_mod.paired(d, "a", "b")
    assert p["median"] == pytest.approx(1.3) and p["p25"] == pytest.approx(1.3) and p["p75"] == pytest.approx(1.3)
    assert p["n"] == len(DRIFT)
    assert duel_mod.paired(d, "b", "a")["median"] == pytest.approx(1 / 1.3)
    # one engine alone swings with the host (2.6× between rounds)
    assert duel_mod.engine_stats(d, "a")["spread"] > 0.5


def test_paired_ratio_uses_only_rounds_where_both_ran():
    # b also ran 6 rounds on a slow host where a had failed: the ratio of median rates is biased,
    # the paired ratio is not
    d = fake_duel({"a": 130.0, "b": 100.0}, only={"b": [0.3] * 6})
    p = duel_mod.paired(d, "a", "b")
    assert p["median"] == pytest.approx(1.3) and p["n"] == len(DRIFT)
    unpaired = duel_mod.engine_stats(d, "a")["rate_wall"] / duel_mod.engine_stats(d, "b")["rate_wall"]
    assert abs(unpaired - 1.3) > 0.1


def test_rates_count_the_padded_tokens_of_each_slots_batches():
    d = fake_duel({"a": 100.0}, drift=[1.0, 1.0], padded=(100, 300))
    d["slots"] = [{"round": 0, "engine": "a", "wall": 2.0, "cpu": 1.0, "batches": [0, 1]},
                  {"round": 1, "engine": "a", "wall": 1.0, "cpu": 1.0, "batches": [1]}]
    assert duel_mod.slot_rates(d, "a") == {0: 200.0, 1: 300.0}
    assert duel_mod.slot_rates(d, "a", "cpu") == {0: 400.0, 1: 300.0}
    s = duel_mod.engine_stats(d, "a")
    assert s["rate_wall"] == pytest.approx(250.0)
    assert s["ms_wall"] == pytest.approx(200 / 250 * 1e3)  # the average batch (200 padded) at the median rate
    assert s["sps"] == pytest.approx(250.0 * 16 / 400)  # 16 sentences in 400 padded tokens


def test_best_peer_is_the_highest_median_rate():
    d = fake_duel({"x": 90.0, "y": 120.0, "z": 110.0})
    assert duel_mod.best_peer(d, ("x", "y", "z")) == "y"
    assert duel_mod.best_peer(d, ("x", "z", "missing")) == "z"
    assert duel_mod.best_peer(d, ("missing",)) is None


def _verdicts(duels: dict) -> list:
    from rich.console import Console
    from rich.table import Table

    verdicts = []
    encoder.report_duels(Console(file=open(os.devnull, "w"), width=200), Table, duels, [1], {}, verdicts)
    return verdicts


def test_issue16_verdict_uses_the_paired_ratio_against_the_best_peer():
    speeds = {"qkv": 50.0, "qkv-bf16": 150.0, "transformers": 45.0, "transformers-bf16": 120.0,
              "onnxruntime": 40.0, "onnxruntime-int8": 100.0}
    v = {name: (ok, text) for name, ok, text, _ in _verdicts({"duel|titles|1": fake_duel(speeds)})}
    ok, text = v["qkv bfloat16 ≥ 1.2× best peer, titles, 1 thread (paired)"]
    assert ok is True and "1.25×" in text and "transformers-bf16" in text
    ok, text = v["qkv ≥ 1.00× transformers, titles, 1 thread (paired)"]
    assert ok is True and "1.11×" in text

    speeds["onnxruntime-int8"] = 130.0  # now the best peer, and qkv bf16 only 1.15× it
    v = {name: (ok, text) for name, ok, text, _ in _verdicts({"duel|reviews|1": fake_duel(speeds)})}
    ok, text = v["qkv bfloat16 ≥ 1.2× best peer, reviews, 1 thread (paired)"]
    assert ok is False and "1.15×" in text and "onnxruntime-int8" in text


def _fake_commands(works: dict[str, int]) -> dict:
    out = {}
    for name, work in works.items():
        job = {"engine": "fake-spin" if work else "no-such-engine", "work": work, "workload": "titles", "threads": 1}
        out[name] = ([sys.executable, str(BENCH / "engine.py"), "--duel-worker", json.dumps(job)],
                     harness.thread_env(1))
    return out


def test_a_real_duel_of_fake_engines():
    d = duel_mod.run(_fake_commands({"fast": 15000, "slow": 30000, "mid": 20000}),
                     slot_s=0.03, budget_s=0.5, min_rounds=8, max_rounds=12)
    assert d["failures"] == {} and 8 <= d["rounds"] <= 12
    assert len(d["slots"]) == 3 * d["rounds"]
    # twice the work a batch: half the rate, whatever the load of the moment
    assert 1.5 < duel_mod.paired(d, "fast", "slow")["median"] < 2.6
    assert 1.5 < duel_mod.paired(d, "fast", "slow", "cpu")["median"] < 2.6
    # one engine at a time, in a changing order: no engine always follows the same one
    seq = [s["engine"] for s in d["slots"]]
    assert all(a != b for a, b in zip(seq, seq[1:]))
    before = {e: {a for a, b in zip(seq, seq[1:]) if b == e} for e in ("fast", "slow", "mid")}
    assert all(len(v) == 2 for v in before.values())
    # the workers are gone
    for m in d["meta"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(m["pid"], 0)


def test_a_failing_engine_is_reported_and_the_others_go_on():
    d = duel_mod.run(_fake_commands({"ok": 10000, "broken": 0}), slot_s=0.02, budget_s=0.1, min_rounds=3,
                     max_rounds=3)
    assert "no-such-engine" in d["failures"]["broken"]
    assert d["engines"] == ["ok"] and d["rounds"] == 3


def test_the_quick_plan_duels_every_peer_on_the_target_workloads():
    plan = encoder.duel_plan([1, 2], quick=True)
    assert [(d["workload"], d["threads"]) for d in plan] == [(w, t) for t in (1, 2) for w in harness.WORKLOADS]
    for d in plan:
        if d["workload"] in harness.TARGET_WORKLOADS:
            assert set(d["engines"]) == {"qkv", "qkv-bf16", "transformers", "transformers-bf16", "onnxruntime",
                                         "onnxruntime-int8"}
            assert d["budget_s"] == encoder.QUICK_DUEL_S and d["min_rounds"] >= 8
        else:
            assert "qkv-bf16" in d["engines"] and d["budget_s"] < encoder.QUICK_DUEL_S
    assert "qkv-encode" in encoder.duel_plan([1], quick=False)[0]["engines"]
