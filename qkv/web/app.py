"""The FastAPI application: ``create_app(...)`` builds one, ``qkv serve`` runs it with uvicorn.

Everything the page can do goes through the JSON API under ``/api/`` (OpenAPI at ``/docs``); the
page itself is static HTML + this package's own small JavaScript, served from ``qkv/web/static``.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from contextlib import asynccontextmanager, suppress
from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from qkv.errors import InputError, QkvError
from qkv.web.limits import BodySizeLimit, Limits
from qkv.web.observe import AccessLog, ApiKey, Metrics
from qkv.web.pools import Busy, ChildCrashed, Overdue, PoolSpec
from qkv.web.state import GENERATION_POLL, AppState, NotFound, TooLarge, Unavailable

log = logging.getLogger("qkv.web")

STATIC = Path(str(resources.files("qkv.web") / "static"))

# pydantic error types that mean "too big" rather than "malformed": answered with 413
_SIZE_ERRORS = {"string_too_long", "too_long", "bytes_too_long"}
# unknown fields people send for a known one (other APIs' names, the CLI's options)
_MEANT = {"where": "filters", "filter": "filters", "q": "query", "text": "query", "top_k": "k", "limit": "k",
          "n": "k", "topk": "k", "size": "k", "budget_tokens": "budget", "model": None}


def create_app(*, index_dir: str | Path | None = None, attributes_model: str | Path | None = None,
               model: str | None = None, encoder=None, limits: Limits | None = None,
               cors_origins: list[str] | None = None, threads: int | None = None,
               preload: bool = True, pools: dict[str, PoolSpec | dict] | None = None,
               api_key: str | None = None, metrics: bool = True,
               generation_poll: float | None = GENERATION_POLL, child_processes: bool = False,
               glossary: str | Path | None = None, balancer=None, trade_glossary: str = "home-improvement",
               allowed_hosts: list[str] | None = None, heavy_workers: int | None = None) -> FastAPI:
    """Build the app. ``index_dir``: the search index this server answers from, and
    ``attributes_model``: the attribute model file (both fixed for the process; no request names a
    path). ``encoder``: an already loaded encoder to share (tests); otherwise ``model`` is
    loaded once at start-up (``preload``, with the index) or on first use. ``cors_origins``: origins
    allowed to call the API from other pages; none by default. ``pools``: per kind of work, its
    ``PoolSpec`` or the fields to change (``qkv.web.pools``). ``api_key``: required on every API
    call when given. ``generation_poll``: seconds between looks for a newly published index
    generation (None: never). ``child_processes``: run the heavy kinds (attention, summaries,
    attributes) in child processes (``qkv serve`` does; tests run them in threads); ``heavy_workers``: how many
    such processes the heavy kinds share (default: sized by cores and memory, ``qkv.web.pools.heavy_processes``).
    ``glossary``: a seller's CSV (Chinese term, English term) that overrides the dictionary when
    Chinese queries are translated (``qkv.translate.translator``); ``trade_glossary``: the built-in trade
    glossary below it ("none": the dictionary alone). ``balancer``: this worker's
    ``qkv.web.balance.Balancer`` under ``qkv serve --workers N`` (keeps the workers' search waits
    alike by closing a connection of the heavier one). ``allowed_hosts``: the only ``Host`` names
    answered (``qkv serve`` on loopback: the loopback names, against DNS rebinding; None: any).
    Cross-origin state-changing requests are refused unless their origin is in ``cors_origins``,
    and every answer carries nosniff, a CSP and frame-ancestors 'none' (``qkv.web.guard``)."""
    state = AppState(model=model, encoder=encoder, index_dir=index_dir, attributes_model=attributes_model,
                     limits=limits, threads=threads, pools=pools, child_processes=child_processes, glossary=glossary,
                     trade_glossary=trade_glossary, heavy_workers=heavy_workers)
    meter = Metrics() if metrics else None
    if meter is not None:
        state.pools.observe(meter.pool_changed)
        state.pools.on_restart(meter.pool_restarted)
    if balancer is not None:
        searches = state.pools["search"]

        def publish(kind: str, waiting: int, running: int) -> None:
            if kind == "search":
                balancer.publish(waiting + running, searches.job_seconds, searches.spec.threads)

        state.pools.observe(publish)

    async def heartbeat():
        """Tell the other workers this one is alive and serving (``qkv.web.balance``)."""
        while True:
            balancer.beat()
            await asyncio.sleep(0.5)

    async def watch_generations():
        """Pick up index generations published while serving (``qkv index --upsert`` on the served
        directory): one stat of the manifest per poll; the new generation is opened and warmed in
        a thread while requests keep using the old one."""
        while True:
            await asyncio.sleep(generation_poll)
            try:
                if state.index_retry_due():  # not open yet (being published, or broken): try again
                    with suppress(Unavailable):
                        await asyncio.to_thread(state.index)
                        log.info("search index %s opened", state.index_dir.name)
                        if meter is not None:
                            meter.set_generation(state.generation)
                elif state.generation_changed() and await asyncio.to_thread(state.reload_index):
                    log.info("index generation %s now served", state.generation)
                    if meter is not None:
                        meter.set_generation(state.generation)
                        meter.swaps.inc()
            except Exception:  # never let the watcher die: the next poll tries again
                log.exception("looking for a new index generation failed")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if preload:
            state.pools.start()
            await asyncio.to_thread(lambda: state.encoder)
            if state.index_dir is not None:
                with suppress(Exception):  # an unusable index answers 503 on use, saying why
                    # opened and searched once, so no client pays for first-use costs; a Chinese
                    # query too (it loads the translator's dictionary: seconds on a busy machine)
                    await asyncio.to_thread(lambda: state.index().search("warm up", k=1))
                    await asyncio.to_thread(lambda: state.index().search("热身", k=1))
        if meter is not None:
            meter.set_generation(state.generation)
            if state._encoder is not None:
                meter.model.labels(state._encoder.name, state.fingerprint()).set(1)
        watcher = asyncio.create_task(watch_generations()) if generation_poll and state.index_dir else None
        beating = asyncio.create_task(heartbeat()) if balancer is not None else None
        try:
            yield
        finally:
            if beating is not None:
                beating.cancel()
                with suppress(asyncio.CancelledError):
                    await beating
            if watcher is not None:
                watcher.cancel()
                with suppress(asyncio.CancelledError):
                    await watcher
            state.pools.shutdown()

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
        return JSONResponse({"error": _describe(errors, request), "details": _plain(errors)}, status_code=status)

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy):
        return JSONResponse({"error": str(exc), "retry_after": exc.retry_after}, status_code=429,
                            headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(Overdue)
    async def overdue(request: Request, exc: Overdue):
        return JSONResponse({"error": str(exc), "retry_after": exc.retry_after}, status_code=503,
                            headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(ChildCrashed)
    async def child_crashed(request: Request, exc: ChildCrashed):
        return JSONResponse({"error": str(exc), "retry_after": 1}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound):
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(TooLarge)
    async def too_large(request: Request, exc: TooLarge):
        return JSONResponse({"error": str(exc)}, status_code=413)

    @app.exception_handler(Unavailable)
    async def unavailable(request: Request, exc: Unavailable):
        return JSONResponse({"error": str(exc)}, status_code=503)

    @app.exception_handler(InputError)
    async def input_error(request: Request, exc: InputError):
        return JSONResponse({"error": _api_names(str(exc))}, status_code=422)

    @app.exception_handler(QkvError)
    async def qkv_error(request: Request, exc: QkvError):
        return JSONResponse({"error": str(exc)}, status_code=500)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        # The trace goes to the server's log, never to the client.
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        # Starlette re-raises the exception after this answer and uvicorn then drops the connection:
        # saying so lets a keep-alive client open a new one instead of failing its next request.
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); see the server log"},
                            status_code=500, headers={"Connection": "close"})

    # ------------------------------------------------------------------ routes
    from qkv.web.routes import attention, attributes, meta, search, summaries

    from qkv.web.routes._util import ERRORS

    for module in (meta, attention, search, attributes, summaries):
        app.include_router(module.router, prefix="/api", responses=ERRORS)

    @app.get("/", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    if meter is not None:
        @app.get("/metrics", include_in_schema=False)
        async def metrics_text():
            from prometheus_client import CONTENT_TYPE_LATEST

            return Response(meter.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # ------------------------------------------------------------------ middleware (outermost last)
    app.add_middleware(BodySizeLimit, max_bytes=state.limits.max_body_bytes)
    if balancer is not None:
        from qkv.web.balance import Rebalance

        app.add_middleware(Rebalance, balancer=balancer)
    if api_key:
        app.add_middleware(ApiKey, key=api_key)
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["content-type", "authorization", "x-api-key"])
    from qkv.web.guard import Guard

    app.add_middleware(Guard, hosts=allowed_hosts, origins=cors_origins)
    app.add_middleware(AccessLog, metrics=meter)
    return app


# Errors of the layers below name the CLI's options; a web client sets the API field instead.
_CLI_OPTIONS = {"--allow-cut": '"allow_cut": true', "--column": 'the "column" field'}


def _api_names(message: str) -> str:
    for option, field in _CLI_OPTIONS.items():
        message = message.replace(option, field)
    return message


def _version() -> str:
    from qkv import __version__

    return __version__


def _describe(errors, request: Request | None = None) -> str:
    """One readable line from pydantic's errors: where and what."""
    parts = []
    for e in errors[:3]:
        if e.get("type") == "json_invalid":
            why = (e.get("ctx") or {}).get("error", "")
            parts.append(f"the body is not valid JSON{f' ({why})' if why else ''}")
            continue
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
        if e.get("type") == "extra_forbidden":
            parts.append(_unknown_field(e.get("loc", ()), request))
            continue
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "invalid request: " + "; ".join(parts) + more


def _unknown_field(loc, request: Request | None) -> str:
    """'unknown field "where"; did you mean "filters"? Fields: …', from the endpoint's own model."""
    name = str(loc[-1]) if loc else "?"
    where = ".".join(str(x) for x in loc[1:-1])
    known = _known_fields(request, loc)
    meant = _MEANT.get(name) if _MEANT.get(name) in known else None
    if meant is None:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        meant = close[0] if close else None
    text = f'unknown field "{name}"' + (f" in {where}" if where else "")
    if meant:
        text += f'; did you mean "{meant}"?'
    if known:
        text += " (fields: " + ", ".join(known) + ")"
    return text


def _known_fields(request: Request | None, loc) -> list[str]:
    """The field names of the body model (or nested model) at ``loc`` of this request's endpoint."""
    import typing

    from pydantic import BaseModel

    route = request.scope.get("route") if request is not None else None
    params = getattr(getattr(route, "dependant", None), "body_params", None) or []
    model = params[0].field_info.annotation if len(params) == 1 else None

    def as_model(tp):
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
        for arg in typing.get_args(tp):
            m = as_model(arg)
            if m is not None:
                return m
        return None

    model = as_model(model)
    for part in loc[1:-1]:  # walk into nested models ("filters", 0, ...)
        if model is None:
            return []
        if isinstance(part, str):
            f = model.model_fields.get(part)
            model = as_model(f.annotation) if f is not None else None
    return list(model.model_fields) if model is not None else []


def _plain(errors) -> list[dict]:
    return [{"loc": [str(x) for x in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in errors]
