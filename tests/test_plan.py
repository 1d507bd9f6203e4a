"""`itlkit plan`: pruning that never drops a feasible candidate, the ranking and frontier
derived by hand, the same answer from one process or several, a cache that resumes.

Hand numbers from shared/spec/worked-example.txt: Llama 3.1 8B streams 8,030,261,248 params x
2 B per step (4.79 ms on an H100 SXM at 3.35 TB/s; 7.88 ms on an A100 80GB at 2.039 TB/s, its
datasheet) and multiplies 2 x 8.03e9 FLOP per token (989.4 TFLOP/s dense BF16 on the H100).
"""

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.physics.calibration import UNCALIBRATED
from itlkit.physics.roofline import step_coefficients
from itlkit.plan.evaluate import Outcome, evaluate, replica_workload
from itlkit.plan.frontier import knob_effects, nothing_meets, pareto, ranked
from itlkit.plan.prices import PriceTable
from itlkit.plan.prune import deployment_of, prune_reason, ttft_floor_seconds
from itlkit.plan.space import Candidate, Slo, Space, Traffic
from itlkit.plan.sweep import Result, run_sweep
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.lengths import Uniform

PARAMS = 8_030_261_248
PRICES = PriceTable({"h100-sxm": 4.0, "a100-80gb-sxm": 2.0, "l40s": 1.0}, {}, "test", "test")
MODEL = "llama-3.1-8b"


def _candidate(gpu="h100-sxm", tp=1, replicas=1, budget=8192, seqs=256):
    return Candidate(gpu, tp, replicas, "bf16", "bf16", budget, seqs)


def test_the_weight_read_prunes_a_gpu_too_slow_for_the_itl_target():
    traffic = Traffic(1.0, 500, 100, duration_seconds=10)
    workload = replica_workload(traffic, 1)
    slo = Slo(itl_p99_seconds=0.007)
    # A100: 2 x 8.03e9 B / 2.039e12 B/s = 7.88 ms > 7 ms; H100: 4.79 ms
    reason = prune_reason(_candidate("a100-80gb-sxm"), MODEL, slo, workload)
    assert reason and "7.88 ms" in reason and "7.00 ms" in reason
    assert prune_reason(_candidate("h100-sxm"), MODEL, slo, workload) is None


def test_the_prompts_gemms_prune_a_ttft_target_no_gpu_could_meet():
    # 8,000-token prompts: 8,000 x 2 x 8.03e9 FLOP / 989.4 TFLOP/s = 0.130 s at the H100's peak
    floor = 8000 * 2 * PARAMS / 989.4e12
    workload = replica_workload(Traffic(1.0, 8000, 10, duration_seconds=10), 1)
    dep = deployment_of(_candidate(), MODEL)
    assert ttft_floor_seconds(dep, [8000])[0] == pytest.approx(floor, rel=1e-9)
    assert prune_reason(_candidate(), MODEL, Slo(ttft_p99_seconds=0.12), workload)
    assert prune_reason(_candidate(), MODEL, Slo(ttft_p99_seconds=0.14), workload) is None


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpu=st.sampled_from(["h100-sxm", "a100-80gb-sxm", "l40s"]),
    tp=st.sampled_from([1, 2]),
    rate=st.floats(0.5, 6.0),
    prompt=st.integers(200, 6000),
    itl_scale=st.floats(0.5, 1.5),
    ttft_scale=st.floats(0.5, 1.5),
    tpot_scale=st.floats(0.5, 1.5),
    spec_k=st.sampled_from([0, 3]),
    seed=st.integers(0, 1000),
)
def test_pruning_never_drops_a_candidate_the_simulation_would_accept(
    gpu, tp, rate, prompt, itl_scale, ttft_scale, tpot_scale, spec_k, seed
):
    # targets drawn around each bound, so that both sides of it are tried; the simulation
    # (uncalibrated roofline, and the bundled calibration's slower steps alike) must then miss
    # n-gram drafts all accepted: the most speculation can ever do for the TPOT bound
    traffic = Traffic(rate, Uniform(prompt // 2, prompt), 64, duration_seconds=15, seed=seed,
                      spec_acceptance=1.0, spec_method="ngram")  # fmt: skip
    c = Candidate(gpu, tp, 1, "bf16", "bf16", 8192, 256, spec_k=spec_k)
    workload = replica_workload(traffic, 1)
    try:
        dep = deployment_of(c, MODEL)
    except ConfigError:
        return
    read = step_coefficients(dep).weight_read_seconds
    uncached = workload.prompt_tokens - workload.cached_prompt_tokens
    ttft = float(np.quantile(ttft_floor_seconds(dep, uncached), 0.99, method="inverted_cdf"))
    slo = Slo(itl_p99_seconds=read * itl_scale, ttft_p99_seconds=ttft * ttft_scale,
              tpot_p99_seconds=read / (spec_k + 1) * tpot_scale)  # fmt: skip
    if prune_reason(c, MODEL, slo, workload) is None:
        return
    outcome = evaluate(c, MODEL, traffic, UNCALIBRATED)
    assert not Result(c, 1.0, outcome=outcome).meets(slo)


def test_an_overloaded_candidate_fails_its_ttft_by_the_requests_it_never_served():
    # 50 prompts/s of 4,000 tokens on one L40S: each prompt's GEMMs alone take 4,000 x 2 x
    # 8.03e9 FLOP / 362 TFLOP/s = 0.18 s, so at most ~6 prompts/s are served: most of the
    # 1,000 requests get no token within the 4 windows the run is given
    traffic = Traffic(50.0, 4000, 50, duration_seconds=20)
    outcome = evaluate(_candidate("l40s"), MODEL, traffic, UNCALIBRATED)
    assert outcome.ttft_p99_seconds == math.inf


def _price_file(folder):
    """PRICES as a price table file (the format `--prices` reads)."""
    rows = {g: {"per_gpu_hour": p, "source": "test"} for g, p in PRICES.per_gpu_hour.items()}
    path = folder / "prices.json"
    path.write_text(json.dumps({"date": "test", "prices": rows}))
    return path


def _result(gpu, replicas, cost, itl, ttft, tokens=1000.0):
    return Result(_candidate(gpu, replicas=replicas), cost, outcome=Outcome(itl, ttft, tokens))


def test_the_best_and_the_frontier_by_hand():
    slo = Slo(itl_p99_seconds=0.05, ttft_p99_seconds=1.0)
    results = [
        _result("l40s", 1, 1.0, 0.20, 5.0),  # cheapest, misses both
        _result("a100-80gb-sxm", 1, 2.0, 0.045, 0.9),  # meets: the best per hour
        _result("h100-sxm", 1, 4.0, 0.030, 0.3, tokens=3000.0),  # meets: best per token
        _result("h100-sxm", 2, 8.0, 0.035, 0.2),  # meets, dearest, slower ITL than 4.0's
    ]
    assert [r.cost_per_hour for r in ranked(results, slo, "cost_per_hour")] == [2.0, 4.0, 8.0]
    # $/Mtok: 2 / (1,000 x 3,600 / 1e6) = 0.556; 4 / (3,000 x 3,600 / 1e6) = 0.370; 8 -> 2.22
    per_token = ranked(results, slo, "cost_per_million_tokens")
    assert [r.cost_per_hour for r in per_token] == [4.0, 2.0, 8.0]
    # cost against ITL p99: each cheaper point must be slower; 8.0's 35 ms beats no cheaper one,
    # nor does a 16.0 that only ties 4.0's 30 ms
    tie = _result("h100-sxm", 4, 16.0, 0.030, 0.1)
    assert [r.cost_per_hour for r in pareto([*results, tie], "itl_p99")] == [1.0, 2.0, 4.0]
    assert [r.cost_per_hour for r in pareto(results, "ttft_p99")] == [1.0, 2.0, 4.0, 8.0]
    effects = knob_effects(results[2], results)
    assert {(e.knob, e.value) for e in effects} == {("gpu", "l40s"), ("gpu", "a100-80gb-sxm"),
                                                    ("replicas", 2)}  # fmt: skip


def test_no_candidate_meeting_names_the_binding_constraint():
    slo = Slo(itl_p99_seconds=0.01, ttft_p99_seconds=1.0)
    results = [_result("h100-sxm", 1, 4.0, 0.015, 0.3), _result("l40s", 1, 1.0, 0.20, 0.5)]
    text = nothing_meets(results, slo)
    assert "ITL P99 binds" in text and "15.00 ms against 10.00 ms (1.50x" in text


SPACE = Space(gpus=("h100-sxm", "a100-80gb-sxm"), tps=(1, 2), replicas=(1, 2),
              max_num_batched_tokens=(2048, 8192))  # fmt: skip
TRAFFIC = Traffic(6.0, 1000, 200, duration_seconds=30)
SLO = Slo(itl_p99_seconds=0.04, ttft_p99_seconds=1.0)


def _sweep(**kw):
    return run_sweep(SPACE, model=MODEL, traffic=TRAFFIC, slo=SLO, prices=PRICES,
                     calibration=UNCALIBRATED, calibration_name="none", **kw)  # fmt: skip


def test_one_process_and_a_pool_give_the_same_answer():
    alone, pool = _sweep(workers=1), _sweep(workers=2)
    assert [r.outcome for r in alone.results] == [r.outcome for r in pool.results]
    assert alone.simulated == pool.simulated > 0


def test_an_interrupted_sweep_resumes_from_its_cache(tmp_path):
    cache = tmp_path / "simulations.jsonl"
    first = _sweep(workers=1, cache=cache)
    lines = cache.read_text().splitlines()
    assert len(lines) == first.simulated
    # an interruption: half the lines kept, the next cut mid-write
    cache.write_text("\n".join(lines[: len(lines) // 2]) + "\n" + lines[-1][:20])
    again = _sweep(workers=1, cache=cache)
    assert again.cached == len(lines) // 2
    assert again.simulated == first.simulated - len(lines) // 2
    assert [r.outcome for r in again.results] == [r.outcome for r in first.results]
    assert _sweep(workers=1, cache=cache).simulated == 0


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--gpus", "b300"], "no price for GPU 'b300'"),
        (["--itl-p99", "0.0001"], "no candidate meets the SLO"),
        (["--tp", "0"], "TP must be whole numbers >= 1"),
    ],
)
def test_bad_plans_are_one_line(tmp_path, capsys, flags, says):
    prices = _price_file(tmp_path)
    code = main(["plan", "--rate", "1", "--duration", "10", "--prices", str(prices),
                 "--cache", "none", "--ttft-p99", "5", *flags])  # fmt: skip
    assert code in (1, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_the_cli_prints_the_best_and_writes_json(tmp_path, capsys):
    prices = _price_file(tmp_path)
    args = ["plan", "--rate", "4", "--duration", "20", "--prices", str(prices), "--cache",
            str(tmp_path / "cache"), "--itl-p99", "0.05", "--ttft-p99", "1",
            "--gpus", "h100-sxm,a100-80gb-sxm", "--tp", "1,2", "--calibration", "none"]  # fmt: skip
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["candidates"] == 4 and out["best"][0]["meets"]
    costs = [row["cost_per_hour"] for row in out["best"]]
    assert costs == sorted(costs)
    assert not math.isnan(out["best"][0]["itl_p99_seconds"])
    assert main(args) == 0
    assert "from the cache" in capsys.readouterr().out


def test_the_bundled_prices_carry_their_sources_and_read_as_derived():
    from itlkit.plan.prices import read_prices

    prices = read_prices()
    # AWS p4de.24xlarge, 8 x A100 80GB, $27.44705 per instance-hour (its source's row) / 8
    assert prices.price("a100-80gb-sxm") == pytest.approx(27.44705 / 8, rel=1e-4)
    assert prices.price("h100-sxm") == pytest.approx(55.04 / 8)
    assert all("@" in s or "docs." in s or "pricing" in s for s in prices.sources.values())
    with pytest.raises(ConfigError, match="no price for GPU 'mi355x'"):
        prices.price("mi355x")


def test_headroom_is_what_is_left_under_each_target():
    slo = Slo(itl_p99_seconds=0.05, ttft_p99_seconds=1.0)
    # 45 ms of a 50 ms target leaves 10%; 0.3 s of 1 s, 70%
    assert _result("h100-sxm", 1, 4.0, 0.045, 0.3).margins(slo) == pytest.approx(
        {"itl_p99": 0.1, "ttft_p99": 0.7}
    )


def test_disaggregated_pairs_cost_twice_the_gpus_and_keep_chunks_off_the_decodes():
    c = Candidate("h100-sxm", 2, 3, "bf16", "bf16", 8192, 256, disaggregated=True)
    assert c.gpus == 2 * 3 * 2  # a prefill and a decode instance of TP 2, three times
    traffic = Traffic(4.0, 3000, 200, duration_seconds=30)
    plain = evaluate(_candidate(), MODEL, traffic, UNCALIBRATED)
    apart = evaluate(Candidate("h100-sxm", 1, 1, "bf16", "bf16", 8192, 256, True), MODEL,
                     traffic, UNCALIBRATED)  # fmt: skip
    # 3,000-token prompts in the decode steps make its ITL p99 a chunked step (~100 ms); apart,
    # the decode instance's steps read only weights and KV (the floor, a few ms)
    assert apart.itl_p99_seconds < plain.itl_p99_seconds / 3


def test_a_replayed_workload_is_dealt_round_robin_to_the_replicas():
    from itlkit.sim.workload import make_workload

    w = make_workload(arrival_seconds=np.arange(10) * 0.5, prompt_tokens=np.arange(10) + 100,
                      output_tokens=20)  # fmt: skip
    traffic = Traffic(0.0, None, None, duration_seconds=5.0, replay=w, replay_name="w.csv")
    share = replica_workload(traffic, 3)
    assert share.prompt_tokens.tolist() == [100, 103, 106, 109]
    assert share.arrival_seconds.tolist() == [0.0, 1.5, 3.0, 4.5]
    assert "w.csv" in traffic.key()


def test_the_cli_plans_a_replayed_trace_and_refuses_two_traffics(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_seconds,prompt_tokens,output_tokens\n"
                     + "".join(f"{i * 0.25},{500 + i},{100}\n" for i in range(60)))  # fmt: skip
    common = ["plan", "--itl-p99", "0.05", "--ttft-p99", "1", "--cache", "none",
              "--calibration", "none", "--json"]  # fmt: skip
    assert main([*common, "--workload", str(trace)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"] and out["best"][0]["meets"]
    assert main([*common, "--workload", str(trace), "--rate", "2"]) == 2
    assert "one of them" in capsys.readouterr().err


def test_the_uncertainty_is_the_calibrations_held_out_error():
    from itlkit.bundled import bundled_path
    from itlkit.physics.calibration import read_calibration
    from itlkit.plan.evaluate import p99_uncertainty

    doc = json.loads(bundled_path("calibration.json").read_text())
    bundled = p99_uncertainty(read_calibration(bundled_path("calibration.json")))
    assert bundled == {"itl_p99": doc["leave_one_out"]["itl_token_p0.99"],
                       "ttft_p99": doc["leave_one_out"]["ttft_p99_seconds"]}  # fmt: skip
    assert p99_uncertainty(UNCALIBRATED) == {}


def test_engines_and_speculation_widen_the_space():
    space = Space(gpus=("h100-sxm",), engines=("vllm", "sglang"), spec_ks=(0, 3),
                  disaggregated=(False, True))  # fmt: skip
    kinds = {(c.engine, c.spec_k, c.disaggregated) for c in space.candidates()}
    # SGLang runs neither speculative nor disaggregated here: 4 vLLM kinds and SGLang plain
    assert kinds == {("vllm", 0, False), ("vllm", 3, False), ("vllm", 0, True),
                     ("vllm", 3, True), ("sglang", 0, False)}  # fmt: skip
    with pytest.raises(ConfigError, match="unknown engine 'trt'"):
        Space(gpus=("h100-sxm",), engines=("trt",)).candidates()


def test_an_sglang_candidate_runs_sglangs_schedule_and_a_speculative_one_verifies():
    traffic = Traffic(2.0, 6000, 100, duration_seconds=30, spec_acceptance=0.8)
    vllm = evaluate(_candidate(budget=2048), MODEL, traffic, UNCALIBRATED)
    sglang = evaluate(Candidate("h100-sxm", 1, 1, "bf16", "bf16", 2048, 256, engine="sglang"),
                      MODEL, traffic, UNCALIBRATED)  # fmt: skip
    # 6,000-token prompts in 2,048-token batches that run alone: a stream waits out three
    # batches back to back (~3 x 70 ms) where vLLM's mixed steps delay it one step at a time
    assert sglang.itl_p99_seconds > 2 * vllm.itl_p99_seconds
    # short prompts and free (n-gram) drafts: each step emits ~2.95 tokens (1 + .8 + .64 +
    # .512) at light load, so a token takes about a step / 2.95: under half the plain TPOT
    light = Traffic(1.0, 300, 200, duration_seconds=30, spec_acceptance=0.8, spec_method="ngram")
    plain = evaluate(_candidate(), MODEL, light, UNCALIBRATED)
    spec = evaluate(Candidate("h100-sxm", 1, 1, "bf16", "bf16", 8192, 256, spec_k=3), MODEL,
                    light, UNCALIBRATED)  # fmt: skip
    assert spec.tpot_p99_seconds < plain.tpot_p99_seconds / 2


def test_a_tpot_target_prunes_by_the_tokens_a_step_can_emit():
    workload = replica_workload(Traffic(1.0, 500, 100, duration_seconds=10), 1)
    slo = Slo(tpot_p99_seconds=0.003)
    # H100: 4.79 ms of weights a step; one token a step cannot beat 3 ms, four (k = 3) can
    # (4.79 / 4 = 1.20 ms), so only the plain candidate is pruned
    assert "4.79 ms a token" in prune_reason(_candidate(), MODEL, slo, workload)
    speculative = Candidate("h100-sxm", 1, 1, "bf16", "bf16", 8192, 256, spec_k=3)
    assert prune_reason(speculative, MODEL, slo, workload) is None
    # ... but not 1 ms: 4.79 / 4 = 1.20 ms a token at best
    assert "1.20 ms a token" in prune_reason(speculative, MODEL, Slo(tpot_p99_seconds=0.001),
                                             workload)  # fmt: skip
    result = Result(_candidate(), 1.0, outcome=Outcome(0.01, 0.1, 1.0, tpot_p99_seconds=0.0045))
    assert result.misses(slo) == pytest.approx({"tpot_p99": 1.5})


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.floats(2.0, 40.0),
    target=st.floats(0.2, 3.0),
    gpu=st.sampled_from(["l40s", "a100-80gb-sxm"]),
)
def test_stopping_early_never_changes_a_verdict(rate, target, gpu):
    # A run stops only once 1% of its requests have waited past the target: their TTFTs are
    # above it whatever comes later, so the full run misses the target too
    traffic = Traffic(rate, 2000, 64, duration_seconds=20)
    early = evaluate(_candidate(gpu), MODEL, traffic, UNCALIBRATED, stop_at_ttft_seconds=target)
    full = evaluate(_candidate(gpu), MODEL, traffic, UNCALIBRATED)
    if early.stopped_at_ttft_seconds is not None:
        assert full.ttft_p99_seconds > target
    else:
        assert early == full


def test_an_overloaded_candidate_stops_early_and_its_cache_answers_tighter_targets_only(tmp_path):
    traffic = Traffic(50.0, 4000, 50, duration_seconds=20)
    stopped = evaluate(_candidate("l40s"), MODEL, traffic, UNCALIBRATED, stop_at_ttft_seconds=1.0)
    assert stopped.stopped_at_ttft_seconds == 1.0 and stopped.ttft_p99_seconds == math.inf
    space = Space(gpus=("l40s",))
    kw = dict(model=MODEL, traffic=traffic, prices=PRICES, calibration=UNCALIBRATED,
              calibration_name="none", workers=1, cache=tmp_path / "c.jsonl")  # fmt: skip
    assert run_sweep(space, slo=Slo(ttft_p99_seconds=1.0), **kw).simulated == 1
    assert run_sweep(space, slo=Slo(ttft_p99_seconds=0.5), **kw).cached == 1
    assert run_sweep(space, slo=Slo(ttft_p99_seconds=5.0), **kw).simulated == 1


def test_the_stop_rule_by_hand():
    from types import SimpleNamespace

    from itlkit.plan.evaluate import ttft_missed

    # 100 requests, one every 0.1 s; at t = 10 s those ready before 9 s (91 of them, 0.0 to 9.0)
    # have waited past a 1 s target unless served: 89 first tokens leave at least 2 late, over
    # 1% of 100; 90 leave at least 1, not over it
    stop = ttft_missed(1.0, 100)
    arrivals = np.round(np.arange(100) * 0.1, 10)
    assert stop(SimpleNamespace(t=10.0, ready_array=arrivals, first_tokens=89))
    assert not stop(SimpleNamespace(t=10.0, ready_array=arrivals, first_tokens=90))
    assert ttft_missed(None, 100) is None


def test_a_rate_profile_is_split_over_the_replicas():
    from itlkit.sim.arrivals import RateProfile

    # 2/s for 100 s then 20/s for 100 s: ~2,200 requests in all, ~1,100 for each of 2 replicas,
    # ten times as many in the second half as in the first
    profile = RateProfile((0.0, 100.0), (2.0, 20.0))
    traffic = Traffic(20.0, 500, 50, duration_seconds=200, profile=profile, seed=3)
    share = replica_workload(traffic, 2)
    first = (share.arrival_seconds < 100).sum()
    assert share.num_requests == pytest.approx(1100, rel=0.1)
    assert (share.num_requests - first) / first == pytest.approx(10, rel=0.25)
    assert "profile=" in traffic.key()


def test_an_e2e_target_counts_unfinished_requests_as_missing_it():
    slo = Slo(e2e_p99_seconds=2.0)
    # 200 output tokens at ~5 ms a step: ~1 s arrival to last token at light load
    light = evaluate(_candidate(), MODEL, Traffic(1.0, 500, 200, duration_seconds=20),
                     UNCALIBRATED)  # fmt: skip
    assert 0.9 < light.e2e_p99_seconds < 2.0 and Result(_candidate(), 1.0, outcome=light).meets(slo)
    overloaded = evaluate(_candidate("l40s"), MODEL, Traffic(50.0, 4000, 50, duration_seconds=20),
                          UNCALIBRATED)  # fmt: skip
    assert overloaded.e2e_p99_seconds == math.inf


def test_the_cli_takes_one_traffic_and_a_rate_profile(capsys, tmp_path):
    prices = _price_file(tmp_path)
    common = ["plan", "--ttft-p99", "2", "--e2e-p99", "10", "--cache", "none", "--calibration",
              "none", "--prices", str(prices), "--duration", "30", "--json"]  # fmt: skip
    assert main([*common, "--rate-profile", "0:1,15:4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slo"]["e2e_p99_seconds"] == 10 and out["best"]
    assert main([*common, "--rate-profile", "0:1,15:4", "--rate", "3"]) == 2
    assert "one of them" in capsys.readouterr().err


def test_an_incidents_traffic_plans_its_fix(capsys, tmp_path):
    # The bundled prefill-interference incident (data/scenarios/prefill_interference/
    # scenario.json): 4,096-token prompts at 2.5/s, 256 tokens out. Its traffic comes back
    # from the counters: those lengths, and 2.5 arrivals/s on average over the windows
    from itlkit.bundled import scenario_folder
    from itlkit.diagnosis.evidence import timeline_from_frame
    from itlkit.diagnosis.whatif import incident_traffic
    from itlkit.metrics.readers import read_paths

    folder = scenario_folder("prefill_interference")
    seen = incident_traffic(timeline_from_frame(read_paths([folder])), context_tokens=1.0)
    assert (seen.prompt_tokens, seen.output_tokens) == (4096, 256)
    assert np.mean(seen.profile.rates_per_second) == pytest.approx(2.5, rel=0.15)
    args = ["plan", "--incident", str(folder), "--itl-p99", "0.05", "--ttft-p99", "2",
            "--max-num-batched-tokens", "512,2048", "--cache", "none", "--calibration", "none",
            "--prices", str(_price_file(tmp_path)), "--json"]  # fmt: skip
    assert main(args) == 0
    best = json.loads(capsys.readouterr().out)["best"][0]
    # the diagnosis' fix, found by the planner: the same H100 with a smaller token budget
    assert (
        best["candidate"]["gpu"] == "h100-sxm"
        and best["candidate"]["max_num_batched_tokens"] == 512
    )


def test_prefill_instances_serve_prompts_side_by_side():
    from itlkit.sim.scheduler import _disaggregated_ready_seconds, constant_step_function
    from itlkit.sim.workload import make_workload

    # three prompts of one chunk each at t = 0, a prefill chunk taking 1 s, no transfer time:
    # one prefill instance hands them over at 1, 2, 3 s; two at 1, 1, 2 s
    w = make_workload(arrival_seconds=[0, 0, 0], prompt_tokens=100, output_tokens=5)
    kw = dict(step_function=constant_step_function(1.0), bytes_per_token=0.0)
    one = SchedulerConfig(disaggregated=True, prefill_instances=1)
    two = SchedulerConfig(disaggregated=True, prefill_instances=2)
    assert _disaggregated_ready_seconds(w, config=one, **kw).tolist() == [1.0, 2.0, 3.0]
    assert _disaggregated_ready_seconds(w, config=two, **kw).tolist() == [1.0, 1.0, 2.0]
    # ... and cost their GPUs: 2 prefill + 1 decode instances of TP 2, twice
    c = Candidate("h100-sxm", 2, 2, "bf16", "bf16", 8192, 256, True, prefill_instances=2)
    assert c.gpus == 2 * 2 * 3
    space = Space(gpus=("h100-sxm",), disaggregated=(False, True), prefill_instances=(1, 2))
    assert [(c.disaggregated, c.prefill_instances) for c in space.candidates()] == [
        (False, 1), (True, 1), (True, 2)]  # fmt: skip


def test_a_second_prefill_instance_halves_the_queue_of_prompts():
    # 3,000-token prompts take ~0.1 s of GEMMs each on an H100 (3,000 x 2 x 8.03e9 FLOP at
    # 50% of 989 TFLOP/s): at 9/s one prefill instance runs ~90% busy and prompts queue; two
    # run ~45% busy, so TTFT p99 falls by far more than half
    traffic = Traffic(9.0, 3000, 50, duration_seconds=60)
    one, two = (evaluate(Candidate("h100-sxm", 1, 1, "bf16", "bf16", 8192, 256, True,
                                   prefill_instances=n), MODEL, traffic, UNCALIBRATED)
                for n in (1, 2))  # fmt: skip
    assert two.ttft_p99_seconds < one.ttft_p99_seconds / 2


def test_a_runs_traffic_is_replayed_and_bad_run_names_are_one_line(tmp_path, capsys):
    from itlkit.bundled import bundled_path

    runs = bundled_path("real-runs", "real_runs_trainval.json")
    common = ["plan", "--ttft-p99", "1", "--cache", "none", "--calibration", "none",
              "--prices", str(_price_file(tmp_path)), "--json"]  # fmt: skip
    # run ids hold colons ("trainval:20"): the file ends at ".json:"
    assert main([*common, "--run", f"{runs}:trainval:20"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"] and out["best"][0]["meets"]
    assert main([*common, "--run", f"{runs}:trainval:nope"]) == 2
    assert "no run 'trainval:nope'; its runs: trainval:17" in capsys.readouterr().err
    assert main([*common, "--run", f"{runs}:trainval:17"]) == 2  # its stages are unknown
    assert "arrival rates are unknown" in capsys.readouterr().err
