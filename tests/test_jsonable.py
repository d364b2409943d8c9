"""qkv.jsonable: the one converter behind the CLI's --json and the web API."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from qkv.jsonable import DIGITS, jsonable


def test_float32_noise_is_rounded_the_same_in_scalars_arrays_and_python_floats():
    x = np.float32(0.69)
    assert float(x) != 0.69  # what float32 arithmetic hands over
    assert jsonable(x) == jsonable(float(x)) == jsonable(np.array([x]))[0] == 0.69
    v = np.random.default_rng(0).standard_normal((50, 7)).astype(np.float32)
    out = jsonable(v)
    assert [[jsonable(float(e)) for e in row] for row in v] == out  # element by element = whole array
    assert all(abs(a - float(b)) <= 0.5 * 10 ** -DIGITS + 1e-15 for a, b in zip(out[0], v[0]))
    # lists of Python floats (a grid's .tolist()) are rounded as a whole: the same numbers, None for NaN/inf
    rows = [[float(e) for e in row] for row in v] + [[float("nan"), 1.0, float("inf")]]
    assert jsonable(rows) == out + [[None, 1.0, None]]
    assert jsonable([1.0, 2]) == [1.0, 2] and type(jsonable([1.0, 2])[1]) is int  # mixed lists element by element


def test_not_finite_becomes_null_and_the_text_is_valid_json():
    d = jsonable({"a": float("nan"), "b": np.array([1.5, np.inf, -np.inf], dtype=np.float32), "c": np.float64("nan")})
    assert d == {"a": None, "b": [1.5, None, None], "c": None}
    text = json.dumps(d, allow_nan=False)  # would raise on NaN/Infinity
    assert json.loads(text) == d


def test_containers_numpy_scalars_dataclasses_and_paths():
    @dataclasses.dataclass(frozen=True)
    class R:
        id: str
        score: float
        tags: frozenset

    out = jsonable({1: (np.int64(3), np.bool_(True), R("p", np.float32(0.25), frozenset({"b", "a"}))),
                    "p": Path("/tmp/x"), "ints": np.arange(3, dtype=np.int32), "none": None})
    assert out == {"1": [3, True, {"id": "p", "score": 0.25, "tags": ["a", "b"]}], "p": "/tmp/x",
                   "ints": [0, 1, 2], "none": None}
    assert type(out["1"][0]) is int and type(out["1"][1]) is bool
    json.dumps(out)


def test_large_values_keep_their_integer_part_and_small_ones_round_to_six_places():
    assert jsonable(123456.7890123) == 123456.789012
    assert jsonable(1.234567e-7) == 0.0 and jsonable(-2.6e-6) == -3e-06
    assert all(math.isfinite(v) for v in jsonable(np.linspace(-1e6, 1e6, 11)))


def test_python_floats_round_exactly_as_numpy_does():
    """Scalars take a pure-Python path (np.round on a scalar cost ~20 µs, hundreds per answer):
    it must give NumPy's numbers bit for bit, halves to even and the sign of zero included."""
    rng = np.random.default_rng(1)
    xs = np.concatenate([rng.standard_normal(20_000) * s for s in (1e-7, 1e-4, 1.0, 1e4, 1e9)])
    xs = np.concatenate([xs, np.round(xs, 6) + 5e-7, np.round(xs, 6) - 5e-7,  # ties and near-ties
                         [0.0, -0.0, 5e-7, -5e-7, 1.5e-6, 2.5e-6, -4e-7, 1e17, 5e-324]])
    for x in xs.tolist():
        got, want = jsonable(x), float(np.round(np.float64(x), DIGITS))
        assert got == want and math.copysign(1, got) == math.copysign(1, want), x
        assert got == jsonable(np.float64(x)) == jsonable(np.array([x]))[0]
    assert jsonable(1.7e308) is None  # rounding would overflow: null, as in an array
    assert jsonable(["a", "b"]) == ["a", "b"] and jsonable(("a",)) == ["a"]  # strings: the fast path
