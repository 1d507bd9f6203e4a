"""One HTTP GET with a total deadline and a size cap (stdlib only).

urllib's `timeout` bounds each socket operation, not the request: a server that sends one byte
per second never trips it. Here a watchdog shuts the connection's socket when the deadline
passes, whatever phase the request is in (connect, headers, body), and the body is read in
chunks against a byte limit, so a huge or endless answer stops at the cap instead of filling
memory. A body shorter than its Content-Length is refused, not returned as if whole.

Every failure is one `HttpGetError` whose text says what happened in the user's words
("nothing is listening at 127.0.0.1:9 (connection refused)"), never urllib's or the socket
library's; the caller puts the URL (`shown_url`) in front.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

_CHUNK_BYTES = 1 << 16
MAX_DEADLINE_SECONDS = 86_400.0  # a day: beyond it no answer is worth waiting for (and a
#                                  timer or socket timeout of ~1e10 s overflows the platform)
_SCHEMES = ("http", "https")
_SHOWN_URL_CHARS = 200


class HttpGetError(Exception):
    """Why a GET failed, in words; the caller prefixes the URL and picks its own error type."""


class HttpStatusError(HttpGetError):
    """The server answered with an HTTP error status; `body` is the start of its explanation."""

    def __init__(self, code: int, reason: str, body: bytes):
        super().__init__(f"answered HTTP {code} {one_line(reason)}".rstrip())
        self.code, self.reason, self.body = code, reason, body


# ---- URLs as the user wrote them --------------------------------------------------------------
def one_line(text: str, max_chars: int = _SHOWN_URL_CHARS) -> str:
    """`text` as a message repeats it: control characters and line breaks escaped, cut short."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def shown_url(url: str) -> str:
    """A URL as a message repeats it: one line, at most 200 characters, a password hidden."""
    if not str(url):
        return "''"
    return one_line(re.sub(r"(//[^/@]*?:)[^/@]*@", r"\1***@", str(url)))


_ODD_CHARACTERS = {" ": "a space", "\t": "a tab", "\n": "a line break", "\r": "a line break"}


def _odd_character(url: str) -> str | None:
    """Where `url` holds a space or a control character, in words; None when it holds none."""
    for i, c in enumerate(url):
        if c in _ODD_CHARACTERS or not c.isprintable():
            what = _ODD_CHARACTERS.get(c, f"the control character {repr(c)[1:-1]}")
            hint = "; write a space as %20" if c == " " else ""
            return f"contains {what} (character {i + 1}), which a URL cannot hold{hint}"
    return None


def _port_problem(netloc: str) -> str | None:
    """What is wrong with the port written in `netloc` (host[:port]), or None."""
    _, colon, port = netloc.rpartition("]")[2].rpartition(":")
    if not colon or port == "":
        return None
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65_535):
        return f"the port {one_line(port, 20)!r} is not a number from 1 to 65535"
    return None


def checked_url(url: str) -> str:
    """`url` with its scheme in lower case (`HTTP://` is `http://`); HttpGetError says what is
    wrong with it otherwise (the caller names the URL)."""
    url = str(url)
    if not url.strip():
        raise HttpGetError("the URL is empty; give one like http://127.0.0.1:8000/metrics")
    if odd := _odd_character(url):
        raise HttpGetError(odd)
    if "://" not in url:
        raise HttpGetError("is not a URL: it needs http:// or https:// in front, "
                           "e.g. http://127.0.0.1:9090")  # fmt: skip
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # an unclosed '[' (urllib: 'Invalid IPv6 URL')
        raise HttpGetError("has an unclosed '[' in its host (an IPv6 address is written "
                           "http://[::1]:9090)") from None  # fmt: skip
    if parts.scheme not in _SCHEMES:
        scheme = one_line(url.partition("://")[0], 20)
        raise HttpGetError(f"only http:// and https:// URLs can be read, not {scheme}://")
    if "@" in parts.netloc:
        raise HttpGetError("a user name or password in the URL is not supported (itlkit sends "
                           "no credentials); use an address that needs none")  # fmt: skip
    if not parts.hostname:
        raise HttpGetError("names no host; give one like http://127.0.0.1:8000/metrics")
    if problem := _port_problem(parts.netloc):
        raise HttpGetError(problem)
    return parts._replace(scheme=parts.scheme.lower()).geturl()


def _target(url: str) -> str:
    """`host:port` of `url`, as a message names the place it could not reach."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _in_words(exc: BaseException, url: str) -> str:
    """A connection failure as the user should read it (the socket and TLS layers' words out)."""
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    at = _target(url)
    if isinstance(reason, ConnectionRefusedError):
        return f"nothing is listening at {at} (connection refused)"
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"the TLS certificate of {at} is not trusted ({reason.verify_message})"
    if isinstance(reason, ssl.SSLError):
        if "WRONG_VERSION_NUMBER" in str(reason) or "record layer" in str(reason):
            return f"the server at {at} does not speak TLS (https:// against a plain http port?)"
        return f"the TLS handshake with {at} failed"
    if isinstance(reason, socket.gaierror):
        host = one_line(urllib.parse.urlsplit(url).hostname or "", 80)
        return f"no host named {host!r} could be found (DNS lookup failed)"
    if isinstance(reason, http.client.RemoteDisconnected):
        return f"the server at {at} closed the connection without answering"
    if isinstance(reason, ConnectionResetError):
        return f"the server at {at} reset the connection"
    if isinstance(reason, http.client.IncompleteRead):
        return f"the answer from {at} was cut off before its end"
    if isinstance(reason, http.client.BadStatusLine):
        said = one_line(str(reason.args[0] if reason.args else ""), 60)
        return f"the server at {at} does not answer in HTTP (it said {said!r})"
    if isinstance(reason, http.client.HTTPException):
        return f"the server at {at} sent a malformed HTTP answer"
    if isinstance(reason, OSError) and reason.strerror:
        return f"cannot connect to {at} ({reason.strerror.lower()})"
    return f"cannot reach {at} ({one_line(str(reason), 100)})"


# ---- the request ------------------------------------------------------------------------------
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


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, kept to http(s) targets that pass `checked_url`; a loop is named as one.

    `followed` lists the URLs redirected to, so a failure there names where it happened.
    """

    def __init__(self):
        self.followed: list[str] = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self.followed.append(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)

    def http_error_302(self, req, fp, code, msg, headers):
        said = headers.get("location") or headers.get("uri") or ""
        try:
            target = urllib.parse.urljoin(req.full_url, said)
        except ValueError:  # an unclosed '[': checked_url says so
            target = said
        try:
            checked_url(target)
        except HttpGetError as exc:
            fp.close()
            raise HttpGetError(f"redirects to {shown_url(target)}: {exc}") from None
        try:
            return super().http_error_302(req, fp, code, msg, headers)
        except urllib.error.HTTPError as exc:
            if not str(exc.msg).startswith(self.inf_msg):
                raise
            exc.close()
            n = len(self.followed)
            if len(set(self.followed)) < n:
                raise HttpGetError(f"redirects in a loop ({n} redirects)") from None
            raise HttpGetError(f"redirects more than {n - 1} times") from None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _watched(base: type, watchdog: _Watchdog) -> type:
    class Watched(base):
        def connect(self):
            super().connect()
            watchdog.watch(self.sock)

    return Watched


def _opener(watchdog: _Watchdog, redirects: _Redirects) -> urllib.request.OpenerDirector:
    http_class = _watched(http.client.HTTPConnection, watchdog)
    https_class = _watched(http.client.HTTPSConnection, watchdog)

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(http_class, req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(https_class, req)

    return urllib.request.build_opener(Http, Https, redirects)


def _read_capped(response, *, max_bytes: int) -> bytes:
    declared = response.headers.get("Content-Length")
    declared_bytes = int(declared) if declared and declared.isdigit() else None
    if declared_bytes is not None and declared_bytes > max_bytes:
        raise HttpGetError(f"answer of {declared_bytes:,} bytes is over the {max_bytes:,} B limit")
    parts, size = [], 0
    while chunk := response.read(_CHUNK_BYTES):
        size += len(chunk)
        if size > max_bytes:
            raise HttpGetError(f"answer is over the {max_bytes:,} B limit")
        parts.append(chunk)
    if declared_bytes is not None and size < declared_bytes:
        raise HttpGetError(
            f"the answer stopped after {size:,} of the {declared_bytes:,} bytes it announced "
            "(Content-Length): the connection closed before its end"
        )
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
    explanation) and `HttpGetError` for everything else, the URL itself included.
    """
    if not 0 < deadline_seconds <= MAX_DEADLINE_SECONDS:
        raise ValueError(f"deadline_seconds must be in (0, {MAX_DEADLINE_SECONDS:g}], "
                         f"got {deadline_seconds!r}")  # fmt: skip
    request = urllib.request.Request(checked_url(url), headers=headers or {})
    redirects = _Redirects()
    started = time.monotonic()
    with _Watchdog(deadline_seconds) as watchdog:
        try:
            with _opener(watchdog, redirects).open(request, timeout=deadline_seconds) as response:
                body = _read_capped(response, max_bytes=max_bytes)
        except urllib.error.HTTPError as exc:
            raise HttpStatusError(exc.code, str(exc.reason), _error_body(exc)) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            if watchdog.expired or time.monotonic() - started >= deadline_seconds:
                raise HttpGetError(f"no complete answer within {deadline_seconds:g} s") from None
            if isinstance(getattr(exc, "reason", exc), TimeoutError):
                raise HttpGetError(f"no answer within {deadline_seconds:g} s") from None
            last = redirects.followed[-1] if redirects.followed else request.full_url
            said = _in_words(exc, last)
            if redirects.followed:
                said = f"redirects to {shown_url(last)}: {said}"
            raise HttpGetError(said) from None
    if watchdog.expired:  # the socket was shut mid-body: what arrived is not the whole answer
        raise HttpGetError(f"no complete answer within {deadline_seconds:g} s")
    return body
