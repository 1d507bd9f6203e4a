"""vLLM's speculative-decoding counters of a simulated run, as its `/metrics` page holds them.

`SpecDecodingProm` (vllm/v1/spec_decode/metrics.py @ 016a8587edb04ae53c913a1da9355a07dc0ca4ae):
per request per step that verified drafts, `observe_draft` adds one draft, its k draft tokens,
its accepted tokens, and one to each position below the accepted count. Here every event after
a request's first (its prefill's token) verified k drafts and kept `tokens - 1` of them. The
families (their names, help texts, the `position` label from 0) are rendered by prometheus_client.
"""

from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily

from itlkit.sim.export import cumulative
from itlkit.sim.results import SimulationResult

_FAMILIES = (
    ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", "drafts"),
    ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", "draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", "accepted"),
)
_PER_POSITION = ("vllm:spec_decode_num_accepted_tokens_per_pos",
                 "Accepted tokens per draft position.")  # fmt: skip


def spec_decode_counters(result: SimulationResult, times_seconds) -> dict[str, np.ndarray]:
    """Each counter at each scrape time: drafts, draft_tokens, accepted, and position_<i>."""
    times = np.asarray(times_seconds, dtype=float)
    events, k = result.token_events, int(result.config.speculative_tokens)
    request, step, ordinal = result.output_events()
    verified = ordinal > 0
    at = result.step_end_seconds[step[verified]]
    accepted = events.tokens_of(request[verified], ordinal[verified]) - 1
    counters = {
        "drafts": cumulative(times, at, np.ones(at.size)),
        "draft_tokens": cumulative(times, at, np.full(at.size, float(k))),
        "accepted": cumulative(times, at, accepted.astype(float)),
    }
    for i in range(k):
        counters[f"position_{i}"] = cumulative(times, at, (accepted > i).astype(float))
    return counters


class _Counters:
    """One scrape's spec-decode families for prometheus_client's registry."""

    def __init__(self, values: dict[str, float], *, k: int, labels: dict[str, str],
                 created_seconds: float):  # fmt: skip
        self.values, self.k, self.labels, self.created = values, k, labels, created_seconds

    def collect(self):
        names, values = list(self.labels), list(self.labels.values())
        for name, help_text, key in _FAMILIES:
            family = CounterMetricFamily(name, help_text, labels=names)
            family.add_metric(values, self.values[key], created=self.created)
            yield family
        family = CounterMetricFamily(*_PER_POSITION, labels=[*names, "position"])
        for i in range(self.k):
            family.add_metric([*values, str(i)], self.values[f"position_{i}"],
                              created=self.created)  # fmt: skip
        yield family


def spec_decode_pages(result: SimulationResult, times_seconds, *, model_name: str,
                      engine: str = "0", created_seconds: float) -> list[str]:  # fmt: skip
    """The spec-decode families of each scrape, as text to append to its vLLM page (empty
    strings for a run without speculation)."""
    if result.token_events is None:
        return ["" for _ in np.atleast_1d(times_seconds)]
    counters = spec_decode_counters(result, times_seconds)
    k = int(result.config.speculative_tokens)
    labels = {"engine": engine, "model_name": model_name}
    pages = []
    for j in range(len(np.atleast_1d(times_seconds))):
        registry = CollectorRegistry(auto_describe=False)
        values = {key: float(series[j]) for key, series in counters.items()}
        registry.register(_Counters(values, k=k, labels=labels, created_seconds=created_seconds))
        pages.append(generate_latest(registry).decode())
    return pages
