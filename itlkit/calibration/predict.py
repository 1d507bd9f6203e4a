"""Simulate a real run (`itlkit-runs/1`) under a calibration: what `itlkit simulate --runs` prints.

The run's client is rebuilt request by request (`sim.run_workload`: fixed-count Poisson stages,
the cycled prompts and what vLLM's prefix cache serves of them), the engine runs its settings
until every request has finished (the drain), and the statistics are the harness's own:
`itl_mean_seconds` = (E2E mean - TTFT mean) / (output tokens mean - 1), per-token ITL quantiles
over every token gap. The TTFT pipeline delay is added to each request's first and last token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from itlkit.errors import ConfigError
from itlkit.physics.calibration import UNCALIBRATED, Calibration
from itlkit.physics.hardware import get_gpu
from itlkit.physics.roofline import Deployment
from itlkit.sim.config import SchedulerConfig, admission_watermark
from itlkit.sim.results import SimulationResult, weighted_quantile
from itlkit.sim.run_workload import (
    UnknownWorkload,
    generated_tokens,
    prompt_cycle_blocks,
    run_workload,
)
from itlkit.sim.runs import ITL_QUANTILE_LEVELS, Run
from itlkit.sim.scheduler import (
    kv_capacity_tokens,
    roofline_step_function,
    simulate,
    step_jitter_factors,
)
from itlkit.sim.versions import intake_seconds_per_prompt_token
from itlkit.units import kv_precision, weight_precision


@dataclass(frozen=True)
class RunPrediction:
    """What the simulator predicts for one run, in the runs file's terms (seconds)."""

    id: str
    e2e_mean_seconds: float
    e2e_p99_seconds: float
    ttft_mean_seconds: float
    ttft_p99_seconds: float
    itl_mean_seconds: float
    itl_per_token_quantiles_seconds: dict[float, float]
    requests: int
    unfinished: int
    mean_running: float  # sequences per decode token's step (what Little's law sees)

    def to_json(self) -> dict:
        quantiles = {str(q): v for q, v in self.itl_per_token_quantiles_seconds.items()}
        return {
            "id": self.id,
            "e2e_mean_seconds": self.e2e_mean_seconds,
            "ttft_mean_seconds": self.ttft_mean_seconds,
            "itl_mean_seconds": self.itl_mean_seconds,
            "ttft_p99_seconds": self.ttft_p99_seconds,
            "e2e_p99_seconds": self.e2e_p99_seconds,
            "itl_per_token_quantiles_seconds": quantiles,
            "requests": self.requests,
            "unfinished": self.unfinished,
        }


def run_deployment(run: Run, calibration: Calibration = UNCALIBRATED) -> Deployment:
    """The run's deployment with the calibration's host and all-reduce terms (its GPU
    family's constants where the calibration has a group for it)."""
    calibration = calibration.for_run(run)
    deployment = Deployment(
        model=run.model,
        gpu=get_gpu(run.gpu),
        weights=weight_precision(run.weights_precision),
        kv=kv_precision(run.kv_precision),
        tp=run.tp,
        gpu_memory_utilization=run.gpu_memory_utilization,
        interconnect=run.interconnect,
    )
    deployment.validate()
    return calibration.apply(deployment)


def run_config(run: Run, *, kv_tokens: int | None = None) -> SchedulerConfig:
    """The engine knobs of the run: vLLM's (V0 without chunked prefill runs prompts alone), or
    SGLang's policy (`sim.sglang`: prefill batches alone unless mixed chunks; its running-request
    cap from the KV pool of `kv_tokens` where the run does not give it)."""
    if run.engine == "SGLang":
        from itlkit.sim.sglang import SglangSettings

        settings = SglangSettings(
            run.max_num_batched_tokens, run.max_num_batched_tokens, run.max_num_seqs or None,
            run.mixed_chunk, run.gpu_memory_utilization, (), run.schedule_conservativeness,
            scheduler_recv_interval=run.scheduler_recv_interval,
            num_continuous_decode_steps=run.num_continuous_decode_steps,
        )  # fmt: skip
        if settings.max_running_requests is None:
            settings = settings.with_kv_tokens(int(kv_tokens), context_tokens=run.max_model_len)
        return settings.scheduler_config(enable_prefix_caching=run.prefix_caching)
    return SchedulerConfig(
        max_num_batched_tokens=run.max_num_batched_tokens,
        max_num_seqs=min(run.max_num_seqs, run.max_num_batched_tokens),
        enable_chunked_prefill=run.chunked_prefill,
        prefill_only_steps=run.engine == "V0" and not run.chunked_prefill,
        enable_prefix_caching=run.prefix_caching,
        admission_watermark=admission_watermark(run.engine),
        intake_seconds_per_prompt_token=intake_seconds_per_prompt_token(run.release),
        async_scheduling=run.async_scheduling,
    )


def run_kv_tokens(run: Run, deployment: Deployment) -> int:
    """The KV pool in tokens: vLLM's sizing, or SGLang's (`engine_memory.sglang_kv_cache`)."""
    if run.engine == "SGLang":
        from itlkit.physics.engine_memory import sglang_kv_cache

        return sglang_kv_cache(deployment).kv_tokens
    return kv_capacity_tokens(deployment)


def request_blocks(run: Run) -> int:
    """KV blocks one request of the run holds when done (mean prompt + output)."""
    w = run.workload
    prompt = w.prompt_tokens_mean or (w.system_prompt_tokens or 0) + (w.question_tokens or 0)
    if not prompt and w.prompt_distribution is not None:  # a bench client's drawn lengths
        prompt = w.prompt_distribution.mean_tokens
    return math.ceil((prompt + generated_tokens(run)) / run.block_size)


def simulate_run(
    run: Run, calibration: Calibration = UNCALIBRATED, *, seed: int = 0
) -> SimulationResult:
    """The engine's run of this workload on this deployment, drained (every request finishes).

    vLLM's prefix cache keeps the blocks that running requests leave free. The run is first
    simulated with the whole KV cache open to it; if the blocks its busiest moments hold (the
    99th percentile of running requests x a request's blocks) leave too little for the cycled
    prompts, the hits are replayed with that smaller cache and the run simulated again.
    """
    try:
        return _simulate_drained(run, calibration.for_run(run), seed=seed)
    except ConfigError as exc:  # from the engine, which does not know the run
        if isinstance(exc, UnknownWorkload) or str(exc).startswith("run "):
            raise
        raise ConfigError(f"run {run.id!r}: {exc}") from None


def _simulate_drained(run: Run, calibration: Calibration, *, seed: int) -> SimulationResult:
    deployment = run_deployment(run, calibration)
    if run.replay is not None:  # the requests as recorded: no prompt cycle to cache
        return _engine(run, deployment, calibration, run.replay, seed=seed)
    total = run_kv_tokens(run, deployment) // run.block_size
    result = _simulate(run, deployment, calibration, capacity_blocks=total, seed=seed)
    if not run.prefix_caching:
        return result
    busy = float(np.quantile(result.step_running, 0.99)) if result.steps else 0.0
    left = max(int(total - math.ceil(busy) * request_blocks(run)), 1)
    if left >= prompt_cycle_blocks(run):
        return result
    return _simulate(run, deployment, calibration, capacity_blocks=left, seed=seed)


def _simulate(run, deployment, calibration, *, capacity_blocks: int, seed: int):
    workload = run_workload(run, capacity_blocks=capacity_blocks, seed=seed)
    if not run.prefix_caching:
        none = np.zeros_like(workload.prompt_tokens)
        workload = replace(workload, cached_prompt_tokens=none, shared_prompt_tokens=none)
    return _engine(run, deployment, calibration, workload, seed=seed)


def _engine(run, deployment, calibration, workload, *, seed: int) -> SimulationResult:
    return simulate(
        workload,
        step_function=roofline_step_function(deployment, efficiency=calibration.efficiency),
        kv_capacity_tokens=(kv := run_kv_tokens(run, deployment)),
        config=run_config(run, kv_tokens=kv),
        jitter=step_jitter_factors(calibration.step_jitter, seed=seed),
    )


def pipeline_delay_seconds(result: SimulationResult, calibration: Calibration) -> np.ndarray:
    """Per request: the TTFT pipeline's delay (steps of the step that emitted the first token,
    plus seconds); NaN for requests that never got a token."""
    first = result.first_token_seconds
    ends = result.step_end_seconds
    got = ~np.isnan(first)
    step = np.full(first.shape, np.nan)
    if ends.size:
        at = np.clip(np.searchsorted(ends, first[got], side="left"), 0, ends.size - 1)
        step[got] = result.step_duration_seconds[at]
    return calibration.ttft_pipeline_steps * step + calibration.ttft_pipeline_seconds


def client_latencies(run: Run, result: SimulationResult, calibration: Calibration):
    """(TTFT, E2E) of every finished request as the run's client saw them (pipeline included)."""
    calibration = calibration.for_run(run)
    arrival = result.workload.arrival_seconds
    delay = pipeline_delay_seconds(result, calibration)
    done = result.finished
    if not done.any():
        raise ConfigError(f"run {run.id!r}: none of its {done.size:,} simulated requests finished")
    return (result.first_token_seconds - arrival + delay)[done], (
        result.finish_seconds - arrival + delay
    )[done]


def harness_itl_mean(run: Run, ttft: np.ndarray, e2e: np.ndarray) -> float:
    """The runs file's ITL mean: (E2E mean - TTFT mean) / (output tokens mean - 1), the tokens
    as the client counted them (the harness's ratio)."""
    return float((e2e.mean() - ttft.mean()) / (run.workload.output_tokens_mean - 1))


def token_quantiles(result: SimulationResult, levels) -> dict[float, float]:
    """Per-token ITL quantiles of a simulated run at these levels (one sort for them all)."""
    values, weights = result.itl_weighted()
    levels = list(levels)
    return dict(zip(levels, weighted_quantile(values, weights, levels).tolist(), strict=True))


def predict(run: Run, result: SimulationResult, calibration: Calibration) -> RunPrediction:
    """The runs file's statistics of a simulated run."""
    ttft, e2e = client_latencies(run, result, calibration)
    quantiles = token_quantiles(result, ITL_QUANTILE_LEVELS)
    decode = result.step_decode_tokens.astype(float)
    running = float((decode * decode).sum() / decode.sum()) if decode.sum() else 0.0
    return RunPrediction(
        id=run.id,
        e2e_mean_seconds=float(e2e.mean()),
        e2e_p99_seconds=float(np.quantile(e2e, 0.99)),
        ttft_mean_seconds=float(ttft.mean()),
        ttft_p99_seconds=float(np.quantile(ttft, 0.99)),
        itl_mean_seconds=harness_itl_mean(run, ttft, e2e),
        itl_per_token_quantiles_seconds=quantiles,
        requests=int(result.finished.size),
        unfinished=int((~result.finished).sum()),
        mean_running=running,
    )


def predict_run(
    run: Run, calibration: Calibration = UNCALIBRATED, *, seed: int = 0
) -> RunPrediction:
    """Simulate `run` under `calibration` and read its statistics."""
    return predict(run, simulate_run(run, calibration, seed=seed), calibration)
