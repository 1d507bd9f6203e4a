"""What a plan chooses from (`Space` of `Candidate`s) and what it must serve (`Traffic`, `Slo`).

A candidate is one deployment replicated: `replicas` copies of `tp` GPUs, each copy serving an
equal share of the traffic (a router spreading requests evenly), with vLLM's token budget and
`max_num_seqs`; disaggregated, each copy is `prefill_instances` prefill instances feeding one
decode instance, each of `tp` GPUs (`sim.scheduler`: the prompts go to the prefill instance
free first). Its cost is its
GPUs x the price of one GPU-hour (`prices`). Traffic is Poisson at a rate, or a replayed
workload (a CSV or a `vllm bench serve` file) dealt round-robin to the replicas.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import asdict, dataclass

from itlkit.errors import ConfigError

OBJECTIVES = ("cost_per_hour", "cost_per_million_tokens", "gpus")
ENGINES = ("vllm", "sglang")
SLO_KEYS = ("itl_p99", "ttft_p99", "tpot_p99", "e2e_p99")


@dataclass(frozen=True)
class Candidate:
    """One deployment: GPU, TP, replicas, precisions and vLLM's scheduling knobs."""

    gpu: str
    tp: int
    replicas: int
    weight_precision: str
    kv_precision: str
    max_num_batched_tokens: int
    max_num_seqs: int
    disaggregated: bool = False
    engine: str = "vllm"  # "sglang": prefill batches alone, its KV pool and defaults
    spec_k: int = 0  # speculative drafts a step (0: off), accepted as `Traffic` says
    prefill_instances: int = 1  # disaggregated: prefill instances per decode instance

    @property
    def gpus(self) -> int:
        instances = self.prefill_instances + 1 if self.disaggregated else 1
        return self.tp * self.replicas * instances

    def label(self) -> str:
        pairs = (f" ({self.prefill_instances} prefill + 1 decode)" if self.disaggregated
                 else "")  # fmt: skip
        extra = "".join((f", {self.engine}" if self.engine != "vllm" else "",
                         f", {self.spec_k} speculative drafts" if self.spec_k else ""))  # fmt: skip
        return (f"{self.replicas} x {self.tp} {self.gpu}{pairs} ({self.weight_precision} "
                f"weights, {self.kv_precision} KV), budget {self.max_num_batched_tokens:,}, "
                f"max_num_seqs {self.max_num_seqs:,}{extra}")  # fmt: skip

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Space:
    """Every combination of the options given (each a tuple of choices)."""

    gpus: tuple[str, ...]
    tps: tuple[int, ...] = (1,)
    replicas: tuple[int, ...] = (1,)
    weight_precisions: tuple[str, ...] = ("bf16",)
    kv_precisions: tuple[str, ...] = ("bf16",)
    max_num_batched_tokens: tuple[int, ...] = (8192,)
    max_num_seqs: tuple[int, ...] = (256,)
    disaggregated: tuple[bool, ...] = (False,)
    engines: tuple[str, ...] = ("vllm",)
    spec_ks: tuple[int, ...] = (0,)
    prefill_instances: tuple[int, ...] = (1,)

    def candidates(self) -> list[Candidate]:
        """Every combination, in a stable order; ConfigError for an empty space. SGLang runs
        neither disaggregated nor speculative here (those are vLLM's paths in `sim`)."""
        options = (self.gpus, self.tps, self.replicas, self.weight_precisions,
                   self.kv_precisions, self.max_num_batched_tokens, self.max_num_seqs,
                   self.disaggregated, self.engines, self.spec_ks,
                   self.prefill_instances)  # fmt: skip
        names = ("gpus", "tps", "replicas", "weight_precisions", "kv_precisions",
                 "max_num_batched_tokens", "max_num_seqs", "disaggregated", "engines",
                 "spec_ks", "prefill_instances")  # fmt: skip
        for name, values in zip(names, options, strict=True):
            if not values:
                raise ConfigError(f"the candidate space is empty: no {name.replace('_', ' ')}")
        _check_whole("TP", self.tps)
        _check_whole("replicas", self.replicas)
        _check_whole("prefill instances", self.prefill_instances)
        unknown = sorted(set(self.engines) - set(ENGINES))
        if unknown:
            raise ConfigError(f"unknown engine {unknown[0]!r}; known: {', '.join(ENGINES)}")
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in self.spec_ks):
            raise ConfigError(f"speculative drafts must be whole numbers >= 0, got {self.spec_ks}")
        combos = (Candidate(*combo) for combo in itertools.product(*options))
        first = self.prefill_instances[0]  # colocated: one candidate, whatever the ratios
        return [c for c in combos
                if (c.engine == "vllm" or not (c.disaggregated or c.spec_k))
                and (c.disaggregated or c.prefill_instances == first)]  # fmt: skip


def _check_whole(name: str, values) -> None:
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 1]
    if bad:
        raise ConfigError(f"{name} must be whole numbers >= 1, got {bad[0]!r}")


@dataclass(frozen=True)
class Traffic:
    """Poisson arrivals at `rate_per_second` over `duration_seconds`, each request with
    `prompt_tokens` and `output_tokens` (fixed, or a `sim.lengths` distribution)."""

    rate_per_second: float
    prompt_tokens: object
    output_tokens: object
    duration_seconds: float = 120.0
    seed: int = 0
    replay: object = None  # a `sim.workload.Workload` to replay instead (rate and lengths: its)
    replay_name: str = ""  # where the replay came from (its file), for the cache key
    spec_acceptance: float = 0.7  # per draft, geometric, for candidates that speculate
    spec_method: str = "eagle"  # the drafts' overheads (`physics.speculative.MEASURED_OVERHEADS`)
    profile: object = None  # a `sim.arrivals.RateProfile` (piecewise-constant rates) instead
    # of the one rate; `rate_per_second` is then its peak
    shared_prefix_tokens: int = 0  # of each prompt, served from the prefix cache (a system prompt)

    def __post_init__(self):
        if self.replay is not None:
            return
        if not (self.rate_per_second > 0 and math.isfinite(self.rate_per_second)):
            raise ConfigError(f"traffic rate must be > 0 requests/s, got {self.rate_per_second}")
        if not (self.duration_seconds > 0 and math.isfinite(self.duration_seconds)):
            raise ConfigError(f"traffic duration must be > 0 s, got {self.duration_seconds}")

    def key(self) -> str:
        if self.replay is not None:
            w = self.replay
            digest = hashlib.sha256()
            for column in (w.arrival_seconds, w.prompt_tokens, w.output_tokens,
                           w.cached_prompt_tokens):  # fmt: skip
                digest.update(column.tobytes())
            return (f"replay={self.replay_name};digest={digest.hexdigest()[:24]};"
                    f"spec={self.spec_acceptance!r},{self.spec_method}")  # fmt: skip
        return (f"rate={self.rate_per_second!r};prompt={self.prompt_tokens!r};"
                f"output={self.output_tokens!r};duration={self.duration_seconds!r};"
                f"seed={self.seed!r};spec={self.spec_acceptance!r},{self.spec_method};"
                f"profile={self.profile!r};shared={self.shared_prefix_tokens}")  # fmt: skip


@dataclass(frozen=True)
class Slo:
    """The targets a candidate must meet (seconds; None: no target): the p99 of vLLM's ITL
    (one gap per step a request took part in), of TTFT over every request that arrived, and of
    TPOT over finished requests (per token: with speculation, what a reader of a stream sees)."""

    itl_p99_seconds: float | None = None
    ttft_p99_seconds: float | None = None
    tpot_p99_seconds: float | None = None
    e2e_p99_seconds: float | None = None  # arrival to last token; unfinished requests: inf

    def __post_init__(self):
        if all(getattr(self, f"{key}_seconds") is None for key in SLO_KEYS):
            raise ConfigError("give at least one SLO: an ITL, TTFT, TPOT or E2E p99 target")
        for name in (f"{key}_seconds" for key in SLO_KEYS):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"SLO {name} must be > 0 seconds, got {value}")
