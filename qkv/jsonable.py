"""Plain JSON types from what qkv's APIs return — one converter for every face.

The CLI's ``--json`` and the web API both answer through ``jsonable``, so the same search gives
the same numbers in both. The rules, decided once:

- Floats (Python or NumPy, scalars or arrays) are rounded to ``DIGITS`` = 6 decimals, with NumPy's
  rounding for scalars and arrays alike (an array element and the same value alone come out
  equal). qkv computes in float32, good to about 7 significant digits, and its outputs mostly lie
  in [0, 10) (cosines, weights, shares, BM25 scores): digits past the sixth decimal are float32
  noise (a cosine of 0.69 arrives as 0.6899999976158142). The explain data's ``to_dict()``
  rounds to the same 6.
- NaN and ±inf become null: JSON has neither, and ``json.dumps`` would write invalid JSON.
- Dataclasses become dicts of their fields; NumPy arrays nested lists; NumPy integers and bools
  Python ones; tuples lists; sets sorted lists (stable output); paths strings.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import PurePath
from typing import Any

import numpy as np

DIGITS = 6


_SCALE = 10.0 ** DIGITS


def _float(x) -> float | None:
    # NumPy's own rounding (np.round: multiply by 10**6, round half to even, divide), written in
    # Python: a server answers hundreds of floats per request and np.round on a scalar costs ~20 µs.
    # round() of a float is half to even on its exact value, as np.rint; copysign keeps -0.0.
    x = float(x)
    if not math.isfinite(x):
        return None
    y = x * _SCALE
    return math.copysign(round(y) / _SCALE, x) if math.isfinite(y) else None  # as an array's overflow


def _array(a: np.ndarray) -> Any:
    if a.dtype.kind == "f":
        a64 = np.round(a.astype(np.float64), DIGITS)
        if np.isfinite(a64).all():
            return a64.tolist()
        return np.where(np.isfinite(a64), a64, None).tolist()  # object array: None where not finite
    if a.dtype.kind in "iub":
        return a.tolist()
    return [jsonable(v) for v in a.tolist()] if a.ndim else jsonable(a.item())


def jsonable(x: Any) -> Any:
    """``x`` as dicts, lists, str, int, float (rounded to ``DIGITS`` decimals), bool and None."""
    t = type(x)
    if t is str or t is int or t is bool or x is None:  # the common cases first: an answer holds thousands
        return x
    if t is float:
        return _float(x)
    if isinstance(x, (bool, str, int)) and not isinstance(x, np.generic):
        return x
    if isinstance(x, (float, np.floating)):
        return _float(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.ndarray):
        return _array(x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (set, frozenset)):
        items = [jsonable(v) for v in x]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(x, (list, tuple)):
        if x and all(type(v) is str for v in x):  # tokens, words
            return list(x)
        if x and all(type(v) is float for v in x):  # a row of numbers (a grid's): rounded at once, as arrays are
            return _array(np.asarray(x, dtype=np.float64))
        return [jsonable(v) for v in x]
    if isinstance(x, PurePath):
        return str(x)
    if isinstance(x, np.generic):
        return x.item()
    return x
