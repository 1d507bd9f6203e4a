"""A continuous-batching scheduler simulator with vLLM V1 semantics, step by step.

Each engine step (vLLM V1 `Scheduler.schedule`, chunked prefill on, as `vllm serve` defaults):

1. Requests that arrived before the step starts join the FIFO waiting queue.
2. Every running request that has finished its prefill gets one decode token. Decodes come first
   (vLLM walks its running list in admission order, decode or not; the request part-way through
   a prompt is nearly always the newest, so in practice its decodes are served first too).
3. Running requests still part-way through a prompt get the next chunk, then waiting requests are
   admitted in arrival order while fewer than `max_num_seqs` run, each taking a chunk of at most
   the token budget left: `max_num_batched_tokens` counts decode and prefill tokens together.
   With chunked prefill off a prompt is prefilled whole in one step (vLLM then requires the budget
   to hold `max_model_len`; here a prompt longer than the budget still goes, alone). vLLM V0
   without chunked prefill (`prefill_only_steps`) goes further: waiting prompts are admitted
   first with the whole budget, and a step that admits any runs them alone while every decode
   waits (`Engine.prefill_only`).
4. KV cache: capacity in tokens = (HBM x utilisation - weights) / KV bytes per token (per GPU).
   Each request holds the KV of its cached prefix, prefilled and generated tokens; a prefix that
   requests of one group share (a system prompt served from the prefix cache) is held once while
   any of them runs, as vLLM's block pool keeps one reference-counted copy. When a running
   request cannot get KV for its next tokens, the newest running request is preempted by
   recompute (vLLM V1 `running.pop()`): its KV is freed, it goes to the front of the waiting
   queue, and later prefills prompt + generated tokens again. No waiting request is admitted in a
   step that preempted, and a waiting request is admitted only if its chunk's KV fits.
5. The step lasts `step_function(decode_tokens=, prefill_tokens=, kv_tokens=)` seconds, where
   `kv_tokens` is the summed context of the decoding requests. At its end each decode emits a
   token, and each request whose prefill completes emits its first (or, after recompute, next)
   token.

What the metrics see (vLLM `IterationStats`): one ITL observation per request per step that
produced output, `token time - previous token time`, so a request that decoded in consecutive
steps observes the step's duration, and a preempted one observes the whole gap. TTFT = first
token - arrival; e2e = last token - arrival.

Disaggregated mode: prompts are prefilled on a separate prefill instance (FIFO, chunks of the
token budget, step time from the same function with no decodes), their KV crosses the network at
`kv_transfer_bytes_per_second`, and the decode instance admits them as plain decodes: its steps
never carry a prefill chunk (except a recompute after preemption). A transferred prompt's KV is
held whole by its request (a shared prefix is not deduplicated across transfers).

Simplifications: KV is counted in tokens (vLLM allocates 16-token blocks: up to 15 tokens a
request more); a request that missed the prefix cache keeps its own copy of the prefix, apart
from the copy that later hits share (vLLM's hits would reference its blocks: at most one prefix
per group counted twice while it runs); attention still reads the shared prefix once per
sequence (no cascade attention); the frontend adds no delay. Speculative decoding runs each
request's output as events of several tokens (`sim.speculative`, `simulate_speculative`). Because
every running request decodes in every step, a request's token times are contiguous runs of step
end times, stored as segments rather than per token.

The steps above are the methods of `itlkit.sim.engine.Engine`; this module holds the public entry
points (`simulate`, `simulate_deployment`) and the roofline step function.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from itlkit.errors import ConfigError
from itlkit.physics.engine_memory import vllm_kv_cache
from itlkit.physics.roofline import Deployment, step_coefficients
from itlkit.physics.speculative import Speculation
from itlkit.sim.config import DEFAULT_KV_TRANSFER_BYTES_PER_SECOND, SchedulerConfig
from itlkit.sim.engine import Engine
from itlkit.sim.intake import intake_departures
from itlkit.sim.results import SimulationResult, Summary, fine_buckets_seconds, weighted_quantile
from itlkit.sim.speculative import (
    capacity_in_units,
    draw_events,
    event_workload,
    kv_scale,
    speculative_step_function,
)
from itlkit.sim.workload import Workload

StepFunction = Callable[..., float]
"""step_function(*, decode_tokens, prefill_tokens, kv_tokens) -> seconds.

Called with ints, except in stretches of pure decode steps, where `kv_tokens` is a numpy array
(one entry per step) and the result must be an array of the same length or a scalar.
"""

DEFAULT_CONFIG = SchedulerConfig()  # `vllm serve` on an H100-class GPU


# ---- step time -----------------------------------------------------------------------------


def constant_step_function(seconds: float) -> StepFunction:
    """Every step lasts `seconds`, whatever it carries (for tests and what-ifs)."""
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ConfigError(f"step seconds must be > 0, got {seconds}")

    def step(*, decode_tokens, prefill_tokens, kv_tokens):
        return seconds

    return step


def roofline_step_function(
    deployment: Deployment,
    *,
    efficiency: float = 1.0,
    host_overhead_seconds: float | None = None,
) -> StepFunction:
    """Roofline step time (`roofline.StepCoefficients`) / efficiency + per-step host overhead.

    `efficiency` scales the GPU time (1 = the roofline model as is, 0.6 = a server at 60% of it);
    host overhead defaults to the deployment's. Python ints get Python floats (the engine calls
    it once a step); arrays of tokens or of KV tokens get arrays.
    """
    if not (0 < efficiency <= 1):
        raise ConfigError(f"efficiency must be in (0, 1], got {efficiency}")
    c = step_coefficients(
        deployment, efficiency=efficiency, host_overhead_seconds=host_overhead_seconds
    )
    host = c.host_overhead_seconds
    if not (host >= 0 and math.isfinite(host)):
        raise ConfigError(f"host overhead must be a finite number >= 0 seconds, got {host}")
    attention = c.attention_flops_per_token_pair > 0
    if c.moe is not None:
        # an MoE step's weight bytes depend on the experts its tokens touch: the same for every
        # step of that size (a few thousand sizes in a run), so remembered per size
        scalar, weight_read = None, functools.cache(c.weight_read)
    elif c.window_tokens:  # sliding-window layers: `c.seconds` caps their KV read and attention
        scalar, weight_read = None, None
    else:
        scalar = _engine_scalar_seconds(c) if c.engine else _scalar_seconds(c)
        weight_read = None

    def step(*, decode_tokens, prefill_tokens, kv_tokens):
        if scalar is not None and type(kv_tokens) is int and type(decode_tokens) is int:
            return scalar(decode_tokens, prefill_tokens, kv_tokens)  # a scheduled step
        tokens = decode_tokens + prefill_tokens
        flops = c.attention_flops(chunk_tokens=prefill_tokens) if attention else 0.0
        sequences = decode_tokens + (prefill_tokens > 0)  # the prefilling one, as one (or none)
        if isinstance(tokens, np.ndarray):
            seconds = c.seconds(tokens, kv_tokens, flops, sequences=sequences)
            return np.where(tokens > 0, seconds, host)
        if tokens <= 0:
            return host if np.ndim(kv_tokens) == 0 else np.full(np.shape(kv_tokens), host)
        weight = weight_read(tokens) if weight_read is not None else None
        if isinstance(kv_tokens, np.ndarray):  # a stretch of decode steps
            return c.seconds(tokens, kv_tokens, flops, max, sequences, weight)
        return float(c.seconds(tokens, kv_tokens, flops, max, sequences, weight))

    if scalar is not None:
        step.scheduled_seconds = scalar  # the engine's positional call for scheduled steps
    return step


def _scalar_constants(c) -> tuple:
    """The step formula's constants as local numbers for the scalar step functions: weight read,
    FLOPs per token, FLOP/s, KV bytes per token, HBM B/s, attention FLOPs per token pair,
    all-reduce bytes per token, link B/s, all-reduce latency per step, efficiency, host per step
    and per sequence."""
    return (c.weight_read_seconds, c.matmul_flops_per_token, c.flops_per_second,
            c.kv_bytes_per_token, c.hbm_bytes_per_second, c.attention_flops_per_token_pair,
            c.allreduce_bytes_per_token, c.link_bytes_per_second, c.allreduce_seconds_per_step,
            c.efficiency, c.host_overhead_seconds, c.host_seconds_per_sequence)  # fmt: skip


def _scalar_seconds(c):
    """`c.seconds` for one scheduled step of a dense model, on Python numbers: the same
    operations in the same order (so the same floats), without the method calls."""
    weight, fpt, fps, kvpt, hbm, pair, arpt, link, arlat, efficiency, host, per_seq = (
        _scalar_constants(c)
    )

    def seconds(decode: int, prefill: int, kv: int) -> float:
        tokens = decode + prefill
        if tokens <= 0:
            return host
        flops = pair * prefill * (0 + prefill / 2.0) if pair > 0 else 0.0
        matmul = fpt * tokens / fps
        gpu = (max(weight, matmul) + kvpt * kv / hbm + flops / fps
               + (arpt * tokens / link + arlat))  # fmt: skip
        return gpu / efficiency + (host + per_seq * (decode + (prefill > 0)))

    return seconds


def _engine_scalar_seconds(c):
    """`c.seconds` of the engine model for one scheduled step of a dense model, on Python
    numbers (`StepCoefficients.total` with the engine terms; see `_scalar_seconds`)."""
    weight, fpt, fps, kvpt, hbm, pair, arpt, link, arlat, efficiency, host, per_seq = (
        _scalar_constants(c)
    )
    head, half = c.head_flops_per_sequence, c.mfu_half_tokens

    def seconds(decode: int, prefill: int, kv: int) -> float:
        tokens = decode + prefill
        if tokens <= 0:
            return host
        sequences = decode + (prefill > 0)
        matmul = (fpt * (tokens + half) + head * (sequences + half)) / fps
        flops = pair * prefill * (prefill / 2.0) if pair > 0 else 0.0
        memory = (kvpt * kv / hbm + (arpt * tokens / link + arlat)) / efficiency
        return (
            max(weight / efficiency, matmul) + memory + flops / fps + (host + per_seq * sequences)
        )

    return seconds


def step_jitter_factors(sigma: float, *, seed=0, size: int = 1 << 16) -> np.ndarray | None:
    """Mean-one lognormal factors (log standard deviation `sigma`) that jitter the steps; None
    for no jitter. Reproducible: the same seed gives the same factors on any machine.

    Drawn with `Generator.lognormal`, which takes each exp() from the C library one value at a
    time: `np.exp` on an array picks a SIMD kernel by CPU (AVX-512 or not), whose last bits
    differ, and every simulated time after the first step would carry that difference."""
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ConfigError(f"step jitter must be a finite number >= 0, got {sigma}")
    if sigma == 0:
        return None
    return np.random.default_rng(seed).lognormal(-sigma * sigma / 2.0, sigma, size)


def transfer_bytes_per_token(deployment: Deployment) -> float:
    """KV bytes one prompt token sends from the prefill to the decode instance (all layers)."""
    return float(deployment.model.kv_bytes_per_token(deployment.kv))


def kv_capacity_tokens(deployment: Deployment) -> int:
    """The KV tokens vLLM would allocate: its CUDA total x utilisation - weights - the profiled
    activations, in whole blocks (`physics.engine_memory`)."""
    memory = vllm_kv_cache(deployment)
    if memory.kv_tokens < 1:
        raise ConfigError(
            f"{deployment.label}: the weights leave no KV cache in "
            f"{memory.utilization:g} of {memory.total_bytes / 1e9:.2f} GB (vLLM would not start)"
        )
    return memory.kv_tokens


# ---- the engine ----------------------------------------------------------------------------


def simulate(
    workload: Workload,
    *,
    step_function: StepFunction,
    kv_capacity_tokens: int,
    config: SchedulerConfig = DEFAULT_CONFIG,
    kv_bytes_per_token: float = 0.0,
    until_seconds: float | None = None,
    jitter: np.ndarray | None = None,
    stop_when: Callable[[Engine], bool] | None = None,
    check_every_seconds: float = 5.0,
) -> SimulationResult:
    """Run the engine over a workload; stop at `until_seconds` (None: when every request is done),
    or earlier when `stop_when(engine)`, asked every `check_every_seconds` of simulated time,
    says the outcome is already known (the result then ends there).

    `kv_bytes_per_token` only matters in disaggregated mode (the KV transfer time). `jitter`:
    factors that multiply step s's time by `jitter[s % len(jitter)]` (`step_jitter_factors`).
    A closed-loop workload (`Workload.max_concurrency`) comes back with its arrival times set to
    when each request was sent (a request never sent by the end arrives at the end), so that
    TTFT and E2E start there, as the client measures them.
    """
    capacity_tokens, end_limit = _checked(workload, config, kv_capacity_tokens, until_seconds)
    taken_in = _taken_in(workload, config)
    if config.disaggregated:
        ready = _disaggregated_ready_seconds(
            taken_in, config=config, step_function=step_function, bytes_per_token=kv_bytes_per_token
        )
        order = np.argsort(ready, kind="stable")
        ready_seconds = ready[order]
    else:
        order = np.arange(workload.num_requests)
        ready_seconds = taken_in.arrival_seconds
    engine = Engine(
        workload,
        step_function=step_function,
        capacity_tokens=capacity_tokens,
        config=config,
        ready_seconds=ready_seconds,
        ready_order=order,
        end_seconds=end_limit,
        jitter=jitter,
    )
    next_check = check_every_seconds
    while engine.step():
        if stop_when is not None and engine.t >= next_check:
            next_check = engine.t + check_every_seconds
            if stop_when(engine):
                break
    engine.close()
    end = max(engine.t, end_limit) if until_seconds is not None else engine.t
    if workload.max_concurrency is not None:
        sent = np.minimum(engine.sent_seconds(), max(end, workload.last_arrival_seconds))
        workload = replace(workload, arrival_seconds=np.maximum(sent, workload.arrival_seconds))
    return _result(engine, workload, config, end_seconds=end)


def _taken_in(workload: Workload, config: SchedulerConfig) -> Workload:
    """The workload as the engine receives it: each request once the API server took it in
    (`sim.intake`), where the config has an intake cost. A closed loop sends one request per
    finish, so its requests rarely queue there: they reach the engine at their send."""
    per_token = config.intake_seconds_per_prompt_token
    if not per_token or workload.max_concurrency is not None:
        return workload
    taken = intake_departures(workload.arrival_seconds, workload.prompt_tokens, per_token)
    return replace(workload, arrival_seconds=taken)


def _checked(workload: Workload, config: SchedulerConfig, kv_capacity_tokens, until_seconds):
    """(KV capacity in tokens, end time) after refusing what could not run."""
    config.validate()
    if config.disaggregated and workload.max_concurrency is not None:
        raise ConfigError(
            "a closed-loop client (max_concurrency) with disaggregated prefill is not simulated: "
            "its sends depend on finishes that the prefill instance's queue would have to know"
        )
    if isinstance(kv_capacity_tokens, bool) or int(kv_capacity_tokens) < 1:
        raise ConfigError(f"KV capacity must be >= 1 token, got {kv_capacity_tokens!r}")
    capacity_tokens = int(kv_capacity_tokens)
    need = workload.prompt_tokens + workload.output_tokens
    too_long = np.flatnonzero(need > capacity_tokens)
    if too_long.size:
        i = int(too_long[0])
        more = f" (and {too_long.size - 1:,} more)" if too_long.size > 1 else ""
        raise ConfigError(
            f"{workload.request_name(i)}{more} needs {int(need[i]):,} KV tokens (prompt "
            f"{int(workload.prompt_tokens[i]):,} + output {int(workload.output_tokens[i]):,}) "
            f"but the KV cache holds {capacity_tokens:,}: it could never finish; shorten it, or "
            "give the KV cache more room (more GPUs, a larger memory share, FP8 KV)"
        )
    end_limit = math.inf if until_seconds is None else float(until_seconds)
    if not end_limit > 0:
        raise ConfigError(f"until_seconds must be > 0, got {until_seconds}")
    return capacity_tokens, end_limit


def _result(engine: Engine, workload: Workload, config, *, end_seconds) -> SimulationResult:
    steps = engine.log.arrays()
    requests = engine.request_arrays()
    segments = engine.segments
    return SimulationResult(
        config=config,
        workload=workload,
        kv_capacity_tokens=engine.capacity,
        end_seconds=float(end_seconds),
        step_start_seconds=steps["start"],
        step_duration_seconds=steps["duration"],
        step_decode_tokens=steps["decode"],
        step_prefill_tokens=steps["prefill"],
        step_running=steps["running"],
        step_waiting=steps["waiting"],
        step_kv_tokens=steps["kv"],
        step_preemptions=steps["preemptions"],
        step_itl_observations=steps["itl"],
        step_first_tokens=steps["first"],
        step_prompt_tokens=steps["prompt"],
        step_generation_tokens=steps["generation"],
        first_scheduled_seconds=requests["first_scheduled"],
        first_token_seconds=requests["first_token"],
        finish_seconds=requests["finish"],
        generated_tokens=requests["generated"],
        request_preemptions=requests["preemptions"],
        segment_request=np.asarray(segments.request, dtype=np.int64),
        segment_first_step=np.asarray(segments.first, dtype=np.int64),
        segment_last_step=np.asarray(segments.last, dtype=np.int64),
        gap_request=np.asarray(segments.gap_request, dtype=np.int64),
        gap_end_seconds=np.asarray(segments.gap_end, dtype=float),
        gap_itl_seconds=np.asarray(segments.gap_value, dtype=float),
    )


def _disaggregated_ready_seconds(
    workload: Workload, *, config: SchedulerConfig, step_function: StepFunction, bytes_per_token
) -> np.ndarray:
    """When each prompt's KV reaches the decode instance: the prompts, in arrival order, each
    on the prefill instance free first (`config.prefill_instances` of them, FIFO), + transfer."""
    chunk = int(config.max_num_batched_tokens)
    ready = np.empty(workload.num_requests)
    free = [0.0] * int(config.prefill_instances)  # a heap of when each instance is free
    cache: dict[int, float] = {}
    for i, (arrival, prompt, cached) in enumerate(
        zip(
            workload.arrival_seconds.tolist(),
            workload.prompt_tokens.tolist(),
            workload.cached_prompt_tokens.tolist(),
            strict=True,
        )
    ):
        tokens = prompt - cached
        seconds = cache.get(tokens)
        if seconds is None:
            full, rest = divmod(tokens, chunk)
            seconds = full * float(
                step_function(decode_tokens=0, prefill_tokens=chunk, kv_tokens=0)
            )
            if rest:
                seconds += float(step_function(decode_tokens=0, prefill_tokens=rest, kv_tokens=0))
            cache[tokens] = seconds
        free_at = max(heapq.heappop(free), arrival) + seconds
        heapq.heappush(free, free_at)
        ready[i] = free_at + prompt * bytes_per_token / config.kv_transfer_bytes_per_second
    return ready


def simulate_deployment(
    workload: Workload,
    *,
    deployment: Deployment,
    config: SchedulerConfig = DEFAULT_CONFIG,
    efficiency: float = 1.0,
    host_overhead_seconds: float | None = None,
    until_seconds: float | None = None,
    jitter: np.ndarray | None = None,
    kv_tokens: int | None = None,
    speculation: Speculation | None = None,
    seed=0,
    stop_when: Callable[[Engine], bool] | None = None,
) -> SimulationResult:
    """Simulate a deployment: roofline step times and the KV capacity its GPU memory allows
    (vLLM's sizing, `kv_capacity_tokens`, unless `kv_tokens` gives another engine's); with
    `speculation`, decoding in verification steps whose accepted drafts `seed` draws;
    `stop_when` as in `simulate`."""
    step_function = roofline_step_function(
        deployment, efficiency=efficiency, host_overhead_seconds=host_overhead_seconds
    )
    kw = dict(
        kv_capacity_tokens=kv_capacity_tokens(deployment) if kv_tokens is None else kv_tokens,
        config=config,
        kv_bytes_per_token=transfer_bytes_per_token(deployment),
        until_seconds=until_seconds,
        jitter=jitter,
        stop_when=stop_when,
    )
    if speculation is None:
        return simulate(workload, step_function=step_function, **kw)
    return simulate_speculative(
        workload, step_function=step_function, deployment=deployment, spec=speculation,
        seed=seed, **kw,
    )  # fmt: skip


def simulate_speculative(
    workload: Workload,
    *,
    step_function: StepFunction,
    deployment: Deployment,
    spec: Speculation,
    kv_capacity_tokens: int,
    config: SchedulerConfig = DEFAULT_CONFIG,
    seed=0,
    **kw,
) -> SimulationResult:
    """`simulate` with speculative decoding (`sim.speculative`): the engine runs each request's
    output as events drawn from `spec`; the result counts tokens again (its workload, generated
    tokens, KV) and keeps each event's tokens (`token_events`) for the per-token views."""
    _checked(workload, config, kv_capacity_tokens, kw.get("until_seconds"))
    events = draw_events(workload.output_tokens, spec, seed=seed)
    engine_workload = event_workload(workload, events)
    scale = kv_scale(workload, events)
    result = simulate(
        engine_workload,
        step_function=speculative_step_function(step_function, deployment, spec,
                                                kv_per_unit=scale),
        kv_capacity_tokens=capacity_in_units(kv_capacity_tokens, engine_workload, scale),
        config=replace(config, speculative_tokens=spec.k),
        **kw,
    )  # fmt: skip
    generated = events.tokens_after(np.arange(workload.num_requests), result.generated_tokens)
    request, step, ordinal = result.output_events()
    emitted = np.bincount(step, weights=events.tokens_of(request, ordinal), minlength=result.steps)
    return replace(
        result,
        workload=replace(result.workload, output_tokens=workload.output_tokens),
        kv_capacity_tokens=int(kv_capacity_tokens),
        step_kv_tokens=np.rint(result.step_kv_tokens * scale).astype(result.step_kv_tokens.dtype),
        generated_tokens=generated,
        step_generation_tokens=emitted.astype(result.step_generation_tokens.dtype),
        token_events=events,
    )


__all__ = [
    "DEFAULT_KV_TRANSFER_BYTES_PER_SECOND",
    "SchedulerConfig",
    "SimulationResult",
    "StepFunction",
    "Summary",
    "constant_step_function",
    "fine_buckets_seconds",
    "kv_capacity_tokens",
    "roofline_step_function",
    "simulate",
    "simulate_deployment",
    "simulate_speculative",
    "transfer_bytes_per_token",
    "weighted_quantile",
]
