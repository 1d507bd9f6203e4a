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
   to hold `max_model_len`; here a prompt longer than the budget still goes, alone).
4. KV cache: capacity in tokens = (HBM x utilisation - weights) / KV bytes per token (per GPU).
   Each request holds the KV of its cached prefix, prefilled and generated tokens. When a running
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
never carry a prefill chunk (except a recompute after preemption).

Simplifications: KV is counted in tokens (vLLM allocates 16-token blocks); the shared prefix
counts in every request that uses it (vLLM stores it once); no speculative decoding; the
frontend adds no delay. Because every running request decodes in every step, a request's token
times are contiguous runs of step end times, stored as segments rather than per token.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from itlkit.errors import ConfigError
from itlkit.physics.roofline import Deployment, capacity, step_coefficients
from itlkit.sim.config import DEFAULT_KV_TRANSFER_BYTES_PER_SECOND, SchedulerConfig
from itlkit.sim.results import SimulationResult, Summary, fine_buckets_seconds, weighted_quantile
from itlkit.sim.workload import Workload

StepFunction = Callable[..., float]
"""step_function(*, decode_tokens, prefill_tokens, kv_tokens) -> seconds.

Called with ints, except in stretches of pure decode steps, where `kv_tokens` is a numpy array
(one entry per step) and the result must be an array of the same length or a scalar.
"""

DEFAULT_CONFIG = SchedulerConfig()  # `vllm serve` on an H100-class GPU

# Stretches of pure decode steps skip the scheduler: a tight loop, or numpy arrays when long.
FAST_PATH_MIN_STEPS = 2
FAST_PATH_ARRAY_STEPS = 48
FAST_PATH_MAX_STEPS = 4096


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

    def step(*, decode_tokens, prefill_tokens, kv_tokens):
        tokens = decode_tokens + prefill_tokens
        flops = c.attention_flops(chunk_tokens=prefill_tokens) if attention else 0.0
        if np.ndim(tokens) or np.ndim(kv_tokens):
            seconds = c.seconds(tokens=tokens, kv_tokens=kv_tokens, attention_flops=flops)
            return np.where(np.asarray(tokens) > 0, seconds, host)
        if tokens <= 0:
            return host
        return float(
            c.seconds(tokens=tokens, kv_tokens=kv_tokens, attention_flops=flops, maximum=max)
        )

    return step


def transfer_bytes_per_token(deployment: Deployment) -> float:
    """KV bytes one prompt token sends from the prefill to the decode instance (all layers)."""
    return float(deployment.model.kv_bytes_per_token(deployment.kv))


def kv_capacity_tokens(deployment: Deployment) -> int:
    """KV tokens that fit beside the weights: (HBM x utilisation - weights) / KV bytes per token."""
    budget = capacity(deployment, context_tokens=1).kv_budget_bytes
    if budget <= 0:
        raise ConfigError(f"{deployment.label}: the weights do not fit in GPU memory")
    return int(budget // deployment.kv_bytes_per_token_per_gpu)


# ---- the engine ----------------------------------------------------------------------------


def simulate(
    workload: Workload,
    *,
    step_function: StepFunction,
    kv_capacity_tokens: int,
    config: SchedulerConfig = DEFAULT_CONFIG,
    kv_bytes_per_token: float = 0.0,
    until_seconds: float | None = None,
) -> SimulationResult:
    """Run the engine over a workload; stop at `until_seconds` (None: when every request is done).

    `kv_bytes_per_token` only matters in disaggregated mode (the KV transfer time).
    """
    config.validate()
    if isinstance(kv_capacity_tokens, bool) or int(kv_capacity_tokens) < 1:
        raise ConfigError(f"KV capacity must be >= 1 token, got {kv_capacity_tokens!r}")
    capacity_tokens = int(kv_capacity_tokens)
    need = workload.prompt_tokens + workload.output_tokens
    if workload.num_requests and int(need.max()) > capacity_tokens:
        raise ConfigError(
            f"a request needs {int(need.max())} KV tokens (prompt + output) but the KV cache "
            f"holds {capacity_tokens}: it could never finish"
        )
    end_limit = math.inf if until_seconds is None else float(until_seconds)
    if not end_limit > 0:
        raise ConfigError(f"until_seconds must be > 0, got {until_seconds}")

    n = workload.num_requests
    prompt = workload.prompt_tokens.tolist()
    output = workload.output_tokens.tolist()
    cached = workload.cached_prompt_tokens.tolist()
    if config.disaggregated:
        ready = _disaggregated_ready_seconds(
            workload, config=config, step_function=step_function, bytes_per_token=kv_bytes_per_token
        )
        order = np.argsort(ready, kind="stable")
        ready_seconds = ready[order].tolist()
        ready_order = order.tolist()
    else:
        ready_seconds = workload.arrival_seconds.tolist()
        ready_order = list(range(n))

    budget_total = int(config.max_num_batched_tokens)
    max_seqs = int(config.max_num_seqs)
    chunked = bool(config.enable_chunked_prefill)
    disaggregated = bool(config.disaggregated)

    # Per-request state (Python lists: scalar access is several times faster than numpy's).
    computed = [0] * n  # KV tokens held
    target = [0] * n  # tokens to prefill before the next token is emitted
    generated = [0] * n  # tokens emitted so far (valid for non-decoding requests)
    decoding = [False] * n
    seg_step = [0] * n  # step of the current segment's first token
    seg_kv = [0] * n  # KV tokens at the end of that step
    seg_gen = [0] * n  # tokens emitted after that step
    epoch = [0] * n  # bumps on preemption; invalidates scheduled finishes
    first_scheduled = [math.nan] * n
    first_token = [math.nan] * n
    finish = [math.nan] * n
    last_token = [math.nan] * n
    preempted_count = [0] * n
    remote_kv = [disaggregated] * n  # KV arrives from the prefill instance
    for i in range(n):
        computed[i] = cached[i]
        target[i] = prompt[i]

    waiting: deque[int] = deque()
    running: list[int] = []
    partial: list[int] = []  # running requests part-way through a prefill, oldest first
    finishes: dict[int, list[tuple[int, int]]] = {}
    finish_steps: list[int] = []  # heap of the keys of `finishes` (stale ones popped lazily)
    used = 0  # KV tokens held by running requests
    decoders = 0
    decode_kv = 0
    next_ready = 0

    starts: list[float] = []
    durations: list[float] = []
    rec_decode: list[int] = []
    rec_prefill: list[int] = []
    rec_running: list[int] = []
    rec_waiting: list[int] = []
    rec_kv: list[int] = []
    rec_preempt: list[int] = []
    rec_itl: list[int] = []
    rec_first: list[int] = []
    rec_prompt: list[int] = []
    rec_generation: list[int] = []
    seg_request: list[int] = []
    seg_first: list[int] = []
    seg_last: list[int] = []
    gap_request: list[int] = []
    gap_end: list[float] = []
    gap_value: list[float] = []

    t = 0.0
    s = 0
    while True:
        while next_ready < n and ready_seconds[next_ready] <= t:
            waiting.append(ready_order[next_ready])
            next_ready += 1
        if not running and not waiting:
            if next_ready >= n:
                break
            t = ready_seconds[next_ready]
            continue
        if t >= end_limit:
            break

        # -- fast path: a stretch of pure decode steps (nothing to admit, nobody finishing) ------
        if decoders == len(running) and decoders and (not waiting or len(running) >= max_seqs):
            while finish_steps and finish_steps[0] not in finishes:
                heapq.heappop(finish_steps)
            stretch = min(
                (finish_steps[0] if finish_steps else s + FAST_PATH_MAX_STEPS) - s,
                (capacity_tokens - used) // decoders,
                FAST_PATH_MAX_STEPS,
            )
            limit = min(ready_seconds[next_ready] if next_ready < n else math.inf, end_limit)
            if stretch >= FAST_PATH_MIN_STEPS:
                first = float(
                    step_function(decode_tokens=decoders, prefill_tokens=0, kv_tokens=decode_kv)
                )
                if not first > 0:
                    raise ConfigError(f"step function returned {first} s for a step; must be > 0")
                # Steps only lengthen as KV grows, so the first bounds how many start before limit.
                if limit < math.inf:
                    stretch = min(stretch, int((limit - t) / first) + 1)
            if stretch >= FAST_PATH_ARRAY_STEPS:
                k = np.arange(stretch)
                seconds = step_function(
                    decode_tokens=decoders, prefill_tokens=0, kv_tokens=decode_kv + k * decoders
                )
                seconds = np.broadcast_to(np.asarray(seconds, dtype=float), (stretch,))
                # Sequential sums, so each start equals the previous start + duration exactly.
                clock = np.cumsum(np.concatenate(([t], seconds)))
                # Steps that start before the next arrival (or the end) cannot see it.
                stretch = int(np.searchsorted(clock[:-1], limit, side="left"))
                if not np.all(seconds[:stretch] > 0):
                    raise ConfigError("step function returned a step of <= 0 s; must be > 0")
                starts.extend(clock[:stretch].tolist())
                durations.extend(seconds[:stretch].tolist())
                rec_kv.extend((used + (k[:stretch] + 1) * decoders).tolist())
                used += stretch * decoders
                decode_kv += stretch * decoders
                t = float(clock[stretch])
            elif stretch >= FAST_PATH_MIN_STEPS:
                done = 0
                while done < stretch and t < limit:
                    duration = step_function(
                        decode_tokens=decoders, prefill_tokens=0, kv_tokens=decode_kv
                    )
                    if not duration > 0:
                        raise ConfigError(f"step function returned {duration} s; must be > 0")
                    starts.append(t)
                    durations.append(duration)
                    used += decoders
                    decode_kv += decoders
                    rec_kv.append(used)
                    t += duration
                    done += 1
                stretch = done
            else:
                stretch = 0
            if stretch:
                rec_decode.extend([decoders] * stretch)
                rec_prefill.extend([0] * stretch)
                rec_running.extend([len(running)] * stretch)
                rec_waiting.extend([len(waiting)] * stretch)
                rec_preempt.extend([0] * stretch)
                rec_itl.extend([decoders] * stretch)
                rec_first.extend([0] * stretch)
                rec_prompt.extend([0] * stretch)
                rec_generation.extend([decoders] * stretch)
                s += stretch
                continue
        # -- schedule: decodes first, preempting the newest request while KV is short --------
        preempted = 0
        while used + decoders > capacity_tokens:
            victim = running.pop()
            preempted += 1
            if not decoding[victim]:
                partial.remove(victim)
            used, decoders, decode_kv = _preempt(
                victim, s, t, used, decoders, decode_kv, decoding, computed, cached, target,
                generated, prompt, seg_step, seg_kv, seg_gen, epoch, preempted_count,
                seg_request, seg_first, seg_last, remote_kv, last_token,
            )  # fmt: skip
            waiting.appendleft(victim)
        used += decoders
        budget = budget_total - decoders
        prefill = 0
        new_tokens = 0  # disaggregated admissions: one decode token each, no prefill
        new_kv = 0
        completions: list[int] = []

        # Running requests part-way through their prompt continue, oldest first.
        for i in list(partial):
            if budget <= 0:
                break
            if i not in partial:  # preempted by an older request's chunk in this step
                continue
            chunk = target[i] - computed[i]
            if chunk > budget:
                chunk = budget
            while used + chunk > capacity_tokens:
                victim = running.pop()
                preempted += 1
                if decoding[victim]:
                    used -= 1  # its decode token, reserved above
                    budget += 1
                else:
                    partial.remove(victim)
                used, decoders, decode_kv = _preempt(
                    victim, s, t, used, decoders, decode_kv, decoding, computed, cached,
                    target, generated, prompt, seg_step, seg_kv, seg_gen, epoch,
                    preempted_count, seg_request, seg_first, seg_last, remote_kv, last_token,
                )  # fmt: skip
                waiting.appendleft(victim)
                if victim == i:
                    break
            if i not in partial:
                continue
            computed[i] += chunk
            used += chunk
            budget -= chunk
            prefill += chunk
            if computed[i] == target[i]:
                partial.remove(i)
                completions.append(i)

        # Then waiting requests, in order, while there is room (never after a preemption).
        if not preempted:
            while waiting and len(running) < max_seqs and budget > 0:
                i = waiting[0]
                if remote_kv[i]:
                    # Disaggregated: the prompt's KV arrived; one decode token emits token 1.
                    if used + prompt[i] + 1 > capacity_tokens:
                        break
                    waiting.popleft()
                    running.append(i)
                    if first_scheduled[i] != first_scheduled[i]:
                        first_scheduled[i] = t
                    computed[i] = prompt[i] + 1
                    used += prompt[i] + 1
                    budget -= 1
                    new_tokens += 1
                    new_kv += prompt[i]
                    completions.append(i)
                    continue
                chunk = target[i] - computed[i]
                if chunk > budget:
                    if chunked:
                        chunk = budget
                    elif prefill > 0:
                        break
                # It holds its prefix-cached tokens' KV from now on, plus the chunk's.
                if used + computed[i] + chunk > capacity_tokens:
                    break
                waiting.popleft()
                running.append(i)
                if first_scheduled[i] != first_scheduled[i]:  # NaN: first time scheduled
                    first_scheduled[i] = t
                used += computed[i] + chunk
                computed[i] += chunk
                budget -= chunk
                prefill += chunk
                if computed[i] == target[i]:
                    completions.append(i)
                else:
                    partial.append(i)

        # -- run the step ---------------------------------------------------------------------
        duration = float(
            step_function(
                decode_tokens=decoders + new_tokens,
                prefill_tokens=prefill,
                kv_tokens=decode_kv + new_kv,
            )
        )
        if not duration > 0:
            raise ConfigError(f"step function returned {duration} s for a step; it must be > 0")
        end = t + duration
        starts.append(t)
        durations.append(duration)
        rec_decode.append(decoders + new_tokens)
        rec_prefill.append(prefill)
        rec_running.append(len(running))
        rec_waiting.append(len(waiting))
        rec_preempt.append(preempted)
        rec_itl.append(decoders)
        decode_kv += decoders
        generation = decoders

        # Requests whose last token is this step's leave and free their KV.
        for i, e in finishes.pop(s, ()):
            if e != epoch[i]:
                continue
            kv = seg_kv[i] + (s - seg_step[i])
            running.remove(i)
            decoding[i] = False
            decoders -= 1
            decode_kv -= kv
            used -= kv
            finish[i] = end
            generated[i] = output[i]
            seg_request.append(i)
            seg_first.append(seg_step[i])
            seg_last.append(s)

        # Requests whose prefill completed emit a token and start (or resume) decoding.
        prompt_done = 0
        first_count = 0
        for i in completions:
            generation += 1
            if math.isnan(first_token[i]):
                first_token[i] = end
                first_count += 1
                prompt_done += prompt[i]
            else:
                gap_request.append(i)
                gap_end.append(end)
                gap_value.append(end - last_token[i])
            remote_kv[i] = False
            generated[i] += 1
            if generated[i] >= output[i]:
                running.remove(i)
                used -= computed[i]
                finish[i] = end
                seg_request.append(i)
                seg_first.append(s)
                seg_last.append(s)
                continue
            decoding[i] = True
            decoders += 1
            decode_kv += computed[i]
            seg_step[i] = s
            seg_kv[i] = computed[i]
            seg_gen[i] = generated[i]
            last = s + output[i] - generated[i]
            if last not in finishes:
                finishes[last] = []
                heapq.heappush(finish_steps, last)
            finishes[last].append((i, epoch[i]))
        rec_first.append(first_count)
        rec_prompt.append(prompt_done)
        rec_generation.append(generation)
        rec_kv.append(used)
        t = end
        s += 1

    # Close the segments of requests still decoding when the run stopped.
    for i in running:
        if decoding[i]:
            seg_request.append(i)
            seg_first.append(seg_step[i])
            seg_last.append(s - 1)
            generated[i] = seg_gen[i] + (s - 1 - seg_step[i])

    return SimulationResult(
        config=config,
        workload=workload,
        kv_capacity_tokens=capacity_tokens,
        end_seconds=float(t if until_seconds is None else max(t, end_limit)),
        step_start_seconds=np.asarray(starts, dtype=float),
        step_duration_seconds=np.asarray(durations, dtype=float),
        step_decode_tokens=np.asarray(rec_decode, dtype=np.int64),
        step_prefill_tokens=np.asarray(rec_prefill, dtype=np.int64),
        step_running=np.asarray(rec_running, dtype=np.int64),
        step_waiting=np.asarray(rec_waiting, dtype=np.int64),
        step_kv_tokens=np.asarray(rec_kv, dtype=np.int64),
        step_preemptions=np.asarray(rec_preempt, dtype=np.int64),
        step_itl_observations=np.asarray(rec_itl, dtype=np.int64),
        step_first_tokens=np.asarray(rec_first, dtype=np.int64),
        step_prompt_tokens=np.asarray(rec_prompt, dtype=np.int64),
        step_generation_tokens=np.asarray(rec_generation, dtype=np.int64),
        first_scheduled_seconds=np.asarray(first_scheduled, dtype=float),
        first_token_seconds=np.asarray(first_token, dtype=float),
        finish_seconds=np.asarray(finish, dtype=float),
        generated_tokens=np.asarray(generated, dtype=np.int64),
        request_preemptions=np.asarray(preempted_count, dtype=np.int64),
        segment_request=np.asarray(seg_request, dtype=np.int64),
        segment_first_step=np.asarray(seg_first, dtype=np.int64),
        segment_last_step=np.asarray(seg_last, dtype=np.int64),
        gap_request=np.asarray(gap_request, dtype=np.int64),
        gap_end_seconds=np.asarray(gap_end, dtype=float),
        gap_itl_seconds=np.asarray(gap_value, dtype=float),
    )


def _preempt(
    i, s, t, used, decoders, decode_kv, decoding, computed, cached, target, generated, prompt,
    seg_step, seg_kv, seg_gen, epoch, preempted_count, seg_request, seg_first, seg_last,
    remote_kv, last_token,
):  # fmt: skip
    """Free request i's KV and reset it to recompute prompt + generated tokens (vLLM V1)."""
    if decoding[i]:
        # It last emitted a token at step s - 1.
        kv = seg_kv[i] + (s - 1 - seg_step[i])
        generated[i] = seg_gen[i] + (s - 1 - seg_step[i])
        decoders -= 1
        decode_kv -= kv
        used -= kv
        decoding[i] = False
        seg_request.append(i)
        seg_first.append(seg_step[i])
        seg_last.append(s - 1)
        last_token[i] = t  # steps run back to back while it decodes: step s - 1 ended at t
    else:
        used -= computed[i]
    # The shared prefix stays in the prefix cache (other requests hold it); the rest is recomputed.
    computed[i] = cached[i]
    target[i] = prompt[i] + generated[i]
    remote_kv[i] = False
    epoch[i] += 1
    preempted_count[i] += 1
    return used, decoders, decode_kv


def _disaggregated_ready_seconds(
    workload: Workload, *, config: SchedulerConfig, step_function: StepFunction, bytes_per_token
) -> np.ndarray:
    """When each prompt's KV reaches the decode instance: FIFO prefill instance + transfer."""
    chunk = int(config.max_num_batched_tokens)
    ready = np.empty(workload.num_requests)
    free_at = 0.0
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
        free_at = max(free_at, arrival) + seconds
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
) -> SimulationResult:
    """Simulate a deployment: roofline step times and the KV capacity its GPU memory allows."""
    return simulate(
        workload,
        step_function=roofline_step_function(
            deployment, efficiency=efficiency, host_overhead_seconds=host_overhead_seconds
        ),
        kv_capacity_tokens=kv_capacity_tokens(deployment),
        config=config,
        kv_bytes_per_token=transfer_bytes_per_token(deployment),
        until_seconds=until_seconds,
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
    "transfer_bytes_per_token",
    "weighted_quantile",
]
