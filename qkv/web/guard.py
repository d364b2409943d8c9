"""Browser-facing protections of the web server, as one pure ASGI middleware:

- **Host check** (against DNS rebinding): a server bound to loopback answers only requests whose
  ``Host`` is a loopback name; a page on ``evil.example`` whose name was re-pointed at 127.0.0.1
  sends ``Host: evil.example`` and is refused (400).
- **Cross-origin writes refused**: a POST (or other state-changing method) whose ``Origin`` is
  neither this server's own nor one allowed with ``--cors`` is refused (403). A JSON body from
  another site is already stopped by CORS preflight; a multipart upload is a "simple" request the
  browser sends without asking, so it must be stopped here. Requests without ``Origin`` (curl,
  scripts) are not browsers' cross-site requests and pass.
- **Security headers** on every answer: ``X-Content-Type-Options: nosniff``, a Content Security
  Policy allowing only this server's own scripts, styles and connections (the page has no inline
  script or style), and ``frame-ancestors 'none'`` (no framing, against clickjacking). FastAPI's
  ``/docs`` page loads Swagger UI from a CDN with an inline script, so it gets only the framing
  rule.

See OWASP's "DNS rebinding" and "Cross-Site Request Forgery Prevention" cheat sheets (checking the
Origin header against the target origin) and MDN's CSP reference.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from qkv.web.limits import refuse

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
PAGE_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
               "frame-ancestors 'none'")
DOCS_POLICY = "frame-ancestors 'none'"
DOCS_PATHS = ("/docs", "/redoc")


def hosts_for_bind(host: str) -> list[str] | None:
    """The Host names a server bound to ``host`` answers: loopback binds only loopback names; a
    server bound beyond loopback is reached by names this process cannot know (None: any)."""
    from qkv.web.observe import LOOPBACK

    return list(LOOPBACK) if host in LOOPBACK else None


def _host_name(value: str) -> str:
    """``Host`` without its port: ``127.0.0.1:8000`` → ``127.0.0.1``, ``[::1]:80`` → ``::1``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _origin(value: str) -> tuple[str, str] | None:
    """(scheme, host[:port]) of an Origin header, lower-cased; None for "null" or unreadable."""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return parts.scheme.lower(), parts.netloc.lower()


class Guard:
    """Pure ASGI middleware; ``hosts``: the Host names answered (None: any); ``origins``: other
    origins allowed to send state-changing requests (the ``--cors`` list)."""

    def __init__(self, app, hosts: list[str] | None = None, origins: list[str] | None = None):
        self.app = app
        self.hosts = {h.lower() for h in hosts} if hosts else None
        self.origins = {o for o in (_origin(x) for x in origins or []) if o}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        path = scope.get("path", "")
        policy = DOCS_POLICY if path.startswith(DOCS_PATHS) else PAGE_POLICY

        async def secured(message):
            if message["type"] == "http.response.start":
                extra = [(b"x-content-type-options", b"nosniff"), (b"content-security-policy", policy.encode()),
                         (b"x-frame-options", b"DENY")]
                have = {k.lower() for k, _ in message.get("headers", [])}
                message = {**message, "headers": list(message.get("headers", []))
                           + [(k, v) for k, v in extra if k not in have]}
            await send(message)

        host = headers.get("host", "")
        if self.hosts is not None and _host_name(host) not in self.hosts:
            return await refuse(secured, 400, f"this server answers only for {', '.join(sorted(self.hosts))} "
                                              f"(the request named host {host[:100]!r}); open it as "
                                              "http://localhost:PORT/")
        if scope.get("method", "GET") not in SAFE_METHODS and not self._same_or_allowed(headers, host):
            return await refuse(secured, 403, "cross-origin requests that change or compute something are "
                                              "refused: call this API from its own page, from a script "
                                              "without an Origin header, or allow the origin with --cors")
        await self.app(scope, receive, secured)

    def _same_or_allowed(self, headers: dict, host: str) -> bool:
        origin = headers.get("origin")
        if origin is None:
            # no Origin: not a browser's cross-site request, unless Fetch metadata says it is one
            return headers.get("sec-fetch-site", "same-origin") != "cross-site"
        o = _origin(origin)
        if o is None:  # "null": a sandboxed frame, a file:// page
            return False
        return o[1] == host.strip().lower() or o in self.origins

