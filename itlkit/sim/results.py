"""What a simulated run produced: per-step and per-request arrays, histograms, quantiles, tables.

`SimulationResult` holds the engine's records (SI units); `Summary` its headline numbers. Quantiles
of simulated samples are exact (inverted CDF, an observed value); histograms bin them as
prometheus_client does (`histogram.from_samples`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from itlkit.metrics.histogram import Histogram, from_samples
from itlkit.metrics.vllm_metrics import (
    ITL_BUCKETS_SECONDS,
    REQUEST_LATENCY_BUCKETS_SECONDS,
    TTFT_BUCKETS_SECONDS,
)
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.workload import Workload

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Everything one run produced: per-step and per-request arrays (SI units) and token segments.

    Step arrays (length = steps): start and duration, tokens scheduled, queue lengths when
    scheduled, KV tokens held after the step, preemptions, ITL observations (requests that
    decoded), first tokens, prompt tokens completed and tokens generated.
    Request arrays (length = workload requests): when first scheduled (on the decode instance
    when disaggregated), first token and finish (NaN if none), tokens generated, preemptions.
    Segment arrays: request i emitted one token at the end of every step from
    `segment_first_step` to `segment_last_step`. Gap arrays: the ITL observations of requests
    that resumed after preemption (observed at `gap_end_seconds`).
    Step counts are int32 (half the memory of int64 over long runs); times are float64.
    """

    config: SchedulerConfig
    workload: Workload
    kv_capacity_tokens: int
    end_seconds: float
    step_start_seconds: np.ndarray
    step_duration_seconds: np.ndarray
    step_decode_tokens: np.ndarray
    step_prefill_tokens: np.ndarray
    step_running: np.ndarray
    step_waiting: np.ndarray
    step_kv_tokens: np.ndarray
    step_preemptions: np.ndarray
    step_itl_observations: np.ndarray
    step_first_tokens: np.ndarray
    step_prompt_tokens: np.ndarray
    step_generation_tokens: np.ndarray
    first_scheduled_seconds: np.ndarray
    first_token_seconds: np.ndarray
    finish_seconds: np.ndarray
    generated_tokens: np.ndarray
    request_preemptions: np.ndarray
    segment_request: np.ndarray
    segment_first_step: np.ndarray
    segment_last_step: np.ndarray
    gap_request: np.ndarray
    gap_end_seconds: np.ndarray
    gap_itl_seconds: np.ndarray
    # Speculative decoding: the tokens each output event carried (`sim.speculative.TokenEvents`);
    # None: one token each. Segments and ITL observations count events, the rest tokens.
    token_events: object = None

    # ---- counts ---------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        return int(self.step_start_seconds.size)

    @property
    def step_end_seconds(self) -> np.ndarray:
        return self.step_start_seconds + self.step_duration_seconds

    @property
    def arrived(self) -> np.ndarray:
        """Mask of requests that arrived before the run ended."""
        return self.workload.arrival_seconds < self.end_seconds

    @property
    def finished(self) -> np.ndarray:
        """Mask of requests that produced their last token."""
        return ~np.isnan(self.finish_seconds)

    @property
    def in_flight(self) -> np.ndarray:
        """Mask of requests that arrived but had not finished when the run ended."""
        return self.arrived & ~self.finished

    @property
    def preemptions(self) -> int:
        return int(self.step_preemptions.sum())

    # ---- samples ---------------------------------------------------------------------------
    def itl_events(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(observed at, ITL value, observation count): every step, then every resume gap."""
        at = np.concatenate([self.step_end_seconds, self.gap_end_seconds])
        values = np.concatenate([self.step_duration_seconds, self.gap_itl_seconds])
        weights = np.concatenate(
            [self.step_itl_observations, np.ones(self.gap_itl_seconds.size, dtype=np.int64)]
        )
        return at, values, weights

    def itl_weighted(self, *, until_seconds: float = math.inf) -> tuple[np.ndarray, np.ndarray]:
        """ITL values and how many observations each carries, observed up to `until_seconds`."""
        at, values, weights = self.itl_events()
        keep = (weights > 0) & (at <= until_seconds)
        return values[keep], weights[keep]

    @property
    def itl_seconds(self) -> np.ndarray:
        """Every ITL observation (one per request per step that produced its next token)."""
        values, weights = self.itl_weighted()
        return np.repeat(values, weights)

    @property
    def ttft_seconds(self) -> np.ndarray:
        """TTFT of every request that got its first token, in arrival order."""
        got = ~np.isnan(self.first_token_seconds)
        return self.first_token_seconds[got] - self.workload.arrival_seconds[got]

    @property
    def e2e_seconds(self) -> np.ndarray:
        """Arrival-to-last-token latency of every finished request."""
        done = self.finished
        return self.finish_seconds[done] - self.workload.arrival_seconds[done]

    def token_times_seconds(self, request: int) -> np.ndarray:
        """When request `request` received each of its tokens (step end times)."""
        ends = self.step_end_seconds
        rows = np.flatnonzero(self.segment_request == request)
        parts = [ends[self.segment_first_step[r] : self.segment_last_step[r] + 1] for r in rows]
        return np.concatenate(parts) if parts else np.zeros(0)

    def itl_views(self):
        """Every ITL definition of this run (`metrics.itl_vocabulary`): per output event (vLLM,
        a streaming client), per token (SGLang's k-split: an event of m tokens is m observations
        of its gap / m) and a finished request's TPOT, (last token - first token) / (tokens - 1).
        Without speculation every event is one token and the first two agree."""
        from itlkit.metrics.itl_vocabulary import ItlViews

        values, weights = self.itl_weighted()
        done = self.finished & (self.generated_tokens > 1)
        tpot = (self.finish_seconds[done] - self.first_token_seconds[done]) / (
            self.generated_tokens[done] - 1
        )
        weights = weights.astype(float)
        if self.token_events is None:  # the same arrays twice: their quantiles sort once
            return ItlViews(values, weights, values, weights, tpot)
        gaps, tokens = self._event_gaps()
        return ItlViews(values, weights, gaps / tokens, tokens, tpot)

    def output_events(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every output event, by request then time: (request, step it ended, its ordinal among
        the request's events). A request's events are the steps of its segments, in order."""
        lengths = self.segment_last_step - self.segment_first_step + 1
        request = np.repeat(self.segment_request, lengths)
        within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        step = np.repeat(self.segment_first_step, lengths) + within
        order = np.lexsort((step, request))
        request, step = request[order], step[order]
        first = np.ones(request.size, dtype=bool)
        first[1:] = request[1:] != request[:-1]
        starts = np.flatnonzero(first)
        ordinal = np.arange(request.size) - np.repeat(starts, np.diff(starts, append=request.size))
        return request, step, ordinal

    def _event_gaps(self) -> tuple[np.ndarray, np.ndarray]:
        """Every event after a request's first: its gap since the previous event, and the tokens
        it carried."""
        request, step, ordinal = self.output_events()
        at, later = self.step_end_seconds[step], ordinal > 0
        tokens = self.token_events.tokens_of(request[later], ordinal[later])
        return np.diff(at)[later[1:]], tokens.astype(float)

    # ---- histograms and quantiles -----------------------------------------------------------
    def itl_histogram(self, upper_bounds=ITL_BUCKETS_SECONDS) -> Histogram:
        """ITL observations binned as vLLM bins them (le inclusive; default vLLM's bounds)."""
        values, weights = self.itl_weighted()
        return from_samples(values, weights=weights, upper_bounds=upper_bounds)

    def ttft_histogram(self, upper_bounds=TTFT_BUCKETS_SECONDS) -> Histogram:
        """TTFT observations in vLLM's TTFT buckets (or any others)."""
        samples = self.ttft_seconds
        return from_samples(samples, upper_bounds=upper_bounds)

    def e2e_histogram(self, upper_bounds=REQUEST_LATENCY_BUCKETS_SECONDS) -> Histogram:
        """e2e latencies of finished requests in vLLM's request-latency buckets."""
        samples = self.e2e_seconds
        return from_samples(samples, upper_bounds=upper_bounds)

    def itl_quantile(self, q):
        """Exact sample quantile(s) of ITL (inverted CDF: an observed value, never interpolated)."""
        values, weights = self.itl_weighted()
        return weighted_quantile(values, weights, q)

    def summary(self, delay_seconds: np.ndarray | None = None) -> Summary:
        """Means and p50/p99 of ITL, TTFT and e2e plus the run's counts; `delay_seconds` (one
        per request) is added to each request's TTFT and e2e: what a client waits beyond the
        engine (a calibration's TTFT pipeline, `calibration.predict.pipeline_delay_seconds`)."""
        itl_values, itl_weights = self.itl_weighted()
        ttft, e2e = self.ttft_seconds, self.e2e_seconds
        if delay_seconds is not None:
            ttft = ttft + delay_seconds[~np.isnan(self.first_token_seconds)]
            e2e = e2e + delay_seconds[self.finished]
        count = int(itl_weights.sum())
        itl_p50, itl_p99 = weighted_quantile(itl_values, itl_weights, [0.5, 0.99]).tolist()
        return Summary(
            itl_mean_seconds=float(np.dot(itl_values, itl_weights) / count) if count else math.nan,
            itl_p50_seconds=itl_p50,
            itl_p99_seconds=itl_p99,
            itl_observations=count,
            ttft_mean_seconds=float(ttft.mean()) if ttft.size else math.nan,
            ttft_p50_seconds=_sample_quantile(ttft, 0.5),
            ttft_p99_seconds=_sample_quantile(ttft, 0.99),
            e2e_mean_seconds=float(e2e.mean()) if e2e.size else math.nan,
            e2e_p99_seconds=_sample_quantile(e2e, 0.99),
            requests_arrived=int(self.arrived.sum()),
            requests_finished=int(self.finished.sum()),
            requests_in_flight=int(self.in_flight.sum()),
            steps=self.steps,
            simulated_seconds=float(self.end_seconds),
            preemptions=self.preemptions,
        )

    # ---- tables ----------------------------------------------------------------------------
    def steps_frame(self) -> pd.DataFrame:
        """One row per engine step."""
        import pandas as pd  # only the tables need it; the CLI's simulate starts faster without

        return pd.DataFrame(
            {
                "start_seconds": self.step_start_seconds,
                "duration_seconds": self.step_duration_seconds,
                "decode_tokens": self.step_decode_tokens,
                "prefill_tokens": self.step_prefill_tokens,
                "running": self.step_running,
                "waiting": self.step_waiting,
                "kv_usage": self.step_kv_tokens / self.kv_capacity_tokens,
                "preemptions": self.step_preemptions,
                "itl_observations": self.step_itl_observations,
            }
        )

    def requests_frame(self) -> pd.DataFrame:
        """One row per request that arrived; `status` is finished or in_flight."""
        import pandas as pd

        w = self.workload
        arrived = self.arrived
        frame = pd.DataFrame(
            {
                "arrival_seconds": w.arrival_seconds,
                "prompt_tokens": w.prompt_tokens,
                "cached_prompt_tokens": w.cached_prompt_tokens,
                "output_tokens": w.output_tokens,
                "first_token_seconds": self.first_token_seconds,
                "finish_seconds": self.finish_seconds,
                "generated_tokens": self.generated_tokens,
                "preemptions": self.request_preemptions,
                "status": np.where(self.finished, "finished", "in_flight"),
            }
        )
        frame["ttft_seconds"] = frame["first_token_seconds"] - frame["arrival_seconds"]
        frame["e2e_seconds"] = frame["finish_seconds"] - frame["arrival_seconds"]
        return frame[arrived].reset_index(drop=True)


@dataclass(frozen=True)
class Summary:
    """The headline numbers of a run (seconds, counts)."""

    itl_mean_seconds: float
    itl_p50_seconds: float
    itl_p99_seconds: float
    itl_observations: int
    ttft_mean_seconds: float
    ttft_p50_seconds: float
    ttft_p99_seconds: float
    e2e_mean_seconds: float
    e2e_p99_seconds: float
    requests_arrived: int
    requests_finished: int
    requests_in_flight: int
    steps: int
    simulated_seconds: float
    preemptions: int


def weighted_quantile(values, weights, q):
    """Inverted-CDF quantile of weighted samples (numpy `method="inverted_cdf"` on the repeats)."""
    values = np.asarray(values, dtype=float)
    weights = np.asarray(weights, dtype=float)
    if weights.sum() <= 0:
        return np.full(np.shape(q), math.nan) if np.ndim(q) else math.nan
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    rank = np.asarray(q, dtype=float) * cumulative[-1]
    index = np.searchsorted(cumulative, rank, side="left")
    result = values[order][np.minimum(index, values.size - 1)]
    return float(result) if np.ndim(result) == 0 else result


def fine_buckets_seconds(*, low_seconds=1e-3, high_seconds=100.0, per_decade=50) -> np.ndarray:
    """Geometric bucket bounds (about 5% wide at 50 per decade) for drawing a smooth histogram."""
    decades = math.log10(high_seconds / low_seconds)
    return np.geomspace(low_seconds, high_seconds, round(decades * per_decade) + 1)


def _sample_quantile(samples: np.ndarray, q: float) -> float:
    if samples.size == 0:
        return math.nan
    return float(np.quantile(samples, q, method="inverted_cdf"))
