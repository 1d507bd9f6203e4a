"""Notebook 04's wiring, driven from Python."""

import html
import re

import pytest

from itlkit.widgets.postmortem import UPLOAD, PostmortemExplorer, bundled_scenarios


def _text(markup: str) -> str:
    """HTML as the reader sees it: no tags, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", markup)).split())


@pytest.fixture(scope="module")
def explorer():
    return PostmortemExplorer(scenario="mixed")


def test_bundled_scenarios_are_offered():
    assert {"healthy", "mixed", "preemption"} <= set(bundled_scenarios())


def test_initial_verdict_and_figures(explorer):
    assert "prefill chunks ride in decode steps" in explorer.verdict.value
    assert "the batch or the context grew" in explorer.verdict.value
    assert explorer.timeline_figure.layout.title.text.startswith("floor ")
    heatmap = explorer.timeline_figure.data[0]
    assert len(heatmap.x) == len(explorer.diagnosis.timeline)
    assert "what-if (budget 512" in explorer.whatif_figure.layout.title.text
    assert "Fixes and their price" in explorer.evidence.value


def test_whatif_controls_resimulate(explorer):
    before = list(explorer.whatif_figure.data[2].y)
    explorer.whatif_budget.value = 4096
    assert "budget 4096" in explorer.whatif_figure.layout.title.text
    assert list(explorer.whatif_figure.data[2].y) != before
    explorer.whatif_disagg.value = True
    assert "disaggregated" in explorer.whatif_figure.layout.title.text
    explorer.whatif_disagg.value = False
    explorer.whatif_budget.value = 512


def test_loading_another_incident_redraws(explorer):
    explorer.source.value = "host_overhead"
    explorer.reload()
    assert "Most likely: host overhead" in explorer.verdict.value
    assert "p50 37.50 ms" in explorer.timeline_figure.layout.title.text
    explorer.source.value = "mixed"
    explorer.reload()


def test_missing_upload_is_a_clear_message(explorer):
    explorer.source.value = UPLOAD
    explorer.reload()
    assert "Cannot diagnose" in explorer.verdict.value
    assert "upload one or more scrape files first" in explorer.verdict.value
    explorer.source.value = "mixed"
    explorer.reload()


def test_export_is_self_contained(explorer, tmp_path):
    path = explorer.export_report(tmp_path / "report.html")
    text = path.read_text()
    assert explorer.diagnosis.verdict.split("(")[0] in text
    assert "Fixes and their price" in text
    # plotly.js is inlined once, and nothing is fetched from the network.
    assert text.count("plotly.js v") >= 1
    assert not re.search(r"<script[^>]+src=", text)
    assert str(path) in explorer.export_status.value


def test_own_config_json_as_the_model(explorer, tmp_path):
    config = tmp_path / "missing" / "config.json"
    explorer.model_path.value = str(config)
    explorer.reload()
    assert "cannot read model config" in explorer.verdict.value
    explorer.model_path.value = ""
    explorer.reload()
    assert "Cannot diagnose" not in explorer.verdict.value


def test_an_empty_prometheus_url_or_period_is_one_clear_message(explorer):
    """Issue 12f: an empty Prometheus URL gave "NaTType does not support timestamp"."""
    from itlkit.widgets.postmortem import PROMETHEUS

    explorer.source.value = PROMETHEUS
    explorer.reload()
    assert "NaTType" not in explorer.verdict.value
    assert ("Cannot diagnose: Prometheus needs its URL (e.g. http://127.0.0.1:9090), the start "
            "and the end of the incident (e.g. 2026-12-02T15:00:00Z)") in _text(explorer.verdict.value)  # fmt: skip
    explorer.url.value = "http://127.0.0.1:9090"
    explorer.start.value = "2026-12-02T15:00:00Z"
    explorer.reload()
    assert "Prometheus needs the end of the incident (e.g. 2026-12-02T16:00:00Z)" in _text(
        explorer.verdict.value
    )
    explorer.url.value = explorer.start.value = ""
    explorer.source.value = "mixed"
    explorer.reload()
