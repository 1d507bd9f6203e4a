"""`itlkit diagnose --prometheus` over SGLang's metrics, against a real Prometheus.

The prefill-interference incident is simulated once; its OpenMetrics export is renamed to the
families current SGLang exports for the same quantities (tests/data/sglang/metric-definitions.md:
`sglang:inter_token_latency_seconds`, `num_running_reqs`, `num_queue_reqs`, `token_usage`,
`num_retracted_requests_total`, ...), its scheduler gauges labelled per TP rank as SGLang's are
(rank 0, and a copy from rank 1), and backfilled. Read from there it must give the diagnosis the
same incident gives from vLLM-named scrape files, with the running requests counted once.
"""

import re

import numpy as np
import pytest
from _prometheus_server import backfilled_prometheus, exported_incident, merge_openmetrics

from itlkit.diagnosis.evidence import timeline_from_frame, timeline_from_prometheus
from itlkit.diagnosis.scoring import diagnose
from itlkit.metrics.prometheus_api import gauge_query, query_range
from itlkit.metrics.readers import read_scrape_folder
from itlkit.physics.roofline import Deployment
from itlkit.sim.scenarios import SCENARIOS

pytestmark = pytest.mark.prometheus
SCENARIO = SCENARIOS["prefill_interference"]
# vLLM's family -> SGLang's (current main), as metric-definitions.md section 1 lists them
RENAMED = {
    "vllm:inter_token_latency_seconds": "sglang:inter_token_latency_seconds",
    "vllm:time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds": "sglang:e2e_request_latency_seconds",
    "vllm:iteration_tokens": "sglang:iteration_tokens",  # no SGLang counterpart: not read
    "vllm:num_requests_running": "sglang:num_running_reqs",
    "vllm:num_requests_waiting": "sglang:num_queue_reqs",
    "vllm:kv_cache_usage_perc": "sglang:token_usage",
    "vllm:num_preemptions": "sglang:num_retracted_requests",
    "vllm:prompt_tokens": "sglang:prompt_tokens",
    "vllm:generation_tokens": "sglang:generation_tokens",
}
SCHEDULER = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
             "sglang:num_retracted_requests")  # fmt: skip


def as_sglang(openmetrics: str) -> str:
    """The page's families under SGLang's names; scheduler series once per TP rank (0 and 1)."""
    for old, new in RENAMED.items():
        openmetrics = re.sub(rf"(?<![\w:]){re.escape(old)}(?=[_{{ ]|$)", new, openmetrics,
                             flags=re.M)  # fmt: skip
    lines = []
    for line in openmetrics.splitlines():
        if line.startswith(SCHEDULER):
            name, rest = line.split("{", 1)
            lines += [f'{name}{{tp_rank="{rank}",{rest}' for rank in (0, 1)]
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def incident(tmp_path_factory, prometheus_binary, promtool_binary):
    root = tmp_path_factory.mktemp("sglang-incident")
    start, text = exported_incident(root, SCENARIO)
    assert "vllm:" not in as_sglang(text)
    with backfilled_prometheus(
        root, as_sglang(text), prometheus=prometheus_binary, promtool=promtool_binary
    ) as url:
        yield url, start, root / "scrapes"


def test_sglang_metrics_in_prometheus_give_the_incidents_diagnosis(incident):
    url, start, scrapes = incident
    deployment = Deployment.create(model=SCENARIO.model, gpu=SCENARIO.gpu)
    from_sglang = timeline_from_prometheus(url, start=start, end=start + SCENARIO.duration_seconds)
    from_files = timeline_from_frame(read_scrape_folder(scrapes))
    server = diagnose(from_sglang, deployment, max_num_batched_tokens=2048)
    files = diagnose(from_files, deployment, max_num_batched_tokens=2048)
    assert server.top.cause == files.top.cause == "prefill_interference"
    for q in (0.5, 0.99):
        assert server.itl_quantiles_seconds[q] == pytest.approx(
            files.itl_quantiles_seconds[q], rel=0.1
        )
    # rank 1's copy of the gauge is not added: summed over every series the server holds twice
    # the running requests itlkit reads
    span = dict(start_seconds=start + 60, end_seconds=start + 600, step_seconds=15)
    read = query_range(url, gauge_query("running", engine="sglang"), **span)
    both = query_range(url, "sum(sglang:num_running_reqs)", **span)
    assert read["value"].max() > 0
    np.testing.assert_allclose(both["value"].to_numpy(), 2 * read["value"].to_numpy())
    assert any("SGLang runs a prefill batch alone before" in n for n in server.notes)


@pytest.fixture(scope="module")
def two_engines(tmp_path_factory, prometheus_binary, promtool_binary):
    """The same incident from two targets: one exporting vLLM's families, one SGLang's."""
    root = tmp_path_factory.mktemp("two-engines")
    start, text = exported_incident(root, SCENARIO)
    merged = merge_openmetrics({"vllm-0:8000": text, "sglang-0:30000": as_sglang(text)})
    with backfilled_prometheus(
        root, merged, prometheus=prometheus_binary, promtool=promtool_binary
    ) as url:
        yield url, start


def test_a_fleet_scan_reads_each_engine_in_its_own_names(two_engines):
    from itlkit.diagnosis.deployment import PageFacts, Stated, infer_deployment
    from itlkit.diagnosis.fleet import diagnose_fleet, fetch_fleet_evidence

    url, start = two_engines
    evidence = fetch_fleet_evidence(url, start=start, end=start + SCENARIO.duration_seconds)
    by_instance = {m.instance: t for m, t in evidence.timelines.items()}
    assert set(by_instance) == {"vllm-0:8000", "sglang-0:30000"}
    vllm, sglang = by_instance["vllm-0:8000"], by_instance["sglang-0:30000"]
    assert (vllm.engine, sglang.engine) == ("vllm", "sglang")
    # the same traffic: SGLang's two rank copies of each gauge are read once, not summed
    np.testing.assert_allclose(sglang.running, vllm.running)
    assert sglang.itl_total.count == vllm.itl_total.count > 0
    rows = diagnose_fleet(
        evidence,
        lambda name: infer_deployment(Stated(model="llama-3.1-8b", gpu="h100-sxm"), PageFacts()),
        max_num_batched_tokens=2048,
    )
    titles = {r.member.instance: r.diagnosis.top.title for r in rows}
    assert titles == {"vllm-0:8000": "prefill chunks ride in decode steps",
                      "sglang-0:30000": "prefill batches stall the decodes"}  # fmt: skip


@pytest.fixture(scope="module")
def sglang_export(tmp_path_factory, prometheus_binary, promtool_binary):
    """The bundled SGLang incident simulated once and exported in SGLang's own families twice:
    pages (`export_sglang_scrapes`) and OpenMetrics (`render_sglang_openmetrics`), backfilled."""
    import time

    from itlkit.sim.export_sglang import export_sglang_scrapes, render_sglang_openmetrics
    from itlkit.sim.scenarios import run_scenario

    scenario = SCENARIOS["sglang_prefill_stall"]
    root = tmp_path_factory.mktemp("sglang-openmetrics")
    start = (int(time.time()) // 3600 - 3) * 3600
    result = run_scenario(scenario)
    export = dict(interval_seconds=15, start_unix_seconds=start, model_name=scenario.model)
    export_sglang_scrapes(result, root / "scrapes", **export)
    text = render_sglang_openmetrics(result, **export)
    with backfilled_prometheus(
        root, text, prometheus=prometheus_binary, promtool=promtool_binary
    ) as url:
        yield url, start, root / "scrapes", scenario, text


def test_sglangs_own_openmetrics_backfill_reads_as_its_pages(sglang_export):
    url, start, scrapes, scenario, text = sglang_export
    # OpenMetrics as prometheus_client writes it: counters end in _total, every point has its
    # time, and the text ends with # EOF; no vLLM family in it
    assert text.endswith("# EOF\n") and "vllm:" not in text
    first = (
        f'sglang:num_retracted_requests_total{{engine_type="unified",model_name="{scenario.model}"'
    )
    assert any(line.startswith(first) for line in text.splitlines())
    deployment = Deployment.create(model=scenario.model, gpu=scenario.gpu)
    end = start + scenario.duration_seconds
    served = diagnose(timeline_from_prometheus(url, start=start, end=end), deployment)
    files = diagnose(timeline_from_frame(read_scrape_folder(scrapes)), deployment)
    assert served.top.title == files.top.title == "prefill batches stall the decodes"
    for q in (0.5, 0.99):
        assert served.itl_quantiles_seconds[q] == pytest.approx(
            files.itl_quantiles_seconds[q], rel=0.1
        )
    # the device timer's forward-mode seconds reach the diagnosis from the server too
    assert served.fingerprint.prefill_alone_share == pytest.approx(
        files.fingerprint.prefill_alone_share, abs=0.05
    )
    assert served.fingerprint.prefill_alone_share > 0.3
