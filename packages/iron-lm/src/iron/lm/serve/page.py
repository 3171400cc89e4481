"""The chat page ``iron-lm serve`` answers at ``/``.

Three static files shipped in the package (``static/``: HTML, CSS and
JavaScript, no build step, nothing fetched from another site) talk to the
server's own API: ``/health`` for the model's name and context,
``/v1/chat/completions`` with ``stream: true`` for answers. They are sent
with a strict Content-Security-Policy (:data:`CSP`: scripts, styles and
requests only from the page's own origin, no inline code, no framing), so
a page that injected markup could run nothing. The page's requests pass
the app's ``Host`` allow-list and API key like any other client's.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["CSP", "FILES", "routes"]

#: The Content-Security-Policy of the page and its assets: everything from
#: the page's origin only, no inline script or style, no plugins, no
#: framing, no form posts elsewhere; the favicon is an empty ``data:`` URL.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)

#: Each path the page is served at -> (its file in ``static/``, its type).
FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/chat.css": ("chat.css", "text/css; charset=utf-8"),
    "/chat.js": ("chat.js", "text/javascript; charset=utf-8"),
}

_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # a new version of the package serves its new page at once
    "Cache-Control": "no-cache",
}


def _read(name: str) -> bytes:
    return resources.files("iron.lm.serve").joinpath("static", name).read_bytes()


def routes() -> list[Route]:
    """The page's routes (``GET`` and ``HEAD``), one per entry of :data:`FILES`.

    Each file is read once, here, so a request reads no disk.
    """
    out = []
    for path, (name, media_type) in FILES.items():
        body = _read(name)

        async def serve(
            request: Request, body: bytes = body, media_type: str = media_type
        ) -> Response:
            return Response(body, media_type=media_type, headers=_HEADERS)

        out.append(Route(path, serve, methods=["GET"]))
    return out
