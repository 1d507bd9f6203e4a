"""Real SGLang pages beyond the 0.3.5 example (provenance beside each in tests/data/sglang/).

Readings argued from the pages' own lines before itlkit runs:

`lss-tp4-specdec-priority.prom` (kachowtowmater/lss @ 7a52fff7, MIT; a current dev build, TP4,
speculative decoding, priority scheduling): two ITL series, priority 0 (lines 1296-1321:
cumulative 0 at 4 ms, 364 at 6 ms, 514 at 8 ms; _sum 2.8745173849747516) and priority 10
(lines 1322-1347: 8, 11, 13; _sum 0.05717622285010293). Together 527 observations: 8 in (2, 4]
ms, 367 in (4, 6], 152 in (6, 8]; p50 in (4, 6] ms. The server was idle (running 0 at every
priority, tp_rank 0 only), and a gauge elsewhere holds NaN (`fwd_occupancy`).

`sglang-docs-llama31-8b-{loaded,single}.prom` (SGLang's docs, Apache-2.0): late-2024 pages with
`sglang:time_per_output_token_seconds` and no ITL histogram. What that histogram counted changed
after 0.3.6, so its meaning on these pages is not known: it must not be read as an ITL.
"""

from __future__ import annotations

import pytest
from _paths import DATA

from itlkit.cli import main
from itlkit.metrics.readers import read_paths
from itlkit.metrics.series import histogram_series, scalar_series

LSS = DATA / "sglang" / "lss-tp4-specdec-priority.prom"
DOCS = [DATA / "sglang" / f"sglang-docs-llama31-8b-{k}.prom" for k in ("loaded", "single")]


def test_the_current_dev_page_reads_both_priorities_itl():
    frame = read_paths([LSS])
    itl = histogram_series(frame, "itl").snapshot(0)
    assert itl.count == 527
    assert itl.sum == pytest.approx(2.8745173849747516 + 0.05717622285010293, rel=1e-15)
    bounds = list(itl.upper_bounds[:5])
    assert bounds == [0.002, 0.004, 0.006, 0.008, 0.010]
    assert list(itl.bucket_counts[:5]) == [0, 8, 367, 152, 0]
    p50 = itl.locate(0.5)
    assert (p50.bucket_lower, p50.bucket_upper) == (0.004, 0.006)
    assert set(frame["model_name"].astype(str)) == {"model-a"}
    assert scalar_series(frame, "running").tolist() == [0.0]


def test_the_histogram_command_reads_the_dev_page(capsys):
    assert main(["histogram", str(LSS)]) == 0
    out = capsys.readouterr().out
    assert "sglang:inter_token_latency_seconds (itl)" in out
    assert "count 527" in out


@pytest.mark.parametrize("page", DOCS, ids=["loaded", "single"])
def test_the_docs_pages_tpot_is_never_read_as_an_itl(page, capsys):
    for command in (["histogram", str(page)], ["diagnose", str(page), "--model", "llama-3.1-8b"]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert "sglang:time_per_output_token_seconds but no sglang:inter_token_latency" in err
        assert "an unknown meaning" in err and "not read as an inter-token latency" in err
