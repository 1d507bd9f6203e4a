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
    # GPU left to the metrics (as `itlkit diagnose` without --gpu): a 37.5 ms step is host-bound
    # on an H100, not on an L40S, so the verdict says which GPUs name it
    assert "host overhead between GPU kernels is named only on" in _text(explorer.verdict.value)
    explorer.gpu.value = "h100-sxm"  # the GPU its scenario.json records
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
    assert "no such model config.json file" in explorer.verdict.value
    explorer.model_path.value = ""
    explorer.reload()
    assert "Cannot diagnose" not in explorer.verdict.value


def test_an_empty_prometheus_url_or_period_is_one_clear_message(explorer):
    """Issue 12f: an empty Prometheus URL gave "NaTType does not support timestamp"."""
    from itlkit.widgets.postmortem import PROMETHEUS

    explorer.source.value = PROMETHEUS
    explorer.reload()
    assert "NaTType" not in explorer.verdict.value
    want = ("Cannot diagnose: Prometheus needs its URL (e.g. http://127.0.0.1:9090), the start "
            "and the end of the incident (e.g. 2026-12-02T15:00:00Z)")  # fmt: skip
    assert want in _text(explorer.verdict.value)
    explorer.url.value = "http://127.0.0.1:9090"
    explorer.start.value = "2026-12-02T15:00:00Z"
    explorer.reload()
    assert "Prometheus needs the end of the incident (e.g. 2026-12-02T16:00:00Z)" in _text(
        explorer.verdict.value
    )
    explorer.url.value = explorer.start.value = ""
    explorer.source.value = "mixed"
    explorer.reload()


ONE_PAGE = "synthetic-v0.12-one-page-20261202T120500Z.prom"


def _upload_bundled(explorer, *names):
    import datetime as dt

    from itlkit.bundled import bundled_path

    items = []
    for name in names:
        data = (bundled_path() / name).read_bytes()
        now = dt.datetime.now(dt.UTC)
        items.append({"name": name, "type": "text/plain", "size": len(data),
                      "last_modified": now, "content": memoryview(data)})  # fmt: skip
    explorer.source.value = UPLOAD
    explorer.upload.value = tuple(items)
    explorer.reload()


def test_one_page_says_it_has_no_time_series_and_counts_start_at_zero():
    """Issue 12g: one page drew the panels over time as a dot, with a negative requests/s axis."""
    ex = PostmortemExplorer(scenario="mixed")
    _upload_bundled(ex, ONE_PAGE)
    assert "Cannot diagnose" not in ex.verdict.value
    notes = [a.text for a in ex.timeline_figure.layout.annotations]
    assert any("one page has no time series" in (text or "") for text in notes), notes
    layout = ex.timeline_figure.layout
    for axis in ("yaxis2", "yaxis3", "yaxis4", "yaxis5"):  # shares, rates, counts, the floor
        assert layout[axis].rangemode == "tozero", axis
    ex.source.value = "mixed"  # a series again: the note goes
    ex.reload()
    notes = [a.text or "" for a in ex.timeline_figure.layout.annotations]
    assert not any("no time series" in text for text in notes)


def test_the_arrivals_axis_starts_at_zero(explorer):
    """Issue 12i: the first-tokens-per-second axis did not start at zero."""
    layout = explorer.timeline_figure.layout
    assert layout.yaxis3.title.text == "requests/s"
    assert layout.yaxis3.rangemode == "tozero"


def test_the_heatmap_colours_shares_on_a_log_scale():
    """Issue 12j: on a linear scale the rare multi-second preemption gaps were invisible."""
    import numpy as np

    ex = PostmortemExplorer(scenario="preemption")
    heatmap = ex.timeline_figure.data[0]
    shares = np.array([h.bucket_counts / h.count for h in ex.diagnosis.timeline.itl]).T
    z = np.array(heatmap.z, dtype=float)
    held = shares > 0
    assert z[held] == pytest.approx(np.log10(shares[held]))
    assert np.isnan(z[~held]).all()  # empty buckets stay blank
    assert (heatmap.zmin, heatmap.zmax) == (-6, 0)
    assert list(heatmap.colorbar.ticktext) == ["0.0001 %", "0.001 %", "0.01 %", "0.1 %", "1 %",
                                                "10 %", "100 %"]  # fmt: skip
    # a 5-7.5 s gap seen a few times in 100,000 ITLs: over a quarter of the way up the scale
    # (on the linear scale it was 0.007 % of the way up)
    rows = [i for i, label in enumerate(heatmap.y) if label.startswith("(5000,")]
    assert np.nanmax(z[rows]) > -6 + 6 / 4


def test_the_whatif_axes_hold_every_value_the_title_shows():
    """Issue 12h: the TTFT axis stopped at ~1.5 s; 39 s and 631 s what-ifs fell off it."""
    import math

    ex = PostmortemExplorer(scenario="mixed")
    ex.whatif_budget.value = 64
    ex.whatif_seqs.value = 8
    layout, t = ex.whatif_figure.layout, ex.diagnosis.timeline
    shown = {
        "xaxis": [t.itl_total.quantile(0.99), ex.baseline.itl_quantile(0.99),
                  ex.prediction.itl_quantile(0.99)],
        "xaxis2": [t.ttft_total.quantile(0.99), ex.baseline.ttft_quantile(0.99),
                   ex.prediction.ttft_quantile(0.99)],
    }  # fmt: skip
    assert max(shown["xaxis2"]) > 100  # seconds: the case that fell off
    for axis, seconds in shown.items():
        low, high = layout[axis].range
        assert layout[axis].type == "log"
        for value in seconds:
            assert low <= math.log10(value * 1e3) <= high, (axis, value, layout[axis].range)


def test_a_recomputing_line_shows_while_04_recomputes_and_no_title_goes_stale():
    """Issue 12k: no sign of the wait while 04 recomputed, and a stale what-if title after it."""
    from itlkit.widgets._style import BUSY_HTML

    ex = PostmortemExplorer(scenario="mixed")
    seen = []
    run_whatif, run_diagnosis = ex._run_whatif, ex._run_diagnosis

    def whatif_spy():
        seen.append(("what-if", ex.busy.value, ex.whatif_figure.layout.title.text))
        run_whatif()

    def diagnosis_spy():
        seen.append(("diagnosis", ex.busy.value, ex.timeline_figure.layout.title.text))
        run_diagnosis()

    ex._run_whatif, ex._run_diagnosis = whatif_spy, diagnosis_spy
    ex.whatif_budget.value = 1024
    (_, busy, title) = seen.pop()
    assert busy == BUSY_HTML  # sent before the simulation starts
    assert "budget 1024" in title and "recomputing" in title and "observed" not in title
    assert ex.busy.value == "" and "observed" in ex.whatif_figure.layout.title.text
    ex.reload()
    assert [(step, busy) for step, busy, _ in seen] == [("diagnosis", BUSY_HTML),
                                                         ("what-if", BUSY_HTML)]  # fmt: skip
    assert ex.busy.value == ""
    # a failed reload leaves both figures marked, not silently showing the old incident
    ex.source.value = UPLOAD
    ex.reload()
    assert ex.busy.value == ""
    for fig in (ex.timeline_figure, ex.whatif_figure):
        assert fig.layout.title.text.startswith("not updated (cannot diagnose): still mixed"), (
            fig.layout.title.text
        )
    # one page: the what-if has nothing to replay, and its old curves go
    _upload_bundled(ex, ONE_PAGE)
    assert "one scrape cannot be replayed" in ex.whatif_figure.layout.title.text
    assert all(len(trace.x or ()) == 0 for trace in ex.whatif_figure.data)
    ex.source.value = "mixed"
    ex.reload()
    assert all(len(trace.x) > 0 for trace in ex.whatif_figure.data)
    assert "observed" in ex.whatif_figure.layout.title.text


def test_a_slider_move_replays_only_the_new_setting(monkeypatch):
    """Issue 12: each move replayed the unchanged baseline too, and a setting already replayed
    was simulated again (two replays of 150-200 ms per key press)."""
    import numpy as np

    from itlkit.diagnosis import whatif
    from itlkit.widgets import postmortem

    ex = PostmortemExplorer(scenario="mixed")
    replayed = []

    def counting_predict(diagnosis, setting, **kwargs):
        replayed.append(setting.max_num_batched_tokens)
        return whatif.predict(diagnosis, setting, **kwargs)

    monkeypatch.setattr(postmortem, "predict", counting_predict)
    ex.whatif_budget.value = 1024
    ex.whatif_budget.value = 512  # shown before: no replay
    ex.whatif_budget.value = 1024
    assert replayed == [1024]
    fresh = whatif.predict(ex.diagnosis, ex._setting(), speed=ex.speed)
    assert np.array_equal(ex.prediction.itl.bucket_counts, fresh.itl.bucket_counts)
    assert np.array_equal(ex.prediction.ttft.bucket_counts, fresh.ttft.bucket_counts)
    assert ex.prediction.preemptions == fresh.preemptions
    ex.source.value = "healthy"  # another incident: its own replays
    ex.reload()
    assert replayed == [1024, ex.diagnosis.max_num_batched_tokens, 1024]


def test_the_whatif_figure_updated_in_place_is_the_one_built_afresh():
    """The redraw sends only what changed; what the figure then holds is what the builder
    draws for the same setting (no stale curve, range or title)."""
    import plotly.graph_objects as go

    from itlkit.plots.postmortem import whatif_figure, whatif_spec
    from itlkit.widgets._figure import plain

    ex = PostmortemExplorer(scenario="mixed")
    for budget in (64, 4096):
        ex.whatif_budget.value = budget
        shown = go.Figure(ex.whatif_figure).to_plotly_json()
        built = whatif_figure(ex.diagnosis, ex.baseline, ex.prediction).to_plotly_json()
        assert shown["layout"] == built["layout"]
        held = [{k: v for k, v in trace.items() if k != "uid"} for trace in shown["data"]]
        assert held == plain(whatif_spec(ex.diagnosis, ex.baseline, ex.prediction)["data"])
