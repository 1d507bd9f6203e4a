"""`sim.client_figures`: a benchmark client's per-request records as a run's measured figures.

Expected values are worked by hand below each case, not taken from the code.
"""

from __future__ import annotations

import pytest

from itlkit.sim.client_figures import (
    client_latencies,
    e2e_seconds,
    length_quantiles,
    replied_figures,
    sharegpt_workload,
)


def test_e2e_is_the_ttft_plus_the_request_s_gaps():
    # 0.1 + 0.02 + 0.03 = 0.15; 0.3 + 0.05 = 0.35; a one-token reply has no gap: 0.2
    e2e = e2e_seconds([0.1, 0.3, 0.2], [[0.02, 0.03], [0.05], []])
    assert e2e.tolist() == pytest.approx([0.15, 0.35, 0.2])


def test_latencies_of_two_requests():
    # TTFT 0.1 and 0.3 s, E2E 0.15 and 0.35 s, 3 and 2 tokens.
    got = client_latencies([0.1, 0.3], [0.15, 0.35], [3, 2])
    # means: TTFT 0.2, E2E 0.25; the ITL mean (0.25 - 0.2) / (2.5 - 1) = 1/30
    assert got["ttft_mean_seconds"] == pytest.approx(0.2)
    assert got["e2e_mean_seconds"] == pytest.approx(0.25)
    assert got["itl_mean_seconds"] == pytest.approx(1 / 30)
    # linear interpolation between the two: p90 = 0.1 + 0.9 * 0.2, p99 = 0.15 + 0.99 * 0.2
    assert got["ttft_p90_seconds"] == pytest.approx(0.28)
    assert got["e2e_p99_seconds"] == pytest.approx(0.348)
    assert got["e2e_p90_seconds"] == pytest.approx(0.33)
    assert got["ttft_p99_seconds"] == pytest.approx(0.298)


def test_length_table_takes_whole_tokens_at_its_levels():
    # 10..50 in steps of 10: the 0.25 quantile is 20, the 0.42 quantile 26.8 (20 + 0.68 * 10),
    # which rounds to 27
    table = length_quantiles([50, 10, 40, 20, 30], (0.0, 0.25, 0.42, 1.0))
    assert table == {"kind": "quantiles", "levels": [0.0, 0.25, 0.42, 1.0],
                     "tokens": [10, 20, 27, 50]}  # fmt: skip


def test_an_empty_reply_is_counted_apart_from_the_latencies():
    # three requests: 3 tokens (TTFT 0.1, gaps 0.02 and 0.03), an empty reply (EOS first: no
    # token, TTFT 0.0, no gap), 2 tokens (TTFT 0.3, gap 0.05)
    result = {
        "output_lens": [3, 0, 2],
        "ttfts": [0.1, 0.0, 0.3],
        "itls": [[0.02, 0.03], [], [0.05]],
        "mean_tpot_ms": 31.7,
        "duration": 2.5,
    }
    got = replied_figures(result)
    assert (got["requests"], got["requests_empty"]) == (2, 1)
    # over the two that replied: TTFT mean 0.2 (the empty one's 0.0 left out), E2E 0.25, and
    # (0.25 - 0.2) / (2.5 - 1) = 1/30
    assert got["ttft_mean_seconds"] == pytest.approx(0.2)
    assert got["itl_mean_seconds"] == pytest.approx(1 / 30)
    # every gap: 0.02, 0.03, 0.05, whose median is 0.03; the file's TPOT as printed
    assert got["itl_per_token_quantiles_seconds"]["0.5"] == pytest.approx(0.03)
    assert got["tpot_mean_seconds"] == pytest.approx(0.0317)


def test_a_sharegpt_workload_runs_an_empty_reply_as_one_token():
    result = {"num_prompts": 4, "input_lens": [10, 20, 30, 40], "output_lens": [0, 5, 9, 2]}
    w = sharegpt_workload(result, levels=(0.0, 1.0), request_rate="inf")
    # outputs 1, 5, 9, 2 (the empty reply ran one token): mean 17 / 4; prompts mean 25
    assert w["output_tokens_mean"] == 4.25 and w["prompt_tokens_mean"] == 25.0
    assert w["output_tokens_distribution"]["tokens"] == [1, 9]
    assert (w["num_prompts"], w["request_rate_per_second"], w["ignore_eos"]) == (4, "inf", False)
