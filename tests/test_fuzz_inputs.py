"""Fuzzing: malformed pages, folders, bench files and Prometheus answers end in a documented error.

Hypothesis mutates real-shaped inputs (a vLLM 0.12 page, a bench result, a range-query answer)
the way transfers, editors and hostile users do: cut anywhere, a number replaced by an impossible
one, a line repeated, dropped or garbled. The readers must then either raise the family's error
(`ItlkitError`, one line) or return numbers the input supports: finite, non-negative counts that
never decrease along the buckets, the `+Inf` bucket equal to `_count`. The CLI must exit 0 or 2
with one line on stderr, never 3 (an internal error) or a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from itlkit.bundled import bundled_path
from itlkit.cli import main
from itlkit.errors import ItlkitError
from itlkit.metrics import prometheus_api
from itlkit.metrics.bench import parse_bench_result
from itlkit.metrics.readers import parse_prometheus_text
from itlkit.metrics.series import histogram_series

PAGE = bundled_path("synthetic-v0.12-one-page-20261202T120500Z.prom").read_text()
LINES = PAGE.split("\n")
# Most mutations land on the histograms the readers build numbers from.
HISTOGRAM_LINES = [
    i for i, line in enumerate(LINES)
    if line.startswith(("vllm:inter_token_latency", "vllm:time_to_first_token"))
]  # fmt: skip
BAD_NUMBERS = ["+Inf", "-Inf", "NaN", "-1", "1e308", "1e999", "true", "", "0x1F", "1e-400", "١٢"]
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def mutated_pages(draw) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.sampled_from(HISTOGRAM_LINES) | st.integers(0, len(lines) - 1))
        i = min(i, len(lines) - 1)
        kind = draw(st.sampled_from(["number", "repeat", "drop", "garble", "swap"]))
        if kind == "number" and " " in lines[i] and not lines[i].startswith("#"):
            head = lines[i].rsplit(" ", 1)[0]
            lines[i] = f"{head} {draw(st.sampled_from(BAD_NUMBERS))}"
        elif kind == "repeat":
            lines.insert(i, lines[i])
        elif kind == "drop":
            del lines[i]
        elif kind == "garble":
            lines[i] = draw(st.text(max_size=40))
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    text = "\n".join(lines)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    return text


def _check_series(series) -> None:
    counts = series.cumulative_counts
    assert np.isfinite(counts).all() and (counts >= 0).all()
    assert (np.diff(counts, axis=1) >= -1e-9).all()
    assert np.allclose(counts[:, -1], series.counts)
    unknown = np.isnan(series.sums)  # only where the reader said the page has no _sum
    assert not unknown.any() or any("no _sum" in note for note in series.notes)
    assert np.isfinite(series.sums[~unknown]).all() and (series.sums[~unknown] >= 0).all()


@FUZZ
@given(text=mutated_pages())
def test_mutated_pages_read_right_or_fail_cleanly(text):
    try:
        frame = parse_prometheus_text(text, source="fuzz.prom")
        for metric in ("itl", "ttft"):
            _check_series(histogram_series(frame, metric))
    except ItlkitError as exc:
        assert "\n" not in str(exc).strip() and str(exc)


def _cli(*args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(args))
    return code, err.getvalue()


@FUZZ
@given(text=mutated_pages())
def test_cli_on_mutated_pages_exits_0_or_2_with_one_line(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "page.prom"
    path.write_text(text)
    code, err = _cli("histogram", str(path), "--json")
    assert code in (0, 2), err
    assert "Traceback" not in err and err.count("\n") <= 1


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
BENCH_KEYS = ["ttfts", "itls", "errors", "completed", "mean_itl_ms", "median_ttft_ms", "p99_itl_ms",
              "input_lens", "output_lens", "num_prompts", "duration"]  # fmt: skip


@FUZZ
@given(doc=st.dictionaries(st.sampled_from(BENCH_KEYS), json_values, max_size=6))
@example(doc={"errors": None, "mean_itl_ms": 0.0, "num_prompts": 0.0})  # once a NaN failure count
def test_bench_files_of_any_shape_read_right_or_fail_cleanly(doc):
    try:
        result = parse_bench_result(json.dumps(doc), source="fuzz.json")
    except ItlkitError:
        return
    for summary in result.summaries.values():
        for value in (summary.mean_seconds, summary.median_seconds, summary.std_seconds):
            assert math.isnan(value) or value >= 0
    if result.samples is not None:
        assert np.isfinite(result.samples.itl_seconds).all()
        assert (result.samples.ttft_seconds >= 0).all()


@FUZZ
@given(doc=json_values | st.fixed_dictionaries(
    {"status": st.just("success"),
     "data": st.fixed_dictionaries({"resultType": st.just("matrix"), "result": json_values})}
))  # fmt: skip
def test_prometheus_answers_of_any_shape_end_in_prometheus_error(doc):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prometheus_api, "http_get", lambda *a, **k: json.dumps(doc).encode())
        try:
            frame = prometheus_api.query_range(
                "http://fuzz", "up", start_seconds=0, end_seconds=60, step_seconds=15
            )
        except ItlkitError:
            return
    assert {"timestamp_seconds", "value"} <= set(frame.columns)
