"""Prometheus answers that cannot be right, and `diagnose --prometheus` periods that cannot be
asked for: each is refused in one line that names the server, the query or the flag.

A fake Prometheus on 127.0.0.1 answers itlkit's range queries with a consistent incident (50 ITL
observations a second, 50% under 25 ms) and breaks one thing per mode: a negative rate, buckets
that fall as le grows, no +Inf bucket, a rate beyond any server, gzip or Latin-1 bodies, series
of the wrong shape. The fleet queries (`by (instance, ...)`) get two members, h1 and h2; modes
ending in `-h2` break only h2.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import ClassVar

import pytest
from _http_server import serving

from itlkit.cli import main
from itlkit.diagnosis.deployment import PageFacts, Stated, infer_deployment
from itlkit.diagnosis.evidence import timeline_from_prometheus
from itlkit.diagnosis.fleet import diagnose_fleet, fetch_fleet_evidence
from itlkit.errors import EvidenceError, PrometheusError

START = "2026-12-02T15:00:00Z"
END = "2026-12-02T15:10:00Z"
NOT_A_TIME = "is not a time from 2000 to 2099: use unix seconds or e.g. 2026-12-02T15:00:00Z"
ITL_LE = ["0.01", "0.025", "0.05", "0.1", "0.5", "1.0", "+Inf"]
ITL_SHARE = [0.0, 0.5, 0.8, 0.95, 0.99, 1.0, 1.0]
MEMBERS = ("h1:8000", "h2:8000")


def _values(times, value) -> list:
    return [[t, value if isinstance(value, str) else repr(float(value))] for t in times]


def _buckets(mode: str, labels: dict, times) -> list:
    out = []
    for le, share in zip(ITL_LE, ITL_SHARE, strict=True):
        if mode == "no-inf" and le == "+Inf":
            continue
        value = 50.0 * share
        if mode == "decreasing":
            value = 50.0 * (1.0 - share) + 1
        if mode == "negative":
            value = -value
        if mode == "huge":
            value = 1e300
        out.append({"metric": {**labels, "le": le}, "values": _values(times, value)})
    return out


def _series(query: str, times, mode: str, models: list[str]) -> list:
    """A consistent answer to one of itlkit's queries, broken as `mode` says."""
    asked = re.search(r'model_name="([^"]*)"', query)
    if asked and asked.group(1) not in models:
        return []
    if "group by(model_name)" in query:
        return [{"metric": {"model_name": m}, "values": _values(times, 1)} for m in models]
    fleet = "by (instance" in query
    members = (
        [dict(instance=i, model_name=models[0], engine="0") for i in MEMBERS] if fleet else [{}]
    )
    out = []
    for labels in members:
        spared = mode.endswith("-h2") and labels.get("instance") != "h2:8000"
        broken = "ok" if spared else mode.removesuffix("-h2")
        if "_bucket" in query:
            if "inter_token" in query or "time_per_output" in query:
                out += _buckets(broken, labels, times)
            else:
                out += [{"metric": {**labels, "le": le}, "values": _values(times, 2.0)}
                        for le in ("0.1", "+Inf")]  # fmt: skip
            continue
        value = 1.0 if "_sum" in query else 50.0 if "_count" in query else 10.0
        out.append({"metric": dict(labels), "values": _values(times, value)})
    return out


def _answer(mode: str, params: dict) -> tuple[int, bytes, dict]:
    start, end, step = (float(params[k][0]) for k in ("start", "end", "step"))
    n = math.floor((end - start) / step + 1e-9) + 1
    if n > 11_000:  # Prometheus' own limit
        return 400, b'{"status":"error","errorType":"bad_data","error":"exceeded maximum"}', {}
    times = [start + i * step for i in range(n)]
    models = ["a", "b"] if mode == "two-models" else ["llama-3.1-8b"]
    result = _series(params["query"][0], times, mode, models)
    shapes = {
        "metric-str": lambda s: {**s, "metric": "instance=x"},
        "values-flat": lambda s: {**s, "values": [v for _, v in s["values"]]},
        "values-dict": lambda s: {**s, "values": {"a": 1}},
        "values-str": lambda s: {**s, "values": [[t, "fast"] for t, _ in s["values"]]},
        "ts-str": lambda s: {**s, "values": [["noon", v] for _, v in s["values"]]},
        "inf-ts": lambda s: {**s, "values": [["+Inf", v] for _, v in s["values"]]},
        "series-str": lambda s: "abc",
        "le-missing": lambda s: {
            **s,
            "metric": {k: v for k, v in s["metric"].items() if k != "le"},
        },
    }
    if mode in shapes:
        result = [shapes[mode](s) for s in result]
    body = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})
    if mode == "latin1":
        return 200, body.encode().replace(b'"success"', b'"succ\xe9ss"', 1), {}
    if mode == "gzip":
        return 200, gzip.compress(body.encode()), {"Content-Encoding": "gzip"}
    return 200, body.encode(), {}


class _FakePrometheus(BaseHTTPRequestHandler):
    queries: ClassVar[list[str]] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        parsed = urllib.parse.urlsplit(self.path)
        mode = parsed.path.split("/")[1]
        params = urllib.parse.parse_qs(parsed.query)
        type(self).queries.append(params["query"][0])
        code, body, headers = _answer(mode, params)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def prometheus():
    with serving(_FakePrometheus) as url:
        yield url


def _diagnose(capsys, *args: str) -> tuple[int, str]:
    code = main(["diagnose", *args])
    return code, capsys.readouterr().err


def test_a_consistent_answer_is_read(prometheus):
    timeline = timeline_from_prometheus(f"{prometheus}/ok", start=START, end=END)
    assert timeline.itl_total.count == pytest.approx(50 * 60 * 10)  # 10 windows of 60 s


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("negative", r"vllm:inter_token_latency_seconds or .*: the value -25 at "
                     r"2026-12-02T15:01:00Z is negative: a rate or a count is never below 0"),
        ("decreasing", r"at 2026-12-02T15:01:00Z the bucket rates fall from 51/s \(le=0.01\) to "
                       r"26/s \(le=0.025\); a histogram's cumulative buckets never fall"),
        ("no-inf", r"the buckets end at le=1, without the \+Inf bucket every Prometheus "
                   "histogram has"),
        ("huge", r"the value 1e\+300 at 2026-12-02T15:01:00Z is beyond any server"),
        ("gzip", "answered with gzip-compressed data, which itlkit did not ask for"),
        ("latin1", r"answered with bytes that are not UTF-8 text \(byte 0xe9 at offset 16\)"),
        ("values-str", r"a sample is not a number: \[.*'fast'\]"),
        ("inf-ts", "a sample's time is not a finite number of seconds"),
    ],
)  # fmt: skip
def test_an_answer_that_cannot_be_right_is_refused_not_repaired(prometheus, mode, message):
    with pytest.raises(PrometheusError, match=message) as info:
        timeline_from_prometheus(f"{prometheus}/{mode}", start=START, end=END)
    assert str(info.value).startswith(f"{prometheus}/{mode}: ") and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("metric-str", r"a result series is not \{metric, values: \[\[t, v\], ...\]\}"),
        ("series-str", r"a result series is not \{metric, values"),
        ("values-flat", r"a result series is not \{metric, values"),
        ("values-dict", r"a result series is not \{metric, values"),
        ("values-str", "a sample is not a number"),
        ("ts-str", "a sample is not a number"),
        ("inf-ts", "a sample's time is not a finite number of seconds"),
        ("le-missing", "an ITL bucket series of instance 'h1:8000', model_name 'llama-3.1-8b', "
                       "engine '0' has no le label"),
    ],
)  # fmt: skip
def test_fleet_answers_of_the_wrong_shape_are_one_error(prometheus, mode, message, capsys):
    url = f"{prometheus}/{mode}"
    with pytest.raises(PrometheusError, match=f"^{re.escape(url)}: {message}"):
        fetch_fleet_evidence(url, start=START, end=END)
    code, err = _diagnose(capsys, "--all", "--prometheus", url, "--start", START, "--end", END)
    assert code == 2 and err.count("\n") == 1 and url in err, err


def _deployment(model_name: str):
    return infer_deployment(Stated(model="llama-3.1-8b", gpu="h100-sxm"), PageFacts())


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("negative-h2", "its ITL bucket rates: the value -25 at 2026-12-02T15:01:00Z is negative"),
        ("decreasing-h2", "its ITL bucket rates: at 2026-12-02T15:01:00Z the bucket rates fall"),
        ("no-inf-h2", r"its ITL bucket rates: the buckets end at le=1, without the \+Inf"),
        ("huge-h2", r"its ITL bucket rates: the value 1e\+300 at 2026-12-02T15:01:00Z is beyond"),
    ],
)
def test_a_fleet_member_with_impossible_rates_cannot_be_diagnosed_the_rest_can(
    prometheus, mode, problem
):
    evidence = fetch_fleet_evidence(f"{prometheus}/{mode}", start=START, end=END)
    rows = {r.member.instance: r for r in diagnose_fleet(evidence, _deployment)}
    assert rows["h1:8000"].diagnosis is not None
    h2 = rows["h2:8000"]
    assert h2.verdict == "cannot diagnose" and h2.diagnosis is None
    assert re.search(problem, h2.problem), h2.problem
    assert h2.problem.startswith("the server's answer cannot be right: ")


def test_a_fleet_whose_every_member_is_impossible_is_an_error(prometheus, capsys):
    url = f"{prometheus}/decreasing"
    code, err = _diagnose(capsys, "--all", "--prometheus", url, "--start", START, "--end", END)
    assert code == 2 and err.count("\n") == 1, err
    assert f"{url}: instance 'h1:8000', model_name 'llama-3.1-8b', engine '0': the server" in err
    assert "the bucket rates fall from 51/s (le=0.01) to 26/s (le=0.025)" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start", "1796223600000", "--end", "1796224200000"],
         "--start '1796223600000' is not a time from 2000 to 2099 (milliseconds? 1796223600 s "
         "is 2026-12-02T15:00:00Z): use unix seconds or e.g. 2026-12-02T15:00:00Z"),
        (["--start", START, "--end", "inf"], f"--end 'inf' {NOT_A_TIME}"),
        (["--start", "nan", "--end", END], f"--start 'nan' {NOT_A_TIME}"),
        (["--start", START, "--end", "1e308"], f"--end '1e308' {NOT_A_TIME}"),
        (["--start", "1677-01-01T00:00:00Z", "--end", END],
         f"--start '1677-01-01T00:00:00Z' {NOT_A_TIME}"),
        (["--start", START, "--end", "2500-01-01"],
         f"--end '2500-01-01' {NOT_A_TIME}"),
        (["--start", "yesterday", "--end", END],
         "--start 'yesterday' is not a time: use unix seconds or e.g. 2026-12-02T15:00:00Z"),
        (["--start", END, "--end", START], f"--end ({START}) is not after --start ({END})"),
        (["--start", START], "--prometheus needs --end (RFC 3339 or unix seconds)"),
        (["--start", "2000-01-01T00:00:00Z", "--end", "2026-01-01T00:00:00Z"],
         "--start to --end span 9,497.0 days: 13,675,680 windows of 60 s, more than the 11,000 "
         "points Prometheus returns per query; shorten the period to at most 7.6 days or make "
         "--window at least 74,595 s"),
    ],
)  # fmt: skip
def test_a_period_that_cannot_be_asked_for_names_the_flag(prometheus, capsys, args, message):
    code, err = _diagnose(capsys, "--prometheus", f"{prometheus}/ok", *args)
    assert code == 2 and err == f"itlkit diagnose: error: {message}\n"


@pytest.mark.parametrize("end", ["inf", "1e308", "1796224200000"])
def test_a_fleet_period_that_cannot_be_asked_for_names_the_flag(prometheus, capsys, end):
    code, err = _diagnose(capsys, "--all", "--prometheus", f"{prometheus}/ok", "--start", START,
                          "--end", end)  # fmt: skip
    assert code == 2 and err.startswith(f"itlkit diagnose: error: --end {end!r} is not a time")


def test_model_name_is_passed_to_every_query(prometheus, capsys):
    _FakePrometheus.queries.clear()
    code, err = _diagnose(capsys, "--prometheus", f"{prometheus}/two-models", "--start", START,
                          "--end", END, "--model-name", "a", "--json")  # fmt: skip
    assert code == 0, err
    data_queries = [q for q in _FakePrometheus.queries if "group by(model_name)" not in q]
    assert data_queries and all('model_name="a"' in q for q in data_queries)


def test_a_model_name_the_server_does_not_hold_lists_the_ones_it_does(prometheus, capsys):
    url = f"{prometheus}/two-models"
    code, err = _diagnose(capsys, "--prometheus", url, "--start", START, "--end", END,
                          "--model-name", "nosuch")  # fmt: skip
    assert code == 2
    assert err == (f"itlkit diagnose: error: no model_name 'nosuch' at {url} in that period "
                   "(it holds: 'a', 'b')\n")  # fmt: skip
    with pytest.raises(EvidenceError, match=r"no ITL histogram of model_name 'x' in that period "
                                            r"\(the server holds: 'a', 'b'\)"):  # fmt: skip
        timeline_from_prometheus(url, start=START, end=END, model_name="x")


def test_several_models_are_not_summed_into_one_diagnosis(prometheus, capsys):
    url = f"{prometheus}/two-models"
    code, err = _diagnose(capsys, "--prometheus", url, "--start", START, "--end", END)
    assert code == 2
    assert err == (f"itlkit diagnose: error: {url} holds 2 models in that period ('a', 'b'); "
                   "choose one with --model-name, or rank them all with --all\n")  # fmt: skip


def test_no_input_says_what_to_give_not_both(capsys):
    code, err = _diagnose(capsys)
    assert code == 2
    assert err == (
        "itlkit diagnose: error: give scrape PATHs or --prometheus URL with --start and --end\n"
    )
    code, err = _diagnose(capsys, "some/folder", "--prometheus", "http://127.0.0.1:1")
    assert err == "itlkit diagnose: error: give scrape PATHs or --prometheus URL, not both\n"
