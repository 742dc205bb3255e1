"""The status page: one static HTML page, its script and its style, shipped beside this
module and served without a token (they hold no secret, like ``/health``). Every datum the
page shows it fetches from the token-protected API, with the token it reads from the URL's
fragment (``/ui#token=...``, which a browser never sends to a server). A strict
Content-Security-Policy allows only this daemon's own script, style and API: no inline
script, no other origin, no framing.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from aiohttp import web

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
FILES = {
    "/ui": ("index.html", "text/html"),
    "/ui/app.js": ("app.js", "text/javascript"),
    "/ui/style.css": ("style.css", "text/css"),
    "/ui/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
PATHS = frozenset({*FILES, "/"})
"""The page's paths (and ``/``, which sends a browser to it): served to anyone who reaches
the daemon's address, without a token."""


@cache
def _content(name: str) -> bytes:
    return resources.files(__name__).joinpath(name).read_bytes()


async def serve(request: web.Request) -> web.Response:
    name, content_type = FILES[request.path]
    return web.Response(
        body=_content(name),
        content_type=content_type,
        charset="utf-8",
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )


async def home(request: web.Request) -> web.Response:
    """``GET /``, where a person's browser lands first: the status page (which asks for the
    token ``condensate ui`` gives it)."""
    # Returned, not raised: the errors middleware answers a raised HTTP exception as JSON.
    return web.Response(status=302, headers={"Location": "/ui"})


def add_routes(app: web.Application) -> None:
    """The page's routes; they are no part of the API (nor of its OpenAPI document)."""
    for path in FILES:
        app.router.add_get(path, serve, allow_head=False)
    app.router.add_get("/", home, allow_head=False)
