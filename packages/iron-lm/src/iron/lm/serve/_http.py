"""uvicorn's h11 protocol with a deadline for a request's head.

uvicorn closes a connection idle between requests (``timeout_keep_alive``)
but waits forever for the head of a request: a client that opens
connections and sends a header line now and then (slow loris) holds them
all. Here a connection whose request line and headers are not complete
within :data:`HEADER_SECONDS` of its first byte (or of its opening, or of
its last response) is closed, and a malformed or oversized head is
answered OpenAI's JSON error object (uvicorn's own is plain text).

h11's ``max_incomplete_event_size`` bounds only a head still arriving: one
that comes whole in a single read (40 KB in one ``send``) is parsed and
served. :class:`BoundedConnection` measures every request head h11 parses
and refuses one over the same bound, however it arrived. A body that comes too slowly is the app's
to refuse (408, :data:`iron.lm.serve.app.BODY_SECONDS`).
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_SECONDS", "BoundedConnection", "HeaderTimeoutProtocol", "head_bytes"]

#: Seconds a request's line and headers may take to arrive.
HEADER_SECONDS = 10.0
#: h11's documented default bound on a head (``max_incomplete_event_size``).
H11_DEFAULT_HEAD_BYTES = 16 * 1024


def head_bytes(request: h11.Request) -> int:
    """Bytes of ``request``'s line and headers as sent (each line's CRLF counted)."""
    line = len(request.method) + len(request.target) + len(b" HTTP/1.1\r\n") + 1
    fields = sum(
        len(name) + len(value) + 4 for name, value in request.headers.raw_items()
    )
    return line + fields + 2


class BoundedConnection(h11.Connection):
    """An h11 server connection refusing a parsed head over its size bound.

    The bound is the one h11 applies to an incomplete head, so the limit
    holds whether a head arrives in pieces or whole.
    """

    def __init__(self, max_incomplete_event_size: int) -> None:
        super().__init__(
            h11.SERVER, max_incomplete_event_size=max_incomplete_event_size
        )
        self.max_head_bytes = max_incomplete_event_size

    def next_event(self):  # noqa: ANN201 - h11's own event union
        event = super().next_event()
        if isinstance(event, h11.Request) and head_bytes(event) > self.max_head_bytes:
            raise h11.RemoteProtocolError(
                f"The request head is {head_bytes(event)} bytes, over the server's "
                f"{self.max_head_bytes}."
            )
        return event


class HeaderTimeoutProtocol(H11Protocol):
    """:class:`H11Protocol`, closing a connection whose request head is late."""

    _head_timer: asyncio.TimerHandle | None = None

    def __init__(self, config, server_state, app_state=None, _loop=None):  # noqa: ANN001
        super().__init__(config, server_state, app_state, _loop)
        size = config.h11_max_incomplete_event_size
        self.conn = BoundedConnection(H11_DEFAULT_HEAD_BYTES if size is None else size)

    def _arm(self) -> None:
        waiting = self.conn.their_state is h11.IDLE
        if waiting and self._head_timer is None:
            self._head_timer = self.loop.call_later(HEADER_SECONDS, self._late)
        elif not waiting and self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        body = json.dumps(
            {
                "error": {
                    "message": f"{msg} The request line and headers must be valid "
                    "HTTP/1.1 and at most 16 KiB together",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_http",
                }
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self.transport.is_closing():
            self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)
