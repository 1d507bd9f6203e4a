"""A `vllm bench serve` result file as a run to calibrate on: the requests as recorded, what
the client measured, and the deployment the user names (a bench file does not say its GPU).

Needs a detailed file (`--save-detailed`: per-request `input_lens`, `output_lens`, `ttfts`,
`itls`), whose requests are replayed as sent (their `start_times`, else Poisson at the file's
`request_rate`). What the client measured becomes the run's measurements, in the runs file's
terms: the TTFT and E2E means and p99s (from vLLM's summary where it has them, else from the
samples), the ITL mean as (E2E mean - TTFT mean) / (output tokens mean - 1) and the per-token
ITL quantiles of every gap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from itlkit.errors import ConfigError
from itlkit.metrics.bench import read_bench_result
from itlkit.physics.roofline import Deployment
from itlkit.sim.client_figures import client_latencies, e2e_seconds
from itlkit.sim.runs import ITL_QUANTILE_LEVELS, Run, RunWorkload
from itlkit.sim.workload import read_vllm_bench_result

# What a bench file's run is calibrated on: the client's means and p99s, and the ITL mean.
MEASURED = ("ttft_mean_seconds", "ttft_p99_seconds", "e2e_mean_seconds", "e2e_p99_seconds",
            "itl_mean_seconds")  # fmt: skip


def _measured(result, workload, path: Path) -> dict[str, float]:
    samples = result.samples
    if samples is None or len(samples.itl_per_request_seconds) != workload.num_requests:
        raise ConfigError(
            f"{path}: calibrating needs a detailed bench result (--save-detailed) whose ttfts "
            "and itls match its input_lens and output_lens request by request"
        )
    tokens = float(workload.output_tokens.mean())
    if tokens <= 1:
        raise ConfigError(f"{path}: its requests generated {tokens:g} tokens on average: no ITL")
    ttft = samples.ttft_seconds
    e2e = e2e_seconds(ttft, samples.itl_per_request_seconds)
    figures = client_latencies(ttft, e2e, workload.output_tokens)
    measured = {key: figures[key] for key in MEASURED}
    if not all(value > 0 for value in measured.values()):
        raise ConfigError(f"{path}: its latencies are not all > 0: nothing to calibrate on")
    return measured


def run_from_bench(
    path,
    *,
    deployment: Deployment,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    seed: int = 0,
) -> Run:
    """The bench file's requests and measurements as a `Run` on `deployment`."""
    path = Path(path)
    result = read_bench_result(path)
    workload = read_vllm_bench_result(path, seed=seed)
    measured = _measured(result, workload, path)
    gaps = result.samples.itl_seconds
    quantiles = {q: float(np.quantile(gaps, q)) for q in ITL_QUANTILE_LEVELS} if gaps.size else {}
    longest = int((workload.prompt_tokens + workload.output_tokens).max())
    return Run(
        id=path.name,
        model=deployment.model,
        gpu=deployment.gpu.slug,
        tp=deployment.tp,
        weights_precision=deployment.weights.name,
        kv_precision=deployment.kv.name,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        max_model_len=longest,
        gpu_memory_utilization=deployment.gpu_memory_utilization,
        block_size=16,
        chunked_prefill=True,
        prefix_caching=False,
        workload=RunWorkload(
            name="vllm bench serve",
            stages=None,
            output_tokens_mean=float(workload.output_tokens.mean()),
            output_tokens_target=None,
            ignore_eos=False,
            prompt_tokens_mean=float(workload.prompt_tokens.mean()),
            system_prompts=None,
            prompts_per_system_prompt=None,
            system_prompt_tokens=None,
            question_tokens=None,
            prompt_template_tokens=None,
            parent=None,
        ),
        measured=measured,
        itl_per_token_quantiles_seconds=quantiles,
        replay=workload,
    )
