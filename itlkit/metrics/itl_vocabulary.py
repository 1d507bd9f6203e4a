"""One vocabulary for "ITL": what each engine's, client's and benchmark's number counts.

The same stream of tokens gives different "ITL"s depending on who counts, and over what:

- `vllm_event` (vLLM's `vllm:inter_token_latency_seconds`): one observation per request per
  engine output that carried new tokens, the time since that request's previous output
  (`IterationStats.update_from_output`, vllm/v1/metrics/stats.py @
  28ed1fb87ed5686e1d4d0cf4134b8e05d8a25a8a). A step that emits k tokens (speculative decoding)
  is one observation of the whole gap.
- `sglang_token` (SGLang's `sglang:inter_token_latency_seconds`): a chunk of k tokens after a
  gap adds k observations of gap / k (`observe_inter_token_latency`,
  python/sglang/srt/observability/metrics_collector.py @ 44cedc2b9c7dd31d9acae4498ea4fa0d3665feed).
- `client_chunk` (`vllm bench serve`'s ITL, and most streaming clients): one observation per
  streamed chunk after the first, the time since the previous chunk (`output.itl.append`,
  vllm/benchmarks/lib/endpoint_request_func.py; vllm/benchmarks/serve.py `calculate_metrics` @
  def9ce85ba1079af970a58ed3d42dd861ae35d58).
- `request_tpot` (`vllm bench serve`'s TPOT, vLLM's `request_time_per_output_token_seconds`):
  one value per request, (E2E - TTFT) / (output tokens - 1): the mean of that request's gaps per
  token, so a stall weighs 1 / (tokens - 1) in it.
- `mlperf_p99_tpot` (MLPerf Inference's LLM latency constraint): the 99th percentile over
  requests of `request_tpot` (mlcommons/inference_policies, inference_rules.adoc).

With one token per output (no speculation, no client batching) the first three agree; TPOT is a
mean per request and hides the stalls that the per-output views show. `views` computes every one
of them from per-request token times, and `per_token_histogram` turns a per-event histogram into
the per-token one when every event carried the same number of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from itlkit.errors import ConfigError
from itlkit.metrics.histogram import Histogram


@dataclass(frozen=True)
class Definition:
    """What one "ITL" counts: who reports it, per what, and where that comes from."""

    key: str
    who: str
    per: str  # "output event", "token", "streamed chunk", "request"
    meaning: str


DEFINITIONS: dict[str, Definition] = {
    d.key: d
    for d in (
        Definition("vllm_event", "vLLM /metrics (vllm:inter_token_latency_seconds)",
                   "output event", "one gap per request per output that carried tokens"),
        Definition("sglang_token", "SGLang /metrics (sglang:inter_token_latency_seconds)",
                   "token", "k observations of gap / k for a chunk of k tokens"),
        Definition("client_chunk", "vllm bench serve ITL, streaming clients", "streamed chunk",
                   "one gap per streamed chunk after the first"),
        Definition("request_tpot", "vllm bench serve TPOT, vllm:request_time_per_output_token",
                   "request", "(E2E - TTFT) / (output tokens - 1), one per request"),
        Definition("mlperf_p99_tpot", "MLPerf Inference LLM constraint", "request",
                   "the 99th percentile over requests of request_tpot"),
    )
}  # fmt: skip

# Which definition a family or a bench field holds.
SOURCES = {
    "vllm:inter_token_latency_seconds": "vllm_event",
    "vllm:time_per_output_token_seconds": "vllm_event",  # ITL's older name, the same values
    "sglang:inter_token_latency_seconds": "sglang_token",
    "vllm:request_time_per_output_token_seconds": "request_tpot",
    "itls": "client_chunk",  # vllm bench serve --save-detailed
    "tpot": "request_tpot",
}


def definition_of(name: str) -> Definition:
    """The definition a metric family or bench field holds; ConfigError names the known ones."""
    if name not in SOURCES:
        raise ConfigError(f"no ITL definition known for {name!r}; known: {', '.join(SOURCES)}")
    return DEFINITIONS[SOURCES[name]]


@dataclass(frozen=True)
class ItlViews:
    """Every definition's observations of one run, in seconds, each value with the number of
    observations it stands for: per output (vLLM's events, a client's chunks: the same outputs
    here), per token (SGLang's k-split), and one TPOT per request."""

    output_seconds: np.ndarray
    output_weights: np.ndarray
    token_seconds: np.ndarray
    token_weights: np.ndarray
    request_tpot: np.ndarray

    def _values(self, key: str) -> tuple[np.ndarray, np.ndarray | None]:
        if key in ("vllm_event", "client_chunk"):
            return self.output_seconds, self.output_weights
        if key == "sglang_token":
            return self.token_seconds, self.token_weights
        if key in ("request_tpot", "mlperf_p99_tpot"):
            return self.request_tpot, None
        raise ConfigError(f"unknown ITL definition {key!r}; known: {', '.join(DEFINITIONS)}")

    def quantile(self, key: str, q: float) -> float:
        """A definition's q-quantile ("mlperf_p99_tpot" is the request TPOTs' 99th whatever q)."""
        values, weights = self._values(key)
        # one sort per (values, weights) pair, not per quantile; the arrays live as long as this
        cache, pair = self.__dict__.setdefault("_sorted", {}), (id(values), id(weights))
        if pair not in cache:
            cache[pair] = _sorted_cumulative(values, weights)
        return _quantile_of_sorted(*cache[pair], 0.99 if key == "mlperf_p99_tpot" else q)

    def mean(self, key: str) -> float:
        """A definition's mean observation (NaN when it has none)."""
        values, weights = self._values(key)
        w = np.ones(values.size) if weights is None else weights
        return float(np.dot(values, w) / w.sum()) if w.sum() > 0 else float("nan")


def _sorted_cumulative(values: np.ndarray, weights) -> tuple[np.ndarray, np.ndarray]:
    """The values sorted, and the cumulative weight up to each."""
    order = np.argsort(values, kind="stable")
    w = np.ones(values.size) if weights is None else np.asarray(weights, dtype=float)
    return values[order], np.cumsum(w[order])


def _quantile_of_sorted(ordered: np.ndarray, cumulative: np.ndarray, q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total (NaN when empty)."""
    if ordered.size == 0:
        return float("nan")
    at = int(np.searchsorted(cumulative, q * cumulative[-1], side="left"))
    return float(ordered[min(at, ordered.size - 1)])


def views(output_times_seconds, tokens_per_output) -> ItlViews:
    """Every definition from each request's output times and the tokens each output carried.

    `output_times_seconds[i]`: the times request i's outputs reached the client (its first token
    first); `tokens_per_output[i]`: the tokens in each (the first output's included). The server
    and the client see the same outputs here (a client that batches chunks: pass its chunks)."""
    gaps, counts, tpots = [], [], []
    for times, tokens in zip(output_times_seconds, tokens_per_output, strict=True):
        times, tokens = np.asarray(times, dtype=float), np.asarray(tokens, dtype=float)
        if times.shape != tokens.shape or times.size == 0:
            raise ConfigError("each request needs one token count per output, and an output")
        if np.any(np.diff(times) < 0) or np.any(tokens < 1):
            raise ConfigError("output times must not go back, and every output carries a token")
        gaps.append(np.diff(times))
        counts.append(tokens[1:])
        if tokens.sum() > 1:
            tpots.append((times[-1] - times[0]) / (tokens.sum() - 1))
    gap = np.concatenate(gaps) if gaps else np.zeros(0)
    k = np.concatenate(counts) if counts else np.zeros(0)
    return ItlViews(gap, np.ones(gap.size), gap / np.maximum(k, 1), k,
                    np.asarray(tpots, dtype=float))  # fmt: skip


def per_token_histogram(h: Histogram, *, tokens_per_event: int) -> Histogram:
    """A per-event ITL histogram as per-token observations, when every event carried
    `tokens_per_event` tokens: each gap becomes k observations of gap / k, SGLang's way, so the
    bounds divide by k, the counts multiply by k, and the seconds (_sum) stay."""
    k = int(tokens_per_event)
    if k < 1 or k != tokens_per_event:
        raise ConfigError(f"tokens per event must be a whole number >= 1, got {tokens_per_event}")
    return Histogram.create(upper_bounds=h.upper_bounds / k,
                            cumulative_counts=h.cumulative_counts * k, sum=h.sum,
                            count=h.count * k)  # fmt: skip
