"""Readings that neither lose nor invent data: untimed scrapes refused as `itlkit diagnose`
refuses them, a bench file's exact quantiles from its own samples beside the bucketed ones, and
the fast mode named as the fast mode (not the floor), with units.

Expected values come from the files themselves (their buckets and samples, read here with the
json module and numpy), never from itlkit's output.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
from _paths import DATA, REAL_PAGES

from itlkit.cli import main
from itlkit.metrics.histogram import Histogram, split_modes

REAL = REAL_PAGES
IDLE = REAL / "er0080-opt125m-tp2-3090-idle-v0.25" / "metrics.prom"
LOADED = REAL / "er0080-opt125m-tp2-3090-loaded-v0.25" / "metrics.prom"
BENCH = DATA.parent.parent / "data" / "synthetic-vllm-bench-serve.json"

# The loaded page's ITL buckets, as its provenance reads them by hand: 164,629 observations,
# 155,912 of them at or under 10 ms.
LOADED_COUNT, LOADED_UNDER_10MS = 164_629, 155_912


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- two pages without timestamps --------------------------------------------------------------
@pytest.mark.parametrize("order", [(IDLE, LOADED), (LOADED, IDLE)])
def test_untimed_pages_are_refused_as_diagnose_refuses_them(capsys, order):
    """The issue: 'window of 2 scrapes: None to None', count 0 or a made-up window, though one
    page holds 164,629 observations. Two untimed pages have no order, so no window."""
    paths = [str(p) for p in order]
    code, out, err = _cli(capsys, "histogram", *paths)
    assert code == 2 and out == ""
    d_code, _, d_err = _cli(capsys, "diagnose", *paths)
    assert d_code == 2
    message = err.split(": error: ", 1)[1]
    assert message == d_err.split(": error: ", 1)[1]  # one check, one sentence
    assert "without timestamps" in message and "None" not in message
    # one of them alone still reads: everything since the server started
    code, out, _ = _cli(capsys, "histogram", str(LOADED))
    assert code == 0 and f"count {LOADED_COUNT:,}" in out


def test_the_notebook_explorer_refuses_two_untimed_uploads():
    from itlkit.widgets.histogram import HistogramExplorer

    ex = HistogramExplorer(examples={"loaded": LOADED})
    now = dt.datetime.now(dt.UTC)
    files = []
    for name, text in (("idle", IDLE.read_text()), ("loaded", LOADED.read_text())):
        files.append({"name": f"{name}.prom", "type": "text/plain", "size": len(text),
                      "last_modified": now, "content": memoryview(text.encode())})  # fmt: skip
    ex.upload.value = tuple(files)
    assert "scrapes without timestamps" in ex.error.value
    assert "not updated" in ex.figure.layout.title.text


# ---- a detailed bench file: exact quantiles beside the bucketed ones ----------------------------
def _file_samples() -> np.ndarray:
    """Every successful request's ITL gaps, concatenated, as vllm bench serve gathers them."""
    doc = json.loads(BENCH.read_text())
    errors = doc.get("errors") or [""] * len(doc["itls"])
    return np.concatenate(
        [np.asarray(g, float) for g, e in zip(doc["itls"], errors, strict=True) if not e]
    )


def test_bench_file_quantiles_come_from_its_own_samples(capsys):
    samples = _file_samples()
    exact = {q: float(np.percentile(samples, 100 * q)) for q in (0.5, 0.9, 0.99)}
    # Bucketed p90: vLLM's first ITL bucket (0, 10 ms] holds n10 of n samples; Prometheus
    # interpolates rank 0.9 n linearly inside it.
    n, n10 = samples.size, int(np.sum(samples <= 0.01))
    assert 0.9 * n <= n10  # p90's rank falls inside the first bucket
    bucketed_p90 = 0.01 * 0.9 * n / n10
    assert f"{exact[0.9] * 1e3:.2f}" == "5.99" and f"{bucketed_p90 * 1e3:.2f}" == "9.14"
    code, out, _ = _cli(capsys, "histogram", str(BENCH))
    assert code == 0
    for q, value in exact.items():
        assert f"exact p{q * 100:g} {value * 1e3:.2f} ms" in out
    where = "(interpolated in bucket (0, 10.00 ms])"
    assert f"bucketed p90 {bucketed_p90 * 1e3:.2f} ms  {where}" in out
    assert f"{n:,} itl samples" in out and "numpy.percentile" in out
    code, out, _ = _cli(capsys, "histogram", str(BENCH), "--json")
    doc = json.loads(out)
    assert doc["exact"]["p90_seconds"] == pytest.approx(exact[0.9], rel=1e-12)
    assert doc["exact"]["count"] == n
    assert doc["p90_seconds"] == pytest.approx(bucketed_p90, rel=1e-9)  # the bucketed view


def test_the_files_own_percentiles_are_checked_against_its_samples(tmp_path, capsys):
    # gaps 10, 20 | 30, 40, 50 ms: numpy's linear p90 of 5 values is at rank 0.9 x 4 = 3.6,
    # 40 + 0.6 x 10 = 46 ms; the median is the third value, 30 ms.
    base = {"ttfts": [0.1, 0.2], "itls": [[0.01, 0.02], [0.03, 0.04, 0.05]], "errors": ["", ""]}
    agrees = tmp_path / "agrees.json"
    agrees.write_text(json.dumps(base | {"p90_itl_ms": 46.0, "median_itl_ms": 30.0}))
    code, out, _ = _cli(capsys, "histogram", str(agrees))
    assert code == 0
    assert "exact p90 46.00 ms  (the file's own p90_itl_ms: 46.00 ms, agrees)" in out
    assert "exact p50 30.00 ms  (the file's own median_itl_ms: 30.00 ms, agrees)" in out
    differs = tmp_path / "differs.json"
    differs.write_text(json.dumps(base | {"p90_itl_ms": 41.0}))
    code, out, _ = _cli(capsys, "histogram", str(differs))
    assert "exact p90 46.00 ms  (the file's own p90_itl_ms: 41.00 ms: differs" in out


# ---- every number named for what it is -------------------------------------------------------
def _loaded_itl() -> Histogram:
    from itlkit.metrics.readers import read_paths
    from itlkit.metrics.series import histogram_series

    return histogram_series(read_paths([LOADED]), "itl").snapshot(0)


def test_the_fast_mode_is_named_the_fast_mode_with_units():
    """The issue: 'floor 2.63977 ms' named the fast mode (the p25) as the floor, unformatted."""
    # p25 by Prometheus' rule: rank 0.25 x 164,629 inside the (0, 10 ms] bucket of 155,912
    fast = 0.01 * 0.25 * LOADED_COUNT / LOADED_UNDER_10MS
    assert f"{fast * 1e3:.5f}" == "2.63977"
    split = split_modes(_loaded_itl(), floor_seconds=fast, slow_factor=3, reference="fast mode")
    assert split.warning == (
        f"the fast mode {fast * 1e3:.2f} ms and a slow mode at 3× it ({3 * fast * 1e3:.2f} ms) "
        "fall in one bucket (0, 10.00 ms]: the histogram cannot separate them"
    )


def test_the_diagnosis_names_its_fast_mode_not_a_floor():
    from itlkit.diagnosis.evidence import timeline_from_frame
    from itlkit.diagnosis.scoring import diagnose
    from itlkit.metrics.readers import read_paths
    from itlkit.physics.roofline import Deployment

    # Llama 3.2 1B on H100: a floor near 1 ms, so the fast mode is the page's own p25.
    timeline = timeline_from_frame(read_paths([LOADED]))
    d = diagnose(timeline, Deployment.create(model="llama-3.2-1b", gpu="h100-sxm"))
    fast = 0.01 * 0.25 * LOADED_COUNT / LOADED_UNDER_10MS
    assert d.fast_mode_seconds == pytest.approx(fast, rel=1e-9)
    assert d.floor_seconds < fast
    assert d.split_warning.startswith(f"the fast mode {fast * 1e3:.2f} ms")
    assert "2.63977" not in d.split_warning and "floor" not in d.split_warning


def test_a_given_floor_keeps_its_name_with_units(capsys):
    code, out, _ = _cli(capsys, "histogram", str(LOADED), "--floor-seconds", "0.00094")
    assert code == 0
    assert (
        "modes: warning: the floor 940.0 µs and a slow mode at 3× it (2.82 ms) fall in one "
        "bucket (0, 10.00 ms]" in out
    )
