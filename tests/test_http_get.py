"""Hostile HTTP servers: a total deadline, a size cap, and Prometheus answers of the wrong shape.

A local server in a thread plays each part: one that trickles a byte at a time (per-read timeouts
never fire), one that sends more than the cap, one that declares a huge Content-Length, and
Prometheus look-alikes whose JSON is valid but not a range-query answer.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time

import pytest

from itlkit.errors import PrometheusError
from itlkit.metrics.http_get import HttpGetError, HttpStatusError, http_get, shown_url
from itlkit.metrics.prometheus_api import fetch_bucket_rates, query_range

ANSWERS = {
    "/not-json": b"<html>hello</html>",
    "/bare-list": b"[1, 2, 3]",
    "/no-data": json.dumps({"status": "success"}).encode(),
    "/vector": json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}),
    "/bad-point": json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": [{"values": [[1]]}]}}
    ),
    "/text-value": json.dumps(
        {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "abc"]]}]},
        }
    ),
    "/no-le": json.dumps(
        {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, "2"]]}]},
        }
    ),
    "/deep": b"[" * 100_000 + b"]" * 100_000,
    "/no-status": json.dumps({"data": {"resultType": "matrix", "result": []}}),
}


REDIRECTS = {
    "/redirect-self": "/redirect-self",
    "/redirect-a": "/redirect-b",
    "/redirect-b": "/redirect-a",
    "/redirect-ftp": "ftp://127.0.0.1/metrics",
    "/redirect-closed": "http://127.0.0.1:CLOSED/m",
    "/redirect-bad-ipv6": "http://[::1/m",
}


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/").removesuffix("/api/v1/query_range") or "/"
        if path == "/trickle":
            self._trickle()
        elif path == "/huge":
            self._send(b"x" * 3_000_000)
        elif path == "/declared-huge":
            self.send_response(200)
            self.send_header("Content-Length", str(10**12))
            self.end_headers()
        elif path == "/error":
            self._send(json.dumps({"status": "error", "error": "parse error at char 3"}), code=400)
        elif path in REDIRECTS:
            self._redirect(REDIRECTS[path].replace("CLOSED", str(self.server.closed_port)))
        elif path == "/close":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif path == "/garbage":
            self.wfile.write(b"HELLO THERE\r\n\r\n")
            self.close_connection = True
        elif path == "/short":
            self.send_response(200)
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(b"# only a little\n")
            self.close_connection = True
        elif path == "/missing":
            self.send_error(404, "Not Found")
        else:
            self._send(ANSWERS.get(path, b"ok"))

    def _redirect(self, where):
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"Found")

    def _send(self, body, code=200):
        body = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self):
        self.send_response(200)
        self.end_headers()
        try:
            for _ in range(200):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.closed_port = _closed_port()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_deadline_is_for_the_whole_request_not_each_read(server):
    # A byte every 50 ms never trips a per-read timeout; the whole answer would take 10 s.
    started = time.monotonic()
    with pytest.raises(HttpGetError, match="no complete answer within 0.5 s"):
        http_get(f"{server}/trickle", deadline_seconds=0.5, max_bytes=10**6)
    assert time.monotonic() - started < 2.0


def test_size_cap_stops_reading(server):
    with pytest.raises(HttpGetError, match="over the 1,000,000 B limit"):
        http_get(f"{server}/huge", deadline_seconds=5, max_bytes=1_000_000)
    with pytest.raises(HttpGetError, match="1,000,000,000,000 bytes is over"):
        http_get(f"{server}/declared-huge", deadline_seconds=5, max_bytes=1_000_000)
    assert http_get(f"{server}/huge", deadline_seconds=5, max_bytes=3_000_000) == b"x" * 3_000_000


def test_status_error_keeps_the_servers_explanation(server):
    with pytest.raises(HttpStatusError) as info:
        http_get(f"{server}/error", deadline_seconds=5, max_bytes=1000)
    assert info.value.code == 400 and b"parse error" in info.value.body


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_names_the_address():
    port = _closed_port()
    with pytest.raises(HttpGetError) as info:
        http_get(f"http://127.0.0.1:{port}/", deadline_seconds=2, max_bytes=1000)
    assert str(info.value) == f"nothing is listening at 127.0.0.1:{port} (connection refused)"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "the URL is empty; give one like http://127.0.0.1:8000/metrics"),
        ("127.0.0.1:9090", "is not a URL: it needs http:// or https:// in front"),
        ("localhost:9090/metrics", "is not a URL: it needs http:// or https:// in front"),
        ("ftp://127.0.0.1/metrics", "only http:// and https:// URLs can be read, not ftp://"),
        ("http://[::1", r"has an unclosed '\[' in its host"),
        ("http://[::1:9090/metrics", r"has an unclosed '\[' in its host"),
        ("http://127.0.0.1:abc/metrics", "the port 'abc' is not a number from 1 to 65535"),
        ("http://127.0.0.1:99999/", "the port '99999' is not a number from 1 to 65535"),
        ("http://127.0.0.1:0/", "the port '0' is not a number from 1 to 65535"),
        ("http://", "names no host"),
        ("http://user:pw@127.0.0.1:1/", "a user name or password in the URL is not supported"),
        ("http://127.0.0.1:1/met rics", r"contains a space \(character 23\).*write a space as %20"),
        ("http://127.0.0.1:1/m\nX-Evil: 1", r"contains a line break \(character 21\)"),
        ("http://127.0.0.1:1/m\x00", r"contains the control character \\x00"),
    ],
)
def test_a_bad_url_is_refused_before_any_connection(url, message):
    with pytest.raises(HttpGetError, match=message) as info:
        http_get(url, deadline_seconds=2, max_bytes=1000)
    assert "\n" not in str(info.value)


def test_a_message_repeats_a_url_on_one_line_without_its_password():
    assert shown_url("http://u:secret@h:1/a\nb") == "http://u:***@h:1/a\\nb"
    assert len(shown_url("http://h/" + "x" * 1000)) == 200


def test_upper_case_scheme_is_http(server):
    url = server.replace("http://", "HTTP://") + "/ok"  # schemes are case-insensitive
    assert http_get(url, deadline_seconds=5, max_bytes=1000) == b"ok"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/redirect-self", r"^redirects in a loop \(5 redirects\)$"),
        ("/redirect-a", r"^redirects in a loop \(9 redirects\)$"),
        ("/redirect-ftp", "^redirects to ftp://127.0.0.1/metrics: only http:// and https://"),
        ("/redirect-closed", r"^redirects to http://127.0.0.1:\d+/m: nothing is listening at "),
        ("/redirect-bad-ipv6", r"^redirects to http://\[::1/m: has an unclosed '\['"),
        ("/close", r"^the server at 127.0.0.1:\d+ closed the connection without answering$"),
        ("/garbage", r"^the server at 127.0.0.1:\d+ does not answer in HTTP \(it said 'HELLO"),
        ("/short", r"^the answer stopped after 16 of the 5,000 bytes it announced"),
    ],
)
def test_a_misbehaving_server_is_named_in_one_line(server, path, message):
    with pytest.raises(HttpGetError, match=message) as info:
        http_get(f"{server}{path}", deadline_seconds=5, max_bytes=10_000)
    assert "\n" not in str(info.value)


def test_an_http_error_says_the_server_answered_it(server):
    with pytest.raises(HttpStatusError, match=r"^answered HTTP 404 Not Found$"):
        http_get(f"{server}/missing", deadline_seconds=5, max_bytes=1000)


def test_tls_against_a_plain_http_port_says_so(server):
    port = server.rsplit(":", 1)[1]
    with pytest.raises(HttpGetError) as info:
        http_get(f"https://127.0.0.1:{port}/ok", deadline_seconds=5, max_bytes=1000)
    assert str(info.value) == (
        f"the server at 127.0.0.1:{port} does not speak TLS (https:// against a plain http port?)"
    )


def test_a_deadline_beyond_a_day_is_refused_before_any_timer_starts():
    with pytest.raises(ValueError, match="deadline_seconds must be in"):
        http_get("http://127.0.0.1:1/", deadline_seconds=1e10, max_bytes=1000)


SPAN = dict(start_seconds=0, end_seconds=60, step_seconds=15, timeout_seconds=2)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/not-json", "answered with an HTML page, not the Prometheus API's JSON"),
        ("/bare-list", "not a Prometheus API object"),
        ("/no-data", "no data.result list"),
        ("/vector", "expected a range-query matrix, got resultType 'vector'"),
        ("/bad-point", r"not \{metric, values"),
        ("/text-value", "a sample is not a number"),
        ("/deep", "answered with JSON nested too deep to be the Prometheus API's"),
        ("/error", r"query rejected \(HTTP 400\): parse error at char 3"),
        ("/trickle", "no complete answer within 2 s"),
        ("/no-status", r"answer has no status \(not a Prometheus API\?\)"),
        ("/missing", r"answered HTTP 404 Not Found at /api/v1/query_range \(is it a Prometheus "
                     r"server's base URL, e.g. http://127.0.0.1:9090\?\)$"),
        ("/ok?x=1", r"a Prometheus base URL has no \?query or #fragment"),
    ],
)  # fmt: skip
def test_prometheus_answers_of_the_wrong_shape_are_one_error(server, path, message):
    with pytest.raises(PrometheusError, match=message):
        query_range(f"{server}{path}", "up", **SPAN)


def test_bucket_rates_without_le_label_are_refused(server):
    with pytest.raises(PrometheusError, match="without an 'le' label"):
        fetch_bucket_rates(f"{server}/no-le", **SPAN)
