"""Notebook 04's fleet scan, driven from Python, against a real Prometheus.

Five simulated instances, one per injected cause (healthy, prefill interference, batch/context
growth, host overhead, preemption), and one idle instance whose counters never move: 15 minutes of
15-s scrapes labelled `instance=` and backfilled into one Prometheus (the recipe of
tests/test_fleet.py, smaller). What each instance should show is
the cause injected into it, never itlkit's output.
"""

import html
import re
import time
from dataclasses import replace

import pytest
from _prometheus_server import backfilled_prometheus, merge_openmetrics

from itlkit.diagnosis.findings import TITLES
from itlkit.diagnosis.fleet import NO_TRAFFIC
from itlkit.sim.export import render_openmetrics
from itlkit.sim.scenarios import SCENARIOS, run_scenario
from itlkit.widgets._style import BUSY_HTML
from itlkit.widgets.postmortem import PROMETHEUS, PostmortemExplorer

pytestmark = pytest.mark.prometheus
DURATION_SECONDS = 900.0
# instance -> injected cause; the names do not follow the causes' order, so ranking matters
INJECTED = {
    "vllm-a:8000": "host_overhead",
    "vllm-b:8000": "healthy",
    "vllm-c:8000": "preemption",
    "vllm-d:8000": "prefill_interference",
    "vllm-e:8000": "batch_or_context_growth",
    "vllm-f:8000": NO_TRAFFIC,
}


def _run(cause: str):
    if cause == NO_TRAFFIC:
        idle = replace(SCENARIOS["healthy"], rate_per_second=1e-6)
        return run_scenario(replace(idle, duration_seconds=DURATION_SECONDS))
    s = SCENARIOS[cause]
    return run_scenario(
        replace(
            s,
            duration_seconds=DURATION_SECONDS,
            profile_start_seconds=tuple(
                t * DURATION_SECONDS / s.duration_seconds for t in s.profile_start_seconds
            ),
        )
    )


@pytest.fixture(scope="module")
def fleet_server(tmp_path_factory, prometheus_binary, promtool_binary):
    root = tmp_path_factory.mktemp("widget-fleet")
    start = (int(time.time()) // 3600 - 3) * 3600  # inside the TSDB's head-free past
    text = merge_openmetrics(
        {
            instance: render_openmetrics(
                _run(cause), interval_seconds=15, start_unix_seconds=start,
                model_name="meta-llama/Llama-3.1-8B-Instruct",
            )
            for instance, cause in INJECTED.items()
        }
    )  # fmt: skip
    with backfilled_prometheus(
        root, text, prometheus=prometheus_binary, promtool=promtool_binary
    ) as url:
        yield url, start


def _text(markup: str) -> str:
    """HTML as the reader sees it: no tags, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


def _table_rows(markup: str) -> list[list[str]]:
    """The fleet table's body rows, cell by cell, as the reader sees them."""
    body = markup.split("<tbody>", 1)[1]
    return [
        [_text(cell) for cell in re.findall(r"<td(?: [^>]*)?>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


def _explorer(url: str, start: int) -> PostmortemExplorer:
    ex = PostmortemExplorer(scenario="mixed", max_num_batched_tokens=2048)
    ex.source.value = PROMETHEUS
    ex.url.value, ex.start.value, ex.end.value = url, str(start), str(start + DURATION_SECONDS)
    ex.gpu.value = "h100-sxm"  # the fleet was simulated on H100s
    return ex


@pytest.fixture(scope="module")
def scanned(fleet_server):
    url, start = fleet_server
    ex = _explorer(url, start)
    seen = []
    run = ex._run_fleet_scan

    def spy():
        seen.append(ex.busy.value)
        return run()

    ex._run_fleet_scan = spy
    ex.scan.click()
    assert seen == [BUSY_HTML]  # "recomputing…" while the scan runs
    assert ex.busy.value == ""
    return ex


def test_the_scan_is_offered_only_for_prometheus():
    ex = PostmortemExplorer(scenario="mixed")
    assert ex.scan.layout.display == ex.fleet_box.layout.display == "none"
    ex.source.value = PROMETHEUS
    assert ex.scan.layout.display == ex.fleet_box.layout.display == ""
    assert ex.instance.disabled  # nothing to pick before a scan


def test_scan_lists_every_instance_ranked(scanned):
    ex = scanned
    header = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", ex.fleet_table.value)
    assert header[:4] == ["instance", "model", "engine", "verdict"]
    assert {"score", "slow", "ITL p50", "ITL p99", "floor", "check next"} <= set(header)
    rows = _table_rows(ex.fleet_table.value)
    assert sorted(r[0] for r in rows) == sorted(INJECTED)
    verdict = header.index("verdict")
    assert {r[0]: r[verdict] for r in rows} == INJECTED
    # worst first: the four named causes by falling score, then healthy, then no traffic
    assert [r[verdict] for r in rows][4:] == ["healthy", NO_TRAFFIC]
    score = [float(r[header.index("score")]) for r in rows[:5]]
    assert score[:4] == sorted(score[:4], reverse=True)
    assert min(score[:4]) >= 0.5 > score[4]
    assert rows[5][header.index("score")] == "-"
    # the dropdown offers them in the table's order, after "every instance summed"
    members = [value for _, value in ex.instance.options]
    assert members[0] is None
    assert [m.instance for m in members[1:]] == [r[0] for r in rows]
    assert not ex.instance.disabled
    assert "6 members, 4 with a cause" in _text(ex.fleet_status.value)


def test_picking_the_worst_loads_its_postmortem(scanned, fleet_server):
    ex = scanned
    worst = ex.instance.options[1][1]
    cause = INJECTED[worst.instance]
    assert cause != "healthy"
    ex.instance.value = worst
    assert ex.diagnosis.verdict_key == cause
    assert f"Most likely: {TITLES[cause]}" in _text(ex.verdict.value)
    # the figures are the instance's: one heatmap column per window of the scan
    assert len(ex.timeline_figure.data[0].x) == len(ex.diagnosis.timeline)
    assert not ex.timeline_figure.layout.title.text.startswith("not updated")
    # another instance, picked, replaces it
    other = next(m for _, m in ex.instance.options[1:] if INJECTED[m.instance] == "healthy")
    ex.instance.value = other
    assert ex.diagnosis.healthy
    ex.instance.value = worst
    assert ex.diagnosis.verdict_key == cause


def test_picking_an_idle_instance_is_one_line(scanned, fleet_server):
    url, _ = fleet_server
    ex = scanned
    shown = ex.instance.options[1][1]
    ex.instance.value = shown
    idle = next(m for _, m in ex.instance.options[1:] if INJECTED[m.instance] == NO_TRAFFIC)
    ex.instance.value = idle
    assert _text(ex.verdict.value) == (
        f"Cannot diagnose: {idle.instance}: its ITL histogram counted nothing in the period "
        "(no traffic)"
    )
    for fig in (ex.timeline_figure, ex.whatif_figure):  # they keep the instance shown before
        assert fig.layout.title.text.startswith(
            f"not updated (cannot diagnose): still {shown.instance} from Prometheus at {url}"
        ), fig.layout.title.text
    ex.instance.value = shown
    assert "Cannot diagnose" not in ex.verdict.value


def test_every_instance_summed_is_the_whole_server(scanned):
    """Back to "every instance summed": the single-instance path over the whole server, whose
    ITL count is the members' counts added (the same windows, summed by Prometheus)."""
    ex = scanned
    ex.instance.value = ex.instance.options[1][1]
    one = ex.diagnosis.timeline.itl_total.count
    ex.instance.value = None
    assert "Cannot diagnose" not in ex.verdict.value
    counts = [t.itl_total.count for t in ex.fleet.evidence.timelines.values() if t is not None]
    assert len(counts) == len(INJECTED) - 1 and one in counts
    assert ex.diagnosis.timeline.itl_total.count == pytest.approx(sum(counts), rel=1e-9)


def test_a_new_period_forgets_the_scan(fleet_server):
    url, start = fleet_server
    ex = _explorer(url, start)
    ex.scan.click()
    assert len(ex.instance.options) == 1 + len(INJECTED)
    ex.end.value = str(start + DURATION_SECONDS - 60)
    assert ex.fleet_table.value == ""
    assert "scan the fleet again" in ex.fleet_status.value
    assert ex.instance.options == ((ex.instance.options[0][0], None),) and ex.instance.disabled


def test_a_refusing_prometheus_is_one_line(fleet_server):
    _, start = fleet_server
    ex = _explorer("http://127.0.0.1:9", start)
    ex.scan.click()
    said = _text(ex.fleet_status.value)
    assert said.startswith(
        "Cannot scan the fleet: http://127.0.0.1:9: nothing is listening at 127.0.0.1:9 "
        "(connection refused)"
    )
    assert "\n" not in said and "Traceback" not in said
    assert ex.fleet_table.value == "" and ex.instance.disabled
    assert ex.busy.value == ""


def test_no_instances_is_one_line(fleet_server):
    url, start = fleet_server
    ex = _explorer(url, start - 7 * 86400)  # a week before anything was stored
    ex.scan.click()
    said = _text(ex.fleet_status.value)
    assert said == f"Cannot scan the fleet: {url}: no vLLM metrics in that period"
    assert ex.fleet_table.value == ""


def test_missing_inputs_are_one_line():
    ex = PostmortemExplorer(scenario="mixed")
    ex.source.value = PROMETHEUS
    ex.scan.click()
    assert _text(ex.fleet_status.value).startswith(
        "Cannot scan the fleet: Prometheus needs its URL (e.g. http://127.0.0.1:9090)"
    )
