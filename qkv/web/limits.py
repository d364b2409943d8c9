"""Input limits of the web API and the middleware that enforces the request-size one.

Every limit answers with a clear status: a body, upload, text or list over its size limit gets 413
(Content Too Large) with a message naming the limit; a malformed or wrong-typed body gets 422.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.exceptions import HTTPException


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = 1_000_000  # any request body
    max_upload_bytes: int = 512_000  # a review file for the summaries view
    max_text_chars: int = 2_000  # attention / tour text, a search query is shorter (below)
    max_attention_tokens: int = 128  # [heads, n, n] per layer stays ~1.5 MB of JSON
    max_query_chars: int = 500
    max_query_han_chars: int = 100  # a Chinese character is a token (or more): 500 took 1.1-1.5 s to search
    max_results: int = 50
    max_titles: int = 200
    max_title_chars: int = 500
    max_reviews: int = 500
    max_review_chars: int = 5_000
    max_budget_tokens: int = 2_000
    max_rating: int = 100  # |rating| of a review: stars, a 0/1 label, a score (qkv.summarize.readers.MAX_RATING)


def error_body(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=False).encode()


async def refuse(send, status: int, message: str) -> None:
    """Answer an ASGI request with ``status`` and the JSON error body, before any app code runs
    (the body-size limit here, the Host and Origin checks in ``qkv.web.guard``)."""
    body = error_body(message)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """Pure ASGI middleware: refuse bodies over ``max_bytes`` with 413, by the Content-Length header
    when there is one and by counting the streamed bytes when there is not (chunked uploads)."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                return await refuse(send, 400, "invalid Content-Length header")
            if too_big:
                return await refuse(send, 413, self._message())

        seen = 0
        started = False

        async def counting_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(413, self._message())
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:  # only when no handler inside answered it
            if not started:
                await refuse(send, 413, self._message())

    def _message(self) -> str:
        return f"request body is larger than this server's limit of {self.max_bytes:,} bytes; send less"



class _TooLarge(HTTPException):
    """An HTTPException, so FastAPI's body parsing passes it through (it turns other errors into 400)
    and the app's handler answers 413 as JSON."""
