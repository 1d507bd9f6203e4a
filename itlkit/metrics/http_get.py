"""One HTTP GET with a total deadline and a size cap (stdlib only).

urllib's `timeout` bounds each socket operation, not the request: a server that sends one byte
per second never trips it. Here a watchdog shuts the connection's socket when the deadline
passes, whatever phase the request is in (connect, headers, body), and the body is read in
chunks against a byte limit, so a huge or endless answer stops at the cap instead of filling
memory.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.error
import urllib.request

_CHUNK_BYTES = 1 << 16


class HttpGetError(Exception):
    """Why a GET failed, in words; the caller prefixes the URL and picks its own error type."""


class HttpStatusError(HttpGetError):
    """The server answered with an HTTP error status; `body` is the start of its explanation."""

    def __init__(self, code: int, reason: str, body: bytes):
        super().__init__(f"HTTP {code} {reason}")
        self.code, self.reason, self.body = code, reason, body


class _Watchdog:
    """Shuts every socket it watches once the deadline passes."""

    def __init__(self, deadline_seconds: float):
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(deadline_seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _watched(base: type, watchdog: _Watchdog) -> type:
    class Watched(base):
        def connect(self):
            super().connect()
            watchdog.watch(self.sock)

    return Watched


def _opener(watchdog: _Watchdog) -> urllib.request.OpenerDirector:
    http_class = _watched(http.client.HTTPConnection, watchdog)
    https_class = _watched(http.client.HTTPSConnection, watchdog)

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(http_class, req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(https_class, req)

    return urllib.request.build_opener(Http, Https)


def _read_capped(response, *, max_bytes: int) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise HttpGetError(f"answer of {int(declared):,} bytes is over the {max_bytes:,} B limit")
    parts, size = [], 0
    while chunk := response.read(_CHUNK_BYTES):
        size += len(chunk)
        if size > max_bytes:
            raise HttpGetError(f"answer is over the {max_bytes:,} B limit")
        parts.append(chunk)
    return b"".join(parts)


def _error_body(exc: urllib.error.HTTPError) -> bytes:
    try:
        return exc.read(_CHUNK_BYTES) or b""
    except (OSError, http.client.HTTPException):
        return b""


def http_get(
    url: str, *, deadline_seconds: float, max_bytes: int, headers: dict | None = None
) -> bytes:
    """The body of `url`, fetched within `deadline_seconds` in all and at most `max_bytes` long.

    Raises `HttpStatusError` for an HTTP error status (with the first 64 kB of the server's
    explanation) and `HttpGetError` for everything else.
    """
    request = urllib.request.Request(url, headers=headers or {})
    started = time.monotonic()
    with _Watchdog(deadline_seconds) as watchdog:
        try:
            with _opener(watchdog).open(request, timeout=deadline_seconds) as response:
                body = _read_capped(response, max_bytes=max_bytes)
        except urllib.error.HTTPError as exc:
            raise HttpStatusError(exc.code, str(exc.reason), _error_body(exc)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            if watchdog.expired or time.monotonic() - started >= deadline_seconds:
                raise HttpGetError(f"no complete answer within {deadline_seconds:g} s") from None
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise HttpGetError(f"no answer within {deadline_seconds:g} s") from None
            raise HttpGetError(f"cannot reach ({reason})") from None
    if watchdog.expired:  # the socket was shut mid-body: what arrived is not the whole answer
        raise HttpGetError(f"no complete answer within {deadline_seconds:g} s")
    return body
