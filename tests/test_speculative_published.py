"""Speculative decoding against published measurements: TPOT and acceptance length per k.

Sources (numbers copied from them, not from itlkit):
- D1, vLLM issue #20780 (ekagra-ranjan, 2025-07-10, https://github.com/vllm-project/vllm/issues/20780):
  vLLM V1, meta-llama/Llama-3.1-8B-Instruct, batch 1 (`--max-concurrency 1`, MT-Bench), EAGLE-1
  and EAGLE-3 heads (yuhuili/EAGLE-LLaMA3.1-Instruct-8B, yuhuili/EAGLE3-LLaMA3.1-Instruct-8B),
  K = 2..7: TPOT without speculation 7.07 ms; the source names K = 3 best for EAGLE-1 and K = 4
  for EAGLE-3. The GPU is not named in the issue; the author's companion runs are on an H100.
- D7, NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/blog1_Pushing_Latency_Boundaries_Optimizing_
  DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md @ 01c4ece911eb569e72cf4177f83238a0520641c2:
  DeepSeek-R1 FP4 on 8 x B200 at batch 1, MTP 0..5: acceptance length and TPS per user.

The model under test (`physics.speculative`): at batch 1 a verification step is the plain step
(its k + 1 tokens of GEMM are free) plus a fixed part plus k draft passes; TPOT = step / E.
Two of the k are used to fit the fixed part and the pass (`fit_draft_overheads`); the others,
the best k, and a simulation are predictions.
"""

import numpy as np
import pytest

from itlkit.drill.scenarios import drill_deployment
from itlkit.physics.speculative import (
    MEASURED_OVERHEADS,
    fit_draft_overheads,
    speculation_from_mean_length,
)
from itlkit.sim.scheduler import simulate_deployment
from itlkit.sim.workload import make_workload

D1_PLAIN_S = 7.07e-3
D1_K = [2, 3, 4, 5, 6, 7]
D1 = {  # method: (acceptance length per K, TPOT ms per K)
    "eagle1": ([2.1, 2.29, 2.39, 2.43, 2.45, 2.47], [4.37, 4.29, 4.48, 4.71, 4.94, 5.2]),
    "eagle3": ([2.36, 2.79, 3.08, 3.32, 3.46, 3.54], [4.32, 4.09, 4.05, 4.13, 4.2, 4.29]),
}
D1_BEST_K = {"eagle1": 3, "eagle3": 4}
D7_MTP = [1, 2, 3, 4, 5]
D7_AL = [1.92, 2.58, 2.82, 2.99, 3.01]
D7_TPS = [198, 250, 253, 245, 239]
D7_PLAIN_TPS = 111


def _predicted_tpot(plain, fixed, per_pass, k, al):
    return (plain + fixed + np.asarray(k) * per_pass) / np.asarray(al)


@pytest.mark.parametrize("method", ["eagle1", "eagle3"])
def test_vllm_eagle_tpot_between_the_ends_and_the_best_k(method):
    al, tpot_ms = D1[method]
    tpot = np.asarray(tpot_ms) * 1e-3
    ends = [0, -1]
    fixed, per_pass = fit_draft_overheads(
        plain_step_seconds=D1_PLAIN_S, drafts=np.take(D1_K, ends),
        tokens_per_step=np.take(al, ends), tpot_seconds=tpot[ends],
    )  # fmt: skip
    predicted = _predicted_tpot(D1_PLAIN_S, fixed, per_pass, D1_K, al)
    assert predicted[1:-1] == pytest.approx(tpot[1:-1], rel=0.05)
    assert D1_K[int(np.argmin(predicted))] == D1_BEST_K[method]


@pytest.mark.parametrize("method", ["eagle1", "eagle3"])
def test_vllm_eagle_leave_one_out_error(method):
    al, tpot_ms = D1[method]
    tpot = np.asarray(tpot_ms) * 1e-3
    errors = []
    for i in range(len(D1_K)):
        rest = [j for j in range(len(D1_K)) if j != i]
        fixed, per_pass = fit_draft_overheads(
            plain_step_seconds=D1_PLAIN_S, drafts=np.take(D1_K, rest),
            tokens_per_step=np.take(al, rest), tpot_seconds=tpot[rest],
        )  # fmt: skip
        guess = _predicted_tpot(D1_PLAIN_S, fixed, per_pass, D1_K[i], al[i])
        errors.append(abs(guess / tpot[i] - 1))
    assert np.median(errors) < 0.03 and max(errors) < 0.06


def test_tensorrt_llm_mtp_tps_and_its_best_depth():
    plain = 1 / D7_PLAIN_TPS
    tpot = 1 / np.asarray(D7_TPS, dtype=float)
    ends = [0, -1]
    fixed, per_pass = fit_draft_overheads(
        plain_step_seconds=plain, drafts=np.take(D7_MTP, ends),
        tokens_per_step=np.take(D7_AL, ends), tpot_seconds=tpot[ends],
    )  # fmt: skip
    predicted_tps = 1 / _predicted_tpot(plain, fixed, per_pass, D7_MTP, D7_AL)
    assert predicted_tps[1:-1] == pytest.approx(D7_TPS[1:-1], rel=0.05)
    assert D7_MTP[int(np.argmax(predicted_tps))] == 3  # the blog's best: MTP 3, 253 TPS


def test_the_simulator_reproduces_eagle3_at_k4_from_the_fit():
    # Llama 3.1 8B on an H100 at batch 1, its plain step brought to the measured 7.07 ms by host
    # time; EAGLE-3's overheads fitted on K = 2 and 7; K = 4 simulated with its acceptance
    # length 3.08 (geometric per position): TPOT 4.05 ms measured.
    al, tpot_ms = D1["eagle3"]
    fixed, per_pass = fit_draft_overheads(
        plain_step_seconds=D1_PLAIN_S, drafts=[2, 7], tokens_per_step=[al[0], al[-1]],
        tpot_seconds=[tpot_ms[0] * 1e-3, tpot_ms[-1] * 1e-3],
    )  # fmt: skip
    dep = drill_deployment(model="llama-3.1-8b", gpu="h100-sxm")
    roofline = (8_030_261_248 * 2 + 131_072 * 300) / 3.35e12  # weights + ~300 tokens of KV
    spec = speculation_from_mean_length(4, 3.08, method="eagle", draft_pass_seconds=per_pass,
                                        verify_extra_seconds=fixed)  # fmt: skip
    w = make_workload(arrival_seconds=np.arange(20) * 10.0, prompt_tokens=100, output_tokens=400)
    r = simulate_deployment(w, deployment=dep, kv_tokens=1_000_000, speculation=spec,
                            host_overhead_seconds=D1_PLAIN_S - roofline)  # fmt: skip
    assert r.itl_views().mean("request_tpot") == pytest.approx(4.05e-3, rel=0.06)


@pytest.mark.parametrize(
    "method, drafts, lengths, tpot_seconds, plain",
    [
        ("eagle", D1_K, D1["eagle3"][0], np.asarray(D1["eagle3"][1]) * 1e-3, D1_PLAIN_S),
        ("mtp", D7_MTP, D7_AL, 1 / np.asarray(D7_TPS, dtype=float), 1 / D7_PLAIN_TPS),
    ],
)
def test_the_default_overheads_are_the_fits_of_their_sources(
    method, drafts, lengths, tpot_seconds, plain
):
    extra, per_pass = fit_draft_overheads(
        plain_step_seconds=plain, drafts=drafts, tokens_per_step=lengths, tpot_seconds=tpot_seconds
    )
    assert MEASURED_OVERHEADS[method][:2] == pytest.approx((extra, per_pass), abs=1e-6)


def test_explain_and_simulate_say_which_overheads_they_assumed(capsys):
    from itlkit.cli import main

    flags = ["--spec-k", "4", "--spec-method", "eagle", "--spec-mean-length", "3.08"]
    assert main(["explain", "--batch", "1", *flags]) == 0
    assert "assumed: eagle overheads 1.28 ms" in capsys.readouterr().out
    measured = ["--spec-draft-pass-seconds", "0.001", "--spec-verify-extra-seconds", "0"]
    assert main(["simulate", "--duration", "5", "--rate", "1", *flags, *measured]) == 0
    assert "eagle overheads" not in capsys.readouterr().out
