"""Small helpers the routers share."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
from fastapi import Request

from qkv.web.state import AppState, Unavailable


def state(request: Request) -> AppState:
    return request.app.state.qkv


def require(module: str, what: str):
    """Import an application module, or answer 503 saying which capability is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Unavailable(f"{what} is not available in this installation: {module} cannot be imported ({e})") from None


def available(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except Exception:
        return False


def rounded(a, digits: int = 4) -> Any:
    """A float array as nested lists with a few decimals: smaller JSON, same picture."""
    return np.round(np.asarray(a, dtype=np.float64), digits).tolist()


def jsonable(x: Any) -> Any:
    """Plain JSON types from what the application APIs return (dataclasses, numpy, tuples)."""
    import dataclasses

    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, float):
        return round(x, 6) if np.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in x]
    return x
