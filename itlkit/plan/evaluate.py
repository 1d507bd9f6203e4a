"""One candidate simulated over its share of the traffic: its ITL and TTFT p99s and its cost.

Each replica serves 1 / replicas of the requests (an even router): one replica is simulated
over Poisson arrivals at that rate, drained, with vLLM's sizing of its KV cache and the
calibration's step model. A request that never got its first token before the run ended counts
as an infinite TTFT, so an overloaded candidate fails its TTFT target instead of hiding its queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from itlkit.errors import ConfigError
from itlkit.physics.calibration import Calibration
from itlkit.physics.engine_memory import cuda_total_bytes, sglang_kv_cache
from itlkit.physics.hardware import get_gpu
from itlkit.physics.speculative import Speculation, measured_overheads
from itlkit.plan.prune import deployment_of
from itlkit.plan.space import Candidate, Traffic
from itlkit.sim.arrivals import RateProfile
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.scheduler import simulate_deployment
from itlkit.sim.sglang import sglang_settings
from itlkit.sim.workload import synthetic_workload

DRAIN_FACTOR = 4.0  # a replica still busy this many windows after the last arrival is overloaded
# Over this share of all requests waiting longer than the TTFT target for their first token,
# the TTFT p99 target is already missed, whatever the rest of the run does (`ttft_missed`)
LATE_SHARE = 0.01


@dataclass(frozen=True)
class Outcome:
    """What a simulation of one replica measured (seconds; inf: some request never got a
    token); `problem` says why it could not run."""

    itl_p99_seconds: float
    ttft_p99_seconds: float
    output_tokens_per_second: float  # all replicas together
    problem: str = ""
    tpot_p99_seconds: float = math.nan  # per finished request, per token (speculation: < ITL)
    # the TTFT target this run stopped at, certainly missed (its p99s are then of a partial
    # run, and TTFT is inf); None: the run went to the end
    stopped_at_ttft_seconds: float | None = None
    # arrival to last token over arrived requests (inf: unfinished)
    e2e_p99_seconds: float = math.nan


# The calibration's leave-one-out median error of each p99, by the planner's name for it
UNCERTAINTY_KEYS = {"itl_p99": "itl_token_p0.99", "ttft_p99": "ttft_p99_seconds"}


def p99_uncertainty(calibration: Calibration) -> dict[str, float]:
    """How far off each predicted p99 tends to be: the calibration's leave-one-out median
    relative error on real runs (empty for the uncalibrated roofline: unknown)."""
    held = calibration.leave_one_out
    return {key: float(held[name]) for key, name in UNCERTAINTY_KEYS.items() if name in held}


def replica_workload(traffic: Traffic, replicas: int):
    """One replica's share: Poisson arrivals at rate / replicas (its own seed, the traffic's),
    or of a replayed workload every replicas-th request (a round-robin router's first)."""
    if traffic.replay is not None:
        w, take = traffic.replay, slice(0, None, replicas)
        columns = ("arrival_seconds", "prompt_tokens", "output_tokens", "cached_prompt_tokens",
                   "shared_prompt_tokens", "prefix_group")  # fmt: skip
        dealt = {name: getattr(w, name)[take].copy() for name in columns}
        origin = None if w.origin is None else w.origin[take].copy()
        return replace(w, origin=origin, **dealt)
    if traffic.profile is not None:
        p = traffic.profile
        share = RateProfile(p.start_seconds, tuple(r / replicas for r in p.rates_per_second))
        return synthetic_workload(duration_seconds=traffic.duration_seconds, profile=share,
                                  seed=traffic.seed, **_lengths(traffic))  # fmt: skip
    return synthetic_workload(duration_seconds=traffic.duration_seconds,
                              rate_per_second=traffic.rate_per_second / replicas,
                              seed=traffic.seed, **_lengths(traffic))  # fmt: skip


def _lengths(traffic: Traffic) -> dict:
    return dict(prompt_tokens=traffic.prompt_tokens, output_tokens=traffic.output_tokens,
                shared_prefix_tokens=traffic.shared_prefix_tokens)  # fmt: skip


class _TtftMissed:
    """`ttft_missed`'s test; `fired` once it stopped a run."""

    def __init__(self, target_seconds: float, requests: int):
        self.target_seconds, self.limit, self.fired = target_seconds, LATE_SHARE * requests, False

    def __call__(self, engine) -> bool:
        now = engine.t - self.target_seconds
        ready = int(np.searchsorted(engine.ready_array, now, side="right"))
        self.fired = ready - engine.first_tokens > self.limit
        return self.fired


def ttft_missed(target_seconds: float | None, requests: int) -> _TtftMissed | None:
    """A `simulate` stop test: at least LATE_SHARE of the `requests` have waited longer than
    the target for a first token. The requests ready before now - target number at least
    (ready ones) - (first tokens given so far), and each of those has a TTFT above the target,
    so the p99 is above it too: a lower bound, never a guess."""
    return None if target_seconds is None else _TtftMissed(target_seconds, requests)


def evaluate(candidate: Candidate, model: str, traffic: Traffic, calibration: Calibration,
             *, stop_at_ttft_seconds: float | None = None) -> Outcome:  # fmt: skip
    """Simulate one replica of `candidate`; a deployment or run that cannot be is its problem.
    With `stop_at_ttft_seconds`, a run that certainly misses that TTFT p99 target stops there
    (`ttft_missed`): overloaded candidates, the slowest to simulate, cost a fraction."""
    workload = replica_workload(traffic, candidate.replicas)
    stop = ttft_missed(stop_at_ttft_seconds, workload.num_requests)
    try:
        dep, config, kv_tokens = _engine(candidate, model)
        engine = "SGLang" if candidate.engine == "sglang" else "V1"
        c = calibration.for_model(candidate.gpu, dep.model, engine)
        window = max(traffic.duration_seconds, workload.last_arrival_seconds)
        result = simulate_deployment(
            workload, deployment=c.apply(dep), config=config, efficiency=c.efficiency,
            until_seconds=window * DRAIN_FACTOR, kv_tokens=kv_tokens,
            speculation=_speculation(candidate, traffic), seed=traffic.seed, stop_when=stop,
        )  # fmt: skip
    except ConfigError as exc:
        return Outcome(math.inf, math.inf, 0.0, problem=str(exc))
    outcome = _measured(result, candidate.replicas)
    if stop is not None and stop.fired:  # it stopped there: the target is missed
        return replace(outcome, ttft_p99_seconds=math.inf,
                       stopped_at_ttft_seconds=stop_at_ttft_seconds)  # fmt: skip
    return outcome


def _engine(candidate: Candidate, model: str):
    """The deployment, scheduler settings and KV pool (None: vLLM's sizing) of the engine."""
    if candidate.engine == "vllm":
        config = SchedulerConfig(max_num_batched_tokens=candidate.max_num_batched_tokens,
                                 max_num_seqs=candidate.max_num_seqs,
                                 disaggregated=candidate.disaggregated,
                                 prefill_instances=candidate.prefill_instances)  # fmt: skip
        return deployment_of(candidate, model), config, None
    gpu = get_gpu(candidate.gpu)
    settings = sglang_settings(gpu_memory_bytes=cuda_total_bytes(gpu)[0], gpu_name=gpu.slug,
                               gpus=candidate.tp,
                               given={"chunked_prefill_size": candidate.max_num_batched_tokens,
                                      "max_running_requests": candidate.max_num_seqs})  # fmt: skip
    dep = replace(
        deployment_of(candidate, model), gpu_memory_utilization=settings.mem_fraction_static
    )
    kv = sglang_kv_cache(dep).kv_tokens
    if kv < 1:
        raise ConfigError(f"{dep.label}: the weights leave SGLang no KV pool")
    return dep, settings.scheduler_config(), kv


def _speculation(candidate: Candidate, traffic: Traffic):
    """The candidate's speculation: k drafts, the traffic's acceptance, the method's overheads."""
    if not candidate.spec_k:
        return None
    return Speculation(candidate.spec_k, traffic.spec_acceptance, method=traffic.spec_method,
                       **measured_overheads(traffic.spec_method))  # fmt: skip


def _measured(result, replicas: int) -> Outcome:
    arrived = result.arrived
    itl = float(result.itl_quantile(0.99)) if result.step_itl_observations.sum() else 0.0
    tokens = float(result.generated_tokens.sum()) * replicas
    tpot = result.itl_views().quantile("request_tpot", 0.99)

    def p99_since_arrival(at_seconds: np.ndarray) -> float:
        """The p99 of each arrived request's time to `at_seconds` (NaN: never: inf)."""
        waited = at_seconds[arrived] - result.workload.arrival_seconds[arrived]
        waited = np.where(np.isnan(waited), math.inf, waited)
        return float(np.quantile(waited, 0.99, method="inverted_cdf")) if waited.size else 0.0

    return Outcome(
        tpot_p99_seconds=float(tpot),
        e2e_p99_seconds=p99_since_arrival(result.finish_seconds),
        itl_p99_seconds=itl,
        ttft_p99_seconds=p99_since_arrival(result.first_token_seconds),
        output_tokens_per_second=tokens / max(result.end_seconds, 1e-9),
    )
