"""SGLang's pages written from a simulation, and the diagnosis of SGLang's prefill stall.

The exported pages follow SGLang's metric code (observability/metrics_collector.py @ 44cedc2b:
names, default buckets, labels; copied in tests/data/sglang/metric-definitions.md). The stall's
numbers are derived by hand below; the simulated incidents' causes are known by construction
(the simulator ran SGLang's schedule), and the diagnosis must find them from the pages alone.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from itlkit.cli import main
from itlkit.diagnosis.fingerprint import time_above
from itlkit.diagnosis.scoring import cause_score
from itlkit.metrics.histogram import Histogram
from itlkit.metrics.readers import read_scrape_folder
from itlkit.metrics.series import histogram_series
from itlkit.sim.export_sglang import export_sglang_scrapes
from itlkit.sim.scheduler import simulate
from itlkit.sim.sglang import sglang_settings
from itlkit.sim.workload import make_workload

GIB = 2**30


def _step(*, decode_tokens, prefill_tokens, kv_tokens):
    return 0.020 + 1e-5 * prefill_tokens + 1e-3 * decode_tokens


def _hand_traced(tmp_path):
    # test_engine_sglang.py's trace: A-D (100-token prompts, 50 tokens out) at 0, E (6,000
    # tokens, 2 out) at 0.1 s; chunk 2,048; prefill batches alone
    settings = sglang_settings(gpu_memory_bytes=80 * GIB, given={
        "chunked_prefill_size": 2048, "max_running_requests": 16})  # fmt: skip
    w = make_workload(arrival_seconds=[0, 0, 0, 0, 0.1], prompt_tokens=[100] * 4 + [6000],
                      output_tokens=[50] * 4 + [2])  # fmt: skip
    r = simulate(w, step_function=_step, kv_capacity_tokens=100_000,
                 config=settings.scheduler_config())  # fmt: skip
    export_sglang_scrapes(r, tmp_path, interval_seconds=0.5, model_name="m")
    return r, read_scrape_folder(tmp_path, metrics=("itl", "forward_seconds", "prompt_tokens"))


def test_the_exported_pages_hold_sglangs_families_as_its_code_writes_them(tmp_path):
    r, frame = _hand_traced(tmp_path)
    last = sorted(tmp_path.glob("metrics-*.prom"))[-1].read_text()
    # SGLang's ITL buckets: 2 ms steps to 10 ms, ... 8 s, then +Inf
    assert 'sglang:inter_token_latency_seconds_bucket{le="0.002",model_name="m"}' in last
    assert 'sglang:inter_token_latency_seconds_bucket{le="8.0",model_name="m"}' in last
    # the scheduler's families carry engine_type and the ranks; rank 0 of a unified server
    assert ('sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",'
            'pp_rank="0",tp_rank="0"}') in last  # fmt: skip
    itl = histogram_series(frame, "itl")
    # one observation per token after the first: 4 x 49 + 1
    assert itl.counts[-1] == itl.cumulative_counts[-1][-1] == 4 * 49 + 1
    assert itl.sums[-1] == pytest.approx(r.itl_seconds.sum(), rel=1e-12)


def test_the_forward_mode_counters_hold_the_prefill_batches_by_hand(tmp_path):
    _, frame = _hand_traced(tmp_path)
    rows = frame[frame["metric"] == "forward_seconds"]
    last = rows[rows["timestamp_seconds"] == rows["timestamp_seconds"].max()]
    by_mode = {labels.split("category=")[1].split(",")[0]: v
               for labels, v in zip(last["labels"], last["value"], strict=True)}  # fmt: skip
    # prefill alone: step 0 (400 tokens, 24 ms), E's three batches (40.48, 40.48, 39.04 ms)
    assert by_mode["forward_extend"] == pytest.approx(0.024 + 2 * 0.04048 + 0.03904, abs=1e-12)
    assert by_mode["forward_mixed"] == 0
    # decode steps: every other step; 49 decode steps for A-D with 4, 5 or 1 streams
    assert by_mode["forward_decode"] > 49 * 0.021


def test_the_time_above_a_cut_is_counted_at_bucket_midpoints():
    # buckets (0, 10 ms] 100, (10, 25] 50, (25, 50] 10, (50 ms, 1 s] 4, (1, 2] 2, (2 s, +Inf) 1
    h = Histogram.create(upper_bounds=[0.01, 0.025, 0.05, 1.0, 2.0, math.inf],
                         cumulative_counts=np.cumsum([100, 50, 10, 4, 2, 1]), sum=10.0)  # fmt: skip
    # a cut at 40 ms takes the buckets wholly above it: 4 x 0.525 + 2 x 1.5 + 1 x 2 (+Inf: its
    # lower bound) = 2.1 + 3 + 2 = 7.1 s; the (25, 50] bucket straddles the cut and is left out
    assert time_above(h, 0.04) == pytest.approx(7.1)
    assert time_above(h, 0.05) == pytest.approx(7.1)
    assert time_above(h, 0.025) == pytest.approx(7.1 + 10 * 0.0375)


@pytest.mark.parametrize(
    ("gaps", "preemptions", "score"),
    [
        # counter 0.55 + gaps 0.3 (5 or more) + correlation 0.15 x 1, gate 1 up to 4 per preemption
        (15, 15, 1.0),
        (60, 15, 1.0),
        # 1,233 long gaps against 15 preemptions: 82 each, past the gate's 40: none are theirs
        (1233, 15, 0.0),
        # 22 per preemption: halfway down the gate from 4 to 40
        (330, 15, 0.5),
    ],
)
def test_preemptions_explain_at_most_a_few_long_gaps_each(gaps, preemptions, score):
    fp = SimpleNamespace(engine="sglang", preemptions=preemptions, gap_observations=gaps,
                         gap_correlation=1.0, gaps_per_preemption=gaps / preemptions)  # fmt: skip
    assert cause_score("preemption", fp) == pytest.approx(score)


def _incident(tmp_path, *flags):
    # 3 prompts a second of ~6,000 tokens (lognormal) into Llama-3.1-8B on one H100: the prompts
    # need ~60% of the GPU; SGLang's prefill batches run alone and hold every stream
    out = tmp_path / "pages"
    code = main(["simulate", "--engine", "sglang", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                 "--rate", "3", "--duration", "90", "--prompt-tokens", "lognormal:6000:0.8",
                 "--output-tokens", "300", "--seed", "3", "--prom-out", str(out),
                 "--scrape-interval", "5", *flags])  # fmt: skip
    assert code == 0
    return out


def test_a_simulated_sglang_stall_is_named_with_sglangs_fixes(tmp_path, capsys):
    pages = _incident(tmp_path)
    capsys.readouterr()
    assert main(["diagnose", str(pages), "--gpu", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "Most likely: prefill batches stall the decodes" in out
    assert "preemption (KV cache full): score 0.00" in out  # a few retractions, not the gaps
    assert "--enable-mixed-chunk is off (its default): the decodes wait" in out
    assert "- --enable-mixed-chunk: the decodes ride in each prefill batch" in out
    assert "lower --chunked-prefill-size from 8,192 to 2,048" in out
    assert "max_num_batched_tokens" not in out.split("1. prefill")[1].split("2. ")[0]


def test_with_mixed_chunks_the_report_says_so_and_does_not_propose_them(tmp_path, capsys):
    pages = _incident(tmp_path, "--enable-mixed-chunk")
    capsys.readouterr()
    assert main(["diagnose", str(pages), "--gpu", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "--enable-mixed-chunk is on: the decodes ride in the prefill batches" in out
    assert "- --enable-mixed-chunk:" not in out


def test_the_predicted_prefill_load_matches_the_gpu_time_the_pages_measure(tmp_path):
    # two routes to the GPU's share of time in prefill batches: the prompt-token counter times
    # the step model's cost per token (`prefill_load`), and SGLang's device timer on the pages
    # (forward_extend seconds over the period): with prefill alone they must agree
    from itlkit.diagnosis.evidence import timeline_from_frame
    from itlkit.diagnosis.scoring import diagnose
    from itlkit.physics.roofline import Deployment

    t = timeline_from_frame(read_scrape_folder(_incident(tmp_path)))
    d = diagnose(t, Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"),
                 max_num_batched_tokens=8192)  # fmt: skip
    fp = d.fingerprint
    assert 0.4 < fp.prefill_alone_share < 0.9 and fp.mixed_share == 0
    assert fp.prefill_load == pytest.approx(fp.prefill_alone_share, abs=0.05)


def test_a_light_load_stalls_too_little_to_be_named(tmp_path, capsys):
    # one 300-token prompt a second: each prefill batch still holds the streams, for ~10 ms a
    # second (~1% of their time), under the 2% the stall needs
    out = tmp_path / "pages"
    assert main(["simulate", "--engine", "sglang", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                 "--rate", "1", "--duration", "120", "--prompt-tokens", "300",
                 "--output-tokens", "200", "--seed", "1", "--prom-out", str(out),
                 "--scrape-interval", "5"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["diagnose", str(out), "--gpu", "h100-sxm"]) == 0
    text = capsys.readouterr().out
    assert "Most likely" not in text and "prefill batches stall the decodes: score 0.00" in text


def test_the_bundled_sglang_incident_replays_sglangs_schedule_and_prices_mixed_chunks():
    # the what-if rebuilds the incident's traffic and replays it under SGLang's own schedule
    # (prefill batches alone, its 8,192-token chunk on an H100): the replay must land on what
    # was observed before a knob means anything; mixed chunks at a 2,048-token budget then put
    # the decodes in every step, so no stream waits a whole 6,000-token prompt
    from dataclasses import replace as with_

    from itlkit.bundled import scenario_folder
    from itlkit.diagnosis.evidence import timeline_from_frame
    from itlkit.diagnosis.scoring import diagnose
    from itlkit.diagnosis.whatif import calibrate, current_setting, predict, scheduler_config
    from itlkit.physics.roofline import Deployment

    t = timeline_from_frame(read_scrape_folder(scenario_folder("sglang_prefill_stall")))
    d = diagnose(t, Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"))
    assert d.fingerprint.max_num_batched_tokens == 8192  # SGLang's default chunk on an H100
    now = current_setting(d)
    assert now.prefill_alone and "prefill batches alone" in now.label
    assert scheduler_config(now).prefill_only_steps
    assert not scheduler_config(with_(now, prefill_alone=False)).prefill_only_steps
    speed = calibrate(d)
    base = predict(d, now, speed=speed)
    mixed = predict(d, with_(now, prefill_alone=False, max_num_batched_tokens=2048), speed=speed)
    assert not base.replay.poor, base.replay.line
    assert mixed.itl_quantile(0.99) < 0.5 * base.itl_quantile(0.99)


def test_notebook_04_offers_mixed_chunks_only_for_sglang_metrics():
    from itlkit.widgets.postmortem import PostmortemExplorer

    e = PostmortemExplorer(scenario="sglang_prefill_stall")
    assert e.whatif_mixed.layout.display == ""
    e.source.value = "prefill_interference"
    e.load.click()
    assert e.whatif_mixed.layout.display == "none"


def test_simulate_writes_sglangs_openmetrics_beside_its_pages(tmp_path):
    # one run, two exports in SGLang's families: the OpenMetrics file's last point of every
    # series is the last page's value (both cover the same scrape times)
    from itlkit.metrics.readers import read_paths

    om = tmp_path / "sglang.om"
    pages = _incident(tmp_path, "--openmetrics-out", str(om))
    text = om.read_text()
    assert text.endswith("# EOF\n") and "vllm:" not in text and "sglang_" not in text
    from_om, from_pages = read_paths([om]), read_scrape_folder(pages)
    om_last, page_last = (frame[frame["timestamp_seconds"] == frame["timestamp_seconds"].max()]
                          for frame in (from_om, from_pages))  # fmt: skip
    assert om_last["timestamp_seconds"].iloc[0] == page_last["timestamp_seconds"].iloc[0]
    for family in ("sglang:inter_token_latency_seconds", "sglang:num_retracted_requests_total",
                   "sglang:gpu_execution_seconds_total"):  # fmt: skip
        a = om_last[om_last["family"] == family]["value"].sort_values().to_numpy()
        b = page_last[page_last["family"] == family]["value"].sort_values().to_numpy()
        assert a.size == b.size > 0 and (a == b).all(), family
