"""The engine step model (`Deployment.as_engine`): the terms vLLM computes, derived by hand.

Expected values come from the models' configs and the datasheet, written out here: Llama-3.1-8B
has 8,030,261,248 parameters, a vocabulary of 128,256 and width 4,096, untied embeddings (so an
input table and an LM head of 128,256 x 4,096 = 525,336,576 each); the H100 SXM streams 3.35 TB/s
and peaks at 989.4 TFLOP/s dense BF16. Mixtral-8x7B routes each token to 2 of 8 experts of
3 x 4,096 x 14,336 = 176,160,768 parameters in each of 32 layers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _paths import REAL_RUNS

from itlkit.calibration.fit import _step_values, features, fit_step_terms, linear_itl
from itlkit.calibration.predict import client_latencies, harness_itl_mean, simulate_run
from itlkit.errors import ConfigError
from itlkit.physics.calibration import Calibration
from itlkit.physics.roofline import Deployment, step_coefficients, step_time
from itlkit.sim.runs import Stage, read_runs

KNOWN = [r for r in read_runs(REAL_RUNS / "real_runs_trainval.json") if r.workload.stages]

TABLE = 128_256 * 4_096  # the input embedding, and (untied) the LM head
PARAMS = 8_030_261_248
BODY = PARAMS - 2 * TABLE  # everything a token multiplies through but the two tables
PEAK, HBM = 989.4e12, 3.35e12
EXPERT = 3 * 4_096 * 14_336


@pytest.fixture(scope="module")
def engine():
    return Deployment.create(model="llama-3.1-8b", gpu="h100-sxm").as_engine()


def test_the_input_embedding_is_a_gather_not_a_stream(engine):
    step = step_time(engine, batch_size=1, context_tokens=1)
    assert step.weight_bytes == (PARAMS - TABLE) * 2  # the LM head is still read
    assert step.weight_read_seconds == pytest.approx((PARAMS - TABLE) * 2 / HBM, rel=1e-12)


def test_logits_are_computed_only_at_the_sampled_rows(engine):
    # 64 decodes and a 2,048-token chunk: 2,112 tokens through the body, 65 rows through the head
    step = step_time(engine, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    assert step.matmul_flops == 2 * BODY * 2112 + 2 * TABLE * 65


def test_a_gemm_over_n_tokens_runs_at_mfu_times_n_over_n_plus_128(engine):
    # n rows at 0.8 x n / (n + 128) of peak: 2,112 body rows and 65 head rows
    step = step_time(engine, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    body = 2 * BODY * 2112 / (0.8 * PEAK * 2112 / (2112 + 128))
    head = 2 * TABLE * 65 / (0.8 * PEAK * 65 / (65 + 128))
    assert step.matmul_seconds == pytest.approx(body + head, rel=1e-12)
    assert step.compute_bound  # 2,112 tokens: far past the ridge


def test_expert_gemms_run_at_the_rows_each_expert_gets():
    moe = Deployment.create(model="mixtral-8x7b-v0.1", gpu="h100-sxm", tp=2).as_engine()
    c = step_coefficients(moe)
    # 1,024 tokens x top-2 of 8 experts: 256 rows per expert, at 256 / (256 + 128) of the MFU
    routed = 2 * 32 * EXPERT
    assert c.expert_flops_per_token == 2 * routed / 2  # per GPU under TP 2
    expected = c.expert_flops_per_token * 1024 * (256 + 128) / 256 / (0.8 * PEAK)
    dense_and_head = c.matmul_seconds(1024, 1) - expected
    assert dense_and_head == pytest.approx(
        (c.matmul_flops_per_token * (1024 + 128) + c.head_flops_per_sequence * (1 + 128))
        / (0.8 * PEAK),
        rel=1e-12,
    )


def test_the_efficiency_slows_memory_traffic_not_the_gemms(engine):
    fast = step_coefficients(engine, efficiency=1.0)
    slow = step_coefficients(engine, efficiency=0.5)
    # a compute-bound chunk step: its GEMMs stay, its KV read doubles
    kv_tokens = 64 * 4096
    gemm = fast.matmul_seconds(2112, 65)
    kv = fast.kv_read_seconds(fast.kv_bytes_per_token * kv_tokens)
    attention = fast.attention_flops(chunk_tokens=2048) / fast.flops_per_second
    gap = slow.seconds(2112, kv_tokens, fast.attention_flops(chunk_tokens=2048), sequences=65) - (
        fast.seconds(2112, kv_tokens, fast.attention_flops(chunk_tokens=2048), sequences=65)
    )
    assert gap == pytest.approx(kv, rel=1e-9)  # only the KV read doubled
    assert attention > 0 and gemm > fast.weight_read_seconds


def test_the_reference_numbers_stay_those_of_the_worked_example(engine):
    reference = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    mixed = step_time(reference, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    assert round(float(mixed.step_seconds) * 1e3, 2) == 78.82  # 68.57 + 10.26
    assert float(step_time(engine, batch_size=64, context_tokens=4096,
                           chunk_tokens=2048).step_seconds) < 0.06  # fmt: skip


def test_tp_across_nodes_prices_the_all_reduce_over_the_network():
    nodes = Deployment.create(model="llama-3.1-8b", gpu="a100-80gb-sxm", tp=2,
                              interconnect="network", network_bytes_per_second=2e9)  # fmt: skip
    # 2 all-reduces x 32 layers x 2 (tp - 1) / tp x 4,096 x 2 B per token, at 2 GB/s
    per_token = 2 * 32 * 2 * (2 - 1) / 2 * 4096 * 2
    c = step_coefficients(nodes)
    assert c.allreduce_seconds(100) == pytest.approx(per_token * 100 / 2e9, rel=1e-12)
    with pytest.raises(ConfigError, match="interconnect must be one of nvlink, pcie, network"):
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", tp=2, interconnect="infiniband")


STEP_CAL = Calibration(step_model="engine", efficiency=0.7, mfu=0.6, host_seconds_per_step=1e-3,
                       host_seconds_per_sequence=5e-6,
                       allreduce_seconds_per_call={"nvlink": 20e-6, "pcie": 0.0,
                                                   "network": 0.0})  # fmt: skip


def cut(runs, seconds: float = 30.0):
    """The runs with each stage cut to `seconds` (same rates): fast stand-ins."""
    for run in runs:
        stages = tuple(Stage(st.rate_per_second, seconds) for st in run.workload.stages)
        yield replace(run, workload=replace(run.workload, stages=stages))


def test_the_fit_reads_a_simulated_step_back_into_its_terms():
    # jitter-free, the step terms rebuild the ITL-weighted mean step exactly:
    # e x memory + u x compute + latency x calls + host + host/sequence x sequences
    cal = STEP_CAL
    for run in cut(KNOWN[:3]):
        result = simulate_run(run, cal)
        f = features(run, result, cal)
        weights = result.step_itl_observations.astype(float)
        mean_step = float((result.step_duration_seconds * weights).sum() / weights.sum())
        rebuilt = (f.gpu_seconds / 0.7 + f.compute_seconds / 0.6 + 20e-6 / 0.7 * f.link_calls[0]
                   + 1e-3 + 5e-6 * f.sequences)  # fmt: skip
        assert rebuilt == pytest.approx(mean_step, rel=1e-9), run.id
        assert f.compute_seconds > 0


def test_a_calibration_group_is_used_for_its_gpu_family_only():
    group = {"efficiency": 0.5, "mfu": 0.6, "host_seconds_per_step": 1e-3,
             "host_seconds_per_sequence": 1e-5, "ttft_pipeline_steps": 1.0,
             "ttft_pipeline_seconds": 0.01, "network_bytes_per_second": 1e9, "step_model": "engine",
             "allreduce_seconds_per_call": {"nvlink": 1e-5, "pcie": 2e-5,
                                            "network": 3e-4}}  # fmt: skip
    cal = Calibration(efficiency=0.9, groups={"gpu:a100": group, "gpu:h100/V0": group})
    assert cal.for_gpu("a100-40gb-sxm").efficiency == 0.5
    assert cal.for_gpu("a100-80gb-sxm").group == "gpu:a100"
    assert cal.for_gpu("h100-sxm").efficiency == 0.9  # V1 on H100: V0's is not lent, global
    assert cal.for_gpu("h100-64gb", "V0").efficiency == 0.5
    fitted = replace(cal, fitted_on=("x",)).for_gpu("a100-80gb-sxm")
    assert "constants of gpu:a100" in fitted.describe()


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen2.5-7b"])
def test_the_simulators_fast_step_is_the_formula(model):
    # the engine's positional call for scheduled steps gives the same floats as the formula
    from itlkit.sim.scheduler import roofline_step_function

    dep = Deployment.create(model=model, gpu="h100-sxm").as_engine()
    step = roofline_step_function(dep, efficiency=0.8)
    c = step_coefficients(dep, efficiency=0.8)
    for decode, prefill, kv in [(1, 0, 1000), (64, 0, 64_000), (10, 2038, 9000), (0, 2048, 0)]:
        attention = c.attention_flops(chunk_tokens=prefill) if prefill else 0.0
        formula = float(
            c.seconds(decode + prefill, kv, attention, sequences=decode + (prefill > 0))
        )
        assert step.scheduled_seconds(decode, prefill, kv) == formula


def test_the_moe_step_reads_its_weights_once_per_size_and_keeps_the_formulas_floats():
    # an MoE step's weight bytes depend on the experts its tokens touch: remembered per token
    # count, the step function must still give the formula's own floats, first call or later
    from itlkit.sim.scheduler import roofline_step_function

    dep = Deployment.create(model="mixtral-8x7b-v0.1", gpu="h100-sxm", tp=2).as_engine()
    step = roofline_step_function(dep, efficiency=0.8)
    c = step_coefficients(dep, efficiency=0.8)
    for decode, prefill, kv in [(1, 0, 1000), (64, 0, 64_000), (10, 2038, 9000), (1, 0, 5),
                                (64, 0, 70_000), (3, 0, 100)]:  # fmt: skip
        attention = c.attention_flops(chunk_tokens=prefill) if prefill else 0.0
        formula = float(
            c.seconds(decode + prefill, kv, attention, sequences=decode + (prefill > 0))
        )
        for _ in range(2):
            assert step(decode_tokens=decode, prefill_tokens=prefill, kv_tokens=kv) == formula


def test_the_fits_equation_is_the_simulated_itl_mean_at_the_simulated_constants():
    # the run's ITL mean as the harness defines it, (E2E - TTFT) / (tokens - 1), is what the
    # fit's linear equation gives at the constants it was simulated with; a lower efficiency
    # moves it by the memory-side seconds x (1 / 0.5 - 1 / 0.7), the schedule held fixed
    cal = STEP_CAL
    for run in cut(KNOWN[:3]):
        result = simulate_run(run, cal)
        f = features(run, result, cal)
        itl = harness_itl_mean(run, *client_latencies(run, result, cal))
        values = _step_values(cal)
        assert linear_itl(f, values) == pytest.approx(itl, rel=1e-9), run.id
        slower = linear_itl(f, {**values, "efficiency": 0.5})
        memory = f.gpu_seconds + 20e-6 * f.link_calls[0]
        assert slower - itl == pytest.approx(memory * (1 / 0.5 - 1 / 0.7), rel=1e-9), run.id


def test_a_fit_whose_predictions_swing_between_two_states_stops(monkeypatch):
    # The A100 cell's fit swung between two states for all MAX_ROUNDS rounds (efficiency 0.783
    # <-> 0.820): once a round's ITL predictions repeat those of two rounds before, the fit
    # stops, as when they repeat the last round's.
    from itlkit.calibration import fit as fit_module

    swings = iter([np.array([0.010, 0.020]), np.array([0.012, 0.024])] * fit_module.MAX_ROUNDS)
    feats = [None, None]
    monkeypatch.setattr(fit_module, "_simulate_all", lambda runs, cal, seed: (next(swings), feats))
    monkeypatch.setattr(fit_module, "_settled", lambda *args: False)
    moves = iter(np.linspace(0.5, 0.9, fit_module.MAX_ROUNDS))

    def solver(runs, feats):
        return {**_step_values(STEP_CAL), "efficiency": float(next(moves))}, {}, {}

    *_, rounds = fit_step_terms([None, None], STEP_CAL, solver=solver)
    assert rounds == 3


def test_a_fit_started_at_its_answer_stops_after_one_simulation():
    # runs measured at these very constants: the first solve moves nothing, so no second
    # simulation is run to confirm that the ITL predictions stand still
    cal = Calibration(step_model="engine", efficiency=0.7, mfu=0.6, host_seconds_per_step=1e-3,
                      host_seconds_per_sequence=5e-6,
                      allreduce_seconds_per_call={"nvlink": 20e-6, "pcie": 20e-6,
                                                  "network": 20e-6})  # fmt: skip
    runs = []
    for run in cut(KNOWN[:4]):
        result = simulate_run(run, cal)
        itl = harness_itl_mean(run, *client_latencies(run, result, cal))
        runs.append(replace(run, measured={**run.measured, "itl_mean_seconds": itl}))
    fitted, *_, rounds = fit_step_terms(runs, cal, prior_weight=0.0)
    assert rounds == 1
    assert fitted.efficiency == 0.7 and fitted.mfu == 0.6


def test_the_fit_reads_the_network_term_of_tp_across_nodes():
    from _paths import REAL_RUNS_MORE

    run = next(r for r in read_runs(REAL_RUNS_MORE / "real_world_more.json") if r.id == "D4")
    assert run.interconnect == "network"  # flagged tp_across_nodes in the source's table
    cal = Calibration(step_model="engine", efficiency=0.7, mfu=0.6, network_bytes_per_second=2e9,
                      allreduce_seconds_per_call={"nvlink": 0.0, "pcie": 0.0,
                                                  "network": 400e-6})  # fmt: skip
    result = simulate_run(run, cal)
    f = features(run, result, cal)
    weights = result.step_itl_observations.astype(float)
    mean_step = float((result.step_duration_seconds * weights).sum() / weights.sum())
    # the network's bytes are priced at 100 Gb/s in the feature: x 12.5 / 2 at 2 GB/s, / 0.7
    rebuilt = (f.gpu_seconds / 0.7 + f.compute_seconds / 0.6 + 400e-6 / 0.7 * f.link_calls[2]
               + f.network_seconds * 12.5e9 / 2e9 / 0.7)  # fmt: skip
    assert f.network_seconds > 0 and f.link_calls[:2] == (0.0, 0.0)
    assert rebuilt == pytest.approx(mean_step, rel=1e-9)


def test_the_fit_reads_the_pcie_term_of_tp_over_pcie():
    from _paths import REAL_RUNS_MORE

    run = next(r for r in read_runs(REAL_RUNS_MORE / "real_world_more.json") if r.id == "D17")
    assert run.interconnect == "pcie"  # two pods of one A100 each on one node
    cal = Calibration(step_model="engine", efficiency=0.7, mfu=0.6, pcie_bandwidth_share=0.25,
                      allreduce_seconds_per_call={"nvlink": 0.0, "pcie": 50e-6,
                                                  "network": 0.0})  # fmt: skip
    result = simulate_run(run, cal)
    f = features(run, result, cal)
    weights = result.step_itl_observations.astype(float)
    mean_step = float((result.step_duration_seconds * weights).sum() / weights.sum())
    # PCIe's bytes are priced at the datasheet's 32 GB/s in the feature: / 0.25 at a quarter of
    # it, then over the efficiency as every link byte
    rebuilt = (f.gpu_seconds / 0.7 + f.compute_seconds / 0.6 + 50e-6 / 0.7 * f.link_calls[1]
               + f.pcie_seconds / 0.25 / 0.7)  # fmt: skip
    assert f.pcie_seconds > 0 and f.network_seconds == 0 and f.link_calls[::2] == (0.0, 0.0)
    assert rebuilt == pytest.approx(mean_step, rel=1e-9)


def test_a_group_keeps_the_step_model_its_held_out_runs_prefer(monkeypatch):
    import itlkit.calibration.groups as groups

    better = {"reference": 0.09, "engine": 0.05}

    def fake_fit(runs, start, *, seed, prior_weight, lent=None):
        # one model predicts every held-out run better (5% against 9%); its TTFT worse: the
        # choice is by the ITL alone
        error = better[start.step_model]
        loo = {"itl_mean_seconds": error, "ttft_mean_seconds": 0.14 - error, "ttft_p99": 0.5}
        folds = {run.id: {"itl_mean_seconds": error} for run in runs}
        return replace(start, efficiency=error), [None] * len(runs), loo, folds

    monkeypatch.setattr(groups, "_fit_group", fake_fit)
    runs = [r for r in read_runs(REAL_RUNS / "real_runs_trainval.json") if r.workload.stages]
    assert len(runs) >= 5  # better on all of five or more runs: p <= 1 / 32
    a100 = [replace(r, id=f"a{r.id}", gpu="a100-80gb-sxm") for r in runs]
    chosen, _, errors = groups.fit_groups([*runs, *a100], Calibration(), seed=0,
                                          prior_weight=0.1)  # fmt: skip
    assert {k: v["step_model"] for k, v in chosen.items()} == {"gpu:a100": "engine",
                                                             "gpu:h100": "engine"}  # fmt: skip
    # each group keeps its runs' count and the kept model's errors, the mean metrics only
    expected = {"runs": len(runs), "itl_mean_seconds": 0.05, "ttft_mean_seconds": 0.09}
    assert errors == {"gpu:a100": pytest.approx(expected), "gpu:h100": pytest.approx(expected)}
    # the reference model better on every run: kept
    better.update(reference=0.05, engine=0.09)
    chosen, _, errors = groups.fit_groups([*runs, *a100], Calibration(), seed=0,
                                          prior_weight=0.1)  # fmt: skip
    assert {v["step_model"] for v in chosen.values()} == {"reference"}


def test_a_groups_own_leave_one_out_refits_its_pcie_share(monkeypatch):
    # A cell fits its PCIe bandwidth share (the global fit does not: GLOBAL_PCIE_SHARE), so the
    # folds that choose its step model must refit the share too, or a PCIe cell's held-out
    # runs would be judged with the datasheet's bandwidth its constants were not fitted at.
    import itlkit.calibration.groups as groups
    from itlkit.calibration.fit import GLOBAL_PCIE_SHARE

    asked = {}

    def folds(runs, feats, group_feats, cal, **kwargs):
        asked.update(kwargs)
        return {run.id: {"itl_mean_seconds": 0.1} for run in runs}

    monkeypatch.setattr(
        groups, "fit_step_terms", lambda runs, start, **_: (start, [None] * len(runs), {}, {}, 1)
    )
    monkeypatch.setattr(groups, "solve_pipeline", lambda runs, feats, **_: (0.0, 0.01))
    monkeypatch.setattr(groups, "held_out_errors", folds)
    runs = [r for r in read_runs(REAL_RUNS / "real_runs_trainval.json") if r.workload.stages]
    _, _, loo, _ = groups._fit_group(runs, Calibration(), seed=0, prior_weight=0.1)
    assert asked["pcie_share"] is True and GLOBAL_PCIE_SHARE is False
    assert loo == {"itl_mean_seconds": pytest.approx(0.1)}


def test_a_quantized_checkpoints_lm_head_streams_at_16_bits():
    # vLLM's FP8 method quantizes linear layers and experts; the LM head (a vocab-parallel
    # embedding) keeps the model's 16 bits: (body at 1 B) + (head at 2 B), the input table
    # gathered. The reference numbers keep every parameter at 1 B.
    fp8 = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", weight_precision="fp8")
    assert fp8.as_engine().weight_bytes_per_gpu() == BODY * 1 + TABLE * 2
    assert fp8.weight_bytes_per_gpu() == PARAMS * 1
    # held in memory (what vLLM sizes its KV cache after): both tables at 2 B
    assert fp8.resident_weight_bytes_per_gpu() == BODY * 1 + 2 * TABLE * 2
    from itlkit.physics.engine_memory import vllm_kv_cache

    assert vllm_kv_cache(fp8).weight_bytes == BODY * 1 + 2 * TABLE * 2
    # Llama-3.2-1B ties its head to its input table (128,256 x 2,048): one table, at 2 B, both
    # streamed (as the head) and held
    tied = Deployment.create(model="llama-3.2-1b", gpu="h100-sxm", weight_precision="fp8")
    table = 128_256 * 2_048
    params = tied.model.total_params
    assert tied.as_engine().weight_bytes_per_gpu() == (params - table) * 1 + table * 2
    assert tied.resident_weight_bytes_per_gpu() == (params - table) * 1 + table * 2


def test_an_mxfp4_checkpoint_quantizes_only_the_routed_experts():
    # gpt-oss-120b: 36 layers of 128 experts of 3 x 2,880 x 2,880 weights + 2 x 2,880 biases
    # (gate_up 2 x 2,880 rows, down 2,880); at 1,000 tokens all 128 are touched. The experts
    # stream at 0.5 B + a 1-byte scale per 32 (MXFP4), everything else (attention, router,
    # head) at 2 B, the input table gathered; held resident, the input table too.
    dep = Deployment.create(model="gpt-oss-120b", gpu="h200-sxm", weight_precision="int4", tp=8)
    engine = dep.as_engine()
    m = dep.model
    experts = 36 * 128 * m.expert_params
    streamed = m.total_params - m.embedding_params
    expected = ((streamed - experts) * 2 + experts * (0.5 + 1 / 32)) / 8
    assert engine.weight_bytes_per_gpu(tokens=1000) == pytest.approx(expected, rel=1e-9)
    resident = ((m.total_params - experts) * 2 + experts * (0.5 + 1 / 32)) / 8
    assert dep.resident_weight_bytes_per_gpu() == pytest.approx(resident, rel=1e-9)
    assert m.expert_params == 3 * 2880 * 2880 + 2 * 2880 + 2880  # the two biases of each expert
