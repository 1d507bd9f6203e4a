"""Hostile HTTP servers: a total deadline, a size cap, and Prometheus answers of the wrong shape.

A local server in a thread plays each part: one that trickles a byte at a time (per-read timeouts
never fire), one that sends more than the cap, one that declares a huge Content-Length, and
Prometheus look-alikes whose JSON is valid but not a range-query answer.
"""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from itlkit.errors import PrometheusError
from itlkit.metrics.http_get import HttpGetError, HttpStatusError, http_get
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
        else:
            self._send(ANSWERS.get(path, b"ok"))

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


def test_unreachable_is_one_line():
    with pytest.raises(HttpGetError, match="cannot reach"):
        http_get("http://127.0.0.1:9/", deadline_seconds=2, max_bytes=1000)


SPAN = dict(start_seconds=0, end_seconds=60, step_seconds=15, timeout_seconds=2)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/not-json", "answer is not JSON"),
        ("/bare-list", "not a Prometheus API object"),
        ("/no-data", "no data.result list"),
        ("/vector", "expected a range-query matrix, got resultType 'vector'"),
        ("/bad-point", r"not \{metric, values"),
        ("/text-value", "a sample is not a number"),
        ("/deep", "answer is not JSON"),
        ("/error", r"query rejected \(HTTP 400\): parse error at char 3"),
        ("/trickle", "no complete answer within 2 s"),
    ],
)
def test_prometheus_answers_of_the_wrong_shape_are_one_error(server, path, message):
    with pytest.raises(PrometheusError, match=message):
        query_range(f"{server}{path}", "up", **SPAN)


def test_bucket_rates_without_le_label_are_refused(server):
    with pytest.raises(PrometheusError, match="without an 'le' label"):
        fetch_bucket_rates(f"{server}/no-le", **SPAN)
