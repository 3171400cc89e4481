"""uvicorn's h11 protocol with a deadline for a request's head.

uvicorn closes a connection idle between requests (``timeout_keep_alive``)
but waits forever for the head of a request: a client that opens
connections and sends a header line now and then (slow loris) holds them
all. Here a connection whose request line and headers are not complete
within :data:`HEADER_SECONDS` of its first byte (or of its opening, or of
its last response) is closed, and a malformed or oversized head is
answered OpenAI's JSON error object (uvicorn's own is plain text). A body that comes too slowly is the app's
to refuse (408, :data:`iron.lm.serve.app.BODY_SECONDS`).
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEADER_SECONDS", "HeaderTimeoutProtocol"]

#: Seconds a request's line and headers may take to arrive.
HEADER_SECONDS = 10.0


class HeaderTimeoutProtocol(H11Protocol):
    """:class:`H11Protocol`, closing a connection whose request head is late."""

    _head_timer: asyncio.TimerHandle | None = None

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
