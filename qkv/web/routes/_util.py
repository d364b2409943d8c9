"""Small helpers the routers share."""

from __future__ import annotations

import importlib

from fastapi import Request
from pydantic import ConfigDict

from qkv.jsonable import jsonable  # noqa: F401  (the routes' converter: the same as the CLI's --json)
from qkv.web.state import AppState, Unavailable

# Every JSON body: unknown fields refused, and no coercion (true is not 1, "yes" not true, "20" not
# 20): what the OpenAPI schema says is exactly what is accepted. Form fields (uploads) are text by
# nature and stay lax.
BODY = ConfigDict(extra="forbid", strict=True)


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

