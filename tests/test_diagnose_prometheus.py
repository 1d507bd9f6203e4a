"""`itlkit diagnose --prometheus` against a real Prometheus holding a simulated incident.

The prefill-interference scenario is simulated once and exported twice: as OpenMetrics for
`promtool` backfill, and as a folder of /metrics scrapes. Diagnosing both must agree: the same
verdict, and floor, p50 and p99 within what Prometheus' `rate` extrapolation allows.
"""

import json
import subprocess
import sys
import time

import pytest
from _prometheus_server import backfilled_prometheus, exported_incident

from itlkit.diagnosis.evidence import timeline_from_frame, timeline_from_prometheus
from itlkit.diagnosis.scoring import diagnose
from itlkit.errors import EvidenceError, PrometheusError
from itlkit.metrics.readers import read_scrape_folder
from itlkit.physics.roofline import Deployment
from itlkit.sim.scenarios import SCENARIOS

pytestmark = pytest.mark.prometheus
SCENARIO = SCENARIOS["prefill_interference"]


@pytest.fixture(scope="module")
def incident(tmp_path_factory, prometheus_binary, promtool_binary):
    root = tmp_path_factory.mktemp("incident")
    start, text = exported_incident(root, SCENARIO)
    with backfilled_prometheus(
        root, text, prometheus=prometheus_binary, promtool=promtool_binary
    ) as url:
        yield url, start, root / "scrapes"


def test_prometheus_and_scrape_files_give_the_same_diagnosis(incident):
    url, start, scrapes = incident
    deployment = Deployment.create(model=SCENARIO.model, gpu=SCENARIO.gpu)
    span = dict(start=start, end=start + SCENARIO.duration_seconds)
    from_server = diagnose(
        timeline_from_prometheus(url, **span), deployment, max_num_batched_tokens=2048
    )
    from_files = diagnose(
        timeline_from_frame(read_scrape_folder(scrapes)), deployment, max_num_batched_tokens=2048
    )
    assert from_server.top.cause == from_files.top.cause == "prefill_interference"
    assert from_server.floor_seconds == pytest.approx(from_files.floor_seconds, rel=0.1)
    for q in (0.5, 0.99):
        assert from_server.itl_quantiles_seconds[q] == pytest.approx(
            from_files.itl_quantiles_seconds[q], rel=0.1
        )


def test_cli_reads_prometheus(incident):
    url, start, _ = incident
    end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + SCENARIO.duration_seconds))
    result = subprocess.run(
        [sys.executable, "-m", "itlkit", "diagnose", "--prometheus", url, "--start", str(start),
         "--end", end, "--max-num-batched-tokens", "2048", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["causes"][0]["cause"] == "prefill_interference"


def test_empty_period_and_unreachable_server(incident):
    url, start, _ = incident
    with pytest.raises(EvidenceError, match="no ITL histogram"):
        timeline_from_prometheus(url, start=start - 86400, end=start - 86400 + 600)
    with pytest.raises(
        PrometheusError, match=r"127\.0\.0\.1:9: nothing is listening at 127\.0\.0\.1:9 \("
    ):
        timeline_from_prometheus("http://127.0.0.1:9", start=start, end=start + 600)
    with pytest.raises(EvidenceError, match="the start 'yesterday' is not a time: use unix"):
        timeline_from_prometheus(url, start="yesterday", end=start)


def test_plan_reads_the_incidents_traffic_from_prometheus_as_from_its_scrapes(incident, capsys):
    from itlkit.cli import main

    url, start, scrapes = incident
    common = ["plan", "--itl-p99", "0.05", "--ttft-p99", "2", "--cache", "none", "--json",
              "--calibration", "none", "--max-num-batched-tokens", "512,2048"]  # fmt: skip
    assert main([*common, "--incident", str(scrapes)]) == 0
    from_files = json.loads(capsys.readouterr().out)
    period = ["--prometheus", url, "--start", str(start),
              "--end", str(start + SCENARIO.duration_seconds)]  # fmt: skip
    assert main([*common, *period]) == 0
    from_server = json.loads(capsys.readouterr().out)
    # the same answer: the diagnosis' fix, the H100 at the smaller budget
    for plan in (from_files, from_server):
        assert plan["best"][0]["candidate"]["max_num_batched_tokens"] == 512
    assert main([*common, "--prometheus", url]) == 2
    assert "--prometheus needs --start and --end" in capsys.readouterr().err
