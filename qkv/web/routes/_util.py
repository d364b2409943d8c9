"""Small helpers the routers share."""

from __future__ import annotations

import importlib

from typing import Annotated

from fastapi import Request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from qkv.jsonable import jsonable  # noqa: F401  (the routes' converter: the same as the CLI's --json)
from qkv.web.state import AppState, Unavailable

# Every JSON body: unknown fields refused, and no coercion (true is not 1, "yes" not true, "20" not
# 20): what the OpenAPI schema says is exactly what is accepted. Form fields (uploads) are text by
# nature and stay lax.
BODY = ConfigDict(extra="forbid", strict=True)


def _whole(value):
    if isinstance(value, (bool, str)):
        raise ValueError("must be a whole number, not true/false or text")
    return value


# A whole number as JSON Schema's "integer" means it: 3 or 3.0, never true or "3" (pydantic's
# strict int refuses 3.0, which the schema calls valid).
Whole = Annotated[int, BeforeValidator(_whole), Field(strict=False)]


class ErrorDetail(BaseModel):
    loc: list[str]
    msg: str
    type: str


class ErrorBody(BaseModel):
    """Every error answer: what was wrong and what to do (``details``: each invalid field, on 422)."""

    error: str
    details: list[ErrorDetail] | None = None
    retry_after: int | None = Field(None, description="Seconds to wait (429, 503; also the Retry-After header).")


def _error(description: str) -> dict:
    return {"model": ErrorBody, "description": description}


# The statuses an API operation may answer besides 200, with their bodies (the OpenAPI contract
# lists them; the app's exception handlers and middleware write them).
ERRORS = {
    400: _error("The request is malformed (unreadable body or headers), or names another host."),
    403: _error("Refused: a cross-origin request that changes or computes something, or no/wrong API key."),
    404: _error("Something named in the request does not exist (a product no longer in the index)."),
    413: _error("The body, a text, a file or a list is over this server's limit (named in the message)."),
    422: _error("The request is well-formed but invalid: which field and why."),
    429: _error("This kind of work is at its queue limit: retry after Retry-After seconds."),
    503: _error("Unavailable: no index or model for this view, or the work missed its deadline; retry later."),
}


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

