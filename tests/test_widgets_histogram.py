"""Notebook 03 wiring: figure builders and the explorer, without a kernel."""

from __future__ import annotations

import datetime as dt
import html
import math
import re

import numpy as np
import pytest

from itlkit.metrics.histogram import from_samples, summarize
from itlkit.physics.roofline import Deployment, decode_step
from itlkit.plots.histogram import bucket_bars, histogram_figure, histogram_spec
from itlkit.widgets._deployment import AUTO_VALUE
from itlkit.widgets.histogram import HistogramExplorer

LES = ["0.01", "0.025", "0.05", "0.075", "0.1", "+Inf"]
INF = math.inf


def page(itl_counts, itl_sum, ttft_count):
    lines = ["# TYPE vllm:inter_token_latency_seconds histogram"]
    for le, c in zip(LES, itl_counts, strict=True):
        lines.append(
            f'vllm:inter_token_latency_seconds_bucket{{model_name="m",engine="0",le="{le}"}} {c}'
        )
    lines.append(
        f'vllm:inter_token_latency_seconds_count{{model_name="m",engine="0"}} {itl_counts[-1]}'
    )
    lines.append(f'vllm:inter_token_latency_seconds_sum{{model_name="m",engine="0"}} {itl_sum}')
    ttft = 'vllm:time_to_first_token_seconds_{}{{model_name="m",engine="0"{}}} {}'
    lines.append("# TYPE vllm:time_to_first_token_seconds histogram")
    lines.append(ttft.format("bucket", ',le="0.5"', ttft_count))
    lines.append(ttft.format("bucket", ',le="+Inf"', ttft_count))
    lines.append(ttft.format("count", "", ttft_count))
    lines.append(ttft.format("sum", "", 0))
    return "\n".join(lines) + "\n"


# 90 ITLs at 16 ms (bucket 10-25 ms) and 10 at 79 ms (bucket 75-100 ms): p99 = 97.5 ms by hand
ONE = page([0, 90, 90, 90, 100, 100], 90 * 0.016 + 10 * 0.079, 3)


@pytest.fixture
def examples(tmp_path):
    single = tmp_path / "metrics-20261202T120000Z.prom"
    single.write_text(ONE)
    folder = tmp_path / "series"
    folder.mkdir()
    # interval 1: 90 fast + 10 slow (10 % slow); interval 2: 50 fast + 50 slow (50 % slow)
    pages = [page([0] * 6, 0, 0), ONE, page([0, 140, 140, 140, 200, 200], 6.0, 9)]
    for i, text in enumerate(pages):
        (folder / f"metrics-20261202T1200{15 * i:02d}Z.prom").write_text(text)
    return {"one page": single, "series": folder}


def _trace(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def test_bucket_bars_are_share_per_decade_with_open_ends():
    h = from_samples([0.005] * 10 + [0.05] * 30 + [5.0] * 40, upper_bounds=[0.01, 0.1, INF])
    bars = bucket_bars(h)
    assert bars.left_seconds.tolist() == pytest.approx([0.001, 0.01, 0.1])
    assert bars.right_seconds.tolist() == pytest.approx([0.01, 0.1, 1.0])
    assert bars.share_per_decade.tolist() == pytest.approx([0.125, 0.375, 0.5])
    assert bars.open_ended.tolist() == [True, False, True]
    wide = bucket_bars(from_samples([0.5] * 4, upper_bounds=[0.01, 1.0, INF]))
    assert wide.share_per_decade[1] == pytest.approx(0.5)  # one share over two decades


def test_histogram_figure_marks_quantiles_mean_and_floor():
    h = from_samples([0.016] * 90 + [0.079] * 10, upper_bounds=[0.01, 0.025, 0.05, 0.075, 0.1, INF])
    fig = histogram_figure(summarize(h), floor_seconds=0.015, slow_factor=5)
    assert _trace(fig, "p99").x[0] == pytest.approx(0.0975)
    assert _trace(fig, "mean").x[0] == pytest.approx(0.0223)
    assert _trace(fig, "floor").x[0] == 0.015
    assert _trace(fig, "5× floor").x[0] == pytest.approx(0.075)
    assert "interpolated in bucket (75.00 ms, 100.00 ms]" in _trace(fig, "p99").hovertemplate
    assert fig.layout.xaxis.type == "log" and "(s, log scale)" in fig.layout.xaxis.title.text
    assert "% per decade" in fig.layout.yaxis.title.text


def test_explorer_initial_numbers(examples):
    ex = HistogramExplorer(examples=examples)
    assert _trace(ex.figure, "p99").x[0] == pytest.approx(0.0975)
    assert _trace(ex.figure, "p50").x[0] == pytest.approx(0.01 + 0.015 * 50 / 90)
    # llama-3.1-8b bf16 on H100 SXM, batch 64, 4,096 tokens: floor 15.05 ms (project brief)
    assert _trace(ex.figure, "floor").x[0] == pytest.approx(0.01505, rel=1e-3)
    assert "p99 97.50 ms (interpolated in bucket (75.00 ms, 100.00 ms])" in ex.status.value
    for control in (ex.batch, ex.context, ex.slow_factor):
        assert "(" in control.description  # every slider names its unit


def test_explorer_moves_the_floor_with_batch_context_and_factor(examples):
    ex = HistogramExplorer(examples=examples)
    ex.batch.value = 256
    ex.context.value = 8192
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    want = float(decode_step(dep, batch_size=256, context_tokens=8192).floor_seconds)
    assert _trace(ex.figure, "floor").x[0] == pytest.approx(want)
    assert want > 0.03  # far from the 15 ms default, so the update is visible
    ex.slow_factor.value = 3.0
    assert _trace(ex.figure, "3× floor").x[0] == pytest.approx(3 * want)
    ex.gpu.value = "h200-sxm"
    assert _trace(ex.figure, "floor").x[0] < want  # more HBM bandwidth, lower floor


def test_explorer_series_shows_slow_share_and_ttft_rate(examples):
    ex = HistogramExplorer(examples=examples)
    ex.example.value = "series"
    slow, ttft = ex.series_figure.data
    # floor 15.05 ms, 5× = 75 ms: the cut is the 25 ms bound (closest to sqrt(5) × floor)
    assert np.asarray(slow.y).tolist() == pytest.approx([10.0, 50.0])
    assert np.asarray(slow.x).tolist() == pytest.approx([0.125, 0.375])  # minutes
    assert np.asarray(ttft.y).tolist() == pytest.approx([3 / 15, 6 / 15])
    assert "window of 3 scrapes" in ex.figure.layout.title.text
    assert _trace(ex.figure, "p50").x[0] == pytest.approx(0.01 + 0.015 * 100 / 140)


def test_explorer_upload_and_bad_upload(examples):
    ex = HistogramExplorer(examples=examples)
    ex.example.value = "series"
    now = dt.datetime.now(dt.UTC)
    upload = {"name": "mine-20261202T130000Z.prom", "type": "text/plain", "size": len(ONE),
              "last_modified": now, "content": memoryview(ONE.encode())}  # fmt: skip
    ex.upload.value = (upload,)
    assert ex.error.value == ""
    assert "mine-20261202T130000Z.prom" in ex.figure.layout.title.text
    assert _trace(ex.figure, "p99").x[0] == pytest.approx(0.0975)
    bad = dict(upload, name="bad.prom", content=memoryview(b"<html>502</html>\n"))
    ex.upload.value = (bad,)
    assert "bad.prom:1: malformed exposition line" in ex.error.value
    assert _trace(ex.figure, "p99").x[0] == pytest.approx(0.0975)  # figure kept


def test_changing_the_source_survives_the_browsers_echo(examples):
    from _frontend import echo_trace_deltas

    ex = HistogramExplorer(examples=examples)
    echo_trace_deltas(ex.figure)
    ex.example.value = "series"
    echo_trace_deltas(ex.figure)
    echo_trace_deltas(ex.series_figure)
    ex.batch.value = 12
    echo_trace_deltas(ex.figure)
    ex.metric.value = "ttft"  # fewer traces: no floor lines
    echo_trace_deltas(ex.figure)
    ex.metric.value = "itl"
    echo_trace_deltas(ex.figure)


def test_title_says_which_floor_is_assumed(examples):
    """Issue 12: a page was judged against the default Llama-3.1-8B / H100 floor with no hint."""
    ex = HistogramExplorer(examples=examples)
    title = ex.figure.layout.title.text
    assert "for llama-3.1-8b bf16 on h100-sxm, batch 64, 4096 tokens" in title
    assert "assumed: model llama-3.1-8b (model_name 'm' is not in the catalog" in _words(title)
    assert "GPU h100-sxm (vLLM's metrics do not name it; pass --gpu)" in _words(title)
    ex.batch.value = 12
    assert "batch 12," in ex.figure.layout.title.text  # the title follows the floor's inputs


def _words(title: str) -> str:
    """A plotly title as the reader sees it: no tags, no line breaks, entities decoded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", title)).split())


def _upload(name: str, text: str) -> dict:
    now = dt.datetime.now(dt.UTC)
    return {"name": name, "type": "text/plain", "size": len(text), "last_modified": now,
            "content": memoryview(text.encode())}  # fmt: skip


def test_choosing_the_example_again_after_an_upload_redraws_it(examples):
    """Issue 12a: after an upload, re-choosing the example shown before did nothing."""
    ex = HistogramExplorer(examples=examples)
    ex.example.value = "series"
    ex.upload.value = (_upload("mine-20261202T130000Z.prom", ONE),)
    assert "mine-20261202T130000Z.prom" in ex.figure.layout.title.text
    assert ex.example.value is None  # the dropdown no longer claims the example is shown
    ex.example.value = "series"
    assert "series · itl · window of 3 scrapes" in ex.figure.layout.title.text
    assert _trace(ex.figure, "p50").x[0] == pytest.approx(0.01 + 0.015 * 100 / 140)


def test_a_failed_upload_marks_the_plot_it_leaves_as_stale(examples):
    """Issue 12b: a failed upload left the previous plot and title under a small red line."""
    ex = HistogramExplorer(examples=examples)
    ex.upload.value = (_upload("bad.prom", "<html>502</html>\n"),)
    title = ex.figure.layout.title.text
    assert title.startswith('<span style="color:#c00">not updated: bad.prom could not be read')
    assert "still showing one page" in title
    assert ex.figure.layout.margin.t >= 40 + 18 * (title.count("<br>") + 1)  # room for it
    layout = ex.figure.layout
    assert layout.height - layout.margin.t - layout.margin.b == 330  # the plot keeps its height
    ex.example.value = "series"  # a good source clears the mark
    assert "not updated" not in ex.figure.layout.title.text
    assert ex.error.value == ""


def test_marker_labels_that_would_overlap_are_merged_or_raised():
    """Issue 12c: the mean, p50 and p90 labels (22, 18 and 25 ms) printed on top of each other."""
    h = from_samples([0.016] * 90 + [0.079] * 10, upper_bounds=[0.01, 0.025, 0.05, 0.075, 0.1, INF])
    fig = histogram_figure(summarize(h), floor_seconds=0.025, slow_factor=4)  # floor = p90
    labels = [(t.text[1], math.log10(t.x[0]), t.y[1]) for t in fig.data[3:]]
    assert [text for text, _, _ in labels] == ["mean", "p50", "", "p99", "p90 · floor", "4× floor"]
    shown = [label for label in labels if label[0]]
    for i, (a, xa, ya) in enumerate(shown):
        for b, xb, yb in shown[i + 1 :]:
            # this figure spans 1.6 decades: labels at one height need 0.12 decade (≥ 40 px)
            assert ya != yb or abs(xa - xb) > 0.12, (a, b)


def test_the_decode_floor_and_slow_share_are_drawn_on_the_itl_histogram_only(examples):
    """Issue 12d: the decode floor and the "slow-mode share of ITLs" were drawn on TTFT."""
    ex = HistogramExplorer(examples=examples)
    ex.example.value = "series"
    slow_before = list(ex.series_figure.data[0].y)
    ex.metric.value = "ttft"
    names = [t.name for t in ex.figure.data]
    assert "floor" not in names and not any("× floor" in n for n in names)
    assert "slow" not in ex.status.value and "floor" not in ex.status.value
    assert "floor 15.05 ms assumed" not in ex.figure.layout.title.text
    assert "the decode floor bounds ITLs only" in ex.figure.layout.title.text
    # the lower figure stays the slow share of the ITLs, not of the first-token latencies
    assert list(ex.series_figure.data[0].y) == pytest.approx(slow_before)
    ex.metric.value = "itl"
    assert _trace(ex.figure, "floor").x[0] == pytest.approx(0.01505, rel=1e-3)
    assert "within" in ex.status.value  # the mode split is back


def test_an_uploaded_page_is_judged_against_its_own_model(examples):
    """Issue 12e: a page of another model was judged against the Llama-3.1-8B / H100 floor."""
    ex = HistogramExplorer(examples=examples)
    served = "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"
    text = ONE.replace('model_name="m"', f'model_name="{served}"')
    ex.upload.value = (_upload("70b-20261202T130000Z.prom", text),)
    assert ex.model.value == AUTO_VALUE  # read off the served name, as `itlkit diagnose` does
    assert ex.inferred().deployment.model.slug == "llama-3.1-70b"
    dep = Deployment.create(model="llama-3.1-70b", gpu="h100-sxm", weight_precision="fp8")
    want = float(decode_step(dep, batch_size=64, context_tokens=4096).floor_seconds)
    assert _trace(ex.figure, "floor").x[0] == pytest.approx(want)
    title = _words(ex.figure.layout.title.text)
    assert "for llama-3.1-70b fp8 on h100-sxm, batch 64" in title
    assert "model llama-3.1-70b, from model_name" in title
    assert "FP8 weights from its suffix" in title
    assert "GPU h100-sxm (vLLM's metrics do not name it" in title
    # four title lines: the figure grows, the plot keeps its height, the legend stays below it
    layout = ex.figure.layout
    assert layout.height - layout.margin.t - layout.margin.b == 330
    legend = layout.legend
    assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")  # at the foot
    ex.model.value = "llama-3.1-8b"  # the reader overrules the guess: its precision goes too
    assert _trace(ex.figure, "floor").x[0] == pytest.approx(0.01505, rel=1e-3)
    assert "fp8" not in ex.figure.layout.title.text
    ex.model.value = AUTO_VALUE
    ex.example.value = "series"  # model_name "m" is in no catalog: the default, said
    assert "model_name 'm' is not in the catalog" in _words(ex.figure.layout.title.text)


def test_the_sliders_read_the_source_once_and_send_only_what_changed(examples, monkeypatch):
    """Issue 12: each key press re-read the scrapes (3 × 20 ms) and rebuilt both figures."""
    import itlkit.widgets.histogram as module
    from itlkit.widgets._figure import changes, plain

    reads = []
    real = module.histogram_series
    monkeypatch.setattr(module, "histogram_series", lambda *a: reads.append(a[1]) or real(*a))
    ex = HistogramExplorer(examples=examples)
    assert reads == ["itl"]  # one page: no series, so its TTFT rate is not needed
    reads.clear()
    ex.example.value = "series"
    assert sorted(reads) == ["itl", "ttft"]
    ex.batch.value = 12
    ex.slow_factor.value = 3.0
    assert sorted(reads) == ["itl", "ttft"]
    ex.example.value = "one page"
    assert sorted(reads) == ["itl", "itl", "ttft"]
    hist, series = ex._figures()
    for figure, spec in ((ex.figure, hist), (ex.series_figure, series)):
        assert list(changes(figure.layout._props, plain(spec["layout"]))) == []
        for trace, values in zip(figure.data, plain(spec["data"]), strict=True):
            assert list(changes(trace._props, values)) == []


def test_the_figures_are_their_specs():
    h = from_samples([0.016] * 90 + [0.079] * 10, upper_bounds=[0.01, 0.025, 0.05, 0.075, 0.1, INF])
    spec = histogram_spec(summarize(h), floor_seconds=0.015, slow_factor=5, title="t")
    fig = histogram_figure(summarize(h), floor_seconds=0.015, slow_factor=5, title="t")
    assert [t.name for t in fig.data] == [t["name"] for t in spec["data"]]
    assert fig.layout.title.text == "t" and fig.layout.height == spec["layout"]["height"]


def _sglang_page(tmp_path):
    """One SGLang page: its ITL family and buckets (sglang/srt/metrics/collector.py), 100 ITLs."""
    bounds = ["0.002", "0.004", "0.006", "0.008", "0.01", "0.05", "0.1", "+Inf"]
    lines = ["# TYPE sglang:inter_token_latency_seconds histogram"]
    family, labels = "sglang:inter_token_latency_seconds", 'model_name="m",tp_rank="0"'
    for le in bounds:  # 90 ITLs in (10, 50] ms, 10 in (50, 100] ms
        count = 0 if float(le) < 0.05 else 90 if float(le) < 0.1 else 100
        lines.append(f'{family}_bucket{{{labels},le="{le}"}} {count}')
    lines.append('sglang:inter_token_latency_seconds_count{model_name="m",tp_rank="0"} 100')
    lines.append('sglang:inter_token_latency_seconds_sum{model_name="m",tp_rank="0"} 2.0')
    path = tmp_path / "sglang-metrics-20261202T120000Z.prom"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_sglang_page_draws_sglangs_stall_and_a_vllm_page_vllms(examples, tmp_path):
    from _reference import FLOPS_PER_SECOND_AT_HALF_MFU, PARAMETERS, mixed_step_ms

    ex = HistogramExplorer(examples={"sglang": _sglang_page(tmp_path), **examples})
    # SGLang's default chunk on an H100 (79.2 GiB of CUDA memory: its tier below 90 GiB) is
    # 8,192 tokens; the stream waits the batch alone (GEMMs at half MFU, the weight read being
    # shorter) and then its decode step, the 15.05 ms floor at 64 x 4,096 tokens.
    assert (ex.slow_mode.value, ex.chunk.value, ex.slow_factor.disabled) == ("sglang", 8192, True)
    want = 2 * PARAMETERS * 8192 / FLOPS_PER_SECOND_AT_HALF_MFU + 0.01505
    (slow,) = [t for t in ex.figure.data if t.name.endswith("× floor")]
    assert slow.x[0] == pytest.approx(want, rel=1e-3)
    assert "prefill batch of 8,192 tokens alone" in str(slow.hovertemplate)
    ex.chunk.value = 2048  # the worked example's chunk: 66.5 + 15.05 ms
    (slow,) = [t for t in ex.figure.data if t.name.endswith("× floor")]
    assert slow.x[0] == pytest.approx(81.54e-3, abs=0.02e-3)
    ex.example.value = "one page"  # a vLLM page: the chunk rides in the decodes' step
    assert ex.slow_mode.value == "vllm" and not ex.chunk.disabled
    (slow,) = [t for t in ex.figure.data if t.name.endswith("× floor")]
    assert slow.x[0] == pytest.approx(mixed_step_ms(2048) / 1e3, rel=1e-3)
    ex.slow_mode.value = "floor"  # by hand again: the slider's multiple
    assert not ex.slow_factor.disabled and ex.chunk.disabled
    assert _trace(ex.figure, "5× floor").x[0] == pytest.approx(5 * 0.01505, rel=1e-3)
