"""`itlkit diagnose --prometheus URL --all` over a real Prometheus holding a simulated fleet.

Twenty instances, four per injected cause (healthy, prefill interference, batch/context growth,
host overhead, preemption; different seeds and spellings of the served name), plus one idle
instance whose counters never move, are simulated for 10 minutes, exported as OpenMetrics with
15 s scrapes, labelled `instance=` and backfilled into one Prometheus. The expected verdict of
each instance is the cause injected into it, never itlkit's output.
"""

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from _prometheus_server import backfilled_prometheus, merge_openmetrics

from itlkit.diagnosis.deployment import PageFacts, Stated, infer_deployment
from itlkit.diagnosis.fleet import FLEET_QUERIES, NO_TRAFFIC, diagnose_fleet, fetch_fleet_evidence
from itlkit.metrics import prometheus_api
from itlkit.metrics.prometheus_api import _get_json
from itlkit.sim.export import render_openmetrics
from itlkit.sim.scenarios import SCENARIOS, run_scenario

pytestmark = pytest.mark.prometheus
DURATION_SECONDS = 900.0
CAUSES = ("healthy", "prefill_interference", "batch_or_context_growth", "host_overhead",
          "preemption")  # fmt: skip
SERVED_NAMES = ("meta-llama/Llama-3.1-8B-Instruct", "/models/Meta-Llama-3.1-8B-Instruct",
                "llama-3.1-8b", "acme/house-model-v3")  # fmt: skip
IDLE = "vllm-idle:8000"


def _injected() -> dict[str, tuple[str, str, object]]:
    """instance -> (expected verdict, served model name, scenario run)."""
    fleet_runs = {}
    for k, cause in enumerate(CAUSES):
        s = SCENARIOS[cause]
        for copy in range(4):
            scenario = replace(
                s,
                duration_seconds=DURATION_SECONDS,
                seed=s.seed + 10 * copy,
                profile_start_seconds=tuple(
                    t * DURATION_SECONDS / s.duration_seconds for t in s.profile_start_seconds
                ),
            )
            instance = f"vllm-{4 * k + copy:02d}:8000"
            fleet_runs[instance] = (cause, SERVED_NAMES[copy], run_scenario(scenario))
    idle = replace(SCENARIOS["healthy"], rate_per_second=1e-6, duration_seconds=DURATION_SECONDS)
    fleet_runs[IDLE] = (NO_TRAFFIC, SERVED_NAMES[0], run_scenario(idle))
    return fleet_runs


@pytest.fixture(scope="module")
def fleet_server(tmp_path_factory, prometheus_binary, promtool_binary):
    root = tmp_path_factory.mktemp("fleet")
    start = (int(time.time()) // 3600 - 3) * 3600  # inside the TSDB's head-free past
    injected = _injected()
    text = merge_openmetrics(
        {
            instance: render_openmetrics(
                run, interval_seconds=15, start_unix_seconds=start, model_name=name
            )
            for instance, (_, name, run) in injected.items()
        }
    )
    with backfilled_prometheus(
        root, text, prometheus=prometheus_binary, promtool=promtool_binary
    ) as url:
        yield url, start, {i: (cause, name) for i, (cause, name, _) in injected.items()}


def _deployment_for(model_name: str):
    return infer_deployment(Stated(model="llama-3.1-8b", gpu="h100-sxm"), PageFacts())


@pytest.fixture(scope="module")
def scanned(fleet_server):
    url, start, injected = fleet_server
    evidence = fetch_fleet_evidence(url, start=start, end=start + DURATION_SECONDS)
    rows = diagnose_fleet(evidence, _deployment_for, max_num_batched_tokens=2048)
    return rows, injected


def test_every_instance_is_found_with_the_injected_cause(scanned):
    rows, injected = scanned
    assert sorted(r.member.instance for r in rows) == sorted(injected)
    for r in rows:
        assert r.member.model_name == injected[r.member.instance][1]
        assert r.member.engine == "0"
    got = {r.member.instance: r.verdict for r in rows}
    assert got == {instance: cause for instance, (cause, _) in injected.items()}


def test_rows_are_ranked_by_severity(scanned):
    rows, _ = scanned
    kinds = [
        "no traffic" if r.verdict == NO_TRAFFIC else "healthy" if r.verdict == "healthy" else "sick"
        for r in rows
    ]
    assert kinds == ["sick"] * 16 + ["healthy"] * 4 + ["no traffic"]
    sick_scores = [r.score for r in rows[:16]]
    assert sick_scores == sorted(sick_scores, reverse=True)
    assert min(sick_scores) >= 0.5 > max(r.score for r in rows[16:20])


def test_quantiles_agree_with_prometheus_histogram_quantile(fleet_server, scanned):
    """The fleet's p50/p99 of one instance against Prometheus' own evaluation over the period
    (10%: the per-window `rate` extrapolation at the window edges)."""
    url, start, _ = fleet_server
    rows, _ = scanned
    row = next(r for r in rows if r.verdict == "prefill_interference")
    end = start + DURATION_SECONDS
    for q in (0.5, 0.99):
        promql = (
            f"histogram_quantile({q}, sum by (le) (increase(vllm:inter_token_latency_seconds_bucket"
            f'{{instance="{row.member.instance}"}}[{DURATION_SECONDS - 60:.0f}s])))'
        )
        doc = _get_json(f"{url}/api/v1/query?query={_quote(promql)}&time={end}", url,
                        timeout_seconds=10)  # fmt: skip
        expected = float(doc["data"]["result"][0]["value"][1])
        assert row.diagnosis.itl_quantiles_seconds[q] == pytest.approx(expected, rel=0.1)


def _quote(text: str) -> str:
    import urllib.parse

    return urllib.parse.quote(text)


def test_queries_are_aggregated_not_one_per_instance(fleet_server, monkeypatch):
    url, start, injected = fleet_server
    asked = []

    def counting(request_url, base_url, *, timeout_seconds):
        asked.append(request_url)
        return _get_json(request_url, base_url, timeout_seconds=timeout_seconds)

    monkeypatch.setattr(prometheus_api, "_get_json", counting)
    evidence = fetch_fleet_evidence(url, start=start, end=start + DURATION_SECONDS)
    assert len(evidence.timelines) == len(injected) == 21
    assert len(asked) == len(FLEET_QUERIES) + 1 < len(injected)  # + which members are SGLang
    for promql in evidence.queries:
        assert "by (instance, model_name, engine" in promql
        assert "instance=" not in promql  # no per-instance selector


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "itlkit", "diagnose", *args],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_cli_all_json_and_table(fleet_server):
    url, start, injected = fleet_server
    span = ["--prometheus", url, "--start", str(start), "--end", str(start + DURATION_SECONDS),
            "--max-num-batched-tokens", "2048", "--gpu", "h100-sxm", "--all"]  # fmt: skip
    result = _cli(*span, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    got = {row["instance"]: row["verdict"] for row in doc["rows"]}
    assert got == {instance: cause for instance, (cause, _) in injected.items()}
    house = [row for row in doc["rows"] if row["model_name"] == "acme/house-model-v3"]
    assert len(house) == len(CAUSES)
    assert all(any("not in the catalog" in a for a in row["assumptions"]) for row in house)
    text = _cli(*span)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("instance"))
    table = lines[header + 1 : header + 22]
    assert [line.split()[0] for line in table] == [row["instance"] for row in doc["rows"]]
    assert table[-1].split()[0] == IDLE and NO_TRAFFIC in table[-1]


def test_cli_all_errors_are_one_line(fleet_server):
    url, start, _ = fleet_server
    for args in (
        ["--all", "some/folder"],
        ["--prometheus", url, "--all", "--start", str(start)],
        ["--prometheus", "http://127.0.0.1:9", "--all", "--start", "0", "--end", "600"],
    ):
        result = _cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and "error:" in result.stderr, result.stderr
