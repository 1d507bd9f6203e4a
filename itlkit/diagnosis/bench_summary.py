"""A `vllm bench serve` summary (no per-request samples) judged as far as a summary allows.

A summary keeps the ITL's median and p99 but no histogram over time, so arrivals, growth and
preemptions cannot be seen in it: those causes are not scored, and say so. What it can show is
host overhead: the median gap (one step, at the run's concurrency) against the slowest GPU time
the deployment could take (floor / PLAUSIBLE_MBU_LOW) and a healthy host's cost (the bundled
calibration), through the same host rule of `scoring.RULES` a page gets. The GPU is not in the
file: the score is the lowest over the plausible GPUs the weights fit on, as for a page.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from itlkit.diagnosis.fingerprint import PLAUSIBLE_MBU_LOW, SLOW_FACTOR
from itlkit.diagnosis.scoring import (
    CAUSES,
    HEALTHY_BELOW,
    PLAUSIBLE_GPUS,
    cause_score,
    healthy_host_calibration,
)
from itlkit.errors import ConfigError
from itlkit.metrics.bench import BenchResult
from itlkit.physics.hardware import get_gpu
from itlkit.physics.roofline import Deployment, capacity, decode_step
from itlkit.physics.speculative import speculative_step

NOT_SCORED = "a bench summary holds no histogram over time: this cause cannot be seen in it"


@dataclass(frozen=True)
class SummaryFeatures:
    """The fingerprint features a summary gives (the host rule's); the rest are unknown."""

    host_excess_ratio: float
    batch_size: float
    main_cluster_share: float = math.nan
    engine: str = "vllm"  # `vllm bench serve` measured it (the rules of any engine's server)
    spec_tokens_per_step: float = math.nan  # the server speculated: its counters over the run
    spec_speedup: float = math.nan

    def __getattr__(self, name: str) -> float:
        return math.nan  # every feature a summary cannot measure


@dataclass(frozen=True)
class GpuReading:
    gpu: str
    floor_seconds: float
    host_excess_ratio: float
    host_score: float


@dataclass(frozen=True)
class SummaryDiagnosis:
    source: str
    deployment: str
    batch_size: int
    context_tokens: float
    step_seconds: float  # the median ITL
    p99_seconds: float
    healthy_host_seconds: float
    readings: tuple[GpuReading, ...]
    speculation: tuple[str, ...] = ()  # what the server's speculation does, where it speculated
    speculation_score: float | None = None  # its cost's score (None: not speculating)

    @property
    def host_score(self) -> float:
        return min(r.host_score for r in self.readings)

    @property
    def healthy(self) -> bool:
        return self.host_score < HEALTHY_BELOW and (self.speculation_score or 0) < HEALTHY_BELOW

    def verdict(self) -> str:
        if (self.speculation_score or 0) >= HEALTHY_BELOW:
            return (f"speculative decoding costs more than it saves (score "
                    f"{self.speculation_score:.2f}): " + self.speculation[-1])  # fmt: skip
        low = min(self.readings, key=lambda r: r.host_score)
        if not self.healthy:
            return (f"host overhead between GPU kernels (score {self.host_score:.2f}, on every "
                    f"plausible GPU): the median gap {self.step_seconds * 1e3:.2f} ms is "
                    f"{low.host_excess_ratio:.1f}x a healthy host's "
                    f"{self.healthy_host_seconds * 1e3:.2f} ms beyond the slowest GPU time "
                    f"({low.gpu}: floor {low.floor_seconds * 1e3:.2f} ms / "
                    f"{PLAUSIBLE_MBU_LOW})")  # fmt: skip
        return (f"no cause stands out in what a summary shows (host overhead "
                f"{self.host_score:.2f} at most; interference, growth and preemption cannot be "
                "seen in a summary)")  # fmt: skip

    def to_json(self) -> dict:
        judged = {"host_overhead": self.host_score}
        if self.speculation_score is not None:
            judged["speculation_cost"] = self.speculation_score
        causes = [{"cause": c, "score": v} | ({"evidence": list(self.speculation)}
                   if c == "speculation_cost" else {}) for c, v in judged.items()] + [
            {"cause": c, "score": 0.0, "evidence": [NOT_SCORED]}
            for c in CAUSES if c not in judged and c != "speculation_cost"
        ]  # fmt: skip
        return {
            "source": self.source, "kind": "bench summary", "deployment": self.deployment,
            "healthy": self.healthy, "verdict": self.verdict(), "causes": causes,
            "batch_size": self.batch_size, "context_tokens": self.context_tokens,
            "step_seconds": self.step_seconds, "itl_p99_seconds": self.p99_seconds,
            "healthy_host_seconds": self.healthy_host_seconds,
            "gpu_range": [dataclasses.asdict(r) for r in self.readings],
            "speculation": list(self.speculation),
        }  # fmt: skip


def mean_context_tokens(result: BenchResult) -> float | None:
    """A request's mean context over its decode: its prompt and half its output (None when the
    file has neither per-request lengths nor totals)."""
    sent = result.requests
    if sent is None:
        return None
    if sent.input_lens is not None and sent.output_lens is not None and sent.input_lens.size:
        return max(float(sent.input_lens.mean() + sent.output_lens.mean() / 2), 1.0)
    if sent.total_input_tokens is None or sent.total_output_tokens is None:
        return None
    if result.completed <= 0:
        return None
    tokens = sent.total_input_tokens + sent.total_output_tokens / 2
    return max(tokens / result.completed, 1.0)


def _lengths(result: BenchResult) -> tuple[int, float]:
    """(concurrency, mean context) of the run: max_concurrency, prompt + half the output."""
    batch = (result.requests.max_concurrency if result.requests else None) or 1
    return batch, mean_context_tokens(result) or 1.0


def diagnose_summary(result: BenchResult, deployment: Deployment, *,
                     gpu_stated: bool, gpus=PLAUSIBLE_GPUS) -> SummaryDiagnosis:  # fmt: skip
    """Host overhead from a summary's median ITL, over the stated GPU or the plausible ones."""
    itl = result.summaries.get("itl")
    if itl is None or not math.isfinite(itl.median_seconds) or itl.median_seconds <= 0:
        raise ConfigError(f"{result.source}: the summary has no median ITL (median_itl_ms)")
    batch, context = _lengths(result)
    host = healthy_host_calibration()
    healthy = host.host_seconds_per_step + batch * host.host_seconds_per_sequence
    step = itl.median_seconds
    spec = result.speculation.speculation() if result.speculation else None
    readings = []
    for name in (deployment.gpu.slug,) if gpu_stated else gpus:
        dep = dataclasses.replace(deployment, gpu=get_gpu(name))
        if not capacity(dep, context_tokens=context).weights_fit:
            continue
        floor = float(decode_step(dep, batch_size=batch, context_tokens=context).floor_seconds)
        gpu = floor
        if spec is not None:  # an ITL gap is a verification step: its slowest GPU time
            gpu = max(floor, float(speculative_step(dep, batch_size=batch,
                                                    context_tokens=context,
                                                    spec=spec).verify_seconds))  # fmt: skip
        ratio = (step - gpu / PLAUSIBLE_MBU_LOW) / healthy
        share = (
            1.0 if itl.percentiles_seconds.get(0.99, math.inf) < SLOW_FACTOR * step else math.nan
        )
        score = cause_score("host_overhead", SummaryFeatures(ratio, batch, share))
        readings.append(GpuReading(name, floor, ratio, score))
    if not readings:
        raise ConfigError(f"{result.source}: the weights of {deployment.model.slug} fit on none "
                          "of the plausible GPUs; pass --gpu")  # fmt: skip
    lines, score = _speculation(result, deployment, batch=batch, context=context, spec=spec)
    return SummaryDiagnosis(result.source, deployment.label, batch, context, step,
                            itl.percentiles_seconds.get(0.99, math.nan), healthy,
                            tuple(readings), lines, score)  # fmt: skip


def _speculation(result: BenchResult, dep: Deployment, *, batch: int, context: float, spec):
    """What the server's speculation does here, in lines, and its cost's score (None: no
    speculation in the file)."""
    reading = result.speculation
    if reading is None:
        return (), None
    e = reading.tokens_per_step
    lines = [f"the server speculated: {e:.2f} tokens a step ({reading.source}); the ITL above is "
             "one gap per streamed chunk, a verification step, and TPOT is per token"]  # fmt: skip
    tpot = result.summaries.get("tpot")
    itl = result.summaries.get("itl")
    if tpot is not None and itl is not None and math.isfinite(tpot.mean_seconds):
        lines.append(f"mean ITL {itl.mean_seconds * 1e3:.2f} ms against mean TPOT "
                     f"{tpot.mean_seconds * 1e3:.2f} ms: {itl.mean_seconds / tpot.mean_seconds:.2f}"
                     " tokens a chunk on average")  # fmt: skip
    if spec is None:
        return tuple(lines), 0.0
    s = speculative_step(dep, batch_size=batch, context_tokens=context, spec=spec)
    features = SummaryFeatures(math.nan, batch, spec_tokens_per_step=e,
                               spec_speedup=float(s.speedup))  # fmt: skip
    lines.append(
        f"at concurrency {batch} and {context:,.0f} tokens of context the step model prices a "
        f"token at {float(s.per_token_seconds) * 1e3:.2f} ms with speculation against "
        f"{float(s.plain_step_seconds) * 1e3:.2f} ms without ({float(s.speedup):.2f}x)"
    )
    return tuple(lines), cause_score("speculation_cost", features)
