"""Diagnosis of speculative deployments from their own /metrics pages (simulated, then read
back the way vLLM's counters are read: vllm/v1/spec_decode/metrics.py @ 016a8587).

Expected values are derived here: with geometric acceptance a and k drafts a verification step
emits 1 + a + ... + a^k tokens on average, and position i is accepted with a^(i+1) (from 0);
the step model's crossover for Llama 3.1 8B on an H100 is where b (k + 1) tokens cross the
ridge (shared/spec/worked-example.txt's terms), far below a batch of several hundred.
"""

import json

import pytest

from itlkit.cli import main
from itlkit.diagnosis.speculation import acceptance_thirds
from itlkit.drill.scenarios import drill_deployment
from itlkit.metrics.readers import read_scrape_folder
from itlkit.metrics.speculative_metrics import speculation_reading
from itlkit.physics.speculative import Speculation
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.export import export_prometheus_scrapes
from itlkit.sim.export_speculative import spec_decode_counters
from itlkit.sim.scheduler import simulate_deployment
from itlkit.sim.workload import make_workload, synthetic_workload

DEP = drill_deployment(model="llama-3.1-8b", gpu="h100-sxm")
MODEL = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm"]


def _incident(tmp_path, *, rate, spec, seconds=90.0, output=600, prompt=200):
    w = synthetic_workload(duration_seconds=seconds, rate_per_second=rate, prompt_tokens=prompt,
                           output_tokens=output, seed=4)  # fmt: skip
    config = SchedulerConfig(max_num_seqs=1024)
    r = simulate_deployment(w, deployment=DEP, speculation=spec, seed=4, kv_tokens=2_000_000,
                            config=config, until_seconds=seconds)  # fmt: skip
    export_prometheus_scrapes(r, tmp_path, interval_seconds=15.0)
    return r


def test_the_pages_count_drafts_as_vllm_does(tmp_path):
    r = _incident(tmp_path, rate=3, spec=Speculation(4, 0.7), seconds=60)
    reading = speculation_reading(read_scrape_folder(tmp_path))
    # 1 + .7 + .49 + .343 + .2401 = 2.7731 on average; the run's last steps are cut at each
    # request's length, so a little less
    assert reading.tokens_per_step == pytest.approx(2.7731, rel=0.03)
    assert reading.positions == 4
    assert reading.per_position == pytest.approx([0.7, 0.49, 0.343, 0.2401], abs=0.02)
    emitted = r.step_generation_tokens.sum()
    assert emitted == r.generated_tokens.sum()


def test_a_request_at_full_acceptance_counts_its_drafts_exactly():
    # 9 tokens at k = 3, all accepted: the prefill's token, then 2 verification steps of 4:
    # 2 drafts, 6 draft tokens, 6 accepted, 2 at each position (observe_draft's loop)
    w = make_workload(arrival_seconds=[0.0], prompt_tokens=50, output_tokens=9)
    r = simulate_deployment(w, deployment=DEP, kv_tokens=10_000, speculation=Speculation(3, 1.0))
    c = {key: series[-1] for key, series in spec_decode_counters(r, [0.0, 10.0]).items()}
    assert c == {"drafts": 2, "draft_tokens": 6, "accepted": 6, "position_0": 2,
                 "position_1": 2, "position_2": 2}  # fmt: skip


def _diagnosis(capsys, folder):
    assert main(["diagnose", str(folder), *MODEL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return {c["cause"]: c for c in out["causes"]}


def test_speculation_past_its_crossover_is_named_and_not_read_as_host_overhead(tmp_path, capsys):
    # ~1,000 running requests verifying 6 tokens each: ~6,000 tokens of GEMM a step, far
    # past the ridge; 1.97 tokens a step cannot pay for it. The step is ~10x the decode floor,
    # which a reader that forgot the verification's width would take for host overhead.
    _incident(tmp_path, rate=40, spec=Speculation(5, 0.5))
    causes = _diagnosis(capsys, tmp_path)
    cost = causes["speculation_cost"]
    assert cost["named"] and cost["score"] >= 0.5
    assert causes["host_overhead"]["score"] < 0.2
    assert any("past the ridge" in line for line in cost["evidence"])
    assert any(fix["action"].startswith("speculation off") for fix in cost["fixes"])


def test_speculation_that_pays_is_no_cause(tmp_path, capsys):
    _incident(tmp_path, rate=2, spec=Speculation(3, 0.8), seconds=60, output=300)
    causes = _diagnosis(capsys, tmp_path)
    assert causes["speculation_cost"]["score"] == 0.0
    assert causes["host_overhead"]["score"] < 0.5


def test_acceptance_thirds_by_hand():
    # six windows drafting 100 each: a third is two windows; 150 + 150 accepted first (2.5
    # tokens a step), 90 + 50 last (1 + 140 / 200 = 1.7)
    thirds = acceptance_thirds([100] * 6, [150, 150, 150, 150, 90, 50])
    assert thirds == pytest.approx((2.5, 1.7))
    assert acceptance_thirds([0, 100, 100], [0, 150, 50]) is None  # two drafting windows
    assert acceptance_thirds(None, None) is None


def test_a_deploy_that_lowers_acceptance_is_said(tmp_path, capsys):
    # the same traffic before and after a restart with a worse draft: 0.8 a draft (3.36 tokens
    # a step at k = 4) for 60 s, then 0.3 (1.43): the counters restart with the server
    w = synthetic_workload(duration_seconds=60, rate_per_second=3, prompt_tokens=500,
                           output_tokens=300, seed=2)  # fmt: skip
    start = 1.7648e9
    for offset, rate in ((0.0, 0.8), (75.0, 0.3)):
        r = simulate_deployment(w, deployment=DEP, speculation=Speculation(4, rate), seed=2,
                                kv_tokens=2_000_000, until_seconds=75.0)  # fmt: skip
        export_prometheus_scrapes(r, tmp_path, interval_seconds=5.0, cover_end=False,
                                  start_unix_seconds=start + offset)  # fmt: skip
    assert main(["diagnose", str(tmp_path), *MODEL, "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    drop = next(n for n in notes if n.startswith("speculative acceptance fell"))
    assert "from 3.3" in drop and "to 1.4" in drop
