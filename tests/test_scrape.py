"""itlkit.metrics.scrape and `itlkit scrape` against tiny local servers on 127.0.0.1 only."""

from __future__ import annotations

import gzip
import signal
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

import pytest
from _http_server import serving

from itlkit.cli import main
from itlkit.errors import ScrapeError
from itlkit.metrics.readers import read_scrape_folder
from itlkit.metrics.scrape import (
    SOURCE_FILE,
    fetch_metrics,
    parse_duration_seconds,
    scrape_series,
)
from itlkit.metrics.series import histogram_series

PAGE = """# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{{model_name="m",engine="0",le="0.025"}} {n}.0
vllm:inter_token_latency_seconds_bucket{{model_name="m",engine="0",le="+Inf"}} {n}.0
vllm:inter_token_latency_seconds_count{{model_name="m",engine="0"}} {n}.0
vllm:inter_token_latency_seconds_sum{{model_name="m",engine="0"}} {s}
"""


BAD_PAGES = {  # path -> (status, body): answers that are not a Prometheus text page
    "/html": (200, b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>\n"),
    "/json": (200, b'{"object": "list", "data": []}'),
    "/empty": (200, b""),
    "/no-content": (204, b""),
    "/comments": (200, b"# HELP nothing here\n# TYPE nothing counter\n"),
    "/malformed": (200, b"vllm:inter_token_latency_seconds_bucket{le=0.1 5\n"),
    "/gzip": (200, gzip.compress(b"# TYPE x counter\nx 1\n")),
    "/latin1": (200, b"# HELP x Histogr\xe4m\nx 1\n"),
}


class _MetricsHandler(BaseHTTPRequestHandler):
    hits = 0
    fail_after = None

    def do_GET(self):
        if self.path in BAD_PAGES:
            status, body = BAD_PAGES[self.path]
            self.send_response(status)
            if status != 204:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == "/short":  # announces 5,000 bytes, sends a few, closes
            self.send_response(200)
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(PAGE.format(n=1, s=0.02).encode()[:100])
            self.close_connection = True
            return
        if self.path != "/metrics":
            self.send_error(404, "Not Found")
            return
        type(self).hits += 1
        if self.fail_after is not None and self.hits > self.fail_after:
            self.send_error(503, "Service Unavailable")
            return
        body = PAGE.format(n=10 * type(self).hits, s=0.02 * 10 * type(self).hits).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _MetricsHandler.hits = 0
    _MetricsHandler.fail_after = None
    with serving(_MetricsHandler) as url:
        yield url


@pytest.fixture
def silent_port():
    """A socket that accepts connections (via the backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock.getsockname()[1]
    sock.close()


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_durations():
    assert parse_duration_seconds("15s") == 15.0
    assert parse_duration_seconds("500ms") == 0.5
    assert parse_duration_seconds("1h30m") == 5400.0
    assert parse_duration_seconds("2.5") == 2.5
    for bad in ("15 parsecs", "", "1x", "1ns", "1h-5m"):
        with pytest.raises(ScrapeError, match=f"^{bad!r} is not a duration: use e.g. 15s"):
            parse_duration_seconds(bad)
    for bad in ("0s", "-3", "nan", "inf"):
        with pytest.raises(ScrapeError, match=f"^{bad!r} is not a positive time"):
            parse_duration_seconds(bad)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--every", "0", "argument --every: '0' is not a duration from 100ms to 365d"),
        ("--every", "50ms", "argument --every: '50ms' is not a duration from 100ms to 365d"),
        ("--every", "1e-300", "argument --every: '1e-300' is not a duration from 100ms to 365d"),
        ("--every", "1e10", "argument --every: '1e10' is not a duration from 100ms to 365d"),
        ("--every", "nan", "argument --every: 'nan' is not a duration from 100ms to 365d"),
        ("--every", "soon", "argument --every: 'soon' is not a duration: use e.g. 15s"),
        ("--for", "inf", "argument --for: 'inf' is not a duration from 1ms to 365d"),
        ("--for", "1h-5m", "argument --for: '1h-5m' is not a duration: use e.g. 15s"),
        ("--timeout", "1e20", "argument --timeout: '1e20' is not a duration from 1ms to 1d"),
        ("--timeout", "1e308", "argument --timeout: '1e308' is not a duration from 1ms to 1d"),
        ("--timeout", "1e-300", "argument --timeout: '1e-300' is not a duration from 1ms to 1d"),
        ("--timeout", "", "argument --timeout: '' is not a duration: use e.g. 15s"),
    ],
)
def test_a_bad_duration_names_its_flag_and_the_range(tmp_path, capsys, flag, value, message):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        main(["scrape", "http://127.0.0.1:1/metrics", "--out", str(out), f"{flag}={value}"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and err.count("\n") == 1, err
    assert not out.exists()  # refused before anything was made


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/html", "answered with an HTML page, not Prometheus metrics text"),
        ("/json", "answered with JSON, not Prometheus metrics text"),
        ("/empty", "answered with an empty page, not Prometheus metrics"),
        ("/no-content", "answered with an empty page, not Prometheus metrics"),
        ("/comments", "answered with a page of comments only, no samples"),
        ("/malformed", "is not Prometheus metrics text that itlkit can read: line 1: malformed"),
        ("/short", "the answer stopped after 100 of the 5,000 bytes it announced"),
        ("/gzip", "answered with gzip-compressed data, which itlkit did not ask for"),
        ("/latin1", r"the page is not UTF-8 text \(byte 0xe4 at offset 16\)"),
    ],
)
def test_an_answer_that_is_not_a_whole_metrics_page_is_not_saved(server, tmp_path, path, message):
    with pytest.raises(ScrapeError, match=message):
        fetch_metrics(f"{server}{path}")
    with pytest.raises(ScrapeError, match=message):
        _scrape_once(f"{server}{path}", tmp_path)
    assert not list(tmp_path.glob("metrics-*.prom"))


def test_an_upper_case_scheme_is_http(server, tmp_path):
    assert len(_scrape_once(server.replace("http://", "HTTP://") + "/metrics", tmp_path)) == 1


def test_a_url_with_a_line_break_is_one_line_and_makes_no_folder(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["scrape", "http://127.0.0.1:1/metrics\nX-Evil: 1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        "itlkit scrape: error: http://127.0.0.1:1/metrics\\nX-Evil: 1: contains a line break "
        "(character 27), which a URL cannot hold\n"
    )
    assert not out.exists()


def test_an_output_folder_that_cannot_be_made_says_why(server, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(ScrapeError, match="a-file: is a file, not a folder for the snapshots$"):
        _scrape_once(f"{server}/metrics", a_file)
    with pytest.raises(ScrapeError, match=r"a-file/x: cannot be created: .*a-file is a file"):
        _scrape_once(f"{server}/metrics", a_file / "x")


def test_fetch_and_errors(server, silent_port):
    assert "vllm:inter_token_latency_seconds_count" in fetch_metrics(f"{server}/metrics")
    with pytest.raises(ScrapeError, match=r"/nothing: answered HTTP 404 Not Found$"):
        fetch_metrics(f"{server}/nothing")
    port = _closed_port()
    with pytest.raises(ScrapeError, match=f"nothing is listening at 127.0.0.1:{port} \\("):
        fetch_metrics(f"http://127.0.0.1:{port}/metrics", timeout_seconds=2)
    started = time.monotonic()
    with pytest.raises(ScrapeError, match=r"no complete answer within 0\.3 s"):
        fetch_metrics(f"http://127.0.0.1:{silent_port}/metrics", timeout_seconds=0.3)
    assert time.monotonic() - started < 5
    with pytest.raises(ScrapeError, match="only http:// and https:// URLs can be read, not file"):
        fetch_metrics("file:///etc/passwd")


def test_series_on_a_fixed_grid_reads_back(server, tmp_path):
    now = [1796225076.0]
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    snaps = list(
        scrape_series(
            f"{server}/metrics",
            tmp_path / "out",
            every_seconds=15,
            duration_seconds=45,
            clock=lambda: now[0],
            sleep=sleep,
        )
    )
    assert len(snaps) == 4 and sleeps == [15, 15, 15]  # at 0, 15, 30, 45 s
    s = histogram_series(read_scrape_folder(tmp_path / "out"), "itl")
    assert s.counts.tolist() == [10, 20, 30, 40]
    assert (s.timestamps_seconds - 1796225076.0).tolist() == [0, 15, 30, 45]
    assert not list((tmp_path / "out").glob("*.partial"))  # no partial files left


def test_first_failure_is_an_error_later_ones_are_reported(server, tmp_path):
    with pytest.raises(ScrapeError, match="nothing is listening at 127.0.0.1"):
        next(scrape_series(f"http://127.0.0.1:{_closed_port()}/m", tmp_path, every_seconds=1))
    _MetricsHandler.fail_after = 1
    snaps = list(
        scrape_series(
            f"{server}/metrics", tmp_path, every_seconds=1, duration_seconds=2, sleep=lambda s: None
        )
    )
    assert snaps[0].path is not None and snaps[0].error is None
    assert len(snaps) >= 2 and all("HTTP 503" in s.error for s in snaps[1:])


def test_cli_for_duration_and_unreachable(server, tmp_path, capsys):
    assert main(["scrape", f"{server}/metrics", "--every", "100ms", "--for", "0.2s",
                 "--out", str(tmp_path / "o")]) == 0  # fmt: skip
    out = capsys.readouterr()
    assert len(list((tmp_path / "o").glob("metrics-*.prom"))) >= 2
    assert "snapshots in" in out.err
    code = main(["scrape", f"http://127.0.0.1:{_closed_port()}/metrics", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "nothing is listening at" in err and "Traceback" not in err


def test_cli_hanging_url_times_out(silent_port, tmp_path, capsys):
    url = f"http://127.0.0.1:{silent_port}/metrics"
    assert main(["scrape", url, "--timeout", "0.2s", "--out", str(tmp_path)]) == 2
    assert "no complete answer within 0.2 s" in capsys.readouterr().err


def test_ctrl_c_keeps_every_snapshot(server, tmp_path):
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [sys.executable, "-m", "itlkit", "scrape", f"{server}/metrics", "--every", "100ms",
         "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while len(list(out.glob("metrics-*.prom"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "stopped by Ctrl-C" in err and "Traceback" not in err
    files = sorted(out.glob("*"))
    names = [f.name for f in files if f.name != SOURCE_FILE]
    assert names and all(n.startswith("metrics-") for n in names)  # no partial files
    s = histogram_series(read_scrape_folder(out), "itl")
    assert len(s) == len(names) and (s.counts > 0).all()


def test_page_over_the_size_cap_is_refused(server):
    with pytest.raises(ScrapeError, match=r"over the 100 B limit"):
        fetch_metrics(f"{server}/metrics", max_bytes=100)


def _scrape_once(url, folder, **kw):
    return list(scrape_series(url, folder, every_seconds=1, duration_seconds=0, **kw))


def test_folder_of_another_servers_scrapes_is_refused_unless_appending(server, tmp_path):
    url = f"{server}/metrics"
    assert len(_scrape_once(url, tmp_path)) == 1
    assert (tmp_path / SOURCE_FILE).read_text().strip() == url
    assert len(_scrape_once(url, tmp_path)) == 1  # the same URL may add to its own folder
    other = url.replace("127.0.0.1", "localhost")
    with pytest.raises(ScrapeError, match=rf"already holds 2 scrapes from {url}.*--append"):
        _scrape_once(other, tmp_path)
    assert len(_scrape_once(other, tmp_path, append=True)) == 1
    assert len(list(tmp_path.glob("metrics-*.prom"))) == 3


def test_folder_of_unknown_scrapes_is_refused(server, tmp_path):
    (tmp_path / "metrics-20261202T000000.000Z.prom").write_text(PAGE.format(n=1, s=0.02))
    with pytest.raises(ScrapeError, match="already holds 1 scrapes of unknown origin"):
        _scrape_once(f"{server}/metrics", tmp_path)


def test_an_empty_url_is_named_as_empty(tmp_path, capsys):
    assert main(["scrape", "", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        "itlkit scrape: error: '': the URL is empty; give one like http://127.0.0.1:8000/metrics\n"
    )


def test_a_failed_first_scrape_leaves_no_folder_behind(tmp_path, capsys):
    # issue 19, item 10: `itlkit scrape` to a dead URL left an empty scrapes/ folder
    out = tmp_path / "new" / "scrapes"
    url = f"http://127.0.0.1:{_closed_port()}/metrics"
    assert main(["scrape", url, "--out", str(out)]) == 2
    assert "nothing is listening at" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"  # a folder that was there before stays
    kept.mkdir()
    assert main(["scrape", url, "--out", str(kept)]) == 2
    assert kept.is_dir()
