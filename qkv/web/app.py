"""The FastAPI application: ``create_app(...)`` builds one, ``qkv serve`` runs it with uvicorn.

Everything the page can do goes through the JSON API under ``/api/`` (OpenAPI at ``/docs``); the
page itself is static HTML + this package's own small JavaScript, served from ``qkv/web/static``.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from qkv.errors import InputError, QkvError
from qkv.web.limits import BodySizeLimit, Limits
from qkv.web.state import AppState, TooLarge, Unavailable

log = logging.getLogger("qkv.web")

STATIC = Path(str(resources.files("qkv.web") / "static"))

# pydantic error types that mean "too big" rather than "malformed": answered with 413
_SIZE_ERRORS = {"string_too_long", "too_long", "bytes_too_long"}


def create_app(*, index_dir: str | Path | None = None, attributes_model: str | Path | None = None,
               model: str | None = None, encoder=None, limits: Limits | None = None,
               cors_origins: list[str] | None = None, threads: int | None = None,
               preload: bool = True) -> FastAPI:
    """Build the app. ``index_dir``: the search index this server answers from, and
    ``attributes_model``: the attribute model file (both fixed for the process; no request names a
    path). ``encoder``: an already loaded encoder to share (tests); otherwise ``model`` is
    loaded once at start-up (``preload``) or on first use. ``cors_origins``: origins allowed to call
    the API from other pages; none by default."""
    state = AppState(model=model, encoder=encoder, index_dir=index_dir, attributes_model=attributes_model,
                     limits=limits, threads=threads)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if preload:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(lambda: state.encoder)
        yield

    app = FastAPI(title="qkv", version=_version(), lifespan=lifespan,
                  description="See and use transformer attention: attention maps, search, attributes, "
                              "review summaries. Every view of the web page uses only this API.")
    app.state.qkv = state

    # ------------------------------------------------------------------ errors: always {"error": message}
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        status = 413 if errors and all(e.get("type") in _SIZE_ERRORS for e in errors) else 422
        return JSONResponse({"error": _describe(errors), "details": _plain(errors)}, status_code=status)

    @app.exception_handler(TooLarge)
    async def too_large(request: Request, exc: TooLarge):
        return JSONResponse({"error": str(exc)}, status_code=413)

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, exc: Unavailable):
        return JSONResponse({"error": str(exc)}, status_code=503)

    @app.exception_handler(InputError)
    async def input_error(request: Request, exc: InputError):
        return JSONResponse({"error": str(exc)}, status_code=422)

    @app.exception_handler(QkvError)
    async def qkv_error(request: Request, exc: QkvError):
        return JSONResponse({"error": str(exc)}, status_code=500)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        # The trace goes to the server's log, never to the client.
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); see the server log"},
                            status_code=500)

    # ------------------------------------------------------------------ routes
    from qkv.web.routes import attention, attributes, meta, search, summaries

    for module in (meta, attention, search, attributes, summaries):
        app.include_router(module.router, prefix="/api")

    @app.get("/", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # ------------------------------------------------------------------ middleware (outermost last)
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["content-type"])
    app.add_middleware(BodySizeLimit, max_bytes=state.limits.max_body_bytes)
    return app


def _version() -> str:
    from qkv import __version__

    return __version__


def _describe(errors) -> str:
    """One readable line from pydantic's errors: where and what."""
    parts = []
    for e in errors[:3]:
        if e.get("type") == "json_invalid":
            why = (e.get("ctx") or {}).get("error", "")
            parts.append(f"the body is not valid JSON{f' ({why})' if why else ''}")
            continue
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "invalid request: " + "; ".join(parts) + more


def _plain(errors) -> list[dict]:
    return [{"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in errors]
